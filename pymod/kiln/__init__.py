"""kiln: CUDA C++ source strings compiled at run time with NVRTC and launched from Python.

    import numpy as np, kiln
    mod = kiln.SourceModule(source)
    f = mod.get_function("multiply_them")
    f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1))

Importing kiln needs no GPU and no driver: compiling works anywhere NVRTC does, and the first
use of the GPU raises kiln.NoDeviceError when there is none.
"""
from ._kiln import (
    CompileError,
    CudaError,
    Device,
    DeviceAllocation,
    Error,
    Function,
    In,
    InOut,
    LaunchError,
    NoDeviceError,
    Out,
    OutOfMemoryError,
    SourceModule,
    __version__,
    mem_alloc,
    memcpy_dtoh,
    memcpy_htod,
    synchronize,
)

__all__ = [
    "CompileError",
    "CudaError",
    "Device",
    "DeviceAllocation",
    "Error",
    "Function",
    "In",
    "InOut",
    "LaunchError",
    "NoDeviceError",
    "Out",
    "OutOfMemoryError",
    "SourceModule",
    "mem_alloc",
    "memcpy_dtoh",
    "memcpy_htod",
    "synchronize",
]
