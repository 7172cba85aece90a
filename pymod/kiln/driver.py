"""PyCUDA's driver module over kiln: `import kiln.driver as drv` in place of
`import pycuda.driver as drv`.

Everything here is kiln's own object under PyCUDA's name, or a few lines over one where
PyCUDA's is Python too (to_device, from_device, PointerHolderBase, the *_like helpers). kiln
works in each device's primary context, shares it with PyTorch and CuPy, and checks every
argument by the kernel's signature; docs/pycuda.md says where that makes kiln differ.
"""
import abc as _abc
import mmap as _mmap

import numpy as _np

from . import _kiln
from . import module_from_file  # noqa: F401
from ._memcpy import Memcpy2D, Memcpy3D, Memcpy3DPeer  # noqa: F401
from ._driver_enums import (  # noqa: F401
    TR_DEFAULT,
    TRSA_OVERRIDE_FORMAT,
    TRSF_NORMALIZED_COORDINATES,
    TRSF_READ_AS_INTEGER,
    address_mode,
    compute_mode,
    ctx_flags,
    device_attribute,
    event_flags,
    filter_mode,
    func_cache,
    function_attribute,
    graphics_register_flags,
    host_alloc_flags,
    ipc_mem_flags,
    jit_fallback,
    jit_input_type,
    jit_option,
    jit_target,
    limit,
    mem_attach_flags,
    mem_host_register_flags,
    memory_type,
    pointer_attribute,
    profiler_output_mode,
    shared_config,
)
from ._kiln import (  # noqa: F401
    CompileError,
    Context,
    CudaError,
    Device,
    DeviceAllocation,
    Error,
    Function,
    IPCMemoryHandle,
    In,
    InOut,
    LaunchError,
    LogicError,
    ManagedAllocation,
    Module,
    NoDeviceError,
    Out,
    OutOfMemoryError,
    PagelockedHostAllocation,
    RegisteredHostMemory,
    Stream,
    get_driver_version,
    get_version,
    init,
    mem_alloc,
    mem_get_ipc_handle,
    managed_empty,
    managed_zeros,
    mem_alloc_pitch,
    memcpy_dtod,
    memcpy_dtod_async,
    memcpy_dtoh,
    memcpy_dtoh_async,
    memcpy_htod,
    memcpy_htod_async,
    memcpy_peer,
    memcpy_peer_async,
    memset_d8,
    memset_d8_async,
    memset_d16,
    memset_d16_async,
    memset_d32,
    memset_d32_async,
    memset_d2d8,
    memset_d2d8_async,
    memset_d2d16,
    memset_d2d16_async,
    memset_d2d32,
    memset_d2d32_async,
    module_from_buffer,
    pagelocked_empty,
    pagelocked_zeros,
    register_host_memory,
    start_profiler,
    stop_profiler,
    synchronize,
)
from ._kiln import mem_info as mem_get_info  # noqa: F401

# PyCUDA's debugging switch: set_debugging() makes every compile from then on a device debug
# build (-G), as `python -m kiln.debug script.py` does for a whole script.
CUDA_DEBUGGING = False


def set_debugging(flag=True):
    """Compile every kernel from now on with device debugging (-G: unoptimized, for
    cuda-gdb and compute-sanitizer), or not (flag False). The option is part of the cache's
    key: debug builds are cached beside the ordinary ones, never in their place."""
    global CUDA_DEBUGGING
    CUDA_DEBUGGING = bool(flag)
    _kiln._set_device_debug(CUDA_DEBUGGING)


# PyCUDA's error names. Its MemoryError is kiln's OutOfMemoryError, which is also Python's
# MemoryError; its RuntimeError, a failure of the run-time environment, is any CudaError.
MemoryError = OutOfMemoryError  # noqa: A001
RuntimeError = CudaError  # noqa: A001


class Event(_kiln.Event):
    """PyCUDA's Event(flags=0), flags from event_flags: a kiln.Event, which records on a stream,
    synchronizes, and times with end.time_since(start) or start.time_till(end) (ms). One made
    with INTERPROCESS | DISABLE_TIMING has an ipc_handle() that another process opens with
    Event.from_ipc_handle()."""

    __slots__ = ()

    def __new__(cls, flags=0):
        return super().__new__(cls, flags=flags)


class PointerHolderBase:
    """A pointer to device memory kept by an object of the program's own: a subclass defines
    get_pointer(), and an instance passes as that pointer to a kernel, to memcpy_* and to
    memset_* (int() and __index__ read it)."""

    def get_pointer(self):
        raise NotImplementedError(f"{type(self).__name__} must define get_pointer()")

    def as_buffer(self, size, offset=0):
        """size bytes from offset as a writable memoryview for the host, where the host can
        reach the memory (managed or mapped page-locked); device memory is a ValueError."""
        if offset < 0:
            raise ValueError(f"as_buffer's offset must be >= 0, not {offset}")
        return _kiln._host_view(self, int(self.get_pointer()) + offset, size)

    def __int__(self):
        return int(self.get_pointer())

    def __index__(self):
        return int(self.get_pointer())


def to_device(buf):
    """A DeviceAllocation holding a copy of buf (a numpy array or any buffer), as PyCUDA's
    to_device; kiln.to_device gives a DeviceArray instead."""
    nbytes = buf.nbytes if isinstance(buf, _np.ndarray) else memoryview(buf).nbytes
    result = mem_alloc(nbytes)
    memcpy_htod(result, buf)
    return result


def from_device(devptr, shape, dtype, order="C"):
    """A new numpy array of shape and dtype holding the bytes at devptr."""
    result = _np.empty(shape, dtype, order=order)
    memcpy_dtoh(result, devptr)
    return result


def from_device_like(devptr, other_ary):
    """A new numpy array like other_ary (shape, dtype, order) holding the bytes at devptr."""
    result = _np.empty_like(other_ary)
    memcpy_dtoh(result, devptr)
    return result


def mem_alloc_like(ary):
    """Device memory of ary's size in bytes."""
    return mem_alloc(ary.nbytes)


def _order(ary):
    return "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"


def pagelocked_empty_like(array, mem_flags=0):
    """A page-locked numpy array of array's shape, dtype and order."""
    return pagelocked_empty(array.shape, array.dtype, _order(array), mem_flags)


def pagelocked_zeros_like(array, mem_flags=0):
    """The same, zeroed."""
    return pagelocked_zeros(array.shape, array.dtype, _order(array), mem_flags)


class AlignedHostAllocation(_mmap.mmap):
    """The memory under an aligned_empty array (its .base): anonymous pages of the process's
    own, so page-aligned, which register_host_memory can page-lock in place. The memory goes
    when the last array over it does."""

    def free(self):
        """Returns at once: the memory goes with the last array over it, so that no array is
        left over freed memory."""


# PyCUDA's older name of the memory under a pagelocked_empty array.
HostAllocation = PagelockedHostAllocation


class HostPointer(_abc.ABC):
    """PyCUDA's base of host memory objects: PagelockedHostAllocation, RegisteredHostMemory
    (each with get_device_pointer()) and AlignedHostAllocation are its subclasses."""


for _host in (PagelockedHostAllocation, RegisteredHostMemory, AlignedHostAllocation):
    HostPointer.register(_host)


class ArgumentHandler(_abc.ABC):
    """PyCUDA's base of In, Out and InOut, which are its subclasses here. kiln's call knows
    those three; a handler class of the program's own is not called."""


for _handler in (In, Out, InOut):
    ArgumentHandler.register(_handler)
del _host, _handler


def aligned_empty(shape, dtype, order="C", alignment=4096):
    """A numpy array of shape, dtype and order whose data starts at a multiple of alignment
    bytes (a power of two or not), in ordinary pageable memory."""
    if not isinstance(alignment, (int, _np.integer)) or isinstance(alignment, bool) \
            or alignment <= 0:
        raise ValueError(f"alignment is a number of bytes > 0, not {alignment!r}")
    alignment = int(alignment)
    dtype = _np.dtype(dtype)
    shape = (shape,) if isinstance(shape, (int, _np.integer)) else tuple(shape)
    nbytes = dtype.itemsize * int(_np.prod(shape, dtype=_np.int64))
    # mmap gives whole pages, so a page or less of alignment comes free; more is found inside
    # an allocation larger by the alignment.
    extra = alignment if alignment > _mmap.PAGESIZE or _mmap.PAGESIZE % alignment else 0
    memory = AlignedHostAllocation(-1, max(nbytes, 1) + extra)
    start = _np.frombuffer(memory, _np.uint8, 1).ctypes.data
    offset = -start % alignment
    return _np.ndarray(shape, dtype, buffer=memory, offset=offset, order=order)


def aligned_zeros(shape, dtype, order="C", alignment=4096):
    """aligned_empty's array, zeroed (fresh anonymous pages are zeros already)."""
    return aligned_empty(shape, dtype, order, alignment)


def aligned_empty_like(array, alignment=4096):
    """An aligned_empty array of array's shape, dtype and order."""
    return aligned_empty(array.shape, array.dtype, _order(array), alignment)


def aligned_zeros_like(array, alignment=4096):
    """The same, zeroed."""
    return aligned_zeros(array.shape, array.dtype, _order(array), alignment)


def managed_empty_like(array, mem_flags=0):
    """A managed array of array's shape, dtype and order."""
    return managed_empty(array.shape, array.dtype, _order(array), mem_flags)


def managed_zeros_like(array, mem_flags=0):
    """The same, zeroed."""
    return managed_zeros(array.shape, array.dtype, _order(array), mem_flags)


def initialize_profiler(config_file, output_file, output_mode):
    """PyCUDA's call of cuProfilerInitialize, which CUDA 12 removed: the profiler is configured
    by the tool that runs the program (nsys, ncu); start_profiler and stop_profiler remain."""
    raise NotImplementedError("CUDA 12 removed cuProfilerInitialize: configure the profiler "
                              "through the tool that runs the program (nsys, ncu); "
                              "start_profiler() and stop_profiler() turn its collection on "
                              "and off")


# CuPy's names of the occupancy calculator (cupy.cuda.driver, cupy.cuda.runtime): functions of
# a kiln.Function, which has them as methods (max_active_blocks, suggested_block_size,
# available_dynamic_shared).
def occupancyMaxActiveBlocksPerMultiprocessor(func, blockSize, dynamicSMemSize=0):
    """Blocks of blockSize threads resident on one multiprocessor at once."""
    return func.max_active_blocks(blockSize, dynamicSMemSize)


def occupancyMaxPotentialBlockSize(func, dynamicSMemSize=0, blockSizeLimit=0):
    """(minGridSize, blockSize): the block size giving the most resident threads, and the
    smallest grid that fills the device with it."""
    return func.max_potential_block_size(dynamicSMemSize, blockSizeLimit)


def occupancyAvailableDynamicSMemPerBlock(func, numBlocks, blockSize):
    """The most dynamic shared memory per block with numBlocks resident per multiprocessor."""
    return func.available_dynamic_shared(numBlocks, blockSize)
