//===- InterfaceImpls.h - upstream interfaces of the op ----------*- C++ -*-===//
//
// flash.attention implements TilingInterface and linalg's
// AggregatedOpInterface as external models: their implementations build
// linalg and tensor IR (and the decomposition lives with the passes), which
// the dialect library does not depend on. flash/InitAll.h registers them.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_TRANSFORMS_INTERFACEIMPLS_H
#define FLASH_TRANSFORMS_INTERFACEIMPLS_H

namespace mlir {
class DialectRegistry;
namespace flash {

/// TilingInterface on flash.attention: loops (batch..., Lq, Lk, D, Dv), of
/// which the batch dims and Lq are tiled; a tile carries `offsets`.
void registerTilingInterfaceExternalModels(DialectRegistry &registry);

/// linalg::AggregatedOpInterface on flash.attention: decomposeOperation is
/// the unfused reference of flash-decompose-attention.
void registerAggregatedOpInterfaceExternalModels(DialectRegistry &registry);

} // namespace flash
} // namespace mlir

#endif // FLASH_TRANSFORMS_INTERFACEIMPLS_H
