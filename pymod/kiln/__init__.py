"""kiln: CUDA C++ source strings compiled at run time with NVRTC and launched from Python.

    import numpy as np, kiln
    mod = kiln.SourceModule(source)
    f = mod.get_function("multiply_them")
    f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1))

Importing kiln needs no GPU and no driver: compiling works anywhere NVRTC does, and the first
use of the GPU raises kiln.NoDeviceError when there is none.
"""
from ._kiln import (
    CacheWarning,
    CompileError,
    CudaError,
    Device,
    DeviceAllocation,
    Error,
    Function,
    In,
    InOut,
    LaunchError,
    Module,
    NoDeviceError,
    Out,
    OutOfMemoryError,
    SourceModule,
    __version__,
    cache_clear,
    cache_info,
    cache_list,
    cache_prune,
    cache_stats,
    mem_alloc,
    module_from_buffer,
    memcpy_dtoh,
    memcpy_htod,
    synchronize,
)



def module_from_file(path):
    """A Module from a CUBIN, fatbin or PTX file (PyCUDA's driver.module_from_file)."""
    with open(path, "rb") as f:
        return module_from_buffer(f.read())


__all__ = [
    "CacheWarning",
    "CompileError",
    "CudaError",
    "Device",
    "DeviceAllocation",
    "Error",
    "Function",
    "In",
    "InOut",
    "LaunchError",
    "Module",
    "NoDeviceError",
    "Out",
    "OutOfMemoryError",
    "SourceModule",
    "cache_clear",
    "cache_info",
    "cache_list",
    "cache_prune",
    "cache_stats",
    "mem_alloc",
    "module_from_buffer",
    "module_from_file",
    "memcpy_dtoh",
    "memcpy_htod",
    "synchronize",
]
