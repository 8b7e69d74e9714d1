//===- Softmax.cpp - softmax over the key axis, in every frontend shape ---===//
//
// Works on the score-space tree, so div vs rcp*mul, keepdim vs projected vs
// broadcast maps, fused sub+exp or exp+sum and linalg.softmax all reduce to
// one shape: exp(X - max_j X) / sum_j exp(X - max_j X), with the max
// optional (softmax is shift invariant) and the log-sum-exp spelling
// exp(X - (max_j X + log sum_j exp(X - max_j X))) accepted too.
//
//===----------------------------------------------------------------------===//
#include "RaiseAttentionImpl.h"

#include "llvm/ADT/APFloat.h"
#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::raise;

static Operation *at(const Node *n, Operation *fallback) {
  return n->origin ? n->origin : fallback;
}

/// The reduction must run over exactly the key axis j = rank - 1.
static LogicalResult checkAxis(ScoreTracer &t, const Node *r, StringRef what,
                               Refusal &why, Operation *fallback) {
  unsigned j = t.rank() - 1, i = t.rank() - 2;
  if (r->reduced.size() == 1 && r->reduced[0] == j)
    return success();
  why.at = at(r, fallback);
  if (r->reduced.size() == 1 && r->reduced[0] == i)
    why.why = llvm::formatv("softmax {0} reduces over the query axis, but the "
                            "second matmul contracts the key axis",
                            what);
  else if (r->reduced.size() > 1)
    why.why = llvm::formatv("softmax {0} reduces over {1} axes; only a "
                            "single-axis softmax over the keys is attention",
                            what, r->reduced.size());
  else
    why.why = llvm::formatv("softmax {0} reduces over a batch axis, not the "
                            "key axis the second matmul contracts",
                            what);
  return failure();
}

/// A max init must not exceed any input: -inf, the lowest finite value of
/// its type, or NaN when the combiner ignores NaN (maxnumf).
static bool isMaxIdentity(const Node *init, StringRef combiner) {
  std::optional<double> v = init->getFloat();
  if (!v)
    return false;
  auto ft = dyn_cast<FloatType>(init->type);
  if (!ft)
    return false;
  if (std::isnan(*v))
    return combiner == "arith.maxnumf";
  if (std::isinf(*v) && *v < 0)
    return true;
  APFloat lowest =
      APFloat::getLargest(ft.getFloatSemantics(), /*Negative=*/true);
  return *v <= lowest.convertToDouble();
}

static bool isFloatZero(const Node *n) {
  std::optional<double> v = n->getFloat();
  return v && *v == 0.0;
}

/// m = max_j X: returns X.
static FailureOr<Node *> matchRowMax(ScoreTracer &t, Node *m, Refusal &why,
                                     Operation *fallback) {
  m = stripCasts(m);
  if (m->kind != Node::Kind::Reduce) {
    why = {at(m, fallback), "the value subtracted before exp is " +
                                describe(m) + ", not a row max"};
    return failure();
  }
  if (m->combiner != "arith.maximumf" && m->combiner != "arith.maxnumf") {
    why = {at(m, fallback),
           "the reduction subtracted before exp is not a max (" +
               (m->combiner.empty() ? std::string("unrecognised combiner")
                                    : m->combiner) +
               ")"};
    return failure();
  }
  if (failed(checkAxis(t, m, "max", why, fallback)))
    return failure();
  if (!isMaxIdentity(m->operands[0], m->combiner)) {
    why = {at(m, fallback),
           "softmax max starts from " + describe(m->operands[0]) +
               " that is not -inf, the lowest value, or NaN with maxnumf: "
               "it clamps the scores"};
    return failure();
  }
  return m->operands[1];
}

/// z = sum_j e: checks combiner, axis, init and that it sums `e`.
static LogicalResult matchRowSum(ScoreTracer &t, Node *z, Node *e,
                                 Refusal &why, Operation *fallback) {
  z = stripCasts(z);
  if (z->kind != Node::Kind::Reduce) {
    why = {at(z, fallback), "the softmax denominator is " + describe(z) +
                                ", not a row sum of the exponentials"};
    return failure();
  }
  if (z->combiner != "arith.addf") {
    why = {at(z, fallback),
           "the softmax denominator is a reduction that is not a sum (" +
               (z->combiner.empty() ? std::string("unrecognised combiner")
                                    : z->combiner) +
               ")"};
    return failure();
  }
  if (failed(checkAxis(t, z, "sum", why, fallback)))
    return failure();
  if (!isFloatZero(z->operands[0])) {
    why = {at(z, fallback), "softmax sum starts from " +
                                describe(z->operands[0]) + ", not 0"};
    return failure();
  }
  if (!structurallyEqual(stripCasts(z->operands[1]), stripCasts(e))) {
    why = {at(z, fallback),
           "the softmax denominator sums something other than the "
           "exponentials in the numerator"};
    return failure();
  }
  return success();
}

/// e = exp(X - max X) or exp(X): fills X.
static LogicalResult matchExp(ScoreTracer &t, Node *e, SoftmaxMatch &m,
                              Refusal &why, Operation *fallback) {
  e = stripCasts(e);
  if (!e->isOp("math.exp")) {
    why = {at(e, fallback), "the softmax numerator is " + describe(e) +
                                ", not exp"};
    return failure();
  }
  Node *y = e->operands[0];
  if (y->isOp("arith.subf") &&
      stripCasts(y->operands[1])->kind == Node::Kind::Reduce) {
    FailureOr<Node *> x = matchRowMax(t, y->operands[1], why, fallback);
    if (failed(x))
      return failure();
    if (!structurallyEqual(stripCasts(*x), stripCasts(y->operands[0]))) {
      why = {at(y, fallback), "the row max is taken over a different tensor "
                              "than the one exponentiated"};
      return failure();
    }
    m.scores = y->operands[0];
    m.subtractsMax = true;
    return success();
  }
  m.scores = y;
  return success();
}

FailureOr<SoftmaxMatch> raise::matchSoftmax(ScoreTracer &t, Node *p,
                                            Refusal &why,
                                            Operation *fallback) {
  SoftmaxMatch m;
  p = stripCasts(simplifyIdentities(t, p));
  Node *e = nullptr, *z = nullptr;
  if (p->isOp("arith.divf")) {
    e = p->operands[0];
    z = p->operands[1];
  } else if (p->isOp("arith.mulf")) {
    for (int k = 0; k < 2 && !z; ++k) {
      Node *r = stripCasts(p->operands[k]);
      std::optional<double> one =
          r->isOp("arith.divf") ? r->operands[0]->getFloat() : std::nullopt;
      if (one && *one == 1.0) {
        z = r->operands[1];
        e = p->operands[1 - k];
      }
    }
    if (!z) {
      why = {at(p, fallback),
             "the second matmul reads a product that is not exp * 1/sum: a "
             "multiplicative mask or dropout after the softmax"};
      return failure();
    }
  } else if (p->isOp("math.exp")) {
    // Log-sum-exp form: exp(X - (max + log(sum exp(X - max)))).
    Node *y = p->operands[0];
    if (y->isOp("arith.subf")) {
      Node *lse = stripCasts(y->operands[1]);
      if (lse->isOp("arith.addf")) {
        for (int k = 0; k < 2; ++k) {
          Node *lg = stripCasts(lse->operands[k]);
          if (!lg->isOp("math.log"))
            continue;
          FailureOr<Node *> x = matchRowMax(t, lse->operands[1 - k], why,
                                            fallback);
          if (failed(x))
            return failure();
          if (!structurallyEqual(stripCasts(*x), stripCasts(y->operands[0]))) {
            why = {at(y, fallback), "the log-sum-exp is taken over a "
                                    "different tensor than the one "
                                    "exponentiated"};
            return failure();
          }
          Node *sum = lg->operands[0];
          Node *inner = stripCasts(stripCasts(sum)->kind == Node::Kind::Reduce
                                       ? stripCasts(sum)->operands[1]
                                       : sum);
          SoftmaxMatch im;
          if (failed(matchExp(t, inner, im, why, fallback)))
            return failure();
          if (failed(matchRowSum(t, sum, inner, why, fallback)))
            return failure();
          if (!im.subtractsMax ||
              !structurallyEqual(stripCasts(im.scores),
                                 stripCasts(y->operands[0]))) {
            why = {at(lg, fallback), "the log-sum-exp does not normalise the "
                                     "exponentiated scores"};
            return failure();
          }
          m.scores = y->operands[0];
          m.subtractsMax = true;
          m.lseForm = true;
          return m;
        }
      }
    }
    why = {at(p, fallback), "partial softmax: the exponentials are not "
                            "normalised by their row sum"};
    return failure();
  } else if (p->isOp("arith.select")) {
    why = {at(p, fallback), "a select between the softmax and the second "
                            "matmul: a mask after the softmax or dropout"};
    return failure();
  } else {
    why = {at(p, fallback), "the second matmul reads " + describe(p) +
                                ", not a softmax"};
    return failure();
  }
  if (stripCasts(e)->isOp("arith.select") || stripCasts(e)->isOp("arith.mulf")) {
    why = {at(stripCasts(e), fallback),
           "the softmax numerator is masked or scaled after exp: a mask "
           "after the softmax or dropout"};
    return failure();
  }
  if (failed(matchExp(t, e, m, why, fallback)))
    return failure();
  if (failed(matchRowSum(t, z, e, why, fallback)))
    return failure();
  return m;
}

FailureOr<SoftmaxMatch> raise::matchDeferredSoftmax(ScoreTracer &t, Node *p,
                                                    Node *z, Refusal &why,
                                                    Operation *fallback) {
  // sum_j(e_j v_j) / Z == sum_j (e_j / Z) v_j because Z does not depend on
  // j: the normalisation commutes with the second matmul.
  SoftmaxMatch m;
  Node *e = stripCasts(simplifyIdentities(t, p));
  if (failed(matchExp(t, e, m, why, fallback)))
    return failure();
  if (failed(matchRowSum(t, simplifyIdentities(t, z), e, why, fallback)))
    return failure();
  return m;
}

bool raise::isRowLogSumExp(ScoreTracer &t, Node *n, Node *x) {
  Refusal ignored;
  n = stripCasts(simplifyIdentities(t, n));
  x = stripCasts(x);
  // log(sum_j exp(X_j - M)) is the log-sum-exp only when M is added back.
  auto logOfSum = [&](Node *lg, bool subtractsMax) {
    lg = stripCasts(lg);
    if (!lg->isOp("math.log"))
      return false;
    Node *sum = stripCasts(lg->operands[0]);
    if (sum->kind != Node::Kind::Reduce)
      return false;
    Node *inner = stripCasts(sum->operands[1]);
    SoftmaxMatch im;
    return succeeded(matchExp(t, inner, im, ignored, nullptr)) &&
           im.subtractsMax == subtractsMax &&
           structurallyEqual(stripCasts(im.scores), x) &&
           succeeded(matchRowSum(t, sum, inner, ignored, nullptr));
  };
  if (n->isOp("arith.addf")) {
    for (int k = 0; k < 2; ++k) {
      if (!stripCasts(n->operands[k])->isOp("math.log"))
        continue;
      FailureOr<Node *> mx = matchRowMax(t, n->operands[1 - k], ignored,
                                         nullptr);
      if (failed(mx) || !structurallyEqual(stripCasts(*mx), x))
        return false;
      // The max inside the log must be this same row max (matchExp checks
      // that it is a max of the exponentiated tensor, i.e. of X).
      return logOfSum(n->operands[k], /*subtractsMax=*/true);
    }
    return false;
  }
  return logOfSum(n, /*subtractsMax=*/false);
}

Node *raise::peelRowMaxShift(ScoreTracer &t, Node *x) {
  SmallVector<Node *> casts;
  Node *s = x;
  while (s->isOp("arith.extf") || s->isOp("arith.truncf")) {
    casts.push_back(s);
    s = s->operands[0];
  }
  if (!s->isOp("arith.subf") ||
      stripCasts(s->operands[1])->kind != Node::Kind::Reduce)
    return x;
  Refusal ignored;
  FailureOr<Node *> inner = matchRowMax(t, s->operands[1], ignored, nullptr);
  if (failed(inner) ||
      !structurallyEqual(stripCasts(*inner), stripCasts(s->operands[0])))
    return x;
  Node *r = peelRowMaxShift(t, s->operands[0]);
  for (Node *c : llvm::reverse(casts))
    r = t.rebuild(c, {r});
  return r;
}
