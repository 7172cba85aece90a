"""For code ported from PyCUDA: `import kiln.driver as drv` in place of `pycuda.driver`."""
from ._kiln import (  # noqa: F401
    CudaError,
    Device,
    DeviceAllocation,
    In,
    InOut,
    LaunchError,
    Out,
    OutOfMemoryError,
    mem_alloc,
    memcpy_dtoh,
    memcpy_htod,
    module_from_buffer,
    synchronize,
)
from . import module_from_file  # noqa: F401

Error = CudaError
