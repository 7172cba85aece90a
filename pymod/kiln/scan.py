"""Prefix scans from a C expression: PyCUDA's `pycuda.scan`.

    from kiln.scan import InclusiveScanKernel, ExclusiveScanKernel
    cumsum = InclusiveScanKernel(np.int32, "a+b")
    cumsum(x_gpu)                       # in place: x_gpu[i] = x[0] + ... + x[i]
    y = ExclusiveScanKernel(np.float32, "a+b", "0")(x_gpu, kiln.empty_like(x_gpu))

`scan_expr` folds two values `a` and `b` and must be associative (not necessarily
commutative: the fold runs in index order); `neutral` is its neutral element, needed by the
exclusive scan for its first output. The three kernels (see `_scan_src`) are compiled once, at
construction, through kiln's cache.

An array of any shape is scanned in its C order (NumPy's `cumsum` of the flattened array).
Where kiln differs from PyCUDA: arrays that are not contiguous are scanned through a
contiguous copy instead of refused, the input's dtype is checked against the kernel's,
`stream=` orders the launches, and `output_ary="new"` (PyCUDA's spelling) as well as a
device array to write into are taken.
"""
import numpy as np

from . import _cgen, _ops, _scan_src
# PyCUDA's scan imports these, and programs that import only pycuda.scan use pycuda.gpuarray
# after it.
from . import characterize, compiler, gpuarray  # noqa: F401
from ._kiln import DeviceArray
from .elementwise import compile_source

__all__ = ["InclusiveScanKernel", "ExclusiveScanKernel"]

_MAX_GRID = 2**31 - 1


class _ScanKernel:
    """What the inclusive and exclusive scans share: the module, the tile-sum pass and its
    recursive inclusive scan."""

    exclusive = False

    def __init__(self, dtype, scan_expr, neutral=None, name_prefix="scan", options=None,
                 preamble="", devices=None):
        if not isinstance(scan_expr, str) or not scan_expr.strip():
            raise TypeError("scan_expr must be a C expression of a and b, e.g. 'a+b'")
        if not isinstance(name_prefix, str) or not name_prefix.isidentifier():
            raise ValueError(f"name_prefix must be a C identifier, not {name_prefix!r}")
        self.dtype = np.dtype(dtype)
        _cgen.dtype_to_ctype(self.dtype)  # refuses dtypes with no C type, saying so
        self.scan_expr = scan_expr
        self.neutral = None if neutral is None else str(neutral)
        self.name_prefix = name_prefix
        self.options = list(options or [])
        self.preamble = preamble
        # `devices` is PyOpenCL's (a list of devices to build for); a kiln module loads on
        # any device of a compatible arch, so there is nothing to choose.
        self.devices = devices
        self._block, _, self._tile = _scan_src.shape(self.dtype)
        src = _scan_src.source(self.dtype, scan_expr, self.neutral, name_prefix, preamble)
        self.module = compile_source(src, self.options)
        self._tiles_fn = self.module.get_function(f"{name_prefix}_tiles")
        self._inclusive_fn = self.module.get_function(f"{name_prefix}_inclusive")
        self._exclusive_fn = self.module.get_function(f"{name_prefix}_exclusive")

    def __call__(self, input_ary, output_ary=None, allocator=None, stream=None, queue=None):
        """Scans input_ary into output_ary (a device array of the same shape and dtype, or
        "new" for a fresh one), or in place when it is None; returns the output. `queue` is
        PyOpenCL's name for `stream`."""
        if stream is None:
            stream = queue
        if not isinstance(input_ary, DeviceArray):
            raise TypeError(f"a scan takes a device array (kiln.to_device(...)), not "
                            f"{type(input_ary).__name__}")
        scanned = self._as_scanned(input_ary, "the input")
        if isinstance(output_ary, str):
            if output_ary != "new":
                raise ValueError(f"output_ary is a device array, None or 'new', not "
                                 f"{output_ary!r}")
            output_ary = _new(input_ary.shape, self.dtype, allocator, stream)
        elif output_ary is None:
            output_ary = input_ary
        elif not isinstance(output_ary, DeviceArray):
            raise TypeError(f"output_ary is a device array, None or 'new', not "
                            f"{type(output_ary).__name__}")
        if tuple(output_ary.shape) != tuple(input_ary.shape):
            raise ValueError(f"input and output must have the same shape: {input_ary.shape} "
                             f"and {output_ary.shape}")
        # From here the two as the kernel's dtype; the caller gets its own output back.
        returned = output_ary
        output_ary = scanned if output_ary is input_ary else \
            self._as_scanned(output_ary, "the output")
        input_ary = scanned
        n = input_ary.size
        if n == 0:
            return returned
        src = input_ary
        if not src.flags.c_contiguous:
            src = _ops.ascontiguous(src, stream=stream)
        elif output_ary is not input_ary and _ops._shares_memory(src, output_ary) and \
                not _ops._same_layout(src, output_ary):
            # Blocks write their tiles while others still read theirs: an output that
            # overlaps the input otherwise than exactly would be read after being written.
            src = _ops.ascontiguous(src, stream=stream, force=True)
        dst = output_ary
        if not dst.flags.c_contiguous:
            dst = src if src is not input_ary else _new(src.shape, self.dtype, None, stream)
        self._scan(src, dst, n, self.exclusive, stream)
        if dst is not output_ary:
            _ops.copy(output_ary, dst, stream=stream)
        return returned

    def _as_scanned(self, ary, what):
        """ary as the kernel's dtype: itself, or a view of integers of the other signedness
        and the same width (PyCUDA's scan reads any array's memory as its own dtype; between
        such integers a sum is the same bits, and a comparison in the scan's expression is the
        kernel's dtype's). Any other dtype is refused: its bytes would scan as nonsense."""
        if ary.dtype == self.dtype:
            return ary
        if ary.dtype.kind in "iu" and self.dtype.kind in "iu" and \
                ary.dtype.itemsize == self.dtype.itemsize:
            return ary.view(self.dtype)
        raise TypeError(f"this scan was built for {self.dtype}; {what} is {ary.dtype} (build "
                        f"a kernel for that dtype, or astype())")

    def _scan(self, src, dst, n, exclusive, stream):
        """dst = scan of n contiguous elements of src (dst may be src)."""
        tiles = -(-n // self._tile)
        if tiles > _MAX_GRID:
            raise ValueError(f"{n} elements are more than one scan launch covers")
        carry = 0
        if tiles > 1:
            sums = _new((tiles,), self.dtype, None, stream)
            self._tiles_fn(src, sums, n, block=(self._block, 1, 1), grid=(tiles, 1),
                           stream=stream)
            # The tile sums scanned inclusively: tile b starts from sums[b - 1].
            self._scan(sums, sums, tiles, False, stream)
            carry = sums
        f = self._exclusive_fn if exclusive else self._inclusive_fn
        f(src, dst, carry, n, block=(self._block, 1, 1), grid=(tiles, 1), stream=stream)


class InclusiveScanKernel(_ScanKernel):
    """InclusiveScanKernel(dtype, scan_expr, neutral=None, name_prefix="scan", options=None,
    preamble="", devices=None)

    out[i] = in[0] op in[1] op ... op in[i], where `a op b` is scan_expr. Called as
    knl(input_ary, output_ary=None, allocator=None, stream=None)."""

    exclusive = False


class ExclusiveScanKernel(_ScanKernel):
    """ExclusiveScanKernel(dtype, scan_expr, neutral, name_prefix="scan", options=None,
    preamble="", devices=None)

    out[0] = neutral, out[i] = in[0] op ... op in[i - 1]. Called as knl(input_ary,
    output_ary=None, allocator=None, stream=None)."""

    exclusive = True

    def __init__(self, dtype, scan_expr, neutral, name_prefix="scan", options=None,
                 preamble="", devices=None):
        if neutral is None:
            raise ValueError("an exclusive scan needs neutral, its first output (e.g. '0' "
                             "for a+b)")
        super().__init__(dtype, scan_expr, neutral, name_prefix, options, preamble, devices)


def _new(shape, dtype, allocator, stream):
    if allocator is not None:
        return DeviceArray(tuple(shape), dtype, allocator=allocator)
    from ._kiln import empty
    return empty(tuple(shape), dtype, stream=stream)
