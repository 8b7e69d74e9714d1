//===- InitAll.h - register everything flash provides ---------*- C++ -*-===//
//
// The one registration entry point shared by flash-opt, the mlir-opt plugin
// and the C API, so every tool sees the same dialects, passes and pipelines.
//
//===----------------------------------------------------------------------===//
#ifndef FLASH_INITALL_H
#define FLASH_INITALL_H

namespace mlir {
class DialectRegistry;
namespace flash {

/// Adds the flash dialect (and the dialects its passes create) to `registry`,
/// flash.attention's TilingInterface and AggregatedOpInterface, and the
/// upstream transform-dialect extensions that tile and decompose it
/// (transform.structured.tile_using_forall and friends).
void registerFlashDialects(DialectRegistry &registry);

/// Registers every flash pass and pipeline with the global pass registry.
void registerFlashPasses();

} // namespace flash
} // namespace mlir

#endif // FLASH_INITALL_H
