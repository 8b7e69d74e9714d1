//===- MemrefLaunch.cpp - host side of the memref-argument kernels ---------===//
//
// The portable and mma.sync kernels take Q, K, V and O as plain memrefs
// viewed [batch·heads, L, D] (no TMA descriptors), so they share this host
// side: the views, the sizes, the grid of (query blocks, batch·heads) and
// the launch on the caller's stream.
//
//===----------------------------------------------------------------------===//
#include "KernelStrategies.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

FailureOr<MemrefKernelSpec> gpu_lowering::memrefKernelSpec(AttentionOp op,
                                                           std::string &why) {
  MemrefKernelSpec spec;
  int64_t nb = op.getNumBatchDims();
  spec.numBatchDims = nb;
  spec.d = op.getQueryType().getDimSize(nb + 1);
  spec.dv = op.getValueType().getDimSize(nb + 1);
  if (ShapedType::isDynamic(spec.d) || ShapedType::isDynamic(spec.dv)) {
    why = "head dims must be static";
    return failure();
  }
  spec.qElem = op.getQueryType().getElementType();
  spec.kElem = op.getKeyType().getElementType();
  spec.vElem = op.getValueType().getElementType();
  spec.oElem = op.getOutputType().getElementType();
  for (Type t : {spec.qElem, spec.kElem, spec.vElem, spec.oElem})
    if (!t.isF32() && !t.isF16() && !t.isBF16()) {
      llvm::raw_string_ostream(why)
          << "element type " << t << " is not supported (f32, f16 or bf16)";
      return failure();
    }
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.scale = op.getScale().convertToDouble();
  spec.scoreMod = op.hasScoreMod() ? &op.getScoreMod() : nullptr;
  spec.numCaptures = op.getCaptures().size();
  spec.hasSinks = op.getSinks() != nullptr;
  spec.lq = op.getQueryType().getDimSize(nb);
  spec.lk = op.getKeyType().getDimSize(nb);
  if (nb > 0) {
    spec.hq = op.getQueryType().getDimSize(nb - 1);
    spec.hkv = op.getKeyType().getDimSize(nb - 1);
  }
  return spec;
}

FailureOr<MemrefKernelSpec> gpu_lowering::memrefKernelSpec(PagedAttentionOp op,
                                                           std::string &why) {
  MemrefKernelSpec spec;
  RankedTensorType q = op.getQueryType(), kc = op.getKeyCacheType(),
                   vc = op.getValueCacheType();
  spec.numBatchDims = 2;
  spec.d = q.getDimSize(3);
  spec.dv = vc.getDimSize(3);
  spec.pageSize = op.getPageSize();
  spec.lq = q.getDimSize(2);
  spec.hq = q.getDimSize(1);
  spec.hkv = kc.getDimSize(2);
  if (ShapedType::isDynamic(spec.d) || ShapedType::isDynamic(spec.dv) ||
      ShapedType::isDynamic(spec.pageSize)) {
    why = "head dims and the page size of a paged KV cache must be static";
    return failure();
  }
  spec.qElem = q.getElementType();
  spec.kElem = kc.getElementType();
  spec.vElem = vc.getElementType();
  spec.oElem = op.getOutputType().getElementType();
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.hasSinks = op.getSinks() != nullptr;
  spec.scale = op.getScale().convertToDouble();
  spec.scoreMod = op.hasScoreMod() ? &op.getScoreMod() : nullptr;
  spec.numCaptures = op.getCaptures().size();
  return spec;
}

FailureOr<MemrefKernelSpec>
gpu_lowering::memrefKernelSpec(VarlenAttentionOp op, std::string &why) {
  MemrefKernelSpec spec;
  RankedTensorType q = op.getQueryType(), k = op.getKeyType(),
                   v = op.getValueType();
  spec.varlen = true;
  spec.numBatchDims = 1;
  spec.d = q.getDimSize(2);
  spec.dv = v.getDimSize(2);
  spec.hq = q.getDimSize(1);
  spec.hkv = k.getDimSize(1);
  if (ShapedType::isDynamic(spec.d) || ShapedType::isDynamic(spec.dv)) {
    why = "head dims must be static";
    return failure();
  }
  spec.qElem = q.getElementType();
  spec.kElem = k.getElementType();
  spec.vElem = v.getElementType();
  spec.oElem = op.getOutputType().getElementType();
  spec.mask = op.getMaskOrNone();
  spec.hasLse = op.hasLse();
  spec.hasSinks = op.getSinks() != nullptr;
  spec.scale = op.getScale().convertToDouble();
  return spec;
}

gpu::GPUFuncOp gpu_lowering::createMemrefKernelFunc(
    ImplicitLocOpBuilder &b, ArrayRef<Type> argTypes,
    ArrayRef<Type> workgroup, ArrayRef<Type> privates, int64_t threads,
    StringRef name) {
  auto fn = gpu::GPUFuncOp::create(
      b, name, FunctionType::get(b.getContext(), argTypes, {}), workgroup,
      privates);
  fn->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  // 16-byte copies into the tiles (and ldmatrix rows) need aligned bases.
  for (unsigned i = 0; i < workgroup.size(); ++i)
    fn.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                   b.getI64IntegerAttr(16));
  fn->setAttr("nvvm.maxntid", b.getDenseI32ArrayAttr(
                                  {static_cast<int32_t>(threads), 1, 1}));
  return fn;
}

DynamicSmem::DynamicSmem(ImplicitLocOpBuilder &b)
    : space(gpu::AddressSpaceAttr::get(b.getContext(),
                                       gpu::AddressSpace::Workgroup)) {
  base = gpu::DynamicSharedMemoryOp::create(
      b, MemRefType::get({ShapedType::kDynamic}, b.getI8Type(),
                         MemRefLayoutAttrInterface(), space));
}

Value DynamicSmem::view(ImplicitLocOpBuilder &b, ArrayRef<int64_t> shape,
                        Type type, int64_t offset) const {
  return memref::ViewOp::create(
             b, MemRefType::get(shape, type, MemRefLayoutAttrInterface(), space),
             base, constIdx(b, offset), ValueRange{})
      .getResult();
}

Value gpu_lowering::dynamicOuterView(ImplicitLocOpBuilder &b, Value m,
                                     int64_t nb) {
  Value c = collapseBatchDims(b, m, nb);
  auto t = cast<MemRefType>(c.getType());
  SmallVector<int64_t> shape(t.getShape());
  for (size_t i = 0; i + 1 < shape.size(); ++i)
    shape[i] = ShapedType::kDynamic;
  if (t.getRank() == 2) // lse: [batch·heads, Lq]
    shape.back() = ShapedType::kDynamic;
  return memref::CastOp::create(b, MemRefType::get(shape, t.getElementType()),
                                c)
      .getResult();
}

MemrefKernelArgs::MemrefKernelArgs(Block &entry, const MemrefKernelSpec &spec) {
  unsigned a = 0;
  q = entry.getArgument(a++);
  k = entry.getArgument(a++);
  v = entry.getArgument(a++);
  out = entry.getArgument(a++);
  if (spec.hasLse)
    lse = entry.getArgument(a++);
  hkv = entry.getArgument(a++);
  for (int64_t i = 0; i < spec.numBatchDims; ++i)
    batchSizes.push_back(entry.getArgument(a++));
  for (int64_t i = 0; i < spec.numCaptures; ++i)
    captures.push_back(entry.getArgument(a++));
  if (spec.hasSinks)
    sinks = entry.getArgument(a++);
  if (spec.pageSize > 0) {
    blockTable = entry.getArgument(a++);
    seqLens = entry.getArgument(a++);
  }
  if (spec.varlen) {
    cuSeqlensQ = entry.getArgument(a++);
    cuSeqlensK = entry.getArgument(a++);
  }
}

/// `m` with its dims `dynamic` made dynamic, so that a kernel's signature
/// does not depend on them.
static Value castDynamic(ImplicitLocOpBuilder &b, Value m,
                         ArrayRef<int64_t> dynamic) {
  auto t = cast<MemRefType>(m.getType());
  SmallVector<int64_t> shape(t.getShape());
  for (int64_t d : dynamic)
    shape[d] = ShapedType::kDynamic;
  return memref::CastOp::create(b, MemRefType::get(shape, t.getElementType()),
                                m)
      .getResult();
}

MemrefLaunchArgs gpu_lowering::memrefLaunchArgs(ImplicitLocOpBuilder &b,
                                                const OperandBuffers &bufs,
                                                const MemrefKernelSpec &spec) {
  int64_t nb = spec.numBatchDims;
  auto dynamicOuter = [&](Value m) { return dynamicOuterView(b, m, nb); };
  MemrefLaunchArgs r;
  // The sinks (any count) as the next argument, where each layout puts them.
  auto appendSinks = [&] {
    if (!bufs.sinks)
      return;
    r.sinks = castDynamic(b, bufs.sinks, {0});
    r.args.push_back(r.sinks);
  };
  if (spec.pageSize > 0) {
    // The pools keep their page size and head dim (the kernel divides by
    // the first and unrolls over the second); the page and head counts, the
    // table's sizes and the batch are run-time values.
    r.args = {dynamicOuter(bufs.q), castDynamic(b, bufs.k, {0, 2}),
              castDynamic(b, bufs.v, {0, 2}), dynamicOuter(bufs.out)};
    if (bufs.lse)
      r.args.push_back(dynamicOuter(bufs.lse));
    r.hkv = memref::DimOp::create(b, bufs.k, 2);
    Value batch = memref::DimOp::create(b, bufs.q, 0);
    Value heads = memref::DimOp::create(b, bufs.q, 1);
    r.args.append({r.hkv, batch, heads});
    // The kernel's argument order (MemrefKernelArgs): the captures and the
    // sinks come after the batch sizes, the pages last.
    r.args.append(bufs.captures.begin(), bufs.captures.end());
    appendSinks();
    r.args.append({castDynamic(b, bufs.blockTable, {0, 1}),
                   castDynamic(b, bufs.seqLens, {0})});
    r.bhCount = arith::MulIOp::create(b, batch, heads);
    r.lq = memref::DimOp::create(b, bufs.q, 2);
    r.lk = arith::MulIOp::create(b, memref::DimOp::create(b, bufs.blockTable, 1),
                                 constIdx(b, spec.pageSize));
    return r;
  }
  if (spec.varlen) {
    // Packed [tokens, heads, D]: the token and head counts are run-time
    // values, the head dims part of the kernel.
    r.args = {castDynamic(b, bufs.q, {0, 1}), castDynamic(b, bufs.k, {0, 1}),
              castDynamic(b, bufs.v, {0, 1}), castDynamic(b, bufs.out, {0, 1})};
    if (bufs.lse)
      r.args.push_back(castDynamic(b, bufs.lse, {0, 1}));
    r.hkv = memref::DimOp::create(b, bufs.k, 1);
    r.bhCount = memref::DimOp::create(b, bufs.q, 1);
    r.args.append({r.hkv, r.bhCount});
    // As for a paged cache: the sinks after the batch sizes (the heads), the
    // offsets last.
    appendSinks();
    r.args.append({castDynamic(b, bufs.cuSeqlensQ, {0}),
                   castDynamic(b, bufs.cuSeqlensK, {0})});
    r.lq = memref::DimOp::create(b, bufs.q, 0);
    r.lk = memref::DimOp::create(b, bufs.k, 0);
    r.sequences = arith::MaxSIOp::create(
        b,
        arith::SubIOp::create(b, memref::DimOp::create(b, bufs.cuSeqlensQ, 0),
                              constIdx(b, 1)),
        constIdx(b, 0));
    return r;
  }
  r.args = {dynamicOuter(bufs.q), dynamicOuter(bufs.k), dynamicOuter(bufs.v),
            dynamicOuter(bufs.out)};
  if (bufs.lse)
    r.args.push_back(dynamicOuter(bufs.lse));
  r.hkv = nb > 0 ? memref::DimOp::create(b, bufs.k, nb - 1).getResult()
                 : constIdx(b, 1);
  r.args.push_back(r.hkv);
  r.bhCount = constIdx(b, 1);
  for (int64_t i = 0; i < nb; ++i) {
    Value s = memref::DimOp::create(b, bufs.q, i);
    r.args.push_back(s);
    r.bhCount = arith::MulIOp::create(b, r.bhCount, s);
  }
  r.args.append(bufs.captures.begin(), bufs.captures.end());
  appendSinks();
  r.lq = memref::DimOp::create(b, bufs.q, nb);
  r.lk = memref::DimOp::create(b, bufs.k, nb);
  return r;
}

scf::IfOp gpu_lowering::ifNonEmptyQuery(ImplicitLocOpBuilder &b,
                                        const MemrefLaunchArgs &a) {
  // No key at all still launches: every row then writes 0 and lse = -inf.
  Value zero = constIdx(b, 0);
  Value nonEmpty = arith::AndIOp::create(
      b, arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, a.lq, zero),
      arith::CmpIOp::create(b, arith::CmpIPredicate::sgt, a.bhCount, zero));
  auto ifLaunch = scf::IfOp::create(b, nonEmpty, /*withElse=*/false);
  b.setInsertionPointToStart(ifLaunch.thenBlock());
  return ifLaunch;
}

LogicalResult gpu_lowering::lowerToMemrefLaunch(
    RewriterBase &rewriter, Operation *op, const OperandBuffers &bufs,
    const MemrefKernelSpec &spec, int64_t rowsPerBlock, int64_t threads,
    MemrefKernelBuilder build) {
  Location loc = op->getLoc();
  Value stream = streamArgument(op);
  OpBuilder::InsertionGuard guard(rewriter);
  rewriter.setInsertionPoint(op);
  ImplicitLocOpBuilder b(loc, rewriter);
  MemrefLaunchArgs a = memrefLaunchArgs(b, bufs, spec);
  SmallVector<Type> argTypes;
  for (Value v : a.args)
    argTypes.push_back(v.getType());

  gpu::GPUFuncOp kernel;
  {
    OpBuilder::InsertionGuard g(rewriter);
    gpu::GPUModuleOp gmod = newKernelModule(rewriter, op);
    kernel = build(rewriter, loc, gmod, spec, argTypes);
  }
  {
    OpBuilder::InsertionGuard g(b);
    ifNonEmptyQuery(b, a);
    Value gx = arith::CeilDivSIOp::create(b, a.lq, constIdx(b, rowsPerBlock));
    if (a.sequences)
      gx = arith::AddIOp::create(b, gx, a.sequences);
    launchOnStream(b, kernel, gx, a.bhCount, threads, /*dynamicSmemBytes=*/0,
                   a.args, stream);
  }
  replaceWithDestinations(rewriter, op, bufs);
  return success();
}

LogicalResult MemrefKernelStrategy::lower(RewriterBase &rewriter,
                                          AttentionOp op,
                                          const OperandBuffers &bufs,
                                          const GPUKernelOptions &,
                                          const ChipInfo &) const {
  std::string why;
  FailureOr<MemrefKernelSpec> spec = memrefKernelSpec(op, why);
  if (failed(spec))
    return op.emitOpError("convert-flash-to-gpu: ") << why;
  return lowerToMemrefLaunch(rewriter, op, bufs, *spec, rowsPerBlock,
                             threads, build);
}
