"""The build step of `pip install .`: CMake builds the C API library (libFlashCAPI.so, which
links Debian's shared libMLIR/libLLVM) and the CUDA runtime (libflash_cuda_runtime.so), and
both go into the package as flash_mlir/lib, where flash_mlir._capi finds them. The build
folder is $FLASH_MLIR_BUILD_DIR, else build/ in this tree (reused when it is configured:
an up-to-date tree builds nothing)."""
import os
import shutil
import subprocess

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.dist import Distribution
from wheel.bdist_wheel import bdist_wheel

ROOT = os.path.dirname(os.path.abspath(__file__))
LIBS = ("libFlashCAPI.so", "libflash_cuda_runtime.so")


class BuildWithCMake(build_py):
    def run(self):
        super().run()
        build = os.environ.get("FLASH_MLIR_BUILD_DIR") or os.path.join(ROOT, "build")
        if not os.path.exists(os.path.join(build, "build.ninja")):
            subprocess.check_call(
                ["cmake", "-G", "Ninja", "-S", ROOT, "-B", build,
                 "-DCMAKE_BUILD_TYPE=Release", "-DMLIR_DIR=/usr/lib/llvm-22/lib/cmake/mlir",
                 "-DPython3_EXECUTABLE=/usr/bin/python3"])
        subprocess.check_call(["cmake", "--build", build, "--target", "FlashCAPI",
                               "flash_cuda_runtime"])
        dest = os.path.join(self.build_lib, "flash_mlir", "lib")
        os.makedirs(dest, exist_ok=True)
        for name in LIBS:
            # The file itself, not the versioned symlink chain: ctypes loads it by path.
            shutil.copyfile(os.path.realpath(os.path.join(build, "lib", name)),
                            os.path.join(dest, name))


class NativeLibraries(Distribution):
    """The package holds native libraries, so it is built and installed as platform code
    (platlib), though no Python extension module is among them."""

    def has_ext_modules(self):
        return True


class PlatformWheel(bdist_wheel):
    """The libraries are loaded through ctypes, not as an extension module: the wheel
    fits any Python 3 (no ABI tag) on this machine's platform."""

    def get_tag(self):
        return ("py3", "none", super().get_tag()[2])


# setuptools' own build folder is not build/, which is the CMake tree.
setup(distclass=NativeLibraries,
      cmdclass={"build_py": BuildWithCMake, "bdist_wheel": PlatformWheel},
      options={"build": {"build_base": "build-py"}})
