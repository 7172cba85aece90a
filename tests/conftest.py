"""Fixtures and hooks. Tests marked `gpu` need a CUDA device: they skip, saying why, where there
is none, and fail instead when KILN_REQUIRE_GPU=1 (the GPU machine's runs skip nothing). What
the tests share besides is in helpers.py."""
import os
import pathlib
import shutil
import subprocess
import tempfile

import pytest

import kiln
from helpers import HAVE_GPU, NO_GPU_REASON

_cache_dir = None


def pytest_configure(config):
    global _cache_dir
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
    config.addinivalue_line("markers", "gpus2: needs two CUDA devices")
    config.addinivalue_line("markers", "cuda: what kiln.tools.mark_cuda_test marks, as PyCUDA's")
    # The suite's kernels go to a cache folder of its own, not the user's. kiln reads these
    # variables when it first uses its cache, and again whenever they change.
    _cache_dir = tempfile.mkdtemp(prefix="kiln-pytest-cache-")
    os.environ["KILN_CACHE_DIR"] = _cache_dir
    os.environ.pop("KILN_CACHE_PATH", None)
    os.environ.pop("KILN_CACHE", None)
    # The lasting compile helper of a cache folder outlives the process that started it (ten
    # minutes idle): a test folder's would outlive its test. The suite turns it off; the tests
    # of it (test_pch.py) turn it on and end theirs.
    os.environ["KILN_NVRTC_SERVER"] = "0"


def pytest_unconfigure(config):
    shutil.rmtree(_cache_dir, ignore_errors=True)


@pytest.fixture(autouse=True)
def _gpu_gate(request):
    if request.node.get_closest_marker("gpu") and not HAVE_GPU:
        if os.environ.get("KILN_REQUIRE_GPU") == "1":
            pytest.fail(f"KILN_REQUIRE_GPU=1 but there is no GPU: {NO_GPU_REASON}")
        pytest.skip(f"needs a CUDA device: {NO_GPU_REASON}")
    if request.node.get_closest_marker("gpus2") and HAVE_GPU and kiln.Device.count() < 2:
        # A one-GPU machine cannot run it; KILN_REQUIRE_GPUS=2 says this one must.
        if os.environ.get("KILN_REQUIRE_GPUS") == "2":
            pytest.fail("KILN_REQUIRE_GPUS=2 but there is one GPU")
        pytest.skip("needs two CUDA devices; this machine has one")


@pytest.fixture(scope="session")
def fake_driver(tmp_path_factory):
    """A CUDA driver that does no GPU work, built from bench/fakecuda/fakecuda.c: its device
    memory is host memory, so copies work, and it records each launch. A child Python given
    KILN_CUDA_PATH=<this path> runs kiln on it on any machine."""
    cc = os.environ.get("CC", "cc")
    include = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include"
    if not shutil.which(cc) or not (include / "cuda.h").exists():
        pytest.skip(f"needs a C compiler ({cc}) and cuda.h in {include}")
    source = pathlib.Path(__file__).resolve().parent.parent / "bench" / "fakecuda" / "fakecuda.c"
    lib = tmp_path_factory.mktemp("fakecuda") / "libcuda.so.1"
    subprocess.run([cc, "-O2", "-Wall", "-Wextra", "-Werror", "-shared", "-fPIC",
                    "-fvisibility=hidden", "-isystem", str(include), str(source), "-lpthread",
                    "-o", str(lib)], check=True)
    return lib
