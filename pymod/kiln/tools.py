"""PyCUDA's tools module over kiln: choosing a device, memoizing per context, device data and
occupancy, memory pools. These are Python in PyCUDA too; what they stand on is kiln's.

kiln's own allocations already come from the device's stream-ordered pool (docs/arrays.md):
DeviceMemoryPool is for programs written against PyCUDA's, which hand out blocks by size and
take them back when the allocation is collected.
"""
import functools
import os
import stat
import warnings

import numpy as _np

from . import _kiln
from . import _cgen
from ._cgen import (  # noqa: F401  (PyCUDA's argument descriptions, tools'd names)
    Argument,
    ScalarArg,
    VectorArg,
    dtype_to_ctype,
    get_arg_type,
    parse_c_arg,
)
from .driver import Context, Device, PointerHolderBase, device_attribute, init, mem_alloc

# ---- Choosing a device ---------------------------------------------------------------------------


def _chosen_ordinal():
    """The ordinal CUDA_DEVICE or ~/.cuda_device names, or None. ~/.cuda_device is the file
    PyCUDA reads; ~/.cuda-device, the name PyCUDA's messages give it, is read where that is
    missing."""
    value = os.environ.get("CUDA_DEVICE")
    where = "CUDA_DEVICE"
    if value is None:
        home = os.path.expanduser("~")
        for name in (".cuda_device", ".cuda-device"):
            path = os.path.join(home, name)
            # Opened without waiting and read no further than a number could go: a FIFO or
            # /dev/zero planted there must not hang or fill the process.
            try:
                fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
            except OSError:
                continue
            with os.fdopen(fd, "rb") as f:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    raise ValueError(f"{path} must be a file that holds a device number")
                value, where = f.read(64).decode("utf-8", "replace").strip(), path
            break
        else:
            return None
    try:
        return int(value)
    except ValueError:
        raise ValueError(f"{where} must hold a device number, not {value!r}") from None


def get_default_device(default=0):
    """The Device CUDA_DEVICE or ~/.cuda_device names, else Device(default). Deprecated in
    PyCUDA, as here, for make_default_context()."""
    warnings.warn("get_default_device() is deprecated; use make_default_context() instead",
                  DeprecationWarning, stacklevel=2)
    chosen = _chosen_ordinal()
    return Device(default if chosen is None else chosen)


def make_default_context(ctx_maker=None):
    """The context of the device CUDA_DEVICE or ~/.cuda_device names, else of the first device
    whose context can be made, made current (pushed). ctx_maker(device) makes it; by default
    device.make_context(). Raises NoDeviceError where there is no GPU."""
    if ctx_maker is None:
        def ctx_maker(dev):
            return dev.make_context()
    init()  # NoDeviceError, saying why, when there is no driver or no device
    chosen = _chosen_ordinal()
    if chosen is not None:
        return ctx_maker(Device(chosen))
    failures = []
    for ordinal in range(Device.count()):
        try:
            return ctx_maker(Device(ordinal))
        except _kiln.CudaError as e:
            failures.append(f"device {ordinal}: {e}")
    raise _NoContextError("make_default_context() could make a context on none of the "
                          f"{len(failures)} devices: " + "; ".join(failures))


class _NoContextError(_kiln.LogicError, RuntimeError):
    """make_default_context's failure on every device: the RuntimeError PyCUDA's raises, and a
    LogicError as the driver's refusals are. Each device's failure is in the message; the
    attributes a CudaError has are None, as for no one driver call."""

    code = name = kernel = launch = None


# ---- Memoizing per context -----------------------------------------------------------------------

# PyCUDA's list of the functions context_dependent_memoize has cached a result of (each once,
# from its first result on); clear_context_caches empties their caches.
context_dependent_memoized_functions = []


def context_dependent_memoize(func):
    """Caches func's result per current context (that is, per current device) and arguments:
    a kernel built once per device. The cache is func._pycuda_ctx_dep_memoize_dic, as in
    PyCUDA: {context: {arguments: result}}."""
    cache = func._pycuda_ctx_dep_memoize_dic = {}

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        key = (args, frozenset(kwargs.items())) if kwargs else (args,)
        # None where there is no device, or where this thread popped every context it pushed
        # (kiln works on in its current device's): then keyed by that device's ordinal.
        context = Context.get_current()
        per_context = cache.setdefault(
            _kiln.current_device() if context is None else context, {})
        try:
            return per_context[key]
        except KeyError:
            pass
        result = per_context[key] = func(*args, **kwargs)
        if not any(f is func for f in context_dependent_memoized_functions):
            context_dependent_memoized_functions.append(func)
        return result
    return wrapper


def clear_context_caches():
    """Empties every context_dependent_memoize cache."""
    for func in context_dependent_memoized_functions:
        func._pycuda_ctx_dep_memoize_dic.clear()


# ---- Small helpers -------------------------------------------------------------------------------


def bitlog2(v):
    """The index of the highest set bit of v > 0: floor(log2(v))."""
    v = int(v)
    if v <= 0:
        raise ValueError(f"bitlog2 takes a positive int, not {v}")
    return v.bit_length() - 1


def mark_cuda_test(inner_f):
    """A test decorator: runs the test with a context made current (popped after), and marks it
    `cuda` for pytest."""
    @functools.wraps(inner_f)
    def f(*args, **kwargs):
        ctx = make_default_context()
        try:
            return inner_f(*args, **kwargs)
        finally:
            ctx.pop()
            clear_context_caches()
    try:
        import pytest
    except ImportError:
        return f
    return pytest.mark.cuda(f)


def init_cuda_context_fixture():
    """A pytest fixture's body, as PyCUDA's tests use it (`yield from
    init_cuda_context_fixture()`): a context made current for the test, popped after it with
    the context caches cleared."""
    init()
    ctx = make_default_context()
    try:
        yield
    finally:
        ctx.pop()
        clear_context_caches()
        import gc
        gc.collect()


# ---- Struct dtypes in generated kernels ----------------------------------------------------------

def _c_names(c_names):
    names = [c_names] if isinstance(c_names, str) else list(c_names)
    if not names or not all(isinstance(n, str) and n.strip() for n in names):
        raise TypeError(f"c_names is a C type's name or a list of them, not {c_names!r}")
    return names


class TypeNameNotKnown(KeyError, RuntimeError, TypeError):  # noqa: N818  (compyte's name)
    """A C type name nothing registered: compyte's TypeNameNotKnown (a RuntimeError), and the
    KeyError PyCUDA's registry lookup raises."""

    def __str__(self):
        return str(self.args[0]) if self.args else ""


def register_dtype(dtype, c_names, alias_ok=False):
    """Makes dtype (a struct dtype, say) known to generated kernels as the C type c_names (a
    name, or a list whose first is the one kernels are written with), and returns the dtype
    object the names stand for: the one registered first when an equal dtype was (as PyCUDA's
    registry gives it back). A dtype that has another C name already keeps it unless alias_ok;
    the new names are then also read as dtype. A name that stands for another dtype already is
    a RuntimeError, as in PyCUDA."""
    dtype = _np.dtype(dtype)
    names = _c_names(c_names)
    bound = set()
    for name in names:
        try:
            other = _cgen.ctype_to_dtype(name)
        except ValueError:
            continue
        if other != dtype:
            raise RuntimeError(f"name '{name}' already registered to different dtype "
                               f"({other!r}, not {dtype!r})")
        bound.add(name)
    try:
        known = dtype_to_ctype(dtype)
    except ValueError:
        known = None
    if known is not None and known not in names and not alias_ok:
        raise RuntimeError(f"dtype {dtype!r} is already the C type {known!r}; pass "
                           f"alias_ok=True to name it {names[0]!r} too")
    try:  # the object registered first, when it is an equal one
        first = _cgen.ctype_to_dtype(known) if known is not None else None
    except ValueError:
        first = None
    if first is not None and first == dtype:
        dtype = first
    for name in reversed(names) if known is None else names:
        if name not in bound:  # the first name last: the one dtype_to_ctype gives
            _cgen.register_dtype(dtype, name)
    if known is not None:
        _cgen.register_dtype(dtype, known)
    return dtype


def get_or_register_dtype(c_names, dtype=None):
    """With dtype, register_dtype(dtype, c_names) and the dtype object the names stand for (an
    equal one registered before is given back, as PyCUDA's); without, the dtype the C type
    c_names (or the first of them) stands for."""
    if dtype is not None:
        return register_dtype(dtype, c_names, alias_ok=True)
    name = _c_names(c_names)[0]
    try:
        return _cgen.ctype_to_dtype(name)
    except ValueError:
        raise TypeNameNotKnown(f"no dtype is known for the C type {name!r}; register_dtype() "
                               f"names one") from None


# ---- Device data and occupancy -------------------------------------------------------------------

# Bytes a block's shared memory is allocated in, and registers a warp's are (both since sm_50).
_SMEM_ALLOC_GRANULARITY = 128
_REGISTER_ALLOC_UNIT = 256


class DeviceData:
    """What occupancy depends on, read from the device's attributes (dev: a Device, default the
    current one)."""

    def __init__(self, dev=None):
        if dev is None:
            dev = Context.get_device()
        a = dev.get_attribute
        self.max_threads = a(device_attribute.MAX_THREADS_PER_BLOCK)
        self.warp_size = a(device_attribute.WARP_SIZE)
        self.warps_per_mp = a(device_attribute.MAX_THREADS_PER_MULTIPROCESSOR) // self.warp_size
        self.thread_blocks_per_mp = a(device_attribute.MAX_BLOCKS_PER_MULTIPROCESSOR)
        self.registers = a(device_attribute.MAX_REGISTERS_PER_BLOCK)
        self.registers_per_mp = a(device_attribute.MAX_REGISTERS_PER_MULTIPROCESSOR)
        self.shared_memory = a(device_attribute.MAX_SHARED_MEMORY_PER_BLOCK)
        self.shared_memory_per_mp = a(device_attribute.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR)
        # What the driver keeps of a multiprocessor's shared memory for each block (1 KiB
        # from sm_80), which the occupancy of a block using shared memory counts.
        self.reserved_shared_memory = a(device_attribute.RESERVED_SHARED_MEMORY_PER_BLOCK)
        # Threads of a warp read shared memory in one go, bank by bank.
        self.smem_granularity = self.warp_size
        self.smem_alloc_granularity = _SMEM_ALLOC_GRANULARITY
        self.register_allocation_unit = "warp"

    def coalesce(self, thread_count):
        """thread_count rounded up to whole warps, whose accesses are coalesced together
        (PyCUDA rounds to 16, the half warp of the first CUDA GPUs)."""
        return -(-thread_count // self.warp_size) * self.warp_size

    def align_bytes(self, word_size=4):
        """Bytes between base addresses at which a warp's accesses of word_size bytes are
        coalesced: the 128-byte cache line every CUDA GPU this kiln runs on reads."""
        if word_size not in (1, 2, 4, 8, 16):
            raise ValueError(f"word_size is 1, 2, 4, 8 or 16 bytes, not {word_size}")
        return 128

    def align(self, bytes, word_size=4):  # noqa: A002 (PyCUDA's name)
        """bytes rounded up to the next multiple of align_bytes(word_size)."""
        a = self.align_bytes(word_size)
        return -(-bytes // a) * a

    def align_words(self, word_size):
        """align_bytes(word_size) in words."""
        a = self.align_bytes(word_size)
        if a % word_size:
            raise ValueError(f"{a} bytes are not a whole number of {word_size}-byte words")
        return a // word_size

    def align_dtype(self, elements, dtype_size):
        """elements rounded up so that elements of dtype_size bytes fill whole aligned lines."""
        w = self.align_words(dtype_size)
        return -(-elements // w) * w

    @staticmethod
    def make_valid_tex_channel_count(size):
        """size rounded up to a channel count a texture takes: 1, 2 or 4."""
        for valid in (1, 2, 4):
            if size <= valid:
                return valid
        raise ValueError(f"a texture has at most 4 channels, not {size}")


class OccupancyRecord:
    """How many blocks of `threads` threads, each using shared_mem bytes of shared memory and
    `registers` registers a thread, one multiprocessor runs at once (tb_per_mp), what limits it
    ("device", "warps", "regs" or "smem"), and the share of the multiprocessor's warps that
    keeps busy (occupancy, 0 to 1)."""

    def __init__(self, devdata, threads, shared_mem=0, registers=0):
        if threads <= 0 or threads > devdata.max_threads:
            raise ValueError(f"threads must be 1 to {devdata.max_threads}, not {threads}")
        if shared_mem < 0 or registers < 0:
            raise ValueError(f"shared_mem and registers are counts of 0 or more, not "
                             f"{shared_mem} and {registers}")
        warps = -(-threads // devdata.warp_size)
        # A devdata of the program's own with PyCUDA's attributes only: PyCUDA's formula
        # divides its registers and shared_memory (a block's most, in PyCUDA's DeviceData).
        regs_per_mp = getattr(devdata, "registers_per_mp", None) or devdata.registers
        smem_per_mp = getattr(devdata, "shared_memory_per_mp", None) or devdata.shared_memory
        # PyCUDA's public list of (blocks, what limits them); its least is the record's, a tie
        # going to the name first in alphabetical order as PyCUDA's min() of the pairs has it.
        self.tb_per_mp_limits = limits = [(devdata.thread_blocks_per_mp, "device"),
                                          (devdata.warps_per_mp // warps, "warps")]
        if registers:
            per_warp = -(-registers * devdata.warp_size // _REGISTER_ALLOC_UNIT)
            alloc = per_warp * _REGISTER_ALLOC_UNIT * warps
            if alloc > devdata.registers or alloc > regs_per_mp:
                raise ValueError(f"too many registers: {threads} threads of {registers} "
                                 f"take {alloc}, more than the {devdata.registers} a block has")
            limits.append((regs_per_mp // alloc, "regs"))
        if shared_mem:
            granule = devdata.smem_alloc_granularity
            taken = shared_mem + getattr(devdata, "reserved_shared_memory", 0)
            alloc = -(-taken // granule) * granule
            if alloc > smem_per_mp:
                raise ValueError(f"too much smem: {shared_mem} bytes a block, more than the "
                                 f"{smem_per_mp} a multiprocessor has")
            limits.append((smem_per_mp // alloc, "smem"))
        self.tb_per_mp, self.limited_by = min(limits)
        self.warps_per_mp = self.tb_per_mp * warps
        self.occupancy = self.warps_per_mp / devdata.warps_per_mp


# ---- Memory pools --------------------------------------------------------------------------------


def _bin_size(nbytes):
    """nbytes rounded up to a size the pools keep blocks of: 256 bytes, or three significant
    bits (at most a quarter wasted)."""
    if nbytes <= 256:
        return 256
    shift = nbytes.bit_length() - 3
    return -(-nbytes >> shift) << shift


class _Pool:
    """What both pools share: freed blocks kept by bin size (_bin_size), PyCUDA's counts
    (held_blocks, active_blocks, active_bytes asked for by the arrays and allocations in use,
    managed_bytes of the blocks behind them and those kept), and PyCUDA's bin_number and
    alloc_size over kiln's bins (the exponent above two bits of mantissa: the three significant
    bits of _bin_size; PyCUDA's bins are finer, four bits, so the numbers differ, but the
    properties its tests check hold). A pool says how big a block is and how to let it go."""

    def __init__(self):
        self._held = {}  # bin size -> [block]
        self._holding = True
        self.held_blocks = self.active_blocks = 0
        self.active_bytes = self.managed_bytes = 0

    @staticmethod
    def bin_number(size):
        size = _bin_size(max(int(size), 1))
        exponent = size.bit_length() - 1
        return exponent << 2 | (size >> (exponent - 2)) & 3

    @staticmethod
    def alloc_size(bin_nr):
        bin_nr = int(bin_nr)
        if bin_nr < _Pool.bin_number(1):
            raise ValueError(f"no pool bin is numbered {bin_nr}")
        return (4 | bin_nr & 3) << ((bin_nr >> 2) - 2)

    def _take(self, nbytes, make):
        """A block for nbytes: a kept one of its bin, else make(bin size)."""
        bin_size = _bin_size(max(nbytes, 1))
        held = self._held.get(bin_size)
        if held:
            block = held.pop()
            self.held_blocks -= 1
        else:
            block = make(bin_size)
            self.managed_bytes += bin_size
        self.active_blocks += 1
        self.active_bytes += nbytes
        return block

    def _give_back(self, block, nbytes):
        self.active_blocks -= 1
        self.active_bytes -= nbytes
        size = self._block_size(block)
        if self._holding:
            self._held.setdefault(size, []).append(block)
            self.held_blocks += 1
        else:
            self.managed_bytes -= size
            self._release(block)

    def free_held(self):
        """Frees every block the pool keeps."""
        held, self._held = self._held, {}
        self.held_blocks = 0
        for blocks in held.values():
            for block in blocks:
                self.managed_bytes -= self._block_size(block)
                self._release(block)

    def stop_holding(self):
        """Frees what the pool keeps, and from now on what comes back."""
        self._holding = False
        self.free_held()


class PooledDeviceAllocation(PointerHolderBase):
    """Device memory from a DeviceMemoryPool: passes as a pointer (int() gives it), len() is its
    size, and it goes back to the pool when collected or freed."""

    def __init__(self, pool, allocation, size):
        self._pool, self._allocation, self._size = pool, allocation, size

    def get_pointer(self):
        if self._allocation is None:
            raise ValueError("the pooled allocation was freed")
        return int(self._allocation)

    def __len__(self):
        return self._size

    def free(self):
        """Gives the memory back to the pool now."""
        allocation, self._allocation = self._allocation, None
        if allocation is not None:
            self._pool._give_back(allocation, self._size)

    def __del__(self):
        try:
            self.free()
        except Exception:  # collected at exit, with the driver or the pool already gone
            pass


class DeviceMemoryPool(_Pool):
    """Keeps freed device memory by size for the next allocation of a similar size."""

    def allocate(self, size):
        """A PooledDeviceAllocation of at least size bytes."""
        size = int(size)
        if size <= 0:
            raise ValueError(f"allocate() needs a positive number of bytes, not {size}")
        return PooledDeviceAllocation(self, self._take(size, self._alloc), size)

    def _alloc(self, nbytes):
        try:
            return mem_alloc(nbytes)
        except _kiln.OutOfMemoryError:
            self.free_held()  # what the pool keeps may be what the device lacks
            return mem_alloc(nbytes)

    @staticmethod
    def _block_size(allocation):
        return allocation.size

    @staticmethod
    def _release(allocation):
        allocation.free()


class DebugMemoryPool(DeviceMemoryPool):
    """A DeviceMemoryPool that writes each allocation to logfile (sys.stdout when None): its
    size, the device's free memory before it and now, the pool's counts, where it was asked
    for, and how many blocks of each size and place are alive. With interactive, each place
    is asked a name (a mnemonic) the first time, and every allocation waits for Enter. PyCUDA
    keeps the mnemonics on disk; kiln keeps them for the pool's life."""

    def __init__(self, interactive=True, logfile=None):
        import sys
        import weakref
        super().__init__()
        self.last_free, _ = _kiln.mem_info()
        self.interactive = interactive
        self.logfile = sys.stdout if logfile is None else logfile
        self.blocks = weakref.WeakKeyDictionary()  # allocation -> (size, description)
        self.stacktrace_mnemonics = {}

    def allocate(self, size):
        import traceback
        stack = tuple(frame[2] for frame in traceback.extract_stack())
        description = self.describe(stack, size)
        histogram = {}
        for block in list(self.blocks.values()):
            histogram[block] = histogram.get(block, 0) + 1
        prefix = os.path.commonprefix([descr for _, descr in histogram])
        free, total = _kiln.mem_info()
        print("\n  Allocation of size %d occurring (mem: last_free:%d, free: %d, total:%d) "
              "(pool: held:%d, active:%d):\n      at: %s"
              % (size, self.last_free, free, total, self.held_blocks, self.active_blocks,
                 description), file=self.logfile)
        for (bsize, descr), count in sorted(histogram.items()):
            print("  %s (%d bytes): %dx" % (descr[len(prefix):], bsize, count),
                  file=self.logfile)
        if self.interactive:
            input("  [Enter]")
        result = super().allocate(size)
        self.blocks[result] = (size, description)
        self.last_free, _ = _kiln.mem_info()
        return result

    def describe(self, stack, size):
        """The place an allocation was asked for: the functions of its stack, or, interactive,
        the name given for that stack and size."""
        if not self.interactive:
            return "|".join(stack)
        try:
            return self.stacktrace_mnemonics[stack, size]
        except KeyError:
            print(size, stack)
            while True:
                mnemonic = input("Enter mnemonic or [Enter] for more info:")
                if mnemonic:
                    break
                import traceback
                traceback.print_stack()
            self.stacktrace_mnemonics[stack, size] = mnemonic
            return mnemonic


class PageLockedAllocator:
    """How a PageLockedMemoryPool gets its blocks: page-locked memory with flags (from
    kiln.driver.host_alloc_flags; kiln's is always portable)."""

    def __init__(self, flags=0):
        self.flags = flags

    def __call__(self, nbytes):
        return _kiln.pagelocked_empty(nbytes, _np.uint8, "C", self.flags)


class PooledHostAllocation:
    """The .base of an array from a PageLockedMemoryPool: its block goes back to the pool when
    the array is collected, or at free()."""

    def __init__(self, pool, block, shape, dtype, order):
        self._pool, self._block = pool, block
        self._shape, self._dtype = tuple(shape), dtype
        self._strides = None
        if order == "F" and len(self._shape) > 1:
            strides, step = [], dtype.itemsize
            for n in self._shape:
                strides.append(step)
                step *= n
            self._strides = tuple(strides)

    @property
    def __array_interface__(self):
        return {"shape": self._shape, "typestr": self._dtype.str, "descr": self._dtype.descr,
                "strides": self._strides, "version": 3,
                "data": (self._block.ctypes.data, False)}

    def __len__(self):
        return int(_np.prod(self._shape, dtype=_np.int64)) * self._dtype.itemsize

    def free(self):
        """Gives the block back to the pool now; the array must not be used after."""
        block, self._block = self._block, None
        if block is not None:
            self._pool._give_back(block, len(self))

    def __del__(self):
        try:
            self.free()
        except Exception:  # collected at exit, with the pool already gone
            pass


class PageLockedMemoryPool(_Pool):
    """Keeps freed page-locked host memory by size for the next array of a similar size."""

    def __init__(self, allocator=None):
        super().__init__()
        self._allocator = allocator or PageLockedAllocator()

    def allocate(self, shape, dtype, order="C"):
        """An uninitialized page-locked numpy array; its .base is a PooledHostAllocation."""
        if order not in ("C", "F"):
            raise ValueError(f"order must be 'C' or 'F', not {order!r}")
        dtype = _np.dtype(dtype)
        shape = (shape,) if _np.ndim(shape) == 0 else tuple(shape)
        nbytes = int(_np.prod(shape, dtype=_np.int64)) * dtype.itemsize
        block = self._take(nbytes, self._allocator)
        return _np.asarray(PooledHostAllocation(self, block, shape, dtype, order))

    @staticmethod
    def _block_size(block):
        return block.nbytes

    @staticmethod
    def _release(block):
        pass  # the array's memory goes with its last reference


# PyCUDA's driver module gives the pools and bitlog2 too (its extension has them).
def _give_the_driver_its_names():
    from . import driver
    for name in ("DeviceMemoryPool", "PageLockedMemoryPool", "PooledDeviceAllocation",
                 "PooledHostAllocation", "PageLockedAllocator", "bitlog2"):
        setattr(driver, name, globals()[name])


_give_the_driver_its_names()
