"""What kiln.autoinit and kiln.autoprimaryctx share: the device CUDA_DEVICE names (or
~/.cuda_device, else the first that works) with its primary context current, made once, and
the clean-up at the program's end.

Each of the two modules registers its own _finish_up with atexit, as PyCUDA's do, so that a
program takes the clean-up of the module it imported off by that module's name; the context is
one, so the clean-up runs once, whichever runs first, and sets both modules' `context` to None.
"""
import sys

from . import tools as _tools
from .tools import make_default_context

context = make_default_context()
device = context.get_device()

_finished = False


def finish_up(ctx):
    """The clean-up, once: ctx is the calling module's `context` (a program may have replaced
    it), or None when that module's clean-up has run."""
    global _finished
    if _finished or ctx is None:
        return
    _finished = True
    # PyCUDA's context is destroyed when the program ends, which waits for the kernels still
    # queued and so prints what their printf wrote (the book's hello world launches and exits).
    # The primary context outlives the program, so that wait is made here. A fault the program
    # never waited for is not raised at exit, as PyCUDA's clean-up does not raise it.
    try:
        ctx.synchronize()
    except Exception:  # noqa: BLE001, S110  (see above)
        pass
    # Pops the context pushed above if it is still on top; the primary context itself stays.
    ctx.detach()
    for name in ("kiln.autoinit", "kiln.autoprimaryctx"):
        module = sys.modules.get(name)
        if module is not None:
            module.context = None
    _tools.clear_context_caches()
