"""PyCUDA's driver module over kiln: `import kiln.driver as drv` in place of
`import pycuda.driver as drv`.

Everything here is kiln's own object under PyCUDA's name, or a few lines over one where
PyCUDA's is Python too (to_device, from_device, PointerHolderBase, the *_like helpers). kiln
works in each device's primary context, shares it with PyTorch and CuPy, and checks every
argument by the kernel's signature; docs/pycuda.md says where that makes kiln differ.
"""
import abc as _abc
import builtins as _builtins
import math as _math
import mmap as _mmap
import operator as _operator
import sys as _sys

import numpy as _np

from . import _kiln
from . import compiler as _compiler
from . import module_from_file  # noqa: F401
from ._memcpy import Memcpy2D, Memcpy3D, Memcpy3DPeer  # noqa: F401
from ._driver_enums import (  # noqa: F401
    TR_DEFAULT,
    TRSA_OVERRIDE_FORMAT,
    TRSF_NORMALIZED_COORDINATES,
    TRSF_READ_AS_INTEGER,
    address_mode,
    array3d_flags,
    array_cubemap_face,
    array_format,
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
    LaunchConfigError,
    LaunchError,
    LogicError,
    ManagedAllocation,
    Module,
    NoDeviceError,
    NotFoundError,
    Out,
    OutOfMemoryError,
    PagelockedHostAllocation,
    RegisteredHostMemory,
    Stream,
    UsageError,
    get_driver_version,
    get_version,
    init,
    mem_alloc,
    mem_get_address_range,
    mem_get_ipc_handle,
    managed_empty,
    managed_zeros,
    mem_alloc_pitch,
    memcpy_atoa,
    memcpy_atod,
    memcpy_atoh,
    memcpy_dtoa,
    memcpy_dtod,
    memcpy_dtod_async,
    memcpy_dtoh,
    memcpy_dtoh_async,
    memcpy_htoa,
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


def have_gl_ext():
    """False: kiln has no OpenGL interop (PyCUDA's pycuda.gl); a program that checks this
    before importing it takes its path without."""
    return False


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

    def __new__(cls, *args, **kwargs):
        if cls is __class__:  # not the module's name, which may be rebound
            if len(args) + len(kwargs) > 1 or set(kwargs) - {"flags"}:
                raise TypeError(f"Event() takes one argument, flags, not {args} {kwargs}")
            return super().__new__(cls, flags=(*args, *kwargs.values(), 0)[0])
        # A subclass's arguments are its own __init__'s, as with PyCUDA's Event (cuburn's
        # DurationEvent(prior)): its event is made again if Event.__init__ is given flags.
        return super().__new__(cls, flags=0)

    def __init__(self, flags=0, *args, **kwargs):
        # A plain Event was made with its flags by __new__.
        if type(self) is not __class__ and flags:
            self._remake(flags)


class Linker:
    """PyCUDA's Linker: CUBIN, PTX, objects and libraries linked into one module
    (link_module()) by compiler.DynamicModule's link, for the arch kiln compiles for (the
    current device's, or KILN_ARCH's), so that code compiled by kiln links as it is. options,
    (jit_option, int) pairs, are the driver linker's JIT options, as DynamicModule's
    link_options; message_handler, when given, is called as PyCUDA calls it: (success,
    info_log, error_log)."""

    def __init__(self, message_handler=None, options=None, log_verbose=False):
        self._linking = _compiler.DynamicModule(link_options=options,
                                                message_handler=message_handler,
                                                log_verbose=log_verbose)

    def add_data(self, data, input_type, name="unknown"):
        """Adds data (bytes: a CUBIN, PTX, fatbin, object or library, as input_type says)."""
        self._linking.add_data(bytes(data), input_type, name)

    def add_file(self, filename, input_type):
        """Adds the file filename, of input_type."""
        self._linking.add_file(filename, input_type)

    def link_module(self):
        """The linked module; a link error is a CompileError with the linker's log."""
        return self._linking.link().module


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


def to_device(bf_obj):
    """A DeviceAllocation holding a copy of bf_obj (a numpy array or any buffer), as PyCUDA's
    to_device; kiln.to_device gives a DeviceArray instead. The elements go in C order, as
    PyCUDA copies memoryview(bf_obj).tobytes(): a Fortran-ordered or strided array arrives
    row by row."""
    if isinstance(bf_obj, _np.ndarray):
        if not bf_obj.flags.c_contiguous:
            bf_obj = _np.ascontiguousarray(bf_obj)
        nbytes = bf_obj.nbytes
    else:
        view = memoryview(bf_obj)
        if not view.c_contiguous:
            bf_obj = view.tobytes()
        nbytes = view.nbytes
    result = mem_alloc(nbytes)
    memcpy_htod(result, bf_obj)
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

    def get_device_pointer(self):
        """The address kernels use for the memory, where it is mapped for the device."""
        raise NotImplementedError(f"{type(self).__name__} has no device address")


for _host in (PagelockedHostAllocation, RegisteredHostMemory, AlignedHostAllocation):
    HostPointer.register(_host)


class ArgumentHandler(_abc.ABC):  # noqa: B024  (a base with PyCUDA's defaults, nothing abstract)
    """PyCUDA's base of In, Out and InOut, which are registered as its subclasses here (they are
    kiln's own types). A class of the program's own derived from it passes to a kernel as the
    device memory its get_device_alloc() gives (by default, memory the size of the array it
    was made with), as under PyCUDA: a buffer object that knows its allocation. kiln's launch
    does not call a handler's pre_call or post_call: a class that defines either, to copy
    around the launch, is refused at the call rather than left uncopied."""

    def __init__(self, ary):
        self.array = ary
        self.dev_alloc = None

    def get_device_alloc(self):
        """The device memory passed to the kernel; made for the array at the first call."""
        if getattr(self, "dev_alloc", None) is None:
            array = getattr(self, "array", None)
            try:
                self.dev_alloc = mem_alloc_like(array)
            except AttributeError:
                raise TypeError(f"could not determine the size of {type(array).__name__!r}: "
                                f"not an array") from None
        return self.dev_alloc

    def pre_call(self, stream):
        """PyCUDA's hook before a launch: nothing, in the base."""

    def __getattr__(self, name):
        # kiln's launch reads an unknown object's gpudata (PyCUDA's rule for GPU arrays of
        # other libraries): a handler's is its device memory. Looked up only when the program
        # set no gpudata of its own.
        if name != "gpudata":
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        cls = type(self)
        if cls.pre_call is not ArgumentHandler.pre_call or hasattr(cls, "post_call"):
            raise TypeError(f"{cls.__name__} defines pre_call or post_call, which kiln's launch "
                            f"does not call; copy before and after the launch in the program, "
                            f"or pass kiln.In/Out/InOut")
        return self.get_device_alloc()


for _handler in (In, Out, InOut):
    ArgumentHandler.register(_handler)
del _host, _handler


def _host_shape(shape):
    """shape as numpy.empty takes it (an int or a sequence of them), as a tuple of ints >= 0.
    Checked here because numpy.ndarray over a buffer reads a negative size as "fill the
    buffer", and with a dtype of no bytes, divides by zero."""
    try:
        try:
            dims = (_operator.index(shape),)  # an int, a NumPy integer, a 0-d integer array
        except TypeError:
            dims = tuple(_operator.index(n) for n in shape)
    except TypeError:
        raise TypeError(f"shape is an int or a sequence of ints, not {shape!r}") from None
    if any(n < 0 for n in dims):
        raise ValueError(f"negative dimensions are not allowed (shape {dims})")
    return dims


def aligned_empty(shape, dtype, order="C", alignment=4096):
    """A numpy array of shape, dtype and order whose data starts at a multiple of alignment
    bytes (a power of two or not), in ordinary pageable memory."""
    if not isinstance(alignment, (int, _np.integer)) or isinstance(alignment, bool) \
            or alignment <= 0:
        raise ValueError(f"alignment is a number of bytes > 0, not {alignment!r}")
    alignment = int(alignment)
    dtype = _np.dtype(dtype)
    shape = _host_shape(shape)
    nbytes = dtype.itemsize * _math.prod(shape)
    if nbytes > _sys.maxsize - alignment:
        raise ValueError(f"an array of shape {shape} and dtype {dtype} is larger than an "
                         f"address can reach ({nbytes} bytes)")
    # mmap gives whole pages, so a page or less of alignment comes free; more is found inside
    # an allocation larger by the alignment.
    extra = alignment if alignment > _mmap.PAGESIZE or _mmap.PAGESIZE % alignment else 0
    try:
        memory = AlignedHostAllocation(-1, max(nbytes, 1) + extra)
    except OSError as e:  # numpy.empty's MemoryError (Python's: this module's is the device's)
        raise _builtins.MemoryError(f"cannot allocate {nbytes + extra} bytes of host memory "
                                    f"for an array of shape {shape} and dtype {dtype}: "
                                    f"{e.strerror}") from None
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


# ---- CUDA arrays -----------------------------------------------------------------------------

class _Descriptor:
    """Plain attributes, printed and compared by their values. Others a program sets are kept
    and reach nothing, as on PyCUDA's descriptors."""

    __slots__ = ("__dict__",)

    def __repr__(self):
        fields = ", ".join(f"{name}={getattr(self, name)!r}" for name in self.__slots__)
        return f"{type(self).__name__}({fields})"

    def __eq__(self, other):
        return type(other) is type(self) and all(
            getattr(self, name) == getattr(other, name) for name in self.__slots__)

    __hash__ = None


class ArrayDescriptor(_Descriptor):
    """The shape of a 1D or 2D Array: width elements in a row, height rows (0 for 1D), each
    element num_channels (1, 2 or 4) values of an array_format."""

    __slots__ = ("width", "height", "format", "num_channels")

    def __init__(self, width=0, height=0, format=0, num_channels=0):  # noqa: A002
        self.width, self.height, self.format, self.num_channels = \
            width, height, format, num_channels

    def _no_3d_field(name):  # noqa: N805  (makes the two properties below)
        def get(self):
            raise AttributeError(f"an ArrayDescriptor has no {name}: ArrayDescriptor3D has")

        def set_(self, value):
            # cuda-sim's helper sets flags = 0 on a 2D descriptor, which PyCUDA keeps and never
            # reads; any other value would ask for what a 2D descriptor cannot make.
            if value != 0:
                raise ValueError(f"an ArrayDescriptor makes a 1D or 2D Array and has no {name}; "
                                 f"ArrayDescriptor3D takes {name}={value!r}")

        return property(get, set_)

    depth = _no_3d_field("depth")
    flags = _no_3d_field("flags")
    del _no_3d_field


class ArrayDescriptor3D(_Descriptor):
    """The shape of any Array: depth slices (or layers) of height rows as ArrayDescriptor's,
    and flags from array3d_flags."""

    __slots__ = ("width", "height", "depth", "format", "num_channels", "flags")

    def __init__(self, width=0, height=0, depth=0, format=0, num_channels=0,  # noqa: A002
                 flags=0):
        self.width, self.height, self.depth = width, height, depth
        self.format, self.num_channels, self.flags = format, num_channels, flags


class Array(_kiln.Array):
    """Array(descriptor): a CUDA array of an ArrayDescriptor's or ArrayDescriptor3D's shape,
    made in the current device's context; destroyed when collected or by free() (after which
    any use is a ValueError). handle is the driver's CUarray, for a texture or surface object
    made over it. Memcpy2D and Memcpy3D (set_src_array, set_dst_array) and memcpy_htoa and its
    kin copy to and from it."""

    __slots__ = ()

    def get_descriptor(self):
        """The ArrayDescriptor it was made with (an array with depth has get_descriptor_3d)."""
        width, height, depth, fmt, channels, _ = self._descriptor
        if depth:
            raise ValueError(f"this Array has a depth of {depth}, which an ArrayDescriptor "
                             f"cannot say: get_descriptor_3d() describes it")
        return ArrayDescriptor(width, height, array_format(fmt), channels)

    def get_descriptor_3d(self):
        """The ArrayDescriptor3D it was made with (depth and flags 0 for a 1D or 2D one)."""
        width, height, depth, fmt, channels, flags = self._descriptor
        return ArrayDescriptor3D(width, height, depth, array_format(fmt), channels, flags)


_ARRAY_FORMATS = {
    _np.dtype(_np.uint8): array_format.UNSIGNED_INT8,
    _np.dtype(_np.uint16): array_format.UNSIGNED_INT16,
    _np.dtype(_np.uint32): array_format.UNSIGNED_INT32,
    _np.dtype(_np.int8): array_format.SIGNED_INT8,
    _np.dtype(_np.int16): array_format.SIGNED_INT16,
    _np.dtype(_np.int32): array_format.SIGNED_INT32,
    _np.dtype(_np.float16): array_format.HALF,
    _np.dtype(_np.float32): array_format.FLOAT,
}


def dtype_to_array_format(dtype):
    """The array_format of a dtype's values (float16 is HALF, which PyCUDA's lacks)."""
    try:
        return _ARRAY_FORMATS[_np.dtype(dtype)]
    except (KeyError, TypeError):
        raise TypeError(f"cannot convert dtype '{dtype}' to array format: an array holds "
                        f"8-, 16- and 32-bit integers, float16 and float32") from None


def _format_and_channels(dtype):
    """An element for each value of dtype: float64, complex64 and complex128 as 2, 2 and 4
    SIGNED_INT32 channels (what PyCUDA's pycuda-helpers.hpp reads back), else one channel."""
    dtype = _np.dtype(dtype)
    if dtype in (_np.dtype(_np.float64), _np.dtype(_np.complex64)):
        return array_format.SIGNED_INT32, 2
    if dtype == _np.dtype(_np.complex128):
        return array_format.SIGNED_INT32, 4
    return dtype_to_array_format(dtype), 1


def _array_order(order):
    if not isinstance(order, str) or order.upper() not in ("C", "F"):
        raise LogicError(f"order must be either F or C, not {order!r}")
    return order.upper()


def _shape_in_order(what, shape, order):
    """(width, height, depth) of a 2D or 3D shape: C order reads it (height, width) or (depth,
    height, width), F order (width, height) or (width, height, depth); depth 0 for 2D."""
    if len(shape) not in (2, 3):
        raise LogicError(f"{what} makes a 2D or 3D CUDA array, from an array of 2 or 3 "
                         f"dimensions, not of shape {tuple(shape)}")
    sizes = tuple(int(n) for n in (shape[::-1] if order == "C" else shape))
    return sizes + (0,) if len(sizes) == 2 else sizes


def _copy_into_array(ary, set_src, row_bytes, height, depth, layered):
    """Rows of row_bytes, height of them in each of depth slices (0: one, as a 2D copy), from
    the source set_src sets, into ary."""
    copy = Memcpy3D() if depth or layered else Memcpy2D()
    set_src(copy)
    copy.set_dst_array(ary)
    copy.width_in_bytes = copy.src_pitch = row_bytes
    copy.height = height
    if isinstance(copy, Memcpy3D):
        copy.src_height = height
        copy.depth = depth or 1
        copy()
    else:
        copy(aligned=False)  # a device source's pitch is its row, which need not be aligned
    return ary


def matrix_to_array(matrix, order="F", allow_double_hack=False):
    """A 2D Array holding the 2D numpy array matrix: order "C" reads it as rows (tex2D(x, y)
    fetches matrix[y, x]), "F" as columns (matrix[x, y]). A float64 matrix with
    allow_double_hack is made of two SIGNED_INT32 channels."""
    order = _array_order(order)
    matrix = _np.asarray(matrix, order=order)
    if matrix.ndim != 2:
        raise LogicError(f"matrix_to_array takes a 2D array, not one of shape {matrix.shape}")
    width, height, _ = _shape_in_order("matrix_to_array", matrix.shape, order)
    if matrix.dtype == _np.float64 and allow_double_hack:
        fmt, channels = array_format.SIGNED_INT32, 2
    else:
        fmt, channels = dtype_to_array_format(matrix.dtype), 1
    ary = Array(ArrayDescriptor(width, height, fmt, channels))
    return _copy_into_array(ary, lambda c: c.set_src_host(matrix), width * matrix.itemsize,
                            height, 0, False)


def _to_array(what, shape, dtype, order, surface, set_src):
    width, height, depth = _shape_in_order(what, shape, order)
    fmt, channels = _format_and_channels(dtype)
    if surface:  # a 2D array becomes one layer, as surfaces of 2D arrays are layered
        flags = array3d_flags.SURFACE_LDST | (0 if depth else array3d_flags.LAYERED)
        descr = ArrayDescriptor3D(width, height, depth or 1, fmt, channels, flags)
    elif depth:
        descr = ArrayDescriptor3D(width, height, depth, fmt, channels)
    else:
        descr = ArrayDescriptor(width, height, fmt, channels)
    return _copy_into_array(Array(descr), set_src, width * _np.dtype(dtype).itemsize, height,
                            depth, surface)


def np_to_array(nparray, order, allowSurfaceBind=False):  # noqa: N803
    """A 2D or 3D Array holding the 2D or 3D numpy array nparray, read in order ("C": its
    shape is (height, width) or (depth, height, width); "F": (width, height) or (width,
    height, depth)). float64, complex64 and complex128 values are 2, 2 and 4 SIGNED_INT32
    channels. allowSurfaceBind adds SURFACE_LDST (a 2D array as one LAYERED layer)."""
    order = _array_order(order)
    nparray = _np.asarray(nparray, order=order)
    return _to_array("np_to_array", nparray.shape, nparray.dtype, order, allowSurfaceBind,
                     lambda c: c.set_src_host(nparray))


def gpuarray_to_array(gpuarray, order, allowSurfaceBind=False):  # noqa: N803
    """np_to_array's Array from a GPUArray on the device, which is contiguous in order."""
    order = _array_order(order)
    if not (gpuarray.flags.c_contiguous if order == "C" else gpuarray.flags.f_contiguous):
        raise ValueError(f"gpuarray_to_array copies a GPUArray contiguous in order {order!r}; "
                         f"this one of shape {gpuarray.shape} and strides {gpuarray.strides} "
                         f"is not (.copy() gives a contiguous one)")
    return _to_array("gpuarray_to_array", gpuarray.shape, gpuarray.dtype, order,
                     allowSurfaceBind, lambda c: c.set_src_device(gpuarray))


def make_multichannel_2d_array(ndarray, order):
    """A 2D Array of elements of several channels (1, 2 or 4) from a 3D numpy array, read in
    order: "C" as (height, width, num_channels), "F" as (num_channels, width, height)."""
    order = _array_order(order)
    matrix = _np.asarray(ndarray, order=order)
    if matrix.ndim != 3:
        raise LogicError(f"make_multichannel_2d_array takes a 3D array, not one of shape "
                         f"{matrix.shape}")
    if order == "C":
        height, width, channels = matrix.shape
    else:
        channels, width, height = matrix.shape
    ary = Array(ArrayDescriptor(width, height, dtype_to_array_format(matrix.dtype), channels))
    return _copy_into_array(ary, lambda c: c.set_src_host(matrix),
                            width * channels * matrix.itemsize, height, 0, False)


def _texture_references_removed(name):
    raise NotImplementedError(f"{name}: texture references were removed in CUDA 12, which kiln "
                              f"needs; make a texture object over the Array's handle "
                              f"(cuTexObjectCreate) and pass it to the kernel as a "
                              f"cudaTextureObject_t argument")


def bind_array_to_texref(ary, texref):
    """PyCUDA's binding of an Array to a texture reference, which CUDA 12 removed."""
    _texture_references_removed("bind_array_to_texref")


def matrix_to_texref(matrix, texref, order):
    """PyCUDA's matrix_to_array bound to a texture reference, which CUDA 12 removed."""
    _texture_references_removed("matrix_to_texref")


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


# The memory pools are in PyCUDA's extension, and so in its driver module too (programs call
# drv.DeviceMemoryPool(), or take them with `from pycuda.driver import *`). kiln's are in
# tools, which imports this module: tools puts them here when it is done, whichever of the two
# a program imported first.
from . import tools  # noqa: E402,F401

# PyCUDA's driver module imports its extension, pycuda._driver, so a program that imported the
# driver may name that module (`except pycuda._driver.LogicError`). Last: it reads this module's
# names.
from . import _driver  # noqa: E402,F401
