"""Shared fixtures of the flash_mlir tests: import from this source tree, a
fresh on-disk cache per test session, and fresh random inputs per test."""
import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))


@pytest.fixture(scope="session", autouse=True)
def _cache_dir(tmp_path_factory):
    if "FLASH_MLIR_CACHE_DIR" not in os.environ:
        os.environ["FLASH_MLIR_CACHE_DIR"] = str(tmp_path_factory.mktemp("flash-cache"))
    yield


@pytest.fixture
def rng():
    import numpy as np
    seed = int(os.environ.get("FLASH_TEST_SEED", np.random.SeedSequence().entropy % (2**31)))
    print("seed", seed)
    return np.random.default_rng(seed)
