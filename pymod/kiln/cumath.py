"""Elementwise math on device arrays: PyCUDA's `pycuda.cumath`, with NumPy's names too.

    import kiln.cumath as cumath
    y = cumath.sin(x_gpu)                     # a new array
    cumath.exp(x_gpu, out=x_gpu)              # in place
    m, e = cumath.frexp(x_gpu)                # x == m * 2**e

Every function takes `(array, stream=None, out=None)` (fmod, ldexp, arctan2, hypot and
copysign take two operands; the functions of one array take PyCUDA's older second argument,
`out` when it is an array and the stream otherwise, before the keywords) and gives what NumPy's function of the same name gives: its
dtype (`sqrt` of an int32 array is float64, of a float16 array float16), its values to the
rounding of CUDA's math library, and NaN and infinity where NumPy gives them (`log(0)` is
-inf, `sqrt(-1)` NaN). Arrays of any strides are read in place; the result is a new
C-contiguous array, or `out` (real and imag give the array's own `.real` and `.imag`, PyCUDA's
contiguous copies of the parts, unless out is given).

The real functions run the kernels of kiln's array operators (`kiln._ops`); the complex
functions NumPy has and those operators lack, and frexp, modf and ldexp, run kernels
generated here (`_cumath_src`). Each kernel is generated and compiled the first time a
(function, dtypes) pair is called, through kiln's cache.

Where kiln differs from PyCUDA: results have NumPy's dtypes (PyCUDA keeps the input's, and
computes in it); frexp's exponents are int32 (PyCUDA gives them in the input's float dtype);
ldexp takes integer exponents and, as PyCUDA, float ones (truncated toward zero); fmod,
ldexp and the other two-operand functions broadcast as NumPy does and take scalars; `out=`
exists.
"""
import numpy as np

from . import _cgen, _cumath_src, _ops
# PyCUDA's cumath imports these, and programs that import only pycuda.cumath use
# pycuda.gpuarray after it.
from . import characterize, gpuarray  # noqa: F401
from ._kiln import DeviceArray
from .elementwise import ElementwiseKernel

__all__ = [
    # PyCUDA's
    "fabs", "ceil", "floor", "exp", "log", "log10", "sqrt", "sin", "cos", "tan", "asin",
    "acos", "atan", "sinh", "cosh", "tanh", "fmod", "frexp", "ldexp", "modf",
    # NumPy's names and the functions NumPy has besides
    "arcsin", "arccos", "arctan", "asinh", "acosh", "atanh", "arcsinh", "arccosh", "arctanh",
    "exp2", "expm1", "log2", "log1p", "trunc", "rint", "cbrt", "square", "reciprocal",
    "negative", "absolute", "abs", "sign", "signbit", "isnan", "isinf", "isfinite",
    "arctan2", "atan2", "hypot", "copysign", "conj", "conjugate", "real", "imag",
]


def _require_array(x, func):
    if not isinstance(x, DeviceArray):
        raise TypeError(f"cumath.{func} takes a device array (kiln.to_device(...)), not "
                        f"{type(x).__name__}")


def _check_out(out, shape, dtype, func):
    """out, when given, must have the result's shape and take its dtype by same_kind casting
    (NumPy's rule for ufunc outputs)."""
    if out is None:
        return
    if not isinstance(out, DeviceArray):
        raise TypeError(f"cumath.{func}: out must be a device array, not "
                        f"{type(out).__name__}")
    if tuple(out.shape) != tuple(shape):
        raise ValueError(f"cumath.{func}: the result has shape {tuple(shape)}; out has "
                         f"{tuple(out.shape)}")
    if not np.can_cast(dtype, out.dtype, "same_kind"):
        raise TypeError(f"cumath.{func}: cannot cast the result from {np.dtype(dtype)} to "
                        f"out's {out.dtype} with casting rule 'same_kind'")


_KERNELS = {}


def _kernel(key, arguments, operation, dtypes):
    """The ElementwiseKernel generated for key (the first item names the function)."""
    k = _KERNELS.get(key)
    if k is None:
        # The complex formulas cancel near their branch cuts: contracting their products into
        # fused multiply-adds (NVRTC's default) moves results there by thousands of units in
        # the last place; without it they round as the same formulas do on the host.
        complex_ = any(np.dtype(d).kind == "c" for d in dtypes)
        k = _KERNELS[key] = ElementwiseKernel(arguments, operation, f"kiln_{key[0]}",
                                              preamble=_cumath_src.preamble(dtypes),
                                              options=["--fmad=false"] if complex_ else None)
    return k


# ---- One operand -------------------------------------------------------------------------------

def _result_dtype(ufunc, dtype):
    return np.dtype(ufunc.resolve_dtypes((np.dtype(dtype), None))[-1])


class _Like:
    """What a plan reads of an array: its dtype."""

    def __init__(self, dtype):
        self.dtype = np.dtype(dtype)


def unary_kernel(func, dtype, out_dtype=None):
    """The kernel (z, x) of NumPy's func over an array of dtype, stored as out_dtype (NumPy's
    result dtype by default): one of kiln._ops's, or for complex functions those lack, one
    generated here. Compiles it the first time."""
    src = np.dtype(dtype)
    result = _result_dtype(_ops._UNARY[func], src)
    out_dtype = result if out_dtype is None else np.dtype(out_dtype)
    if src.kind == "c" and func in _cumath_src.COMPLEX_FUNCS:
        value = _cumath_src.complex_call(func, _ops.load("x", "x_i", src, src))
        return _kernel((func, src, out_dtype),
                       f"{_cgen.dtype_to_ctype(out_dtype)} *z, {_cgen.dtype_to_ctype(src)} *x",
                       f"z[z_i] = {_ops.store(value, result, out_dtype)}", [src, out_dtype])
    # The operators' own plan (out dtype None) when the result is NumPy's, so both share it.
    return _ops.unary_plan(func, _Like(src), None if out_dtype == result else out_dtype)[0]


def _one_of(given, positional, what, name):
    if given is not None:
        raise TypeError(f"{name}() got {what} twice: as its second argument and as {what}=")
    return positional


def _unary(func, pycuda_name=None):
    """cumath's function of one array for NumPy's ufunc `func`."""
    ufunc = _ops._UNARY[func]
    name = pycuda_name or func

    def f(array, stream_or_out=None, *, stream=None, out=None):
        if isinstance(stream_or_out, DeviceArray):  # PyCUDA's second argument: out or stream
            out = _one_of(out, stream_or_out, "out", name)
        elif stream_or_out is not None:
            stream = _one_of(stream, stream_or_out, "stream", name)
        _require_array(array, name)
        result = _result_dtype(ufunc, array.dtype)
        _check_out(out, array.shape, result, name)
        if out is None:
            out = _ops._result(array, array.shape, result, stream)
        if out.size:
            unary_kernel(func, array.dtype, out.dtype)(out, _ops._operand(array, out, stream),
                                                       stream=stream)
        return out

    f.__name__ = f.__qualname__ = name
    f.__doc__ = (f"{name}(array, stream_or_out=None, *, stream=None, out=None): NumPy's {func} "
                 f"of each element, with its dtype; the second argument is out when it is an "
                 f"array, else the stream.")
    return f


fabs = _unary("fabs")
ceil = _unary("ceil")
floor = _unary("floor")
trunc = _unary("trunc")
rint = _unary("rint")
exp = _unary("exp")
exp2 = _unary("exp2")
expm1 = _unary("expm1")
log = _unary("log")
log2 = _unary("log2")
log10 = _unary("log10")
log1p = _unary("log1p")
sqrt = _unary("sqrt")
cbrt = _unary("cbrt")
square = _unary("square")
reciprocal = _unary("reciprocal")
negative = _unary("negative")
sin = _unary("sin")
cos = _unary("cos")
tan = _unary("tan")
arcsin = _unary("arcsin")
arccos = _unary("arccos")
arctan = _unary("arctan")
asin = _unary("arcsin", "asin")
acos = _unary("arccos", "acos")
atan = _unary("arctan", "atan")
sinh = _unary("sinh")
cosh = _unary("cosh")
tanh = _unary("tanh")
arcsinh = _unary("arcsinh")
arccosh = _unary("arccosh")
arctanh = _unary("arctanh")
asinh = _unary("arcsinh", "asinh")
acosh = _unary("arccosh", "acosh")
atanh = _unary("arctanh", "atanh")
absolute = _unary("absolute")
abs = _unary("absolute", "abs")  # noqa: A001  (NumPy's name)
sign = _unary("sign")
signbit = _unary("signbit")
isnan = _unary("isnan")
isinf = _unary("isinf")
isfinite = _unary("isfinite")
conjugate = _unary("conjugate")
conj = _unary("conjugate", "conj")


def _part(which):
    def f(array, stream=None, out=None):
        _require_array(array, which)
        complex_ = array.dtype.kind == "c"
        if out is None and (stream is None or not complex_):
            return getattr(array, which)
        if not complex_:
            # a real array's real part is itself, its imaginary part zeros
            _check_out(out, array.shape, array.dtype, which)
            return _ops.copy(out, array, stream=stream) if which == "real" else \
                _ops.fill(out, 0, stream=stream)
        view = array._parts()[which == "imag"]
        if out is None:  # the attribute's copy, made on stream as every result here is
            out = _ops._result(array, array.shape, view.dtype, stream)
        else:
            _check_out(out, array.shape, view.dtype, which)
        return _ops.copy(out, view, stream=stream)

    f.__name__ = f.__qualname__ = which
    f.__doc__ = (f"{which}(array, stream=None, out=None): NumPy's {which}: the array's "
                 f".{which} (of a complex array, a new contiguous array of its {which} parts, "
                 "as PyCUDA's; "
                 + ("of a real array, the array itself" if which == "real" else
                    "of a real array, new zeros") + "), or its values written into out.")
    return f


real = _part("real")
imag = _part("imag")


# ---- Two operands ------------------------------------------------------------------------------

def _binary(func, pycuda_name=None):
    name = pycuda_name or func

    def f(x, y, stream=None, out=None):
        if not isinstance(x, DeviceArray) and not isinstance(y, DeviceArray):
            raise TypeError(f"cumath.{name} takes at least one device array")
        if out is not None:
            # Python scalars are weak, as in NumPy: their type, not a dtype, is resolved.
            result = _ops._BINARY[func].resolve_dtypes((_ops._desc(x)[0], _ops._desc(y)[0],
                                                        None))[-1]
            shape = np.broadcast_shapes(*[v.shape for v in (x, y)
                                          if isinstance(v, DeviceArray)])
            _check_out(out, shape, result, name)
        return _ops.binary(func, x, y, out=out, stream=stream)

    f.__name__ = f.__qualname__ = name
    return f


_fmod = _binary("fmod")
arctan2 = _binary("arctan2")
atan2 = _binary("arctan2", "atan2")
hypot = _binary("hypot")
copysign = _binary("copysign")


def fmod(arg, mod, stream=None, out=None):
    """The remainder of arg / mod with the sign of arg (C's fmod; NumPy's fmod), elementwise;
    mod may be an array of arg's shape (or one that broadcasts with it) or a scalar."""
    return _fmod(arg, mod, stream=stream, out=out)


arctan2.__doc__ = "arctan2(y, x, stream=None, out=None): the angle of (x, y), elementwise."
atan2.__doc__ = arctan2.__doc__
hypot.__doc__ = "hypot(x, y, stream=None, out=None): sqrt(x**2 + y**2) without overflow."
copysign.__doc__ = "copysign(x, y, stream=None, out=None): |x| with the sign of y."


# ---- Decomposition and assembly --------------------------------------------------------------

def _float_dtype(dtype, func):
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        raise TypeError(f"cumath.{func} takes a floating-point array (float16, float32 or "
                        f"float64), not {dtype}; convert it with astype() first")
    return dtype


def _require_float(arg, func):
    _require_array(arg, func)
    _float_dtype(arg.dtype, func)


def _pair_out(out, func, like, dtypes, stream):
    """The two output arrays: out's, checked, or new ones made as like's results are."""
    shape = like.shape
    if out is None:
        return [_ops._result(like, shape, d, stream) for d in dtypes]
    if not (isinstance(out, (tuple, list)) and len(out) == 2):
        raise TypeError(f"cumath.{func}: out is a pair of device arrays")
    for o, d in zip(out, dtypes):
        _check_out(o, shape, d, func)
    return list(out)


def frexp_kernel(dtype, sig_dtype=None, ex_dtype=np.int32):
    """The kernel (sig, ex, x) of frexp over an array of float dtype."""
    src = _float_dtype(dtype, "frexp")
    sig_dtype = src if sig_dtype is None else np.dtype(sig_dtype)
    ex_dtype = np.dtype(ex_dtype)
    return _kernel(("frexp", src, sig_dtype, ex_dtype),
                   f"{_cgen.dtype_to_ctype(sig_dtype)} *sig, "
                   f"{_cgen.dtype_to_ctype(ex_dtype)} *ex, {_cgen.dtype_to_ctype(src)} *x",
                   _cumath_src.frexp(src, sig_dtype), [src, sig_dtype, ex_dtype])


def modf_kernel(dtype, frac_dtype=None, int_dtype=None):
    """The kernel (frac, whole, x) of modf over an array of float dtype."""
    src = _float_dtype(dtype, "modf")
    frac_dtype = src if frac_dtype is None else np.dtype(frac_dtype)
    int_dtype = src if int_dtype is None else np.dtype(int_dtype)
    return _kernel(("modf", src, frac_dtype, int_dtype),
                   f"{_cgen.dtype_to_ctype(frac_dtype)} *frac, "
                   f"{_cgen.dtype_to_ctype(int_dtype)} *whole, {_cgen.dtype_to_ctype(src)} *x",
                   _cumath_src.modf(src, frac_dtype, int_dtype), [src, frac_dtype, int_dtype])


def frexp(arg, stream=None, out=None):
    """(significands, exponents) with arg == significands * 2**exponents, significands of
    magnitude in [0.5, 1) (or 0, inf, NaN with exponent 0), as NumPy's frexp: the
    significands of arg's dtype, the exponents int32."""
    _require_float(arg, "frexp")
    sig, ex = _pair_out(out, "frexp", arg, (arg.dtype, np.int32), stream)
    if arg.size:
        x = _ops._operand(_ops._operand(arg, sig, stream), ex, stream)
        frexp_kernel(arg.dtype, sig.dtype, ex.dtype)(sig, ex, x, stream=stream)
    return sig, ex


def modf(arg, stream=None, out=None):
    """(fracpart, intpart): the fractional and integral parts of arg, both with arg's sign
    and dtype (NumPy's modf: modf(-inf) is (-0.0, -inf))."""
    _require_float(arg, "modf")
    frac, whole = _pair_out(out, "modf", arg, (arg.dtype, arg.dtype), stream)
    if arg.size:
        x = _ops._operand(_ops._operand(arg, frac, stream), whole, stream)
        modf_kernel(arg.dtype, frac.dtype, whole.dtype)(frac, whole, x, stream=stream)
    return frac, whole


def ldexp_kernel(sig_dtype, exp_dtype, exp_is_array=True, out_dtype=None):
    """The kernel (z, s, e) of ldexp: s an array of sig_dtype, e an array of exp_dtype (or a
    scalar of it)."""
    sig_dtype, exp_dtype = np.dtype(sig_dtype), np.dtype(exp_dtype)
    if sig_dtype.kind not in "biuf":
        raise TypeError(f"cumath.ldexp takes a real significand, not {sig_dtype}")
    if exp_dtype.kind not in "biuf":
        raise TypeError(f"cumath.ldexp takes integer or float exponents, not {exp_dtype}")
    loop, _, result = (np.dtype(d) for d in
                       np.ldexp.resolve_dtypes((sig_dtype, np.dtype(np.int32), None)))
    out_dtype = result if out_dtype is None else np.dtype(out_dtype)
    e_decl = (f"{_cgen.dtype_to_ctype(exp_dtype)} *e" if exp_is_array
              else f"{_cgen.dtype_to_ctype(exp_dtype)} e")
    return _kernel(("ldexp", sig_dtype, exp_dtype, exp_is_array, out_dtype),
                   f"{_cgen.dtype_to_ctype(out_dtype)} *z, {_cgen.dtype_to_ctype(sig_dtype)} *s, "
                   f"{e_decl}",
                   _cumath_src.ldexp(sig_dtype, exp_dtype, loop, out_dtype, exp_is_array),
                   [sig_dtype, exp_dtype, loop, out_dtype])


def ldexp(significand, exponent, stream=None, out=None):
    """significand * 2**exponent, elementwise: significand a device array, exponent an
    array (integers, or floats as PyCUDA's frexp gives them, truncated toward zero) or an
    int; they broadcast as NumPy's do. The result has NumPy's dtype for an int32 exponent
    (float16 stays float16, integers become float64)."""
    _require_array(significand, "ldexp")
    if significand.dtype.kind not in "biuf":
        raise TypeError(f"cumath.ldexp takes a real significand, not {significand.dtype}")
    exp_is_array = isinstance(exponent, DeviceArray)
    if exp_is_array:
        exp_dtype = exponent.dtype
        if exp_dtype.kind not in "biuf":
            raise TypeError(f"cumath.ldexp takes integer or float exponents, not {exp_dtype}")
        shape = np.broadcast_shapes(significand.shape, exponent.shape)
    elif isinstance(exponent, (int, np.integer)) and not isinstance(exponent, bool):
        exp_dtype = np.dtype(np.int64)
        shape = significand.shape
    else:
        raise TypeError(f"cumath.ldexp takes an exponent that is a device array or an int, "
                        f"not {type(exponent).__name__}")
    result = np.dtype(np.ldexp.resolve_dtypes((significand.dtype, np.dtype(np.int32),
                                               None))[-1])
    _check_out(out, shape, result, "ldexp")
    if out is None:
        out = _ops._result((significand, exponent), shape, result, stream)
    if not out.size:
        return out
    k = ldexp_kernel(significand.dtype, exp_dtype, exp_is_array, out.dtype)
    s = _ops.broadcast_to(_ops._operand(significand, out, stream), shape)
    e = (_ops.broadcast_to(_ops._operand(exponent, out, stream), shape) if exp_is_array
         else np.int64(exponent))
    k(out, s, e, stream=stream)
    return out
