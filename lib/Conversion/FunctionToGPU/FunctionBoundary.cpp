//===- FunctionBoundary.cpp - a tensor function's boundary on the device --===//
//
// A frontend hands over `func.func @f(%q: tensor<...>, ...) -> tensor<...>`.
// On the GPU its tensors are the caller's device buffers: the arguments
// become memrefs read through `bufferization.to_tensor restrict`, each
// tensor result a trailing memref the caller allocates (written with
// `materialize_in_destination`), and the function takes the caller's stream
// last. Every tensor a flash op reads or writes is then made a view of a
// device buffer, which is the form convert-flash-to-gpu lowers: an
// attention whose result is the function's result writes into the caller's
// buffer; any other operand computed in the function gets a buffer of its
// own.
//
//===----------------------------------------------------------------------===//
#include "flash/Conversion/Passes.h"

#include "flash/Dialect/Flash/IR/FlashOps.h"
#include "flash/Transforms/Passes.h"
#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/SymbolTable.h"
#include "mlir/Interfaces/DestinationStyleOpInterface.h"

namespace mlir::flash {
#define GEN_PASS_DEF_FLASHGPUFUNCTIONBOUNDARYPASS
#include "flash/Conversion/Passes.h.inc"
} // namespace mlir::flash

using namespace mlir;
using namespace mlir::flash;

static constexpr StringLiteral kStreamAttr = "flash.stream";

static bool hasTensorBoundary(func::FuncOp func) {
  auto isTensor = [](Type t) { return isa<TensorType>(t); };
  return llvm::any_of(func.getArgumentTypes(), isTensor) ||
         llvm::any_of(func.getResultTypes(), isTensor);
}

static bool hasStreamArgument(func::FuncOp func) {
  for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
    if (func.getArgAttr(i, kStreamAttr))
      return true;
  return false;
}

/// Tensor arguments become memrefs viewed as tensors, tensor results
/// trailing memref arguments, and the stream the last argument.
static LogicalResult convertBoundary(func::FuncOp func) {
  MLIRContext *ctx = func.getContext();
  for (Type t : llvm::concat<const Type>(func.getArgumentTypes(),
                                         func.getResultTypes()))
    if (isa<UnrankedTensorType>(t) ||
        (isa<RankedTensorType>(t) && cast<RankedTensorType>(t).getEncoding()))
      return func.emitOpError("flash-gpu-function-boundary: ")
             << t << " has no device buffer form (ranked tensors without an "
             << "encoding only)";

  bool addStream = !hasStreamArgument(func);
  Block &entry = func.getBody().front();
  OpBuilder b = OpBuilder::atBlockBegin(&entry);
  StringRef writable = bufferization::BufferizationDialect::kWritableAttrName;
  for (BlockArgument arg : entry.getArguments()) {
    auto tt = dyn_cast<RankedTensorType>(arg.getType());
    if (!tt)
      continue;
    arg.setType(MemRefType::get(tt.getShape(), tt.getElementType()));
    func.removeArgAttr(arg.getArgNumber(), writable);
    // The caller's input is read, never written: not `writable`.
    auto view = bufferization::ToTensorOp::create(b, arg.getLoc(), tt, arg,
                                                  /*restrict=*/true,
                                                  /*writable=*/false);
    arg.replaceAllUsesExcept(view, view);
  }

  // One memref per tensor result, in result order, after the inputs.
  SmallVector<Type> results;
  SmallVector<unsigned> tensorResults;
  for (auto [i, t] : llvm::enumerate(func.getResultTypes())) {
    if (auto tt = dyn_cast<RankedTensorType>(t))
      tensorResults.push_back(i);
    else
      results.push_back(t);
  }
  SmallVector<BlockArgument> outs;
  for (unsigned i : tensorResults) {
    auto tt = cast<RankedTensorType>(func.getResultTypes()[i]);
    outs.push_back(entry.addArgument(
        MemRefType::get(tt.getShape(), tt.getElementType()), func.getLoc()));
  }
  for (Block &block : func.getBody()) {
    auto ret = dyn_cast<func::ReturnOp>(block.getTerminator());
    if (!ret)
      continue;
    b.setInsertionPoint(ret);
    SmallVector<Value> kept;
    unsigned next = 0;
    for (auto [i, v] : llvm::enumerate(ret.getOperands())) {
      if (next < tensorResults.size() && tensorResults[next] == i) {
        auto store = bufferization::MaterializeInDestinationOp::create(
            b, ret.getLoc(), v, outs[next++]);
        store.setRestrict(true);
        store.setWritable(true);
        continue;
      }
      kept.push_back(v);
    }
    ret->setOperands(kept);
  }
  if (addStream)
    entry.addArgument(LLVM::LLVMPointerType::get(ctx), func.getLoc());

  // The new signature; the stream keeps the attribute convert-flash-to-gpu
  // looks for, and the function is callable from C.
  unsigned numArgs = func.getNumArguments();
  SmallVector<DictionaryAttr> argAttrs;
  for (unsigned i = 0; i < numArgs; ++i)
    argAttrs.push_back(func.getArgAttrDict(i));
  for (unsigned i = numArgs; i < entry.getNumArguments(); ++i)
    argAttrs.push_back(DictionaryAttr::get(ctx));
  if (addStream)
    argAttrs.back() = DictionaryAttr::get(
        ctx, {NamedAttribute(StringAttr::get(ctx, kStreamAttr),
                             UnitAttr::get(ctx))});
  func.setType(FunctionType::get(ctx, entry.getArgumentTypes(), results));
  func.setAllArgAttrs(argAttrs);
  func.removeResAttrsAttr();
  func->setAttr(LLVM::LLVMDialect::getEmitCWrapperAttrName(),
                UnitAttr::get(ctx));
  return success();
}

/// `tensor.from_elements` of host scalars (a frontend's sequence length,
/// captured by a score_mod) as a linalg.generic that selects each element
/// by its linear index: it bufferizes into a kernel that writes the device
/// buffer, where from_elements would become host stores into it.
static void fromElementsAsGeneric(tensor::FromElementsOp op) {
  OpBuilder b(op);
  Location loc = op.getLoc();
  auto type = cast<RankedTensorType>(op.getType());
  // A rank-0 tensor is written as one element of rank 1: a generic with no
  // loop would lower to a store on the host.
  auto loopType =
      type.getRank() ? type
                     : RankedTensorType::get({1}, type.getElementType());
  int64_t rank = loopType.getRank();
  Value init = tensor::EmptyOp::create(b, loc, loopType.getShape(),
                                       loopType.getElementType());
  SmallVector<AffineMap> maps = {b.getMultiDimIdentityMap(rank)};
  SmallVector<utils::IteratorType> iters(rank, utils::IteratorType::parallel);
  ValueRange elements = op.getElements();
  auto generic = linalg::GenericOp::create(
      b, loc, TypeRange{loopType}, ValueRange{}, ValueRange{init}, maps, iters,
      [&](OpBuilder &nb, Location nl, ValueRange) {
        Value v = elements.back();
        if (elements.size() == 1) {
          linalg::YieldOp::create(nb, nl, v);
          return;
        }
        // Row-major linear index of the element this point writes.
        Value linear = arith::ConstantIndexOp::create(nb, nl, 0);
        for (int64_t d = 0; d < rank; ++d) {
          Value size =
              arith::ConstantIndexOp::create(nb, nl, loopType.getDimSize(d));
          Value idx = linalg::IndexOp::create(nb, nl, d);
          linear = arith::AddIOp::create(
              nb, nl, arith::MulIOp::create(nb, nl, linear, size), idx);
        }
        for (int64_t i = static_cast<int64_t>(elements.size()) - 2; i >= 0;
             --i) {
          Value is = arith::CmpIOp::create(
              nb, nl, arith::CmpIPredicate::eq, linear,
              arith::ConstantIndexOp::create(nb, nl, i));
          v = arith::SelectOp::create(nb, nl, is, elements[i], v);
        }
        linalg::YieldOp::create(nb, nl, v);
      });
  Value result = generic.getResult(0);
  if (!type.getRank())
    result = tensor::CollapseShapeOp::create(
        b, loc, type, result, ArrayRef<ReassociationIndices>{});
  op.replaceAllUsesWith(result);
  op.erase();
}

/// A new device buffer of `t`'s shape, holding `t` unless `fill` is false.
static Value newDeviceBuffer(OpBuilder &b, Location loc, Value t, bool fill) {
  auto tt = cast<RankedTensorType>(t.getType());
  SmallVector<Value> dynSizes;
  for (int64_t d = 0; d < tt.getRank(); ++d)
    if (tt.isDynamicDim(d))
      dynSizes.push_back(tensor::DimOp::create(b, loc, t, d));
  auto type = MemRefType::get(tt.getShape(), tt.getElementType());
  Value buffer = memref::AllocOp::create(b, loc, type, dynSizes);
  if (fill) {
    auto store =
        bufferization::MaterializeInDestinationOp::create(b, loc, t, buffer);
    store.setRestrict(true);
    store.setWritable(true);
  }
  return buffer;
}

/// The buffer holding `t`, seen through the reshapes (`collapse_shape`,
/// `expand_shape`) that made `t`: frontends fold heads into the batch
/// (`[B, H, L, D]` to `[B·H, L, D]`), and such a view of a buffer needs no
/// copy. Below the reshapes is a view of a buffer, or else a value stored
/// into a new buffer of its own shape (so that what computes it can write
/// that buffer in place). Null when a reshape has no identity-layout view.
static Value reshapedBuffer(OpBuilder &b, Value t) {
  if (auto view = t.getDefiningOp<bufferization::ToTensorOp>())
    return view.getBuffer();
  if (auto collapse = t.getDefiningOp<tensor::CollapseShapeOp>()) {
    Value src = reshapedBuffer(b, collapse.getSrc());
    if (!src || !memref::CollapseShapeOp::isGuaranteedCollapsible(
                    cast<MemRefType>(src.getType()),
                    collapse.getReassociationIndices()))
      return Value();
    return memref::CollapseShapeOp::create(b, collapse.getLoc(), src,
                                           collapse.getReassociationIndices());
  }
  if (auto expand = t.getDefiningOp<tensor::ExpandShapeOp>()) {
    Value src = reshapedBuffer(b, expand.getSrc());
    auto srcType = src ? cast<MemRefType>(src.getType()) : MemRefType();
    if (!src || !srcType.getLayout().isIdentity())
      return Value();
    auto type = MemRefType::get(expand.getResultType().getShape(),
                                srcType.getElementType());
    return memref::ExpandShapeOp::create(
        b, expand.getLoc(), type, src, expand.getReassociationIndices(),
        expand.getMixedOutputShape());
  }
  return newDeviceBuffer(b, t.getLoc(), t, /*fill=*/true);
}

static void operandsIntoDeviceBuffers(Operation *op) {
  OpBuilder b(op);
  Location loc = op->getLoc();
  auto dps = dyn_cast<DestinationStyleOpInterface>(op);
  for (OpOperand &operand : op->getOpOperands()) {
    Value t = operand.get();
    auto tt = dyn_cast<RankedTensorType>(t.getType());
    if (!tt || t.getDefiningOp<bufferization::ToTensorOp>())
      continue;
    // An init's contents matter only where the op does not overwrite them
    // (a varlen batch's uncovered rows); a tensor.empty has none.
    if (dps && dps.isDpsInit(&operand)) {
      Value buffer = newDeviceBuffer(b, loc, t, /*fill=*/!t.getDefiningOp<tensor::EmptyOp>());
      operand.set(bufferization::ToTensorOp::create(
          b, loc, tt, buffer, /*restrict=*/true, /*writable=*/true));
      continue;
    }
    Value buffer = reshapedBuffer(b, t);
    if (!buffer || !cast<MemRefType>(buffer.getType()).getLayout().isIdentity())
      buffer = newDeviceBuffer(b, loc, t, /*fill=*/true);
    // Not `restrict`: the buffer may also be read through another view.
    operand.set(bufferization::ToTensorOp::create(
        b, loc, tt, buffer, /*restrict=*/false, /*writable=*/false));
  }
}

namespace {
struct FlashGPUFunctionBoundaryPass
    : flash::impl::FlashGPUFunctionBoundaryPassBase<
          FlashGPUFunctionBoundaryPass> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> funcs;
    for (auto func : module.getOps<func::FuncOp>())
      if (!func.isExternal() && hasTensorBoundary(func))
        funcs.push_back(func);
    for (func::FuncOp func : funcs) {
      // A call passes tensors, which the new signature no longer takes.
      if (!SymbolTable::symbolKnownUseEmpty(func, module)) {
        func.emitOpError("flash-gpu-function-boundary: a function on "
                         "tensors that is called in the module cannot take "
                         "device buffers; inline its calls first");
        return signalPassFailure();
      }
      if (failed(convertBoundary(func)))
        return signalPassFailure();
    }
    for (auto func : module.getOps<func::FuncOp>()) {
      if (hasStreamArgument(func)) {
        SmallVector<tensor::FromElementsOp> scalars;
        func.walk([&](tensor::FromElementsOp op) { scalars.push_back(op); });
        for (tensor::FromElementsOp op : scalars)
          fromElementsAsGeneric(op);
      }
      writeAttentionIntoDestinations(func);
      func.walk([](Operation *op) {
        if (isa<AttentionOp, AttentionGradOp, PagedAttentionOp,
                VarlenAttentionOp>(op))
          operandsIntoDeviceBuffers(op);
      });
    }
  }
};
} // namespace
