"""Seed 003: a C-API extension taking NumPy float64 arrays and running the CUDA samples'
vectorAdd, here on 10^6 elements through kiln."""
import numpy as np
import pytest

import kiln
from helpers import KERNELS

vector_add = kiln.SourceModule((KERNELS / "vector_add.cu").read_text()).get_function(
    "vectorAdd")


def vector_add_cuda(h_a, h_b):
    n = h_a.shape[0]
    h_c = np.empty_like(h_a)
    threads_per_block = 256
    blocks_per_grid = (n + threads_per_block - 1) // threads_per_block
    vector_add(kiln.In(h_a), kiln.In(h_b), kiln.Out(h_c), n, block=threads_per_block,
               grid=blocks_per_grid)
    return h_c


def test_signature_is_float64_pointers():
    assert vector_add.signature == ("ptr", "ptr", "ptr", "i32")


@pytest.mark.gpu
def test_million_doubles():
    a, b = np.random.randn(1000000), np.random.randn(1000000)
    assert np.array_equal(vector_add_cuda(a, b), a + b)
