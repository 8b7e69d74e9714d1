"""`pip install .` as Python users run it: into a fresh virtual environment (with the
system's numpy and torch, --system-site-packages), offline, with the build step running our
CMake build; the installed package finds its own C API library and runtime (no
FLASH_MLIR_LIB_DIR, run outside the source tree) and compiles and runs attention against a
float64 reference. `pip wheel .` and `python3 -m build` make a wheel holding both libraries,
tagged for this platform; the built wheel installs into a fresh venv and runs."""
import os
import subprocess
import sys
import zipfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

pytestmark = [
    pytest.mark.skipif("LD_PRELOAD" in os.environ,
                       reason="packaging is tested in the release build, not under ASan"),
    pytest.mark.skipif(subprocess.run([sys.executable, "-c", "import ensurepip, venv"],
                                      capture_output=True).returncode != 0,
                       reason="no venv/ensurepip (Debian's python3-venv; scripts/setup.sh "
                              "installs it)"),
]


def _build_dir():
    if os.environ.get("FLASH_MLIR_BUILD_DIR"):
        return os.environ["FLASH_MLIR_BUILD_DIR"]
    if os.environ.get("FLASH_MLIR_LIB_DIR"):
        return os.path.dirname(os.path.abspath(os.environ["FLASH_MLIR_LIB_DIR"]))
    return os.path.join(ROOT, "build")


def _env(tmp_path):
    env = {k: v for k, v in os.environ.items()
           if k not in ("FLASH_MLIR_LIB_DIR", "FLASH_MLIR_CAPI", "PYTHONPATH")}
    env["FLASH_MLIR_BUILD_DIR"] = _build_dir()
    env["FLASH_MLIR_CACHE_DIR"] = str(tmp_path / "cache")
    env["PIP_NO_INDEX"] = "1"
    return env


CHECK = r"""
import os, sys
import numpy as np
import flash_mlir
assert flash_mlir.__file__.startswith(sys.prefix), flash_mlir.__file__
lib = flash_mlir._capi.library_path()
assert lib.startswith(os.path.dirname(flash_mlir.__file__)), lib
rng = np.random.default_rng(int.from_bytes(os.urandom(4), "little"))
q = rng.standard_normal((2, 3, 19, 16)).astype(np.float32)
k = rng.standard_normal((2, 3, 27, 16)).astype(np.float32)
v = rng.standard_normal((2, 3, 27, 12)).astype(np.float32)
out = flash_mlir.attention(q, k, v, causal=True, align="bottom_right")
s = np.einsum("bhid,bhjd->bhij", q.astype(np.float64), k.astype(np.float64)) / 4.0
s[..., np.arange(27)[None, :] > np.arange(19)[:, None] + 8] = -np.inf
p = np.exp(s - s.max(-1, keepdims=True))
ref = (p / p.sum(-1, keepdims=True)) @ v.astype(np.float64)
err = np.abs(out - ref).max()
assert err < 1e-5, err
print("ok", err)
"""


def test_pip_install_into_a_fresh_venv(tmp_path):
    venv = tmp_path / "venv"
    env = _env(tmp_path)
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=env)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-build-isolation", "--no-deps",
                        ROOT], env=env, cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([py, "-c", CHECK], env=env, cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr


def test_pip_wheel_holds_the_libraries(tmp_path):
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-build-isolation",
                        "--no-deps", "-w", str(tmp_path / "dist"), ROOT],
                       env=env, cwd=tmp_path, capture_output=True, text=True)
    if r.returncode != 0 and "No module named pip" in r.stderr:
        pytest.skip("no pip for %s (Debian's python3-pip)" % sys.executable)
    assert r.returncode == 0, r.stdout + r.stderr
    _check_wheel(tmp_path / "dist")


def _check_wheel(dist):
    """The one wheel in `dist`: native libraries inside, so tagged py3-none-<platform>."""
    (wheel,) = dist.glob("flash_mlir-*.whl")
    assert wheel.name.split("-", 2)[2].startswith("py3-none-linux_"), wheel.name
    names = zipfile.ZipFile(wheel).namelist()
    for lib in ("flash_mlir/lib/libFlashCAPI.so", "flash_mlir/lib/libflash_cuda_runtime.so",
                "flash_mlir/_attention.py"):
        assert lib in names, (lib, names)
    return wheel


def test_python_build_makes_a_wheel_that_installs_and_runs(tmp_path):
    env = _env(tmp_path)
    r = subprocess.run([sys.executable, "-m", "build", "--no-isolation", "--wheel",
                        "--outdir", str(tmp_path / "dist"), ROOT],
                       env=env, cwd=tmp_path, capture_output=True, text=True)
    if r.returncode != 0 and "No module named build" in r.stderr:
        pytest.skip("no build frontend for %s (Debian's python3-build)" % sys.executable)
    assert r.returncode == 0, r.stdout + r.stderr
    wheel = _check_wheel(tmp_path / "dist")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)],
                   check=True, env=env)
    py = str(venv / "bin" / "python")
    r = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", str(wheel)], env=env,
                       cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    r = subprocess.run([py, "-c", CHECK], env=env, cwd=tmp_path, capture_output=True,
                       text=True)
    assert r.returncode == 0 and r.stdout.startswith("ok"), r.stdout + r.stderr
