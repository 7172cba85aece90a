"""`pycuda.compyte.array`: strides, flags and dtype promotion of array-like objects (anything
with shape, strides and dtype: a GPUArray, a NumPy array)."""
import numpy as np
from numpy.lib.stride_tricks import as_strided  # PyCUDA's compyte gives NumPy's under this name

__all__ = ["f_contiguous_strides", "c_contiguous_strides", "equal_strides",
           "is_f_contiguous_strides", "is_c_contiguous_strides", "ArrayFlags",
           "get_common_dtype", "as_strided"]


def _contiguous_strides(itemsize, shape):
    """Strides of shape walked first axis fastest; an axis of length 0 or 1 takes the stride
    the next axis would have, as NumPy gives it."""
    strides, step = [], itemsize
    for n in shape:
        strides.append(step)
        step *= max(n, 1)
    return strides


def f_contiguous_strides(itemsize, shape):
    return tuple(_contiguous_strides(itemsize, shape))


def c_contiguous_strides(itemsize, shape):
    return tuple(reversed(_contiguous_strides(itemsize, tuple(reversed(shape)))))


def equal_strides(strides1, strides2, shape):
    """Whether two stride tuples walk an array of shape alike (axes of length 1 aside)."""
    if strides1 == strides2:
        return True
    if len(strides1) != len(strides2) or len(strides1) != len(shape):
        return False
    return all(n == 1 or s1 == s2 for s1, s2, n in zip(strides1, strides2, shape))


def is_f_contiguous_strides(strides, itemsize, shape):
    return equal_strides(strides, f_contiguous_strides(itemsize, shape), shape) or \
        0 in shape


def is_c_contiguous_strides(strides, itemsize, shape):
    return equal_strides(strides, c_contiguous_strides(itemsize, shape), shape) or \
        0 in shape


class ArrayFlags:
    """An array's contiguity: c_contiguous, f_contiguous and forc (either)."""

    def __init__(self, ary):
        self.f_contiguous = is_f_contiguous_strides(ary.strides, ary.dtype.itemsize, ary.shape)
        self.c_contiguous = is_c_contiguous_strides(ary.strides, ary.dtype.itemsize, ary.shape)
        self.forc = self.f_contiguous or self.c_contiguous

    def __repr__(self):
        return (f"  C_CONTIGUOUS : {self.c_contiguous}\n"
                f"  F_CONTIGUOUS : {self.f_contiguous}")


def get_common_dtype(obj1, obj2, allow_double=True):
    """The dtype obj1 and obj2 combine to (arrays, NumPy scalars or Python numbers) by NumPy's
    promotion; with allow_double false, float64 becomes float32 and complex128 complex64."""
    dtype = np.result_type(*(o.dtype if hasattr(o, "dtype") else o for o in (obj1, obj2)))
    if not allow_double:
        dtype = {np.dtype(np.float64): np.dtype(np.float32),
                 np.dtype(np.complex128): np.dtype(np.complex64)}.get(dtype, dtype)
    return dtype
