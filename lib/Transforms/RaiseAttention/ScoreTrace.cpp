//===- ScoreTrace.cpp - linalg/tensor producers as score-space expressions ===//
#include "RaiseAttentionImpl.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Matchers.h"
#include <limits>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

std::optional<double> Node::getFloat() const {
  if (kind != Kind::Const)
    return std::nullopt;
  if (auto f = dyn_cast<FloatAttr>(cst))
    return f.getValueAsDouble();
  return std::nullopt;
}

Node *ScoreTracer::make(Node::Kind kind, Type type) {
  arena.push_back(std::make_unique<Node>());
  Node *n = arena.back().get();
  n->kind = kind;
  n->type = type;
  return n;
}

Node *ScoreTracer::makeConst(TypedAttr attr) {
  Node *n = make(Node::Kind::Const, attr.getType());
  n->cst = attr;
  return n;
}

Node *ScoreTracer::makeOp(StringRef name, Type type, ArrayRef<Node *> operands,
                          DictionaryAttr attrs, Operation *origin) {
  Node *n = make(Node::Kind::Op, type);
  n->name = OperationName(name, ctx);
  n->operands.assign(operands.begin(), operands.end());
  for (Node *o : operands)
    n->operandTypes.push_back(o->type);
  n->attrs = attrs ? attrs : DictionaryAttr::get(ctx);
  n->origin = origin;
  return n;
}

Node *ScoreTracer::rebuild(Node *n, ArrayRef<Node *> operands) {
  Node *r = makeOp(n->name->getStringRef(), n->type, operands, n->attrs,
                   n->origin);
  r->operandTypes = n->operandTypes;
  return r;
}

Node *ScoreTracer::makeReduce(StringRef combiner, Node *init, Node *body,
                              ArrayRef<unsigned> dims, Type type,
                              Operation *origin) {
  Node *n = make(Node::Kind::Reduce, type);
  n->combiner = combiner.str();
  n->operands = {init, body};
  n->reduced.assign(dims.begin(), dims.end());
  n->origin = origin;
  return n;
}

Node *ScoreTracer::leaf(Value v, AffineMap view) {
  if (!isa<ShapedType>(v.getType())) {
    TypedAttr attr;
    if (matchPattern(v, m_Constant(&attr)))
      return makeConst(attr);
    Node *n = make(Node::Kind::Scalar, v.getType());
    n->value = v;
    return n;
  }
  Node *n = make(Node::Kind::Read, getElementTypeOrSelf(v.getType()));
  n->value = v;
  n->map = view;
  n->origin = v.getDefiningOp();
  return n;
}

/// Source-side view of a reshape: `resultView` indexes the result; the
/// returned map indexes the source. Groups with a single non-unit dim are
/// exact; others linearise with static strides.
static FailureOr<AffineMap>
viewThroughExpand(tensor::ExpandShapeOp op, AffineMap resultView) {
  auto resTy = op.getResultType();
  SmallVector<AffineExpr> src;
  MLIRContext *ctx = op.getContext();
  for (ReassociationIndices group : op.getReassociationIndices()) {
    AffineExpr e = getAffineConstantExpr(0, ctx);
    for (int64_t r : group) {
      int64_t size = resTy.getDimSize(r);
      if (ShapedType::isDynamic(size) && group.size() > 1)
        return failure();
      e = e * size + resultView.getResult(r);
    }
    src.push_back(simplifyAffineExpr(e, resultView.getNumDims(), 0));
  }
  return AffineMap::get(resultView.getNumDims(), 0, src, ctx);
}

/// A group of several non-unit dims is delinearised (static sizes only):
/// this is how a head split of the scores ([B*H, ..] viewed as [B, H, ..],
/// PyTorch's view round-trip around a mask add) stays traceable; the
/// matching expand on the other side recombines to the plain index.
static FailureOr<AffineMap>
viewThroughCollapse(tensor::CollapseShapeOp op, AffineMap resultView) {
  auto srcTy = op.getSrcType();
  SmallVector<AffineExpr> src;
  MLIRContext *ctx = op.getContext();
  unsigned nd = resultView.getNumDims();
  for (auto [c, group] : llvm::enumerate(op.getReassociationIndices())) {
    int nonUnit = 0;
    for (int64_t s : group)
      nonUnit += srcTy.getDimSize(s) != 1;
    if (nonUnit > 1 && llvm::any_of(group, [&](int64_t s) {
          return ShapedType::isDynamic(srcTy.getDimSize(s));
        }))
      return failure();
    AffineExpr r = resultView.getResult(c);
    int64_t inner = 1; // product of the sizes right of the current dim
    SmallVector<AffineExpr> exprs(group.size());
    for (int64_t k = group.size() - 1; k >= 0; --k) {
      int64_t size = srcTy.getDimSize(group[k]);
      if (size == 1) {
        exprs[k] = getAffineConstantExpr(0, ctx);
        continue;
      }
      AffineExpr e = nonUnit == 1 ? r : r.floorDiv(inner);
      if (nonUnit > 1 && k > 0)
        e = e % size;
      exprs[k] = simplifyAffineExpr(e, nd, 0);
      inner *= size;
    }
    src.append(exprs.begin(), exprs.end());
  }
  return AffineMap::get(nd, 0, src, ctx);
}

Node *ScoreTracer::trace(Value v, AffineMap view) {
  auto key = std::make_pair(v, view);
  if (auto it = memo.find(key); it != memo.end())
    return it->second;
  Node *n = nullptr;
  Operation *def = v.getDefiningOp();
  if (!def || !isa<ShapedType>(v.getType())) {
    n = leaf(v, view);
  } else if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (dense && dense.isSplat())
      n = makeConst(dense.getSplatValue<TypedAttr>());
    else
      n = leaf(v, view);
  } else if (auto exp = dyn_cast<tensor::ExpandShapeOp>(def)) {
    FailureOr<AffineMap> m = viewThroughExpand(exp, view);
    if (succeeded(m)) {
      visited.insert(def);
      n = trace(exp.getSrc(), *m);
    } else {
      n = leaf(v, view);
    }
  } else if (auto col = dyn_cast<tensor::CollapseShapeOp>(def)) {
    FailureOr<AffineMap> m = viewThroughCollapse(col, view);
    if (succeeded(m)) {
      visited.insert(def);
      n = trace(col.getSrc(), *m);
    } else {
      n = leaf(v, view);
    }
  } else if (auto castOp = dyn_cast<tensor::CastOp>(def)) {
    visited.insert(def);
    n = trace(castOp.getSource(), view);
  } else if (auto sm = dyn_cast<linalg::SoftmaxOp>(def)) {
    n = traceSoftmax(sm, view);
  } else if (auto lop = dyn_cast<linalg::LinalgOp>(def)) {
    if (isMatmul(lop))
      n = leaf(v, view);
    else
      n = traceLinalg(lop, cast<OpResult>(v), view);
  } else {
    n = leaf(v, view);
  }
  memo[key] = n;
  return n;
}

Node *ScoreTracer::traceSoftmax(linalg::SoftmaxOp op, AffineMap view) {
  int64_t d = op.getDimension();
  auto dimExpr = dyn_cast<AffineDimExpr>(view.getResult(d));
  if (!dimExpr)
    return leaf(op.getResult()[0], view);
  visited.insert(op);
  Node *x = trace(op.getInput(), view);
  Type t = x->type;
  auto ft = dyn_cast<FloatType>(t);
  if (!ft)
    return leaf(op.getResult()[0], view);
  unsigned bound = dimExpr.getPosition();
  // linalg.softmax is defined as exp(x - max) / sum(exp(x - max)).
  Node *ninf = makeConst(FloatAttr::get(
      t, APFloat::getInf(ft.getFloatSemantics(), /*Negative=*/true)));
  Node *zero = makeConst(FloatAttr::get(t, 0.0));
  Node *max = makeReduce("arith.maximumf", ninf, x, {bound}, t, op);
  Node *e = makeOp("math.exp", t, {makeOp("arith.subf", t, {x, max}, {}, op)},
                   {}, op);
  Node *sum = makeReduce("arith.addf", zero, e, {bound}, t, op);
  return makeOp("arith.divf", t, {e, sum}, {}, op);
}

Node *ScoreTracer::traceLinalg(linalg::LinalgOp op, OpResult res,
                               AffineMap view) {
  if (!op.hasPureTensorSemantics())
    return leaf(res, view);
  unsigned nLoops = op.getNumLoops();
  unsigned resIdx = res.getResultNumber();
  OpOperand *init = op.getDpsInitOperand(resIdx);
  AffineMap outMap = op.getMatchingIndexingMap(init);
  SmallVector<AffineExpr> assign(nLoops);
  for (auto [p, e] : llvm::enumerate(outMap.getResults())) {
    if (auto d = dyn_cast<AffineDimExpr>(e))
      assign[d.getPosition()] = view.getResult(p);
    else if (!isa<AffineConstantExpr>(e))
      return leaf(res, view);
  }
  // Loops missing from the output map are reductions; each binds a score
  // dim that the view leaves free (the reduced axis).
  SmallVector<utils::IteratorType> its = op.getIteratorTypesArray();
  SmallVector<unsigned> freeLoops;
  for (unsigned l = 0; l < nLoops; ++l) {
    if (assign[l])
      continue;
    if (its[l] != utils::IteratorType::reduction)
      return leaf(res, view);
    freeLoops.push_back(l);
  }
  SmallVector<unsigned> bound;
  if (!freeLoops.empty()) {
    SmallVector<unsigned> unref;
    for (unsigned d = 0; d < rank(); ++d)
      if (!view.isFunctionOfDim(d))
        unref.push_back(d);
    if (unref.size() < freeLoops.size())
      return leaf(res, view);
    SmallVector<int64_t> ranges = op.getStaticLoopRanges();
    if (unref.size() == freeLoops.size()) {
      for (auto [l, d] : llvm::zip(freeLoops, unref)) {
        if (!ShapedType::isDynamic(ranges[l]) &&
            !ShapedType::isDynamic(extents[d]) && ranges[l] != extents[d])
          return leaf(res, view);
        assign[l] = getAffineDimExpr(d, ctx);
        bound.push_back(d);
      }
    } else {
      // One step of a sum over several dims (a bias's gradient reduced one
      // axis at a time): each loop binds the first free dim of its extent.
      // A binding that puts a dim where the graph does not is no wrong
      // reading, only a tree that no longer matches.
      for (unsigned l : freeLoops) {
        auto it = llvm::find_if(unref, [&](unsigned d) {
          return !ShapedType::isDynamic(ranges[l]) &&
                 ranges[l] == extents[d] && !llvm::is_contained(bound, d);
        });
        if (it == unref.end())
          return leaf(res, view);
        assign[l] = getAffineDimExpr(*it, ctx);
        bound.push_back(*it);
      }
    }
  }
  AffineMap loopMap = AffineMap::get(rank(), 0, assign, ctx);

  // Interpret the body: every block value becomes a node.
  Block *body = op.getBlock();
  DenseMap<Value, Node *> env;
  for (OpOperand *in : op.getDpsInputOperands()) {
    BlockArgument arg = body->getArgument(in->getOperandNumber());
    if (arg.use_empty())
      continue;
    AffineMap m = op.getMatchingIndexingMap(in).compose(loopMap);
    env[arg] = trace(in->get(), m);
  }
  Node *acc = make(Node::Kind::Acc, getElementTypeOrSelf(res.getType()));
  for (OpOperand &out : op.getDpsInitsMutable()) {
    BlockArgument arg = body->getArgument(out.getOperandNumber());
    if (arg.use_empty())
      continue;
    if (out.getOperandNumber() == init->getOperandNumber() && !bound.empty())
      env[arg] = acc;
    else if (out.getOperandNumber() == init->getOperandNumber())
      env[arg] = trace(out.get(), view);
    else
      env[arg] = make(Node::Kind::Acc, arg.getType());
  }
  for (Operation &inner : body->without_terminator()) {
    if (auto idx = dyn_cast<linalg::IndexOp>(inner)) {
      AffineExpr e = assign[idx.getDim()];
      if (auto d = dyn_cast<AffineDimExpr>(e)) {
        Node *n = make(Node::Kind::Index, idx.getType());
        n->dim = d.getPosition();
        env[idx] = n;
      } else if (auto c = dyn_cast<AffineConstantExpr>(e)) {
        env[idx] = makeConst(IntegerAttr::get(idx.getType(), c.getValue()));
      } else {
        return leaf(res, view);
      }
      continue;
    }
    if (inner.getNumRegions() != 0 || inner.getNumResults() != 1)
      return leaf(res, view);
    TypedAttr attr;
    if (matchPattern(inner.getResult(0), m_Constant(&attr))) {
      env[inner.getResult(0)] = makeConst(attr);
      continue;
    }
    SmallVector<Node *> operands;
    for (Value operand : inner.getOperands()) {
      auto it = env.find(operand);
      operands.push_back(it != env.end() ? it->second : leaf(operand, view));
    }
    // torch-mlir converts a sub's integer alpha inside the body
    // (x - y * sitofp(1)); folded, the 1 vanishes like any other x * 1.
    if (isa<arith::SIToFPOp, arith::UIToFPOp>(inner) &&
        operands[0]->kind == Node::Kind::Const)
      if (auto i = dyn_cast<IntegerAttr>(operands[0]->cst)) {
        APInt v = i.getValue();
        double d = isa<arith::SIToFPOp>(inner) ? double(v.getSExtValue())
                                               : double(v.getZExtValue());
        env[inner.getResult(0)] =
            makeConst(FloatAttr::get(inner.getResult(0).getType(), d));
        continue;
      }
    env[inner.getResult(0)] =
        makeOp(inner.getName().getStringRef(), inner.getResult(0).getType(),
               operands, inner.getAttrDictionary(), op);
  }
  Value yielded = body->getTerminator()->getOperand(resIdx);
  auto it = env.find(yielded);
  Node *y = it != env.end() ? it->second : leaf(yielded, view);
  visited.insert(op);
  if (bound.empty())
    return y;

  Node *initNode = trace(init->get(), view);
  // A recognised reduction combines the accumulator with an acc-free term.
  if (y->kind == Node::Kind::Op && y->operands.size() == 2) {
    for (int k = 0; k < 2; ++k) {
      if (y->operands[k] == acc && !containsKind(y->operands[1 - k],
                                                 Node::Kind::Acc))
        return makeReduce(y->name->getStringRef(), initNode,
                          y->operands[1 - k], bound, y->type, op);
    }
  }
  return makeReduce("", initNode, y, bound, y->type, op);
}

//===----------------------------------------------------------------------===//
// Node utilities
//===----------------------------------------------------------------------===//

bool raise::structurallyEqual(const Node *a, const Node *b) {
  if (a == b)
    return true;
  if (a->kind != b->kind || a->type != b->type)
    return false;
  switch (a->kind) {
  case Node::Kind::Read:
    return a->value == b->value && a->map == b->map;
  case Node::Kind::Scalar:
    return a->value == b->value;
  case Node::Kind::Index:
    return a->dim == b->dim;
  case Node::Kind::Const:
    return a->cst == b->cst;
  case Node::Kind::Acc:
    return false;
  case Node::Kind::Op:
    if (*a->name != *b->name || a->operands.size() != b->operands.size())
      return false;
    // fastmath flags do not change what is computed here.
    for (NamedAttribute attr : a->attrs)
      if (attr.getName() != "fastmath" &&
          b->attrs.get(attr.getName()) != attr.getValue())
        return false;
    break;
  case Node::Kind::Reduce:
    if (a->combiner != b->combiner || a->reduced != b->reduced)
      return false;
    break;
  }
  for (auto [x, y] : llvm::zip(a->operands, b->operands))
    if (!structurallyEqual(x, y))
      return false;
  return true;
}

bool raise::containsKind(const Node *n, Node::Kind kind) {
  if (n->kind == kind)
    return true;
  for (Node *o : n->operands)
    if (containsKind(o, kind))
      return true;
  return false;
}

bool raise::readsFrom(const Node *n, Operation *op) {
  if (n->kind == Node::Kind::Read && n->value.getDefiningOp() == op)
    return true;
  for (Node *o : n->operands)
    if (readsFrom(o, op))
      return true;
  return false;
}

const Node *raise::findOp(const Node *n, StringRef name) {
  if (n->isOp(name))
    return n;
  for (Node *o : n->operands)
    if (const Node *f = findOp(o, name))
      return f;
  return nullptr;
}

Node *raise::stripCasts(Node *n) {
  while (n->isOp("arith.extf") || n->isOp("arith.truncf"))
    n = n->operands[0];
  return n;
}

static bool isConstValue(const Node *n, double v) {
  std::optional<double> f = n->getFloat();
  return f && *f == v;
}

Node *raise::simplifyIdentities(ScoreTracer &t, Node *n) {
  if (n->kind == Node::Kind::Reduce) {
    Node *init = simplifyIdentities(t, n->operands[0]);
    Node *body = simplifyIdentities(t, n->operands[1]);
    if (init == n->operands[0] && body == n->operands[1])
      return n;
    return t.makeReduce(n->combiner, init, body, n->reduced, n->type,
                        n->origin);
  }
  if (n->kind != Node::Kind::Op)
    return n;
  SmallVector<Node *> ops;
  bool changed = false;
  for (Node *o : n->operands) {
    ops.push_back(simplifyIdentities(t, o));
    changed |= ops.back() != o;
  }
  auto sameType = [&](Node *x) { return x->type == n->type; };
  if (n->isOp("arith.mulf")) {
    if (isConstValue(ops[1], 1.0) && sameType(ops[0]))
      return ops[0];
    if (isConstValue(ops[0], 1.0) && sameType(ops[1]))
      return ops[1];
  }
  if (n->isOp("arith.divf") && isConstValue(ops[1], 1.0) && sameType(ops[0]))
    return ops[0];
  if (n->isOp("arith.addf")) {
    if (isConstValue(ops[1], 0.0) && sameType(ops[0]))
      return ops[0];
    if (isConstValue(ops[0], 0.0) && sameType(ops[1]))
      return ops[1];
  }
  if (n->isOp("arith.subf") && isConstValue(ops[1], 0.0) && sameType(ops[0]))
    return ops[0];
  if (!changed)
    return n;
  return t.rebuild(n, ops);
}

std::string raise::describe(const Node *n) {
  switch (n->kind) {
  case Node::Kind::Read:
    if (Operation *def = n->value.getDefiningOp())
      return "a value produced by '" + def->getName().getStringRef().str() +
             "'";
    return "a function argument";
  case Node::Kind::Scalar:
    return "a scalar value";
  case Node::Kind::Index:
    return "an index";
  case Node::Kind::Const:
    return "a constant";
  case Node::Kind::Acc:
    return "an accumulator";
  case Node::Kind::Op:
    return "'" + n->name->getStringRef().str() + "'";
  case Node::Kind::Reduce:
    return "a reduction" +
           (n->combiner.empty() ? std::string()
                                : " by '" + n->combiner + "'");
  }
  return "?";
}
