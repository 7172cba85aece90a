"""`import kiln.autoinit` in place of `import pycuda.autoinit`: sets up the device CUDA_DEVICE
names (or ~/.cuda_device, else the first that works) and makes its context current.

The context is the device's primary context, the one kiln, PyTorch and CuPy share: kiln makes
no context of its own. Without a GPU, importing this raises kiln.NoDeviceError, as
pycuda.autoinit fails without one; `import kiln` alone never does.
"""
import atexit

from . import _autoctx

# The names pycuda.autoinit has besides context and device, which programs reach through it
# (`pycuda.autoinit.cuda.Event()`): the driver module, and make_default_context.
from . import driver as cuda  # noqa: F401
from .tools import make_default_context  # noqa: F401

context = _autoctx.context
device = _autoctx.device


def _finish_up():
    """What runs when the program ends, under PyCUDA's name: programs that end the context
    themselves take it off with atexit.unregister(autoinit._finish_up), or call it. Once it
    has run, context is None, as under PyCUDA; running it again does nothing."""
    _autoctx.finish_up(context)


atexit.register(_finish_up)
