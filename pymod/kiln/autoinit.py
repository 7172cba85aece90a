"""`import kiln.autoinit` in place of `import pycuda.autoinit`: sets up the device CUDA_DEVICE
names (or ~/.cuda_device, else the first that works) and makes its context current.

The context is the device's primary context, the one kiln, PyTorch and CuPy share: kiln makes
no context of its own. Without a GPU, importing this raises kiln.NoDeviceError, as
pycuda.autoinit fails without one; `import kiln` alone never does.
"""
import atexit

# The names pycuda.autoinit has besides context and device, which programs reach through it
# (`pycuda.autoinit.cuda.Event()`): the driver module, and make_default_context.
from . import driver as cuda  # noqa: F401
from . import tools as _tools
from .tools import make_default_context

context = make_default_context()
device = context.get_device()


def _finish_up():
    """What runs when the program ends, under PyCUDA's name: programs that end the context
    themselves take it off with atexit.unregister(autoinit._finish_up), or call it. Once it
    has run, context is None, as under PyCUDA; running it again does nothing."""
    global context
    if context is None:
        return
    # PyCUDA's context is destroyed when the program ends, which waits for the kernels still
    # queued and so prints what their printf wrote (the book's hello world launches and exits).
    # The primary context outlives the program, so that wait is made here. A fault the program
    # never waited for is not raised at exit, as PyCUDA's clean-up does not raise it.
    try:
        context.synchronize()
    except Exception:  # noqa: BLE001, S110  (see above)
        pass
    # Pops the context pushed above if it is still on top; the primary context itself stays.
    context.detach()
    context = None
    _tools.clear_context_caches()


atexit.register(_finish_up)
