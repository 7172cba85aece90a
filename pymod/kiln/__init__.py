"""kiln: CUDA C++ source strings compiled at run time with NVRTC and launched from Python.

    import numpy as np, kiln
    mod = kiln.SourceModule(source)
    f = mod.get_function("multiply_them")
    f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1))

Importing kiln needs no GPU and no driver: compiling works anywhere NVRTC does, and the first
use of the GPU raises kiln.NoDeviceError when there is none.
"""
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
    LaunchError,
    LogicError,
    Module,
    NoDeviceError,
    Out,
    OutOfMemoryError,
    SourceModule,
    Stream,
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
)



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


def module_from_file(path):
    """A Module from a CUBIN, fatbin or PTX file (PyCUDA's driver.module_from_file)."""
    with open(path, "rb") as f:
        return module_from_buffer(f.read())


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
    "LaunchError",
    "LogicError",
    "Module",
    "NoDeviceError",
    "Out",
    "OutOfMemoryError",
    "SourceModule",
    "Stream",
    "asarray",
    "cache_clear",
    "cache_info",
    "cache_list",
    "cache_prune",
    "cache_stats",
    "empty",
    "empty_like",
    "mem_alloc",
    "mem_info",
    "module_from_buffer",
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
]
