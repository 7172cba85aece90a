"""PyCUDA's `pycuda._driver`, its compiled extension, which some programs name directly
(`except pycuda._driver.LogicError`): the same names as kiln.driver."""
from .driver import *  # noqa: F401,F403
from .driver import (  # noqa: F401  (the error classes, whatever driver's star export holds)
    CompileError,
    CudaError,
    Error,
    LaunchConfigError,
    LaunchError,
    LogicError,
    MemoryError,
    NoDeviceError,
    NotFoundError,
    OutOfMemoryError,
    RuntimeError,
    UsageError,
)


def __getattr__(name):  # the memory pools, as the driver gives them
    from . import driver
    return getattr(driver, name)
