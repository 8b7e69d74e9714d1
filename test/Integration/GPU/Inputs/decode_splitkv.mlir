// A split-KV decode whose key length is dynamic: the host code chooses the split
// count per call (fake_driver_check.py reads it as the kernel's grid.x).
func.func @decode(%q: memref<1x8x1x128xbf16>, %k: memref<1x1x?x128xbf16>,
                  %v: memref<1x1x?x128xbf16>, %o: memref<1x8x1x128xbf16>) attributes {llvm.emit_c_interface} {
  %qt = bufferization.to_tensor %q restrict : memref<1x8x1x128xbf16> to tensor<1x8x1x128xbf16>
  %kt = bufferization.to_tensor %k restrict : memref<1x1x?x128xbf16> to tensor<1x1x?x128xbf16>
  %vt = bufferization.to_tensor %v restrict : memref<1x1x?x128xbf16> to tensor<1x1x?x128xbf16>
  %ot = bufferization.to_tensor %o restrict writable : memref<1x8x1x128xbf16> to tensor<1x8x1x128xbf16>
  %r = flash.attention ins(%qt, %kt, %vt : tensor<1x8x1x128xbf16>, tensor<1x1x?x128xbf16>, tensor<1x1x?x128xbf16>)
      outs(%ot : tensor<1x8x1x128xbf16>) scale(0.088) -> tensor<1x8x1x128xbf16>
  bufferization.materialize_in_destination %r in restrict writable %o : (tensor<1x8x1x128xbf16>, memref<1x8x1x128xbf16>) -> ()
  return
}
