# -*- Python -*-
import os
import shutil
import subprocess

import lit.formats
from lit.llvm import llvm_config
from lit.llvm.subst import ToolSubst

config.name = "FLASH"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.flash_obj_root, "test")
config.excludes = ["CMakeLists.txt", "README.md", "lit.cfg.py", "lit.site.cfg.py", "Inputs", "lib"]

config.substitutions.append(("%PATH%", config.environment["PATH"]))
config.substitutions.append(("%shlibext", ".so"))
config.substitutions.append(("%mlir_lib_dir", config.llvm_lib_dir))
config.substitutions.append(("%flash_lib_dir", config.flash_lib_dir))
config.substitutions.append(("%flash_src_root", config.flash_src_root))
config.substitutions.append(("%python", config.python_executable))
config.environment["FILECHECK_OPTS"] = "-enable-var-scope --allow-unused-prefixes=false"

llvm_config.with_system_environment(["HOME", "INCLUDE", "LIB", "TMP", "TEMP"])
llvm_config.use_default_substitutions()

# A sanitized build (FLASH_SANITIZE): every process gets the shared ASan
# runtime first, so the plugin in mlir-opt and the C API in python3 run
# instrumented too. config.asan_options (CMakeLists.txt says why) leaves leaks
# and LLVM's allocator poisoning out.
if config.asan_runtime:
    config.environment["LD_PRELOAD"] = config.asan_runtime
    config.environment["ASAN_OPTIONS"] = config.asan_options
    config.environment["UBSAN_OPTIONS"] = "print_stacktrace=1"
    config.available_features.add("asan")

tool_dirs = [config.flash_tools_dir, config.llvm_tools_dir]
# Every flash-opt run, on a RUN line or started by a test's script, checks
# that its input and its output print, parse and print again identically, so
# each lit input and each pass output is a round-trip test
# (`--param roundtrip=0` turns it off).
if lit_config.params.get("roundtrip", "1") != "0":
    config.environment["FLASH_VERIFY_ROUNDTRIP"] = "1"
tools = [
    "flash-opt",
    ToolSubst("mlir-opt", unresolved="ignore"),
    ToolSubst("mlir-runner", unresolved="ignore"),
    ToolSubst("mlir-translate", unresolved="ignore"),
    ToolSubst("llc", unresolved="ignore"),
]
if os.path.exists(os.path.join(config.flash_tools_dir, "flash-pipeline-fuzzer")):
    config.available_features.add("fuzzer")
    tools.append("flash-pipeline-fuzzer")
llvm_config.add_tool_substitutions(tools, tool_dirs)
# `not` (and the other LLVM test utilities) by name on RUN lines.
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

# Features for the GPU parts: code generation needs only the toolkit; running
# needs a device, which CI machines do not have.
cuda_home = config.cuda_home or os.environ.get("CUDA_HOME", "/usr/local/cuda")
config.substitutions.append(("%cuda_home", cuda_home))
if os.path.exists(os.path.join(cuda_home, "bin", "ptxas")):
    config.available_features.add("ptxas")
if shutil.which("nvidia-smi") and os.system("nvidia-smi -L >/dev/null 2>&1") == 0:
    config.available_features.add("cuda-gpu")

# Gradient tests take their float64 reference from torch's autograd
# (Debian's python3-torch, installed by scripts/setup.sh).
if subprocess.run([config.python_executable, "-c", "import torch"],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("torch")
