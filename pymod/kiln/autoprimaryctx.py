"""`import kiln.autoprimaryctx` in place of `import pycuda.autoprimaryctx`: the device that
CUDA_DEVICE names (or ~/.cuda_device, else the first that works) with its primary context
current, the context PyTorch, CuPy and Numba use too.

kiln works in primary contexts alone, so this is kiln.autoinit under PyCUDA's other name:
`device` and `context` are the same objects, and the context stays when the process ends.
"""
import atexit

from . import _autoctx
from . import driver as cuda  # noqa: F401
from .tools import make_default_context  # noqa: F401

context = _autoctx.context
device = _autoctx.device


def _finish_up():
    """The clean-up at the program's end, under PyCUDA's name, which a program takes off with
    atexit.unregister(autoprimaryctx._finish_up); the one autoinit's runs too, so that whichever
    runs first does it, once, and afterwards both modules' context is None."""
    _autoctx.finish_up(context)


atexit.register(_finish_up)
