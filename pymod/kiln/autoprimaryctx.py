"""`import kiln.autoprimaryctx` in place of `import pycuda.autoprimaryctx`: the device that
CUDA_DEVICE names (or ~/.cuda_device, else the first that works) with its primary context
current, the context PyTorch, CuPy and Numba use too.

kiln works in primary contexts alone, so this is kiln.autoinit under PyCUDA's other name:
`device` and `context` are the same objects, and the context stays when the process ends.
"""
import atexit

from . import autoinit as _autoinit
from .autoinit import context, cuda, device, make_default_context  # noqa: F401


def _finish_up():
    """autoinit's clean-up, under this module's name too, as PyCUDA's: afterwards this module's
    context is None as well as autoinit's."""
    global context
    _autoinit._finish_up()
    context = None


# Registered in autoinit's place, so that a program ending the context itself can take this
# module's clean-up off atexit, as it does with PyCUDA's.
atexit.unregister(_autoinit._finish_up)
atexit.register(_finish_up)
