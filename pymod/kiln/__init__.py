"""kiln: CUDA C++ source strings compiled at run time with NVRTC and launched from Python.

    import numpy as np, kiln
    mod = kiln.SourceModule(source)
    f = mod.get_function("multiply_them")
    f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1))

Importing kiln needs no GPU and no driver: compiling works anywhere NVRTC does, and the first
use of the GPU raises kiln.NoDeviceError when there is none.
"""
import atexit as _atexit

from . import _kiln
from ._kiln import (
    STREAM_NON_BLOCKING,
    CacheWarning,
    CompileError,
    Context,
    CudaError,
    Device,
    DeviceAllocation,
    DeviceArray,
    Error,
    Event,
    Function,
    Graph,
    In,
    InOut,
    LaunchConfigError,
    LaunchError,
    LogicError,
    Module,
    NoDeviceError,
    NotFoundError,
    Out,
    OutOfMemoryError,
    SourceModule,
    Stream,
    UsageError,
    __version__,
    asarray,
    cache_clear,
    cache_info,
    cache_list,
    cache_prune,
    cache_stats,
    empty,
    mem_alloc,
    mem_info,
    module_from_buffer,
    module_table,
    pool_alloc,
    pagelocked_empty,
    pagelocked_zeros,
    pool_stats,
    pool_trim,
    staging_info,
    to_device,
    zeros,
    memcpy_dtoh,
    memcpy_htod,
    synchronize,
    current_device,
    nvrtc_where,
)
from . import _compile_error, _pickle
from ._reload import ReloadingModule, ReloadWarning, load

_pickle.register()
# PyCUDA's CompileError(msg, command_line, stdout=None, stderr=None), and its str().
CompileError.__init__ = _compile_error.init
CompileError.__str__ = _compile_error.text
_pickle.use_wheel_nvrtc()
_pickle.use_compile_helper()
# At the program's end, the wait for queued kernels that the destruction of PyCUDA's context
# makes (their printf output appears), for programs with or without kiln.autoinit.
_atexit.register(_kiln._wait_at_exit)


from . import _log  # noqa: E402  (the "kiln" logger: compiles, hits, misses, evictions)
from ._many import compile_many  # noqa: E402


def empty_like(a, stream=None):
    """An uninitialized DeviceArray of a's shape and dtype (a: a DeviceArray or numpy array)."""
    return empty(a.shape, a.dtype, stream=stream)


def zeros_like(a, stream=None):
    """A DeviceArray of zeros of a's shape and dtype."""
    return zeros(a.shape, a.dtype, stream=stream)


def pagelocked_empty_like(a):
    """An uninitialized page-locked numpy array of a's shape and dtype."""
    return pagelocked_empty(a.shape, a.dtype)


def pagelocked_zeros_like(a):
    """A zeroed page-locked numpy array of a's shape and dtype."""
    return pagelocked_zeros(a.shape, a.dtype)


def module_from_file(filename):
    """A Module from a CUBIN, fatbin or PTX file (PyCUDA's driver.module_from_file)."""
    import os
    import stat

    # Opened without waiting, so a FIFO or a device fails the check instead of blocking; read
    # no further than the largest image kiln loads.
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(filename, flags)
    with os.fdopen(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError(f"{os.fsdecode(filename)} is not a regular file, so it is not read as a "
                             f"CUBIN, fatbin or PTX")
        if st.st_size > _MAX_IMAGE_BYTES:
            raise ValueError(f"{os.fsdecode(filename)} is {st.st_size} bytes, larger than any CUBIN, "
                             f"fatbin or PTX kiln loads ({_MAX_IMAGE_BYTES})")
        data = f.read(_MAX_IMAGE_BYTES + 1)
    if len(data) > _MAX_IMAGE_BYTES:
        raise ValueError(f"{os.fsdecode(filename)} grew past {_MAX_IMAGE_BYTES} bytes while read")
    return module_from_buffer(data)


_MAX_IMAGE_BYTES = 1 << 30  # as kiln_module_from_file in the engine

# PyCUDA's version names, holding the PyCUDA release whose documented surface kiln gives
# (tests/test_pycuda_surface.py reads that release's documentation): programs compare VERSION
# with PyCUDA's year-numbered releases to choose which of its APIs to call. kiln's own version
# is __version__ (docs/pycuda.md).
VERSION = (2026, 1)
VERSION_STATUS = ""
VERSION_TEXT = "2026.1"


__all__ = [
    "STREAM_NON_BLOCKING",
    "CacheWarning",
    "CompileError",
    "Context",
    "CudaError",
    "Device",
    "DeviceAllocation",
    "DeviceArray",
    "Error",
    "Event",
    "Function",
    "Graph",
    "In",
    "InOut",
    "LaunchConfigError",
    "LaunchError",
    "LogicError",
    "Module",
    "NoDeviceError",
    "NotFoundError",
    "Out",
    "OutOfMemoryError",
    "ReloadWarning",
    "ReloadingModule",
    "SourceModule",
    "Stream",
    "UsageError",
    "VERSION",
    "VERSION_STATUS",
    "VERSION_TEXT",
    "asarray",
    "cache_clear",
    "cache_info",
    "cache_list",
    "cache_prune",
    "cache_stats",
    "compile_many",
    "empty",
    "empty_like",
    "load",
    "mem_alloc",
    "mem_info",
    "pool_alloc",
    "module_from_buffer",
    "module_table",
    "module_from_file",
    "pagelocked_empty",
    "pagelocked_empty_like",
    "pagelocked_zeros",
    "pagelocked_zeros_like",
    "pool_stats",
    "pool_trim",
    "staging_info",
    "to_device",
    "zeros",
    "zeros_like",
    "memcpy_dtoh",
    "memcpy_htod",
    "synchronize",
    "current_device",
    "nvrtc_where",
]


def load_ipython_extension(ipython):
    """`%load_ext kiln`: the %%kiln cell magic, and kernels' printf shown in the cell."""
    from ._magic import load_ipython_extension as load
    load(ipython)


def unload_ipython_extension(ipython):
    from ._magic import unload_ipython_extension as unload
    unload(ipython)
