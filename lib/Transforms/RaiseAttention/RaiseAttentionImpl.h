//===- RaiseAttentionImpl.h - shared pieces of the attention recognizer ---===//
//
// The recognizer turns the computation between the two contractions into an
// expression tree over the "score space" (batch..., i, j): i is the query row,
// j the key column, i.e. the reduction loop of the PV contraction. Every
// linalg/tensor producer is looked through by composing indexing maps, so a
// fused sub+exp, a keepdim max, a projected broadcast and linalg.softmax all
// become the same tree, and the softmax, mask, scale and score_mod are read
// off that tree instead of off op names or loop order.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_LIB_TRANSFORMS_RAISEATTENTION_RAISEATTENTIONIMPL_H
#define FLASH_LIB_TRANSFORMS_RAISEATTENTION_RAISEATTENTIONIMPL_H

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/IR/AffineMap.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/FunctionInterfaces.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/STLFunctionalExtras.h"
#include "llvm/ADT/SetVector.h"
#include <memory>
#include <optional>
#include <string>

namespace mlir::flash::raise {

/// Why a candidate was not rewritten: the op where the chain broke and why.
struct Refusal {
  Operation *at = nullptr;
  std::string why;
};

/// One scalar expression over the score space.
struct Node {
  enum class Kind {
    Read,   // tensor `value` read at `map(score indices)`
    Scalar, // a scalar SSA value defined outside every traced body
    Index,  // score-space index `dim`
    Const,  // scalar constant `cst`
    Op,     // a pure single-result scalar op `name` over `operands`
    Acc,    // the accumulator of the reduction being interpreted
    Reduce, // reduction over score dims `reduced` of operands[1], init operands[0]
  };
  Kind kind;
  Type type;
  Value value;
  AffineMap map;
  unsigned dim = 0;
  TypedAttr cst;
  std::optional<OperationName> name;
  DictionaryAttr attrs;
  SmallVector<Node *, 3> operands;
  SmallVector<Type, 3> operandTypes; // Op: the types the op was built with
  SmallVector<unsigned, 1> reduced;
  std::string combiner; // Reduce: combining op name, empty if not recognised
  Operation *origin = nullptr;

  bool isOp(StringRef n) const {
    return kind == Kind::Op && name->getStringRef() == n;
  }
  /// Float value of a scalar float constant.
  std::optional<double> getFloat() const;
};

/// Visits every node of the DAG under `root` once, depth first (a node,
/// then its operands in order), until `fn` returns false; returns whether
/// the walk ran to the end.
inline bool forEachNode(const Node *root,
                        llvm::function_ref<bool(const Node *)> fn) {
  llvm::SmallVector<const Node *> stack{root};
  llvm::DenseSet<const Node *> seen;
  while (!stack.empty()) {
    const Node *n = stack.pop_back_val();
    if (!seen.insert(n).second)
      continue;
    if (!fn(n))
      return false;
    stack.append(n->operands.begin(), n->operands.end());
  }
  return true;
}

/// Builds expression trees over a score space of a given rank and extents.
class ScoreTracer {
public:
  ScoreTracer(MLIRContext *ctx, ArrayRef<int64_t> extents)
      : ctx(ctx), extents(extents) {}

  /// The expression computing `v[view(score indices)]`. Producers that are
  /// not understood (and contractions) become `Read` leaves.
  Node *trace(Value v, AffineMap view);

  Node *make(Node::Kind kind, Type type);
  Node *makeConst(TypedAttr attr);
  Node *makeOp(StringRef name, Type type, ArrayRef<Node *> operands,
               DictionaryAttr attrs = {}, Operation *origin = nullptr);
  /// A copy of Op node `n` over new operands (same operand types).
  Node *rebuild(Node *n, ArrayRef<Node *> operands);
  Node *makeReduce(StringRef combiner, Node *init, Node *body,
                   ArrayRef<unsigned> dims, Type type, Operation *origin);

  unsigned rank() const { return extents.size(); }
  MLIRContext *getContext() const { return ctx; }
  ArrayRef<int64_t> getExtents() const { return extents; }

  /// Ops whose results were looked through (the candidate chain).
  llvm::SetVector<Operation *> visited;

private:
  Node *traceLinalg(linalg::LinalgOp op, OpResult res, AffineMap view);
  Node *traceSoftmax(linalg::SoftmaxOp op, AffineMap view);
  Node *leaf(Value v, AffineMap view);

  MLIRContext *ctx;
  SmallVector<int64_t> extents;
  std::vector<std::unique_ptr<Node>> arena;
  DenseMap<std::pair<Value, AffineMap>, Node *> memo;
};

//===- Node utilities (ScoreTrace.cpp) ------------------------------------===//
bool structurallyEqual(const Node *a, const Node *b);
bool containsKind(const Node *n, Node::Kind kind);
/// Whether `n` reads a value produced by `op` anywhere.
bool readsFrom(const Node *n, Operation *op);
/// The first op in `n` (pre-order) that is an Op node named `name`.
const Node *findOp(const Node *n, StringRef name);
/// Looks through extf/truncf.
Node *stripCasts(Node *n);
/// Removes the identity residues x*1, 1*x, x/1, x+0, 0+x, x-0.
Node *simplifyIdentities(ScoreTracer &t, Node *n);
/// Short printable description of a node for remarks.
std::string describe(const Node *n);

//===- Contractions (Contraction.cpp) -------------------------------------===//
/// A contraction: two inputs, one init, reduction loops, body acc + a * b
/// (possibly with extf on the inputs). Classified from the maps, never from
/// the op name or the loop order.
bool isContraction(linalg::LinalgOp op);
/// A contraction with a free loop on each side (a matmul). One without
/// (rowsum(a ∘ b), as a fused softmax backward computes it) is a reduction
/// the tracer looks through.
bool isMatmul(linalg::LinalgOp op);
/// Whether the init of `op` is all zeros.
bool hasZeroInit(linalg::LinalgOp op);

/// An operand as the fused op wants it: result dim t is `value` dim perm[t].
struct OperandView {
  Value value;
  SmallVector<int64_t> perm;
};
/// Looks through transposes (linalg.transpose, permutation generics) and,
/// when `scale` is given, splat multiplies/divides, which it folds into
/// `*scale`. Ops looked through are added to `seen`.
OperandView lookThroughOperand(Value v, ArrayRef<int64_t> perm, double *scale,
                               llvm::SetVector<Operation *> &seen);
/// The tensor for `view`: its value, transposed when `perm` is not identity.
Value materializeOperand(RewriterBase &rewriter, Location loc,
                         const OperandView &view);
/// Where each of `loops` sits in the results of `map` (a permutation onto
/// them): operand dim perm[t] is indexed by loops[t]; nullopt otherwise.
std::optional<SmallVector<int64_t>> operandPerm(AffineMap map,
                                                ArrayRef<unsigned> loops);
/// The loops of `op` as score indices (batch..., i, j): batch loop k is score
/// dim k, `iLoop` dim nb, `jLoop` dim nb + 1, any other loop 0. `extents`
/// receives the score space's sizes.
AffineMap scoreSpaceMap(linalg::LinalgOp op, ArrayRef<unsigned> batchLoops,
                        unsigned iLoop, unsigned jLoop,
                        SmallVectorImpl<int64_t> &extents);
/// `v`, laid out as a fused op's result whose dim t is loop loops[t] of
/// `op`, transposed to the layout of `op`'s result.
Value toResultLayout(RewriterBase &rewriter, Location loc, Value v,
                     linalg::LinalgOp op, ArrayRef<unsigned> loops);
/// `v` with float elements of type `to` (a generic of extf/truncf).
Value castElements(RewriterBase &rewriter, Location loc, Value v, Type to);
/// If `x` is a repeat-interleave of fewer heads along dim `headDim` (each
/// source head repeated G times in a row: collapse of a broadcast over an
/// inner dim, possibly under further collapses and transposes, as TOSA's
/// reshape / add-zeros / reshape spelling gives), returns the source (same
/// rank, fewer heads) and G. A tile-order repeat (h reads h mod Hkv) is not
/// grouped-query attention and gives nullopt, so the caller keeps it
/// materialised. Ops built on the way are appended to `created`, so a caller
/// that drops the result can erase them.
std::optional<std::pair<Value, int64_t>>
peelRepeatInterleave(RewriterBase &rewriter, Location loc, Value x,
                     int64_t headDim, SmallVectorImpl<Operation *> &created);

//===- Softmax (Softmax.cpp) ----------------------------------------------===//
struct SoftmaxMatch {
  Node *scores = nullptr; // X: what the softmax normalises
  bool subtractsMax = false;
  bool lseForm = false;
};
/// Recognises `p` as softmax over score dim j of some X.
FailureOr<SoftmaxMatch> matchSoftmax(ScoreTracer &t, Node *p, Refusal &why,
                                     Operation *fallback);

/// Deferred normalisation: the second matmul reads the unnormalised `p` =
/// exp(X - max X) (or exp(X)) and its result is divided by `z` afterwards;
/// `z` must be the row sum of exactly those exponentials.
FailureOr<SoftmaxMatch> matchDeferredSoftmax(ScoreTracer &t, Node *p, Node *z,
                                             Refusal &why, Operation *fallback);
/// Whether `n` (over the score space, constant in j) is the row log-sum-exp
/// of `x`: max_j X + log sum_j exp(X - max_j X), or log sum_j exp(X).
bool isRowLogSumExp(ScoreTracer &t, Node *n, Node *x);
/// `x` without a row-max shift X - max_j X in front of it (a frontend's
/// own shift before a softmax that subtracts the max again; softmax is
/// shift invariant); `x` itself if it has none.
Node *peelRowMaxShift(ScoreTracer &t, Node *x);

/// A softmax over the scores with one more column, a sink: the second
/// matmul reads the softmax of concat(X, sink) (or concat(sink, X)) along
/// the key axis through a slice that drops the sink column again.
struct SinkMatch {
  /// The softmax of the kept columns; `scores` is X over the PV's score
  /// space (casts between the concatenation and the softmax kept).
  SoftmaxMatch softmax;
  /// Where the sink logit comes from: a tensor read at the head index
  /// (unit dims elsewhere), a tensor element, a scalar or a constant.
  enum class Source { HeadVector, Element, Scalar, Constant } source;
  Value value;                // HeadVector, Element: the tensor; Scalar
  SmallVector<int64_t> index; // Element: where it is read
  /// HeadVector: the op's heads dim merges `tiles` batch elements of the
  /// vector's heads each (a [B * H] batch reads sinks[bh mod H]).
  int64_t tiles = 1;
  TypedAttr constant;         // Constant
  /// Element types the logit is converted through on its way to the
  /// softmax, innermost first.
  SmallVector<Type> casts;
  Node *logit = nullptr;      // the sink column as traced
  /// The slice, the concatenation and the softmax over the extended key
  /// axis: chain ops the score-space tracer did not visit itself.
  SmallVector<Operation *> ops;
  /// The softmax's own score space (key extent Lk + 1) and what it
  /// normalises there, the concatenation (its max shift peeled): a row
  /// log-sum-exp over it is flash.attention's LSE with sinks.
  std::shared_ptr<ScoreTracer> extended;
  Node *extendedScores = nullptr;
};
enum class SinkResult { NotCandidate, Refused, Matched };
/// Recognises `p` (the second matmul's P operand traced over `t`'s score
/// space) as the kept columns of a softmax with a sink column. A slice that
/// does not lead to a softmax over a matmul is no candidate; any other
/// mismatch is a refusal in `why`.
SinkResult matchSinkSoftmax(ScoreTracer &t, Node *p, SinkMatch &m,
                            Refusal &why, Operation *fallback);
/// The op's `[Hq]` sinks operand for `m`; `hq` is the number of query heads.
Value materializeSinks(RewriterBase &rw, Location loc, const SinkMatch &m,
                       OpFoldResult hq);

//===- Score modification (ScoreMod.cpp) ----------------------------------===//
struct ScoreModPlan {
  double scale = 1.0;
  MaskAttr mask;          // null: none
  Node *body = nullptr;   // null: identity score_mod
  Node *scoreLeaf = nullptr; // the node standing for scale * q.k
};
/// A constant the mask fills with: <= -1e4 counts as -inf (the file comment
/// of ScoreMod.cpp says why).
bool isMaskFill(const Node *n);
/// Splits the pre-softmax expression `x` over the score leaf `s` into the
/// structured mask, the scale and what remains as score_mod.
FailureOr<ScoreModPlan> planScoreMod(ScoreTracer &t, Node *x, Node *s,
                                     int64_t lq, int64_t lk, Refusal &why,
                                     Operation *fallback);
/// The tensors a score_mod reads: `keys` are the traced values (tensors, or
/// scalars wrapped into 0-d tensors in `operands`), in capture order.
struct CaptureList {
  SmallVector<Value> keys;
  SmallVector<Value> operands;
};
/// Collects the captures `plan.body` needs; scalars are wrapped (created at
/// the rewriter's insertion point).
LogicalResult collectCaptures(RewriterBase &rewriter, Location loc,
                              const ScoreModPlan &plan, CaptureList &captures,
                              Refusal &why, Operation *fallback);
/// Builds the score_mod region of `op` from `plan.body`.
LogicalResult buildScoreModRegion(RewriterBase &rewriter, AttentionOp op,
                                  const ScoreModPlan &plan,
                                  const CaptureList &captures, unsigned rank);

//===- Backward (Backward.cpp) --------------------------------------------===//
/// What the backward matcher needs of the forward it differentiates.
struct ForwardFacts {
  Node *scores = nullptr;  // X, what the softmax normalises
  const ScoreModPlan *plan = nullptr;
  unsigned numBatch = 0;
  Operation *qk = nullptr, *pv = nullptr;
  OperandView q, k, v;     // the operands as the fused op reads them
  float scale = 1.0f;      // the fused op's scale
  /// The sink column, when the softmax has one: the backward then reads P,
  /// and writes dS, through slices of the softmax's own score space.
  const SinkMatch *sink = nullptr;
};
/// One gradient contraction of the backward: its result is `factor` times
/// the gradient op's result, whose dim t is loop loops[t] of `op`.
struct GradContraction {
  linalg::LinalgOp op;
  SmallVector<unsigned> loops;
  double factor = 1.0;
  /// Under GQA, the graph's sum of this gradient over the query heads of
  /// each group (the repeat's backward): the op's gradient of the
  /// unrepeated K or V replaces `groupSum`, and `groupChain` (from `op` to
  /// it) dies. Null when the gradient is kept per query head.
  Value groupSum;
  SmallVector<Operation *> groupChain;
};
struct BackwardMatch {
  GradContraction dq, dk, dv; // op null where the graph does not compute it
  OperandView gradOut;        // dO in [batch..., Lq, Dv]
  /// Ops the backward's score-space traces looked through (the chain the
  /// gradient op replaces), and the dO·Vᵀ contraction.
  llvm::SetVector<Operation *> ops;
  Operation *dp = nullptr;
  /// The gradient of a float capture that the graph computes itself (an
  /// additive bias's: dS summed over the dims the bias is broadcast along):
  /// `value` is `factor` times the gradient op's result for `capture`,
  /// reshaped by unit dims at most.
  struct CaptureGrad {
    Value capture, value;
    double factor = 1.0;
  };
  SmallVector<CaptureGrad> captureGrads;
  /// The sinks' gradient the graph computes itself (the sink column of the
  /// softmax gradient summed over batch and query rows): `value` is
  /// `factor` times −Σ exp(sinks[h] − lse)·rowsum(dO ∘ O), reshaped by unit
  /// dims at most.
  struct SinkGrad {
    Value value;
    double factor = 1.0;
  };
  std::optional<SinkGrad> sinkGrad;
};
/// Recognises, among the contractions reachable from `escapes` (the users
/// of forward intermediates outside the forward chain), autodiff's backward
/// of the forward: dV = Pᵀ·dO, dP = dO·Vᵀ, dS = P ∘ (dP − rowsum(dP ∘ P)),
/// dQ = dS·K, dK = dSᵀ·Q, each up to a constant factor, and the gradient of
/// each additive bias the graph computes. Every contraction it examined is
/// added to `examined`.
/// Whether the only use of `g.op`'s result is the backward of a
/// repeat-interleave of its head loop `headLoop` by `group` (the head dim
/// split into (heads / group, group) by an expand_shape, summed from 0 over
/// the group dim, keepdim or not, then at most unit-dim reshapes); fills
/// g.groupSum and g.groupChain.
bool matchGroupSum(GradContraction &g, unsigned headLoop, int64_t group);
FailureOr<BackwardMatch> matchBackward(const ForwardFacts &fwd,
                                       ArrayRef<Operation *> escapes,
                                       DenseSet<Operation *> &examined,
                                       Refusal &why);

//===- Paged KV caches (PagedGather.cpp) ----------------------------------===//
/// Rewrites each flash.attention in `func` whose K and V are gathered
/// through one block table (and masked at each sequence's length, or not at
/// all) into flash.paged_attention over the pools; with `remarks`, a gather
/// that does not fold emits a remark saying why.
void foldPagedGathers(RewriterBase &rw, FunctionOpInterface func,
                      bool remarks);

} // namespace mlir::flash::raise

#endif // FLASH_LIB_TRANSFORMS_RAISEATTENTION_RAISEATTENTIONIMPL_H
