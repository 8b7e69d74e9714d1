//===- HopperPrimitives.cpp - TMA, mbarriers and wgmma for sm_90a ---------===//
#include "HopperPrimitives.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

using namespace mlir;
using namespace mlir::flash;
using namespace mlir::flash::gpu_lowering;

Value gpu_lowering::smemOffset(ImplicitLocOpBuilder &b, Value base,
                               Value bytes) {
  return LLVM::GEPOp::create(b, base.getType(), b.getI8Type(), base,
                             ValueRange{bytes});
}
Value gpu_lowering::smemOffset(ImplicitLocOpBuilder &b, Value base,
                               int64_t bytes) {
  if (bytes == 0)
    return base;
  return smemOffset(b, base, constI64(b, bytes));
}

void gpu_lowering::declareSwizzledSmem(ImplicitLocOpBuilder &b) {
  auto arrTy = LLVM::LLVMArrayType::get(b.getI8Type(), 0);
  LLVM::GlobalOp::create(b, arrTy, /*isConstant=*/false,
                         LLVM::Linkage::External, "flash_smem", Attribute(),
                         /*alignment=*/1024, /*addrSpace=*/3);
}

Value gpu_lowering::swizzledSmemBase(ImplicitLocOpBuilder &b) {
  Value base = LLVM::AddressOfOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 3), "flash_smem");
  Value baseInt = LLVM::PtrToIntOp::create(b, b.getI64Type(), base);
  Value up = LLVM::AddOp::create(b, baseInt, constI64(b, 1023));
  Value aligned = LLVM::AndOp::create(b, up, constI64(b, ~int64_t(1023)));
  return smemOffset(b, base, LLVM::SubOp::create(b, aligned, baseInt));
}

void gpu_lowering::mbarInit(ImplicitLocOpBuilder &b, Value bar,
                            int64_t count) {
  NVVM::MBarrierInitOp::create(b, bar, constI32(b, count), Value());
}

void gpu_lowering::mbarWait(ImplicitLocOpBuilder &b, Value bar,
                            Value parityI32) {
  NVVM::MBarrierTryWaitParityOp::create(b, bar, parityI32,
                                        constI32(b, 10000000));
}

void gpu_lowering::mbarArrive(ImplicitLocOpBuilder &b, Value bar) {
  NVVM::MBarrierArriveOp::create(b, Type(), bar, Value());
}

void gpu_lowering::mbarArriveExpectTx(ImplicitLocOpBuilder &b, Value bar,
                                      int64_t bytes) {
  NVVM::MBarrierArriveExpectTxOp::create(b, Type(), bar, constI32(b, bytes),
                                         NVVM::MemScopeKind::CTA,
                                         /*relaxed=*/false, Value());
}

void gpu_lowering::tmaLoad(ImplicitLocOpBuilder &b, Value dst, Value desc,
                           ArrayRef<Value> coords, Value bar) {
  // The CTA's own shared memory seen through the shared::cluster window
  // (a launch without clusters is a cluster of one).
  Value dstCluster = LLVM::AddrSpaceCastOp::create(
      b, LLVM::LLVMPointerType::get(b.getContext(), 7), dst);
  NVVM::CpAsyncBulkTensorGlobalToSharedClusterOp::create(
      b, dstCluster, desc, coords, bar, ValueRange{}, Value(), Value(),
      NVVM::TMALoadMode::TILE, /*isCTAOnly=*/false,
      NVVM::CTAGroupKindAttr(), Value());
}

Value gpu_lowering::uniformWarpgroupIndex(ImplicitLocOpBuilder &b, Value tid) {
  Value wg = toI32(b, arith::DivUIOp::create(b, tid, constIdx(b, 128)));
  Value uniform = gpu::ShuffleOp::create(b, wg, constI32(b, 0), constI32(b, 32),
                                         gpu::ShuffleMode::IDX)
                      .getShuffleResult();
  return arith::IndexCastUIOp::create(b, b.getIndexType(), uniform);
}

// Matrix descriptor bits: [0,14) address >> 4, [16,30) leading byte offset
// >> 4, [32,46) stride byte offset >> 4, [62,64) swizzle (1 = 128 B).
WgmmaDesc gpu_lowering::wgmmaDescriptor(ImplicitLocOpBuilder &b, Value ptr,
                                        int64_t lboBytes, int64_t sboBytes) {
  Value addr = sharedAddress32(b, ptr);
  Value masked = arith::AndIOp::create(b, addr, constI32(b, 0x3FFFF));
  Value field = arith::ShRUIOp::create(b, masked, constI32(b, 4));
  uint32_t lbo = uint32_t((lboBytes >> 4) & 0x3FFF) << 16;
  WgmmaDesc d;
  d.lo = arith::OrIOp::create(b, field, constI32(b, lbo));
  d.hi = uint32_t((sboBytes >> 4) & 0x3FFF) | (1u << 30);
  return d;
}

WgmmaDesc WgmmaDesc::plus(ImplicitLocOpBuilder &b, int64_t bytes) const {
  if (bytes == 0)
    return *this;
  return {arith::AddIOp::create(b, lo, constI32(b, bytes / 16)), hi};
}

WgmmaDesc WgmmaDesc::plusUnits(ImplicitLocOpBuilder &b, Value unitsI32) const {
  return {arith::AddIOp::create(b, lo, unitsI32), hi};
}

Value WgmmaDesc::value(ImplicitLocOpBuilder &b) const {
  Value wide = arith::ExtUIOp::create(b, b.getI64Type(), lo);
  return arith::OrIOp::create(
      b, wide, constI64(b, static_cast<int64_t>(uint64_t(hi) << 32)));
}

LLVM::LLVMStructType gpu_lowering::accType(MLIRContext *ctx, int64_t n) {
  SmallVector<Type> fields(n / 2, Float32Type::get(ctx));
  return LLVM::LLVMStructType::getLiteral(ctx, fields);
}

static NVVM::WGMMATypes wgmmaType(Type t) {
  return t.isBF16() ? NVVM::WGMMATypes::bf16 : NVVM::WGMMATypes::f16;
}

Value gpu_lowering::wgmmaSS(ImplicitLocOpBuilder &b, Value acc,
                            const WgmmaDesc &descA, const WgmmaDesc &descB,
                            int64_t n, Type elemType, bool accumulate,
                            bool transA, bool transB) {
  MLIRContext *ctx = b.getContext();
  auto t = NVVM::WGMMATypesAttr::get(ctx, wgmmaType(elemType));
  Value a = descA.value(b);
  Value bd = descB.value(b);
  return NVVM::WgmmaMmaAsyncOp::create(
      b, acc.getType(), acc, a, bd, NVVM::MMAShapeAttr::get(ctx, 64, n, 16), t,
      t, NVVM::WGMMATypesAttr::get(ctx, NVVM::WGMMATypes::f32),
      NVVM::WGMMAScaleOutAttr::get(ctx, accumulate ? NVVM::WGMMAScaleOut::one
                                                   : NVVM::WGMMAScaleOut::zero),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      NVVM::WGMMAScaleInAttr::get(ctx, NVVM::WGMMAScaleIn::one),
      // NVVM's names: A row / B col is K-major, the other one transposed.
      NVVM::MMALayoutAttr::get(ctx, transA ? NVVM::MMALayout::col
                                           : NVVM::MMALayout::row),
      NVVM::MMALayoutAttr::get(ctx, transB ? NVVM::MMALayout::row
                                           : NVVM::MMALayout::col),
      NVVM::MMAIntOverflowAttr());
}

Value gpu_lowering::wgmmaRS(ImplicitLocOpBuilder &b, Value acc,
                            ArrayRef<Value> aRegs, const WgmmaDesc &descB,
                            int64_t n, Type elemType) {
  int64_t nAcc = n / 2;
  std::string ty = elemType.isBF16() ? "bf16" : "f16";
  std::string asmStr = "{\n.reg .pred p;\nsetp.ne.b32 p, 1, 0;\n"
                       "wgmma.mma_async.sync.aligned.m64n" +
                       std::to_string(n) + "k16.f32." + ty + "." + ty + " {";
  for (int64_t i = 0; i < nAcc; ++i)
    asmStr += (i ? ", $" : "$") + std::to_string(i);
  asmStr += "}, {";
  for (int64_t i = 0; i < 4; ++i)
    asmStr += (i ? ", $" : "$") + std::to_string(2 * nAcc + i);
  // imm-scale-a = imm-scale-b = 1; imm-trans-b = 1: V is stored [key][d],
  // i.e. N-major for B.
  asmStr += "}, $" + std::to_string(2 * nAcc + 4) + ", p, 1, 1, 1;\n}";

  std::string cons;
  for (int64_t i = 0; i < nAcc; ++i)
    cons += "=f,";
  for (int64_t i = 0; i < nAcc; ++i)
    cons += std::to_string(i) + ",";
  cons += "r,r,r,r,l";

  SmallVector<Value> operands;
  for (int64_t i = 0; i < nAcc; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(b, acc, i));
  operands.append(aRegs.begin(), aRegs.end());
  operands.push_back(descB.value(b));
  return LLVM::InlineAsmOp::create(
             b, acc.getType(), operands, asmStr, cons,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}

Value gpu_lowering::fenceRegisters(ImplicitLocOpBuilder &b, Value acc) {
  auto st = cast<LLVM::LLVMStructType>(acc.getType());
  int64_t n = st.getBody().size();
  std::string cons;
  for (int64_t i = 0; i < n; ++i)
    cons += "=f,";
  for (int64_t i = 0; i < n; ++i)
    cons += std::to_string(i) + (i + 1 < n ? "," : "");
  SmallVector<Value> operands;
  for (int64_t i = 0; i < n; ++i)
    operands.push_back(LLVM::ExtractValueOp::create(b, acc, i));
  return LLVM::InlineAsmOp::create(
             b, acc.getType(), operands, "", cons,
             /*has_side_effects=*/true, /*is_align_stack=*/false,
             LLVM::tailcallkind::TailCallKind::None,
             LLVM::AsmDialectAttr::get(b.getContext(),
                                       LLVM::AsmDialect::AD_ATT),
             ArrayAttr())
      .getResult(0);
}

void gpu_lowering::wgmmaFence(ImplicitLocOpBuilder &b) {
  NVVM::WgmmaFenceAlignedOp::create(b);
}

void gpu_lowering::inlinePtx(ImplicitLocOpBuilder &b, StringRef text,
                             ValueRange operands, StringRef constraints) {
  LLVM::InlineAsmOp::create(
      b, TypeRange{}, operands, text, constraints, /*has_side_effects=*/true,
      /*is_align_stack=*/false, LLVM::tailcallkind::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      ArrayAttr());
}

void gpu_lowering::fenceProxyAsyncShared(ImplicitLocOpBuilder &b) {
  inlinePtx(b, "fence.proxy.async.shared::cta;", {}, "");
}

Value gpu_lowering::sharedAddress32(ImplicitLocOpBuilder &b, Value ptr) {
  return LLVM::PtrToIntOp::create(b, b.getI32Type(), ptr);
}
