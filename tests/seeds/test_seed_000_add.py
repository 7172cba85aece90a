"""Seed 000: a Cython wrapper around nvcc-built `add(a, b, &c)`, now a kiln kernel."""
import numpy as np
import pytest

import kiln
from helpers import KERNELS

add_kernel = kiln.SourceModule((KERNELS / "add.cu").read_text()).get_function("add_kernel")


def add_integers(a, b):
    """The seed's add_integers: the kernel writes a + b through an Out of one int32."""
    c = np.zeros(1, np.int32)
    add_kernel(a, b, kiln.Out(c), block=(1, 1, 1), grid=(1, 1))
    return int(c[0])


def test_signature():
    assert add_kernel.signature == ("i32", "i32", "ptr")


@pytest.mark.gpu
def test_add_integers():
    assert add_integers(2, 3) == 5
    assert add_integers(-7, 2**31 - 1) == 2**31 - 8
