"""flash_mlir: Python side of flash-mlir (gpu: ctypes launcher for compiled GPU kernel libraries)."""
