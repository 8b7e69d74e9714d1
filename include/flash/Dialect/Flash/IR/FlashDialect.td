//===- FlashDialect.td - the flash dialect -----------------*- tablegen -*-===//
#ifndef FLASH_DIALECT
#define FLASH_DIALECT

include "mlir/IR/OpBase.td"

def Flash_Dialect : Dialect {
  let name = "flash";
  let summary = "Fused attention for MLIR";
  let description = [{
    The flash dialect holds one fused operation, `flash.attention`, that
    replaces the matmul → softmax → matmul chain of scaled dot-product
    attention. Lowering it to a tiled online-softmax kernel keeps the L×L
    score matrix out of memory.
  }];
  let cppNamespace = "::mlir::flash";
  let useDefaultAttributePrinterParser = 1;
  let extraClassDeclaration = [{
    void registerAttributes();
  }];
  let dependentDialects = ["::mlir::arith::ArithDialect",
                           "::mlir::tensor::TensorDialect"];
}

class Flash_Op<string mnemonic, list<Trait> traits = []>
    : Op<Flash_Dialect, mnemonic, traits>;

#endif // FLASH_DIALECT
