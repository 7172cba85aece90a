"""Seed 002: add_arrays called through ctypes with NumPy arrays, then through a PyTorch
extension on the current stream. Both ways, with kiln."""
import numpy as np
import pytest

import kiln
from helpers import KERNELS

add_arrays = kiln.SourceModule((KERNELS / "add_arrays.cu").read_text()).get_function(
    "add_arrays")

pytestmark = pytest.mark.gpu


def test_numpy_arrays():
    N = 1024
    a = np.random.rand(N).astype(np.float32)
    b = np.random.rand(N).astype(np.float32)
    out = np.zeros_like(a)
    threads = 256
    add_arrays(kiln.In(a), kiln.In(b), kiln.Out(out), N, block=threads,
               grid=(N + threads - 1) // threads)
    np.testing.assert_allclose(out, a + b, rtol=1e-5)


def test_torch_tensors_on_the_current_stream():
    torch = pytest.importorskip("torch")
    a = torch.randn(1024, device="cuda", dtype=torch.float32)
    b = torch.randn(1024, device="cuda", dtype=torch.float32)
    out = torch.empty_like(a)
    n = a.numel()
    add_arrays(a, b, out, n, block=256, grid=(n + 255) // 256,
               stream=torch.cuda.current_stream())
    torch.testing.assert_close(out, a + b)
