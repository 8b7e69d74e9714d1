// Upstream mlir-opt with the dialect plugin tiles and decomposes
// flash.attention: the plugin registers the op's TilingInterface and
// AggregatedOpInterface (flash/InitAll.h), so the checks of the flash-opt
// test hold unchanged.

// RUN: mlir-opt %S/../Dialect/Flash/tiling.mlir -split-input-file \
// RUN:   --load-dialect-plugin=%flash_plugin --transform-interpreter \
// RUN:   --canonicalize --cse | FileCheck %S/../Dialect/Flash/tiling.mlir
// RUN: mlir-opt %S/../Dialect/Flash/tiling-invalid.mlir -split-input-file \
// RUN:   --load-dialect-plugin=%flash_plugin --transform-interpreter \
// RUN:   -verify-diagnostics
