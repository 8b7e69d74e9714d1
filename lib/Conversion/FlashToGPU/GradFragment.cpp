//===- GradFragment.cpp - the backward kernels' elementwise score work ----===//
//
// Between the two matmul pairs of a backward step every element of the
// transposed score fragment is recomputed on its own: P from the saved
// lse, dS from dP and delta, and with a score_mod its derivative inlined
// (buildScoreModGradient, the same rule the CPU lowerings use) with the
// captures read from their buffers. A float capture's gradient is a sum of
// dS·∂score_mod/∂c over the elements that read each of its entries; the
// elements of one thread that read the same entry (an index that ignores
// the key, the query or both) are summed in registers first and, where the
// whole warp reads one entry (a per-head slope), over the warp, so the
// atomics are one per distinct entry rather than one per score.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include <cmath>

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

GradScoreModArgs gpu_lowering::gradScoreModArgs(Block &entry,
                                                const GradKernelConfig &cfg) {
  GradScoreModArgs args;
  if (!cfg.scoreMod)
    return args;
  args.region = cfg.scoreMod;
  // The score_mod's arguments, then the staged captures' descriptors.
  unsigned n = cfg.scoreModArgTypes.size();
  unsigned end = entry.getNumArguments() - cfg.staged.size();
  unsigned i = end - n;
  for (size_t c = 0; c < cfg.captureHasGrad.size(); ++c)
    args.captures.push_back(entry.getArgument(i++));
  for (bool g : cfg.captureHasGrad)
    args.grads.push_back(g ? entry.getArgument(i++) : Value());
  for (; i < end; ++i)
    args.batchSizes.push_back(entry.getArgument(i));
  return args;
}

GradFragment::GradFragment(const GradKernelConfig &cfg,
                           const GradScoreModArgs *mod,
                           ArrayRef<Value> batchIdx, Value lq, Value lk,
                           bool masked)
    : cfg(cfg), mod(mod && mod->region ? mod : nullptr),
      batchIdx(batchIdx), lq(lq), lk(lk), masked(masked) {}

Value GradFragment::visible(ImplicitLocOpBuilder &b, Value key, Value query,
                            int64_t keySlot) {
  auto [base, offset] = splitConstantOffset(query);
  KeySpan &ks = keySpans[keySlot];
  if (ks.base != base)
    ks = {base, keyQueries(b, cfg.mask, key, base, lq, lk)};
  return ks.span.admits(b, offset);
}

GradFragment::Element GradFragment::element(ImplicitLocOpBuilder &b, Value s,
                                            Value dp, Value lse2, Value delta,
                                            Value key, Value query,
                                            int64_t keySlot, int64_t querySlot,
                                            ArrayRef<Value> staged) {
  Value negLse = arith::NegFOp::create(b, lse2);
  if (!mod) {
    Value x =
        exp2Approx(b, fmaF32(b, s, constF32(b, cfg.scale * M_LOG2E), negLse));
    if (masked) {
      Value ok = visible(b, key, query, keySlot);
      x = arith::SelectOp::create(b, ok, x, constF32(b, 0.0));
    }
    return {x, arith::MulFOp::create(b, x, arith::SubFOp::create(b, dp, delta))};
  }
  // The region sees indices in range: rows past Lq (P = 0 by their lse) and
  // keys past Lk (masked tiles only) read the last row's and key's entries.
  Value one = constIdx(b, 1);
  Value i = arith::MinSIOp::create(b, query, arith::SubIOp::create(b, lq, one));
  Value j = masked ? arith::MinSIOp::create(b, key,
                                            arith::SubIOp::create(b, lk, one))
                         .getResult()
                   : key;
  ArrayRef<Value> captures = mod->captures;
  auto read = [&](OpBuilder &ob, Location, tensor::ExtractOp ex,
                  ValueRange idx) -> Value {
    unsigned c = captureNumber(ex, captures.size());
    if (c < staged.size() && staged[c])
      return staged[c];
    return loadCapture(ob, captures, ex, idx);
  };
  // Static lengths bound the indices: a conversion of them to f32 (ALiBi's
  // distance) is exact f32 arithmetic on copies of the element's query
  // (its step's base converted once, plus a constant) and key (the
  // thread's, fixed for the walk), not an I2F of a 64-bit integer per
  // element on the unit the exponent takes.
  std::optional<int64_t> bound = exactIndexBound(cfg.indexBound);
  std::optional<IndexFloats> floats;
  if (bound &&
      llvm::any_of(mod->region->front().without_terminator(),
                   [](Operation &op) { return isa<arith::SIToFPOp>(op); })) {
    auto [qBase, qOff] = splitConstantOffset(query);
    Value iF = indexToF32(b, qBase);
    if (qOff)
      iF = arith::AddFOp::create(b, iF, constF32(b, double(qOff)));
    iF = arith::MinNumFOp::create(
        b, iF, indexToF32(b, arith::SubIOp::create(b, lq, one)));
    Value jF = indexToF32(b, key);
    if (masked)
      jF = arith::MinNumFOp::create(
          b, jF, indexToF32(b, arith::SubIOp::create(b, lk, one)));
    floats = IndexFloats{iF, jF, *bound};
  }
  Value t = arith::MulFOp::create(b, s, constF32(b, cfg.scale));
  IRMapping clones;
  FailureOr<ScoreModGradient> g = buildScoreModGradient(
      b, b.getLoc(), *mod->region, ValueRange(), t, batchIdx, i, j, read,
      &clones);
  // The op's verifier proved the region differentiable.
  assert(succeeded(g) && "score_mod without a derivative");
  if (floats)
    foldIndexConversions(b, *mod->region, clones, i, j, *floats);
  Value x = exp2Approx(b, fmaF32(b, g->score, constF32(b, M_LOG2E), negLse));
  if (masked) {
    Value ok = visible(b, key, query, keySlot);
    x = arith::SelectOp::create(b, ok, x, constF32(b, 0.0));
  }
  Value ds = arith::MulFOp::create(b, x, arith::SubFOp::create(b, dp, delta));

  int64_t nb = batchIdx.size();
  for (ScoreModRead &r : g->reads) {
    if (!mod->grads[r.capture])
      continue;
    bool byQuery = llvm::is_contained(r.dims, nb),
         byKey = llvm::is_contained(r.dims, nb + 1);
    std::tuple<unsigned, int64_t, int64_t> slot = {
        r.capture, byQuery ? querySlot : -1, byKey ? keySlot : -1};
    Value add = arith::MulFOp::create(b, ds, r.partial);
    auto *it = llvm::find_if(pending, [&](auto &p) { return p.first == slot; });
    if (it != pending.end()) {
      it->second.sum = arith::AddFOp::create(b, it->second.sum, add);
      continue;
    }
    Pending p;
    p.capture = r.capture;
    for (int64_t d : r.dims)
      p.indices.push_back(d < nb ? batchIdx[d] : d == nb ? i : j);
    p.sum = add;
    p.wholeWarp = !byQuery && !byKey;
    pending.push_back({slot, p});
  }
  return {x, arith::MulFOp::create(b, ds, g->dScore)};
}

void GradFragment::flush(ImplicitLocOpBuilder &b) {
  for (auto &[slot, p] : pending) {
    (void)slot;
    Value grad = mod->grads[p.capture];
    Value sum = p.sum;
    if (!p.wholeWarp) {
      memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addf, sum, grad,
                                  p.indices);
      continue;
    }
    sum = butterflyReduce(b, sum, /*isMax=*/false, 32);
    Value lane = arith::RemUIOp::create(
        b, gpu::ThreadIdOp::create(b, gpu::Dimension::x), constIdx(b, 32));
    OpBuilder::InsertionGuard g(b);
    auto ifFirst = scf::IfOp::create(
        b, arith::CmpIOp::create(b, arith::CmpIPredicate::eq, lane,
                                 constIdx(b, 0)),
        /*withElse=*/false);
    b.setInsertionPointToStart(ifFirst.thenBlock());
    memref::AtomicRMWOp::create(b, arith::AtomicRMWKind::addf, sum, grad,
                                p.indices);
  }
  pending.clear();
}

std::pair<SmallVector<Value>, SmallVector<Value>> gpu_lowering::buildGradFragment(
    ImplicitLocOpBuilder &b, const GradKernelConfig &cfg,
    const GradScoreModArgs *mod, ArrayRef<Value> batchIdx, Value lq, Value lk,
    Value needsMask, int64_t n,
    function_ref<GradFragment::Element(GradFragment &, int64_t)> element) {
  auto ifMask = scf::IfOp::create(b, SmallVector<Type>(2 * n, b.getF32Type()),
                                  needsMask, /*withElseRegion=*/true);
  for (bool masked : {true, false}) {
    OpBuilder::InsertionGuard g(b);
    b.setInsertionPointToStart(masked ? ifMask.thenBlock()
                                      : ifMask.elseBlock());
    GradFragment frag(cfg, mod, batchIdx, lq, lk, masked);
    SmallVector<Value> both(2 * n);
    for (int64_t i = 0; i < n; ++i) {
      GradFragment::Element e = element(frag, i);
      both[i] = e.p;
      both[n + i] = e.ds;
    }
    frag.flush(b);
    scf::YieldOp::create(b, both);
  }
  return {SmallVector<Value>(ifMask.getResults().take_front(n)),
          SmallVector<Value>(ifMask.getResults().drop_front(n))};
}
