"""The package's version; equal to the CMake project's (a test checks it
against the C API), so cache keys carry it without loading the compiler."""
__version__ = "0.1.0"
