"""Shared fixtures. Tests marked `gpu` need a CUDA device: they skip, saying why, where there
is none, and fail instead when KILN_REQUIRE_GPU=1 (the GPU machine's runs skip nothing)."""
import os
import pathlib
import shutil
import tempfile

# The suite's kernels go to a cache folder of its own, not the user's (set before kiln reads it).
_CACHE_DIR = tempfile.mkdtemp(prefix="kiln-pytest-cache-")
os.environ["KILN_CACHE_DIR"] = _CACHE_DIR
os.environ.pop("KILN_CACHE_PATH", None)
os.environ.pop("KILN_CACHE", None)

import pytest  # noqa: E402

import kiln  # noqa: E402

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels_src"


def _no_gpu_reason():
    try:
        n = kiln.Device.count()
    except kiln.NoDeviceError as e:
        return str(e)
    return None if n else "the driver found no CUDA device"


_REASON = _no_gpu_reason()
HAVE_GPU = _REASON is None


def pytest_configure(config):
    config.addinivalue_line("markers", "gpu: needs a CUDA device")
    config.addinivalue_line("markers", "gpus2: needs two CUDA devices")


def pytest_unconfigure(config):
    shutil.rmtree(_CACHE_DIR, ignore_errors=True)


@pytest.fixture(autouse=True)
def _gpu_gate(request):
    if request.node.get_closest_marker("gpu") and not HAVE_GPU:
        if os.environ.get("KILN_REQUIRE_GPU") == "1":
            pytest.fail(f"KILN_REQUIRE_GPU=1 but there is no GPU: {_REASON}")
        pytest.skip(f"needs a CUDA device: {_REASON}")
    if request.node.get_closest_marker("gpus2") and HAVE_GPU and kiln.Device.count() < 2:
        # A one-GPU machine cannot run it; KILN_REQUIRE_GPUS=2 says this one must.
        if os.environ.get("KILN_REQUIRE_GPUS") == "2":
            pytest.fail("KILN_REQUIRE_GPUS=2 but there is one GPU")
        pytest.skip("needs two CUDA devices; this machine has one")


@pytest.fixture
def kernel_source():
    """The source of a kernel in kernels_src/, by file name."""
    return lambda name: (KERNELS / name).read_text()


# A compile arch that works with or without a GPU: the device's own where there is one.
ARCH = None if HAVE_GPU else "sm_90"
