"""Arrays that compute on the GPU: PyCUDA's `pycuda.gpuarray`.

    import kiln.gpuarray as gpuarray
    a = gpuarray.to_gpu(np.random.randn(4, 4).astype(np.float32))
    b = (2 * a + 1).get()
    total = gpuarray.sum(a).get()

`GPUArray` is kiln's one array type, `kiln.DeviceArray`: what `kiln.to_device`, `kiln.empty`
and `kiln.asarray` give is a GPUArray, and a GPUArray passes to any kiln kernel as its pointer.
Arithmetic, comparisons, reductions and the functions here run kernels kiln generates,
compiles through its cache and launches through its own call path (`kiln._ops`,
`kiln.elementwise`, `kiln.reduction`), with NumPy's type promotion.
"""
import builtins

import numpy as np

from . import _cgen, _ops
from . import characterize  # noqa: F401  (PyCUDA's gpuarray imports it: pycuda.characterize)
# PyCUDA's gpuarray has these modules as attributes, which programs reach through it
# (gpuarray.elementwise.get_arange_kernel, gpuarray.drv.Stream).
from . import driver as drv  # noqa: F401
from . import elementwise  # noqa: F401
from ._kiln import DeviceArray
from .compyte import array as _compyte_array
# PyCUDA's gpuarray holds these under private names, which programs use (gpustats gives an
# array Fortran order with _f_contiguous_strides).
from .compyte.array import as_strided as _as_strided  # noqa: F401
from .compyte.array import c_contiguous_strides as _c_contiguous_strides  # noqa: F401
from .compyte.array import f_contiguous_strides as _f_contiguous_strides  # noqa: F401
from .elementwise import ElementwiseKernel
from .reduction import ReductionKernel

GPUArray = DeviceArray
vec = _cgen.vec

# PyCUDA's GPUArray still has Python 2's names of division, which libraries read off the class
# (getattr(GPUArray, "__div__")).
GPUArray.__div__ = GPUArray.__truediv__
GPUArray.__rdiv__ = GPUArray.__rtruediv__
GPUArray.__idiv__ = GPUArray.__itruediv__

__all__ = ["GPUArray", "vec", "splay", "to_gpu", "to_gpu_async", "empty", "zeros", "ones",
           "empty_like", "zeros_like", "ones_like", "arange", "take", "multi_take",
           "multi_put", "multi_take_put", "concatenate", "stack", "reshape", "transpose",
           "if_positive", "where", "maximum", "minimum", "sum", "subset_sum", "dot",
           "subset_dot", "vdot", "max", "min", "subset_max", "subset_min", "logical_and",
           "logical_or", "logical_not", "any", "all", "real", "imag", "conj"]


def splay(n, dev=None):
    """PyCUDA's launch shape for n elements: ((blocks, 1), (threads, 1, 1))."""
    block = 256
    blocks = builtins.max(1, builtins.min(-(-int(n) // block), 2**31 - 1))
    return (blocks, 1), (block, 1, 1)


# ---- Making arrays ---------------------------------------------------------------------------

def _get_common_dtype(obj1, obj2):
    """The dtype of obj1 combined with obj2 (arrays, NumPy scalars or Python numbers), by
    NumPy's promotion: PyCUDA's name, which programs that extend GPUArray call."""
    return _compyte_array.get_common_dtype(obj1, obj2)


def _compact_strides(a):
    """Strides of a packed array whose axes lie in the order a's strides give them (the
    smallest stride innermost): PyCUDA's helper, which its to_gpu and programs' own GPUArray
    makers pass as strides= to keep a host array's order."""
    strides = [0] * len(a.shape)
    step = a.dtype.itemsize
    for _, n, axis in sorted((a.strides[k], a.shape[k], k) for k in range(len(a.shape))):
        strides[axis] = step
        step *= n
    return strides


def _memcpy_discontig(dst, src, async_=False, stream=None):
    """src's elements into dst's, PyCUDA's helper that libraries built on it call: arrays of the
    same shape and dtype, each a GPUArray or a NumPy array, of any strides (kiln's copy walks
    each as its strides say, so their orders need not agree). With async_, a copy between
    device arrays is queued on stream; one with the host is done when this returns."""
    for name, a in (("src", src), ("dst", dst)):
        if not isinstance(a, (DeviceArray, np.ndarray)):
            raise TypeError(f"{name} must be GPUArray or ndarray")
    if src.shape != dst.shape:
        raise ValueError("src and dst must be same shape")
    if src.dtype != dst.dtype:
        raise TypeError("src and dst must have same dtype")
    stream = stream if async_ else None
    if isinstance(dst, np.ndarray):
        dst[...] = src if isinstance(src, np.ndarray) else src.get()
        return
    if isinstance(src, np.ndarray):
        if dst.flags.c_contiguous:
            dst.set(np.ascontiguousarray(src))
            return
        src = to_gpu(np.ascontiguousarray(src))
    _ops.copy(dst, src, stream=stream)


def _like_for_copy(ary, allocator):
    """A new GPUArray to copy `ary` into (a NumPy array, or a GPUArray as PyCUDA's to_gpu
    takes too), and the source to copy from. As PyCUDA's to_gpu, the new array is packed with
    its axes in the order `ary`'s strides give them (_compact_strides): a transposed array's
    copy keeps the transposed layout, which a kernel given its memory reads as under PyCUDA.
    A host array that is neither C- nor Fortran-contiguous is packed so on the host first."""
    if not isinstance(ary, DeviceArray):
        ary = np.asarray(ary)
        if not (ary.flags.c_contiguous or ary.flags.f_contiguous):
            packed = np.empty(ary.shape, ary.dtype)
            packed = np.lib.stride_tricks.as_strided(packed, strides=_compact_strides(ary))
            packed[...] = ary
            return DeviceArray(ary.shape, ary.dtype, allocator=allocator,
                               strides=packed.strides), packed
    order = "F" if ary.flags.f_contiguous and not ary.flags.c_contiguous else "C"
    return DeviceArray(ary.shape, ary.dtype, allocator=allocator, order=order), ary


def to_gpu(ary, allocator=None):
    """A GPUArray holding a copy of `ary`: a NumPy array, or a GPUArray (copied on the device,
    as PyCUDA's to_gpu does)."""
    result, ary = _like_for_copy(ary, allocator)
    result.set(ary)
    return result


def to_gpu_async(ary, allocator=None, stream=None):
    """The same, with the copy queued on `stream` (page-locked `ary` copies without
    blocking)."""
    result, ary = _like_for_copy(ary, allocator)
    result.set(ary, async_=True, stream=stream)
    return result


def empty(shape, dtype=np.float64, allocator=None, base=None, gpudata=None, strides=None,
          order="C"):
    """An uninitialized GPUArray: the GPUArray constructor, whose synonym it is in PyCUDA, with
    its arguments in its order (gpudata=, strides= and base= make a view of memory there)."""
    return DeviceArray(shape, dtype, allocator=allocator, base=base, gpudata=gpudata,
                       strides=strides, order=order)


def zeros(shape, dtype=np.float64, allocator=None, order="C"):
    """A GPUArray of zeros."""
    a = empty(shape, dtype, allocator, order=order)
    _ops.fill(a, 0)
    return a


def ones(shape, dtype=np.float64, allocator=None, order="C"):
    """A GPUArray of ones."""
    a = empty(shape, dtype, allocator, order=order)
    _ops.fill(a, 1)
    return a


def _like_order(other, order):
    """NumPy's "K" and "A" keep a Fortran-ordered array's order (and give C order otherwise)."""
    if order in ("K", "A"):
        return "F" if other.flags.f_contiguous and not other.flags.c_contiguous else "C"
    return order


def empty_like(other_ary, dtype=None, order="K"):
    """An uninitialized GPUArray of other_ary's shape (and dtype, unless given), its memory
    from other_ary's allocator, as PyCUDA's (kiln's pool when it has none)."""
    return DeviceArray(other_ary.shape, other_ary.dtype if dtype is None else dtype,
                       allocator=getattr(other_ary, "allocator", None),
                       order=_like_order(other_ary, order))


def zeros_like(other_ary, dtype=None, order="K"):
    a = empty_like(other_ary, dtype, order)
    _ops.fill(a, 0)
    return a


def ones_like(other_ary, dtype=None, order="K"):
    a = empty_like(other_ary, dtype, order)
    _ops.fill(a, 1)
    return a


_ARANGE = {}


def arange(*args, dtype=None, stream=None, **kwargs):
    """arange([start,] stop[, step], dtype=None, stream=None): NumPy's arange on the GPU
    (its length, dtype and values)."""
    names = ("start", "stop", "step")
    # A dtype last among the positions, as PyCUDA's takes one (np.dtype(np.float32)) and
    # NumPy's fourth (arange(0, 5, 1, np.float32)).
    if args and dtype is None and (isinstance(args[-1], np.dtype) or len(args) == 4):
        args, dtype = args[:-1], args[-1]
    if len(args) > 3:
        raise TypeError(f"arange() takes at most 3 positional arguments ({len(args)} given)")
    values = {"stop": args[0]} if len(args) == 1 else dict(zip(names, args))
    for k in list(kwargs):
        if k not in names:
            raise TypeError(f"arange() got an unexpected keyword argument {k!r}")
        values[k] = kwargs.pop(k)
    start, stop, step = values.get("start", 0), values.get("stop"), values.get("step", 1)
    if stop is None:
        raise TypeError("arange() needs a stop")
    if step == 0:
        raise ValueError("arange() step must not be zero")
    host = np.arange(start, stop, step, dtype=dtype)  # NumPy's length and dtype, for free
    result = DeviceArray(host.shape, host.dtype)
    n = host.size
    if n == 0:
        return result
    dt = host.dtype
    k = _ARANGE.get(dt)
    if k is None:
        ct = _ops.compute_ctype(dt)
        wire = "double" if dt.kind in "fc" else "long"
        k = _ARANGE[dt] = ElementwiseKernel(
            f"{_cgen.dtype_to_ctype(dt)} *z, {wire} start, {wire} step",
            f"z[z_i] = {_ops.store(f'({ct})(start + ({wire})i * step)', dt, dt)}",
            "kiln_arange", preamble=_ops._preamble([dt]))
    if dt.kind in "fc":
        k(result, float(np.real(start)), float(np.real(step)), stream=stream)
    else:
        k(result, int(start), int(step), stream=stream)
    return result


# ---- Indexing --------------------------------------------------------------------------------

_TAKE = {}


def _memory_order(a, stream):
    """a's elements along one axis as PyCUDA's take and put index them, by their place in
    memory: a view of an array contiguous in C or Fortran order (a Fortran-ordered matrix's
    columns one after another, as a program laying out cuBLAS's band storage counts on); a
    copy in C order of a strided view, whose memory holds other elements between its own."""
    # DeviceArray's own reshape: a subclass's could copy, and a put would write the copy.
    if a.flags.c_contiguous:
        return DeviceArray.reshape(a, a.size)
    if a.flags.f_contiguous:
        return DeviceArray.reshape(a, a.size, order="F")
    return DeviceArray.reshape(_ops.ascontiguous(a, stream=stream), a.size)


def take(a, indices, out=None, stream=None, mode="raise"):
    """`out[i]` = the element of a at indices[i], counting a's elements in the order of its
    memory as PyCUDA's (C order for a strided view). Out-of-range indices raise
    IndexError (mode="raise", checked on the device before anything is read), wrap around
    (mode="wrap") or are clipped (mode="clip"), as in NumPy."""
    if not isinstance(indices, DeviceArray):
        indices = to_gpu(np.asarray(indices))
    if indices.dtype.kind not in "iu":
        raise TypeError(f"indices must be integers, not {indices.dtype}")
    if mode not in ("raise", "wrap", "clip"):
        raise ValueError("mode is 'raise', 'wrap' or 'clip'")
    allocator = a._allocator  # the result's memory, as PyCUDA's take makes it
    a = _memory_order(a, stream)
    if out is None:
        out = DeviceArray(indices.shape, a.dtype, allocator=allocator)
    elif out.shape != indices.shape or out.dtype != a.dtype:
        raise ValueError(f"out must have shape {indices.shape} and dtype {a.dtype}")
    if out.size == 0:
        return out
    if a.size == 0:
        raise IndexError("cannot take from an empty array")
    key = (a.dtype, indices.dtype, out.dtype, mode)
    k = _TAKE.get(key)
    if k is None:
        it = _cgen.dtype_to_ctype(indices.dtype)
        fix = {"raise": "if (j < 0) j += n_a; if (j < 0 || j >= n_a) { *bad = 1; return; }",
               "wrap": "j %= n_a; if (j < 0) j += n_a;",
               "clip": "j = j < 0 ? 0 : j >= n_a ? n_a - 1 : j;"}[mode]
        k = _TAKE[key] = ElementwiseKernel(
            f"{_cgen.dtype_to_ctype(out.dtype)} *z, {_cgen.dtype_to_ctype(a.dtype)} *a, "
            f"{it} *idx, long n_a, int *bad",
            f"long long j = (long long)idx[idx_i]; {fix} z[z_i] = a[j]", "kiln_take",
            preamble=_ops._preamble([a.dtype]))
    bad = DeviceArray((1,), np.int32)
    _ops.fill(bad, 0, stream=stream)
    k(out, a, indices, a.size, bad, stream=stream)
    if mode == "raise" and int(bad.get(stream=stream)[0]):
        raise IndexError(f"an index is out of bounds for an array of size {a.size}")
    return out


def _one_dtype(arrays, what):
    """The dtype all of arrays share (PyCUDA's single_valued): the multi_ calls make one
    kernel for them all."""
    dtypes = {a.dtype for a in arrays}
    if len(dtypes) != 1:
        raise TypeError(f"{what} must all have one dtype, not {sorted(map(str, dtypes))}")
    return dtypes.pop()


def _multi_out(arrays, out, dest_shape, what):
    """The arrays a multi_ call writes: out as given, checked as PyCUDA checks it, or new ones
    of dest_shape with the first array's allocator."""
    dtype = _one_dtype(arrays, what)
    if out is None:
        if dest_shape is None:
            raise TypeError("give dest_shape (the shape of each result) or out")
        return [DeviceArray(dest_shape, dtype, allocator=arrays[0]._allocator)
                for _ in arrays]
    out = list(out)
    if len(out) != len(arrays):
        raise ValueError("out and arrays must have the same length")
    if _one_dtype(out, "out") != dtype:
        raise TypeError("arrays and out must have the same dtype")
    return out


def _as_indices(indices, what):
    if not isinstance(indices, DeviceArray):
        indices = to_gpu(np.asarray(indices))
    if indices.dtype.kind not in "iu":
        raise TypeError(f"{what} must be integers, not {indices.dtype}")
    if indices.ndim != 1:
        raise ValueError(f"{what} must be 1D")
    return indices


def multi_take(arrays, indices, out=None, stream=None):
    """[take(a, indices) for a in arrays] (PyCUDA's): the arrays share one dtype."""
    arrays = list(arrays)
    if not arrays:
        return []
    _one_dtype(arrays, "arrays")
    indices = _as_indices(indices, "indices")
    if out is not None and len(out) != len(arrays):
        raise ValueError("out and arrays must have the same length")
    outs = out if out is not None else [None] * len(arrays)
    return [take(a, indices, out=o, stream=stream) for a, o in zip(arrays, outs)]


def multi_put(arrays, dest_indices, dest_shape=None, out=None, stream=None):
    """out[k][dest_indices[i]] = arrays[k][i] (PyCUDA's), for every i of dest_indices: an
    array with fewer values is refused, and an index out of range is an IndexError, where
    PyCUDA reads and writes there unchecked."""
    arrays = list(arrays)
    if not arrays:
        return []
    dest_indices = _as_indices(dest_indices, "dest_indices")
    out = _multi_out(arrays, out, dest_shape, "arrays")
    for a in arrays:  # the first dest_indices.size values of each are put, as PyCUDA's
        if a.size < dest_indices.size:
            raise ValueError(f"each array has a value for every index: {dest_indices.size} "
                             f"indices, an array of {a.size}")
    for a, o in zip(arrays, out):
        _put(o, dest_indices, a, stream)
    return out


def multi_take_put(arrays, dest_indices, src_indices, dest_shape=None, out=None,
                   stream=None, src_offsets=None):
    """out[k][dest_indices[i]] = arrays[k][src_indices[i] + src_offsets[k]] (PyCUDA's)."""
    arrays = list(arrays)
    if not arrays:
        return []
    dest_indices = _as_indices(dest_indices, "dest_indices")
    src_indices = _as_indices(src_indices, "src_indices")
    out = _multi_out(arrays, out, dest_shape, "arrays")
    if src_indices.dtype != dest_indices.dtype:
        raise TypeError("src_indices and dest_indices must have the same dtype")
    if src_indices.shape != dest_indices.shape:
        raise ValueError("src_indices and dest_indices must have the same shape")
    if src_offsets is not None and len(src_offsets) != len(arrays):
        raise ValueError("src_offsets must have one offset for each array")
    taken = []
    for k, a in enumerate(arrays):
        idx = src_indices
        if src_offsets is not None and src_offsets[k]:
            idx = _ops.binary("add", src_indices, int(src_offsets[k]))
        taken.append(take(a, idx, stream=stream))
    return multi_put(taken, dest_indices, out=out, stream=stream)


_PUT = {}


def _put(dst, indices, values, stream):
    dst_flat = _memory_order(dst, stream)  # a view, or a copy written back after
    values = _memory_order(values, stream)
    key = (dst.dtype, indices.dtype, values.dtype)
    k = _PUT.get(key)
    if k is None:
        # The indices first: the first array gives the kernel its range, one i per value put,
        # however many elements the destination has.
        k = _PUT[key] = ElementwiseKernel(
            f"{_cgen.dtype_to_ctype(indices.dtype)} *idx, {_cgen.dtype_to_ctype(dst.dtype)} *z, "
            f"{_cgen.dtype_to_ctype(values.dtype)} *v, long n_z, int *bad",
            "long long j = (long long)idx[idx_i]; if (j < 0) j += n_z; "
            "if (j < 0 || j >= n_z) { *bad = 1; return; } "
            f"z[j] = {_ops.store(_ops.load('v', 'v_i', values.dtype, values.dtype), values.dtype, dst.dtype)}",
            "kiln_put", preamble=_ops._preamble([dst.dtype, values.dtype]))
    bad = DeviceArray((1,), np.int32)
    _ops.fill(bad, 0, stream=stream)
    k(indices, dst_flat, values, dst.size, bad, stream=stream)
    if int(bad.get(stream=stream)[0]):
        raise IndexError(f"an index is out of bounds for an array of size {dst.size}")
    if not (dst.flags.c_contiguous or dst.flags.f_contiguous):
        _ops.copy(dst, dst_flat.reshape(dst.shape), stream=stream)


# ---- Joining and reshaping -------------------------------------------------------------------

def _first_allocator(arrays, allocator):
    """The allocator of a result made of arrays, as PyCUDA picks it: the one given, else the
    first array's that has one (None: kiln's pool)."""
    return allocator or next((a._allocator for a in arrays
                              if isinstance(a, DeviceArray) and a._allocator), None)


def concatenate(arrays, axis=0, allocator=None):
    """NumPy's concatenate of GPUArrays along an existing axis."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to concatenate")
    nd = arrays[0].ndim
    if nd == 0:
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        raise np.exceptions.AxisError(axis, nd) if hasattr(np, "exceptions") else \
            ValueError(f"axis {axis} is out of bounds for {nd} dimensions")
    for a in arrays[1:]:
        if a.ndim != nd or builtins.any(a.shape[d] != arrays[0].shape[d]
                                        for d in range(nd) if d != axis):
            raise ValueError(f"all the input array dimensions except for the concatenation "
                             f"axis must match exactly: {arrays[0].shape} and {a.shape}")
    dtype = np.result_type(*[a.dtype for a in arrays])
    shape = list(arrays[0].shape)
    shape[axis] = builtins.sum(a.shape[axis] for a in arrays)
    out = DeviceArray(tuple(shape), dtype, allocator=_first_allocator(arrays, allocator))
    at = 0
    for a in arrays:
        n = a.shape[axis]
        if n:
            index = (slice(None),) * axis + (slice(at, at + n),)
            _ops.copy(out[index], a)
        at += n
    return out


def stack(arrays, axis=0, allocator=None):
    """NumPy's stack of GPUArrays of one shape along a new axis, laid out as PyCUDA's: C order
    along a new first axis, Fortran order along any other."""
    arrays = list(arrays)
    if not arrays:
        raise ValueError("need at least one array to stack")
    shape = arrays[0].shape
    if builtins.any(a.shape != shape for a in arrays):
        raise ValueError("all input arrays must have the same shape")
    nd = len(shape) + 1
    axis = axis + nd if axis < 0 else axis
    if not 0 <= axis < nd:
        raise ValueError(f"axis {axis} is out of bounds for {nd} dimensions")
    out = DeviceArray((*shape[:axis], len(arrays), *shape[axis:]),
                      np.result_type(*[a.dtype for a in arrays]),
                      allocator=_first_allocator(arrays, allocator),
                      order="C" if axis == 0 else "F")
    if out.size:
        for i, a in enumerate(arrays):
            _ops.copy(out[(slice(None),) * axis + (i,)], a)
    return out


def reshape(a, *shape, **kwargs):
    """a.reshape(*shape, order="C"): the shape as one tuple or as ints, as PyCUDA's."""
    return a.reshape(*shape, **kwargs)


def transpose(a, axes=None):
    """a.transpose(axes)."""
    return a.transpose(axes) if axes is not None else a.transpose()


# ---- Choosing --------------------------------------------------------------------------------

_WHERE = {}


def where(criterion, then_, else_, out=None, stream=None):
    """NumPy's where: then_ where criterion is true (nonzero), else else_; arrays broadcast,
    then_ and else_ may be scalars. (PyCUDA's names; NumPy's x and y.)"""
    x, y = then_, else_
    ops = [v for v in (criterion, x, y) if isinstance(v, DeviceArray)]
    if not isinstance(criterion, DeviceArray):
        raise TypeError("where() takes the criterion as a device array")
    # NumPy's result type: arrays' and NumPy scalars' dtypes, Python scalars weak.
    dtype = np.result_type(*(v.dtype if isinstance(v, DeviceArray) else v for v in (x, y)))
    shape = np.broadcast_shapes(*[v.shape for v in ops])
    if out is None:
        # then_'s allocator, as PyCUDA's empty_like(then_); else_'s or criterion's where then_
        # is a scalar
        allocator = x._allocator if isinstance(x, DeviceArray) else \
            _first_allocator([y, criterion], None)
        out = _ops._plain_result(shape, dtype, allocator, stream, _ops._order(ops, shape))
    if out.size == 0:
        return out
    args, decl, vals = [out], [f"{_cgen.dtype_to_ctype(out.dtype)} *z"], []
    for name, v in (("c", criterion), ("x", x), ("y", y)):
        if isinstance(v, DeviceArray):
            args.append(_ops.broadcast_to(v, shape))
            decl.append(f"{_cgen.dtype_to_ctype(v.dtype)} *{name}")
            vals.append(_ops.load(name, f"{name}_i", v.dtype, dtype if name != "c"
                                  else np.bool_))
        else:
            args.append(np.asarray(v, dtype)[()])
            decl.append(f"{_cgen.dtype_to_ctype(dtype)} {name}")
            vals.append(name if dtype != np.float16 else f"__half2float({name})")
    key = tuple(d for d in decl) + (str(dtype),)
    k = _WHERE.get(key)
    if k is None:
        k = _WHERE[key] = ElementwiseKernel(
            ", ".join(decl),
            f"z[z_i] = {_ops.store(f'({vals[0]}) ? {vals[1]} : {vals[2]}', dtype, out.dtype)}",
            "kiln_where", preamble=_ops._preamble([dtype] + [v.dtype for v in ops]))
    k(*args, stream=stream)
    return out


def if_positive(criterion, then_, else_, out=None, stream=None):
    """PyCUDA's if_positive: then_[i] where criterion[i] > 0, else else_[i]."""
    positive = _ops.binary("greater", criterion, 0, stream=stream)
    return where(positive, then_, else_, out=out, stream=stream)


def maximum(a, b, out=None, stream=None):
    """The elementwise maximum (NaN when either is NaN, as NumPy's)."""
    return _ops.binary("maximum", a, b, out=out, stream=stream)


def minimum(a, b, out=None, stream=None):
    """The elementwise minimum (NaN when either is NaN, as NumPy's)."""
    return _ops.binary("minimum", a, b, out=out, stream=stream)


def _logical(op, operands, out, allocator, stream):
    """NumPy's logical op of arrays and scalars as a bool array (0-d when all are scalars), in
    memory from allocator when given and no out is."""
    arrays = [v for v in operands if isinstance(v, DeviceArray)]
    if out is None and (allocator is not None or not arrays):
        shape = np.broadcast_shapes(*[v.shape for v in arrays]) if arrays else ()
        out = DeviceArray(shape, np.bool_, allocator=allocator, order=_ops._order(arrays, shape))
    if not arrays:  # PyCUDA's scalars-only form: the host's answer in a 0-d array
        out.fill(getattr(np, op)(*operands), stream=stream)
        return out
    if len(operands) == 1:
        return _ops.unary(op, operands[0], out=out, stream=stream)
    return _ops.binary(op, *operands, out=out, stream=stream)


def logical_and(x1, x2, /, out=None, *, allocator=None, stream=None):
    """NumPy's logical_and of arrays or scalars, as a bool array."""
    return _logical("logical_and", (x1, x2), out, allocator, stream)


def logical_or(x1, x2, /, out=None, *, allocator=None, stream=None):
    """NumPy's logical_or of arrays or scalars, as a bool array."""
    return _logical("logical_or", (x1, x2), out, allocator, stream)


def logical_not(x, /, out=None, *, allocator=None, stream=None):
    """NumPy's logical_not of an array or a scalar, as a bool array."""
    return _logical("logical_not", (x,), out, allocator, stream)


def real(a):
    return a.real


def imag(a):
    return a.imag


def conj(a, stream=None):
    return _ops.unary("conjugate", a, stream=stream)


# ---- Reductions ------------------------------------------------------------------------------

def sum(a, dtype=None, stream=None, allocator=None):  # noqa: A001
    """The sum of a's elements as a 0-d GPUArray, of NumPy's sum dtype unless given."""
    if dtype is None and allocator is None:
        k = _ops.SUM_KERNELS.get(a.dtype)  # the kernel itself, after the first sum of a dtype
        if k is not None:
            return k(a) if stream is None else k(a, stream=stream)
    return _ops.reduce("sum", a, dtype=dtype, stream=stream, allocator=allocator)


def subset_sum(subset, a, dtype=None, stream=None, allocator=None):
    """The sum of a[subset[i]] over i."""
    return _ops.reduce("sum", a, dtype=dtype, stream=stream, allocator=allocator,
                       subset=subset)


def max(a, stream=None):  # noqa: A001
    """The largest element as a 0-d GPUArray (NaN when there is one, as NumPy's)."""
    return _ops.reduce("max", a, stream=stream)


def min(a, stream=None):  # noqa: A001
    """The smallest element as a 0-d GPUArray (NaN when there is one, as NumPy's)."""
    return _ops.reduce("min", a, stream=stream)


def subset_max(subset, a, stream=None):
    return _ops.reduce("max", a, stream=stream, subset=subset)


def subset_min(subset, a, stream=None):
    return _ops.reduce("min", a, stream=stream, subset=subset)


def dot(a, b, dtype=None, stream=None, allocator=None):
    """sum(a * b) over all elements, as a 0-d GPUArray (PyCUDA's dot of flat arrays)."""
    return _ops.dot(a, b, dtype=dtype, stream=stream, allocator=allocator)


def vdot(a, b, dtype=None, stream=None, allocator=None):
    """sum(conj(a) * b) over all elements."""
    return _ops.dot(a, b, dtype=dtype, stream=stream, allocator=allocator, conjugate=True)


def subset_dot(subset, a, b, dtype=None, stream=None, allocator=None):
    """sum(a[subset[i]] * b[subset[i]]) over i."""
    return _ops.dot(a, b, dtype=dtype, stream=stream, allocator=allocator, subset=subset)


def any(a, stream=None, allocator=None):  # noqa: A001
    """True (a 0-d bool GPUArray) when some element is nonzero."""
    return _ops.reduce("any", a, stream=stream, allocator=allocator)


def all(a, stream=None, allocator=None):  # noqa: A001
    """True (a 0-d bool GPUArray) when every element is nonzero."""
    return _ops.reduce("all", a, stream=stream, allocator=allocator)
