"""Seed 001: a hand-written C-API extension with helloworld() and a memoized fib(n). kiln's
extension is the C-API part; the two functions become kernels."""
import numpy as np
import pytest

import kiln
from helpers import KERNELS

mod = kiln.SourceModule((KERNELS / "fib.cu").read_text())


def fib_table(n):
    out = np.zeros(n, np.uint64)
    mod.get_function("fib")(kiln.Out(out), n, block=1, grid=1)
    return out


@pytest.mark.gpu
def test_helloworld(capfd):
    mod.get_function("helloworld")(block=1, grid=1)
    kiln.synchronize()  # device printf is flushed at synchronization
    assert "Hello World" in capfd.readouterr().out


@pytest.mark.gpu
def test_fib_matches_python():
    expect = [0, 1]
    while len(expect) < 90:
        expect.append(expect[-1] + expect[-2])
    assert fib_table(90).tolist() == expect
