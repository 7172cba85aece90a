"""The kernels behind array arithmetic: one generated elementwise kernel per (operation,
operand dtypes), with NumPy's type promotion (NEP 50: Python scalars are weak) taken from
NumPy itself (`ufunc.resolve_dtypes`), so `x * 2.5` has the dtype NumPy would give it.

The C side of the array type (`arrayops.c`) keeps a table from (operation, operand kinds) to
the plan this module makes, and launches the plan's kernel itself on the common case
(contiguous arrays of one shape, or an array and a scalar); everything else (broadcasting,
strided views, `out=`, streams) comes here, to `binary()` and `unary()`.
"""
import re

import numpy as np

from . import _cgen, _log
from ._kiln import DeviceArray
from .compyte import array as _compyte_array

# ---- C spelling of values --------------------------------------------------------------------


def compute_ctype(dtype):
    """The C type a kernel computes in for dtype: float16 is computed in float."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return "float"
    if dtype.kind == "c":
        return "kiln::complex<float>" if dtype == np.complex64 else "kiln::complex<double>"
    return _cgen.dtype_to_ctype(dtype)


def convert(expr, src, dst):
    """C for `expr`, a value computed as dtype src (see compute_ctype), as a value of dst's
    compute type. Complex to real keeps the real part, as NumPy's astype does."""
    src, dst = np.dtype(src), np.dtype(dst)
    if src == dst or (src.kind == dst.kind and compute_ctype(src) == compute_ctype(dst)):
        return f"({expr})"
    t = compute_ctype(dst)
    if dst.kind == "c":
        if src.kind == "c":
            return f"{t}({expr})"
        part = "float" if dst == np.complex64 else "double"
        return f"{t}(({part})({expr}))"
    if src.kind == "c":
        if dst.kind == "b":
            return f"(({expr}).re != 0 || ({expr}).im != 0)"
        return f"({t})(({expr}).re)"
    if dst.kind == "b":
        return f"(({expr}) != 0)"
    return f"({t})({expr})"


def load(name, index, dtype, to):
    """C reading element `index` of array `name` (of dtype) as a value of `to`'s compute type."""
    dtype = np.dtype(dtype)
    raw = f"{name}[{index}]"
    if dtype == np.float16:
        raw = f"__half2float({raw})"
    return convert(raw, dtype, to)


def store(expr, src, dtype):
    """C of a value computed as src, as an element of dtype to store."""
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        return f"__float2half({convert(expr, src, np.float32)})"
    return convert(expr, src, dtype)


# ---- Helper functions the operations use -----------------------------------------------------

HELPERS = r"""
template <typename T> __device__ __forceinline__ T _kiln_floordiv_i(T a, T b) {
  if (b == 0) return 0;
  if (T(-1) > T(0)) return a / b; /* unsigned */
  if (b == T(-1)) return T(0) - a;  /* wraps at the minimum, as NumPy's does */
  T q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q -= 1;
  return q;
}
template <typename T> __device__ __forceinline__ T _kiln_mod_i(T a, T b) {
  if (b == 0) return 0;
  if (T(-1) > T(0)) return a % b;
  if (b == T(-1)) return 0;
  T r = a % b;
  if (r != 0 && ((r < 0) != (b < 0))) r += b;
  return r;
}
template <typename T> __device__ __forceinline__ T _kiln_fmod_i(T a, T b) {
  if (b == 0) return 0;
  if (T(-1) < T(0) && b == T(-1)) return 0;
  return a % b;
}
/* NumPy's npy_divmod for floats: the floor of the quotient and a remainder with the sign of
 * the divisor. */
template <typename T> __device__ __forceinline__ T _kiln_mod_f(T a, T b) {
  T mod = fmod(a, b);
  if (b == T(0)) return mod;
  if (mod != T(0)) {
    if ((b < T(0)) != (mod < T(0))) mod += b;
  } else {
    mod = copysign(T(0), b);
  }
  return mod;
}
template <typename T> __device__ __forceinline__ T _kiln_floordiv_f(T a, T b) {
  if (b == T(0)) return a / b;
  T mod = fmod(a, b);
  T div = (a - mod) / b;
  if (mod != T(0) && ((b < T(0)) != (mod < T(0)))) div -= T(1);
  T floordiv;
  if (div != T(0)) {
    floordiv = floor(div);
    if (div - floordiv > T(0.5)) floordiv += T(1);
  } else {
    floordiv = copysign(T(0), a / b);
  }
  return floordiv;
}
/* Integer powers by squaring; a negative exponent gives what 1/a**-b truncates to. */
template <typename T> __device__ __forceinline__ T _kiln_ipow(T a, T b) {
  if (T(-1) < T(0) && b < T(0)) return a == T(1) ? T(1) : a == T(-1) ? ((b & 1) ? T(-1) : T(1)) : T(0);
  T r = 1;
  while (b) { if (b & 1) r *= a; a *= a; b >>= 1; }
  return r;
}
/* Shifts by the width or more give 0 (or -1 for a negative value shifted right), as NumPy. */
template <typename T> __device__ __forceinline__ T _kiln_shl(T a, T b) {
  return (b < T(0) || b >= T(sizeof(T) * 8)) ? T(0) : T(a << b);
}
template <typename T> __device__ __forceinline__ T _kiln_shr(T a, T b) {
  if (b < T(0) || b >= T(sizeof(T) * 8)) return a < T(0) ? T(-1) : T(0);
  return T(a >> b);
}
/* Maximum and minimum that return NaN when either side is NaN, as NumPy's do. */
template <typename T> __device__ __forceinline__ T _kiln_max(T a, T b) { return (a != a || a >= b) ? a : b; }
template <typename T> __device__ __forceinline__ T _kiln_min(T a, T b) { return (a != a || a <= b) ? a : b; }
template <typename T> __device__ __forceinline__ T _kiln_sign(T a) { return a > T(0) ? T(1) : a < T(0) ? T(-1) : a; }
/* a < b for one signed and one unsigned integer, as numbers. */
template <typename A, typename B> __device__ __forceinline__ bool _kiln_mlt(A a, B b) {
  if constexpr (A(-1) < A(0)) return a < A(0) || (unsigned long long)a < (unsigned long long)b;
  else return b >= B(0) && (unsigned long long)a < (unsigned long long)b;
}
"""

# Only kernels over complex numbers include these (and the complex header they need).
COMPLEX_HELPERS = r"""
/* Complex numbers order by real part, then imaginary part, as in NumPy. */
template <typename T> __device__ __forceinline__ bool _kiln_lt(const kiln::complex<T> &a, const kiln::complex<T> &b) { return a.re < b.re || (a.re == b.re && a.im < b.im); }
template <typename T> __device__ __forceinline__ bool _kiln_le(const kiln::complex<T> &a, const kiln::complex<T> &b) { return a.re < b.re || (a.re == b.re && a.im <= b.im); }
template <typename T> __device__ __forceinline__ bool _kiln_isnan(const kiln::complex<T> &a) { return a.re != a.re || a.im != a.im; }
template <typename T> __device__ __forceinline__ kiln::complex<T> _kiln_cmax(const kiln::complex<T> &a, const kiln::complex<T> &b) { return (_kiln_isnan(a) || !_kiln_lt(a, b)) ? a : b; }
template <typename T> __device__ __forceinline__ kiln::complex<T> _kiln_cmin(const kiln::complex<T> &a, const kiln::complex<T> &b) { return (_kiln_isnan(a) || _kiln_le(a, b)) ? a : b; }
/* fmax and fmin take the other side when one is NaN. */
template <typename T> __device__ __forceinline__ kiln::complex<T> _kiln_cfmax(const kiln::complex<T> &a, const kiln::complex<T> &b) { return _kiln_isnan(b) ? a : _kiln_isnan(a) ? b : _kiln_cmax(a, b); }
template <typename T> __device__ __forceinline__ kiln::complex<T> _kiln_cfmin(const kiln::complex<T> &a, const kiln::complex<T> &b) { return _kiln_isnan(b) ? a : _kiln_isnan(a) ? b : _kiln_cmin(a, b); }
"""

# ---- Binary operations -----------------------------------------------------------------------

# name: (NumPy ufunc, C of x and y computed in the loop dtype L; per kind of L)
_BINARY = {
    "add": np.add, "subtract": np.subtract, "multiply": np.multiply,
    "true_divide": np.true_divide, "floor_divide": np.floor_divide,
    "remainder": np.remainder, "power": np.power, "fmod": np.fmod,
    "bitwise_and": np.bitwise_and, "bitwise_or": np.bitwise_or, "bitwise_xor": np.bitwise_xor,
    "left_shift": np.left_shift, "right_shift": np.right_shift,
    "equal": np.equal, "not_equal": np.not_equal, "less": np.less,
    "less_equal": np.less_equal, "greater": np.greater, "greater_equal": np.greater_equal,
    "maximum": np.maximum, "minimum": np.minimum, "fmax": np.fmax, "fmin": np.fmin,
    "logical_and": np.logical_and, "logical_or": np.logical_or, "logical_xor": np.logical_xor,
    "arctan2": np.arctan2, "hypot": np.hypot, "copysign": np.copysign, "ldexp": np.ldexp,
}


def _binary_expr(op, loop):
    """C computing op on x and y, both of the loop dtype (`loop` is the ufunc's loop dtypes)."""
    k = np.dtype(loop[0]).kind
    cplx = k == "c"
    if op == "add":
        return "(x || y)" if k == "b" else "(x + y)"
    if op == "subtract":
        return "(x - y)"
    if op == "multiply":
        return "(x && y)" if k == "b" else "(x * y)"
    if op == "true_divide":
        return "(x / y)"
    if op == "floor_divide":
        return "_kiln_floordiv_i(x, y)" if k in "iu" else "_kiln_floordiv_f(x, y)"
    if op == "remainder":
        return "_kiln_mod_i(x, y)" if k in "iu" else "_kiln_mod_f(x, y)"
    if op == "fmod":
        return "_kiln_fmod_i(x, y)" if k in "iu" else "fmod(x, y)"
    if op == "power":
        if k == "b":
            return "(x || !y)"
        return "_kiln_ipow(x, y)" if k in "iu" else ("kiln::pow(x, y)" if cplx else "pow(x, y)")
    if op in ("bitwise_and", "bitwise_or", "bitwise_xor"):
        sym = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}[op]
        return f"(x {sym} y)" if k != "b" else f"(bool)(x {sym} y)"
    if op == "left_shift":
        return "_kiln_shl(x, y)"
    if op == "right_shift":
        return "_kiln_shr(x, y)"
    kx, ky = np.dtype(loop[0]).kind, np.dtype(loop[1]).kind
    if op in _COMPARISONS and kx != ky and kx in "iu" and ky in "iu":
        # NumPy's own loops for a signed and an unsigned 64-bit integer compare the values,
        # not the bits.
        return {"less": "_kiln_mlt(x, y)", "less_equal": "!_kiln_mlt(y, x)",
                "greater": "_kiln_mlt(y, x)", "greater_equal": "!_kiln_mlt(x, y)",
                "equal": "(!_kiln_mlt(x, y) && !_kiln_mlt(y, x))",
                "not_equal": "(_kiln_mlt(x, y) || _kiln_mlt(y, x))"}[op]
    if op in ("equal", "not_equal"):
        return "(x == y)" if op == "equal" else "(x != y)"
    if op in ("less", "less_equal", "greater", "greater_equal"):
        if cplx:
            return {"less": "_kiln_lt(x, y)", "less_equal": "_kiln_le(x, y)",
                    "greater": "_kiln_lt(y, x)", "greater_equal": "_kiln_le(y, x)"}[op]
        return {"less": "(x < y)", "less_equal": "(x <= y)", "greater": "(x > y)",
                "greater_equal": "(x >= y)"}[op]
    if op in ("maximum", "minimum"):
        if cplx:
            return "_kiln_cmax(x, y)" if op == "maximum" else "_kiln_cmin(x, y)"
        if k in "iub":
            return "(x > y ? x : y)" if op == "maximum" else "(x < y ? x : y)"
        return "_kiln_max(x, y)" if op == "maximum" else "_kiln_min(x, y)"
    if op in ("fmax", "fmin"):
        if cplx:
            return "_kiln_cfmax(x, y)" if op == "fmax" else "_kiln_cfmin(x, y)"
        if k in "iub":
            return "(x > y ? x : y)" if op == "fmax" else "(x < y ? x : y)"
        return f"{op}(x, y)"
    if op in ("logical_and", "logical_or", "logical_xor"):
        tx = "(x.re != 0 || x.im != 0)" if cplx else "(x != 0)"
        ty = tx.replace("x", "y")
        sym = {"logical_and": "&&", "logical_or": "||", "logical_xor": "!="}[op]
        return f"({tx} {sym} {ty})"
    if op == "arctan2":
        return "atan2(x, y)"
    if op == "hypot":
        return "hypot(x, y)"
    if op == "copysign":
        return "copysign(x, y)"
    if op == "ldexp":
        return "ldexp(x, (int)y)"
    raise ValueError(f"unknown operation {op!r}")


# ---- Unary operations ------------------------------------------------------------------------

_UNARY = {
    "negative": np.negative, "positive": np.positive, "absolute": np.absolute,
    "invert": np.invert, "logical_not": np.logical_not, "conjugate": np.conjugate,
    "sqrt": np.sqrt, "exp": np.exp, "exp2": np.exp2, "expm1": np.expm1, "log": np.log,
    "log2": np.log2, "log10": np.log10, "log1p": np.log1p, "sin": np.sin, "cos": np.cos,
    "tan": np.tan, "arcsin": np.arcsin, "arccos": np.arccos, "arctan": np.arctan,
    "sinh": np.sinh, "cosh": np.cosh, "tanh": np.tanh, "arcsinh": np.arcsinh,
    "arccosh": np.arccosh, "arctanh": np.arctanh, "floor": np.floor, "ceil": np.ceil,
    "trunc": np.trunc, "rint": np.rint, "fabs": np.fabs, "sign": np.sign,
    "square": np.square, "reciprocal": np.reciprocal, "isnan": np.isnan, "isinf": np.isinf,
    "isfinite": np.isfinite, "signbit": np.signbit, "cbrt": np.cbrt,
}

_C_MATH = {"sqrt": "sqrt", "exp": "exp", "exp2": "exp2", "expm1": "expm1", "log": "log",
           "log2": "log2", "log10": "log10", "log1p": "log1p", "sin": "sin", "cos": "cos",
           "tan": "tan", "arcsin": "asin", "arccos": "acos", "arctan": "atan", "sinh": "sinh",
           "cosh": "cosh", "tanh": "tanh", "arcsinh": "asinh", "arccosh": "acosh",
           "arctanh": "atanh", "floor": "floor", "ceil": "ceil", "trunc": "trunc",
           "rint": "rint", "fabs": "fabs", "cbrt": "cbrt"}
_COMPLEX_MATH = {"sqrt", "exp", "log", "log10", "sin", "cos", "tan", "sinh", "cosh", "tanh"}


def _unary_expr(op, loop):
    k = np.dtype(loop[0]).kind
    cplx = k == "c"
    if op == "negative":
        return "(-x)"
    if op == "positive":
        return "(x)"
    if op == "absolute":
        if cplx:
            return "kiln::abs(x)"
        if k == "b" or k == "u":
            return "(x)"
        return "(x < 0 ? -x : x)" if k == "i" else "fabs(x)"
    if op == "invert":
        return "(!x)" if k == "b" else "(~x)"
    if op == "logical_not":
        return "!(x.re != 0 || x.im != 0)" if cplx else "(!x)"
    if op == "conjugate":
        return "kiln::conj(x)" if cplx else "(x)"
    if op == "square":
        return "(x * x)"
    if op == "reciprocal":
        return "(1 / x)" if k != "i" and k != "u" else "(x == 0 ? 0 : (x == 1 || x == -1) ? x : 0)"
    if op == "sign":
        if cplx:
            raise TypeError("sign of complex arrays is not supported")
        return "_kiln_sign(x)"
    if op == "isnan":
        return "_kiln_isnan(x)" if cplx else ("false" if k in "iub" else "isnan(x)")
    if op == "isinf":
        if cplx:
            return "(isinf(x.re) || isinf(x.im))"
        return "false" if k in "iub" else "isinf(x)"
    if op == "isfinite":
        if cplx:
            return "(isfinite(x.re) && isfinite(x.im))"
        return "true" if k in "iub" else "isfinite(x)"
    if op == "signbit":
        return "signbit(x)" if k == "f" else "(x < 0)"
    if op in ("floor", "ceil", "trunc", "rint") and k in "iub":
        return "(x)"  # NumPy keeps integers as they are
    if op in _C_MATH:
        if cplx:
            if op not in _COMPLEX_MATH:
                raise TypeError(f"{op} of complex arrays is not supported")
            return f"kiln::{_C_MATH[op]}(x)"
        return f"{_C_MATH[op]}(x)"
    raise ValueError(f"unknown operation {op!r}")


# ---- Plans -----------------------------------------------------------------------------------

def _desc(obj):
    """What promotion sees of an operand: an array's dtype, a NumPy scalar's dtype, or the
    Python type of a weak scalar (int, float, complex; a bool is NumPy's bool)."""
    if isinstance(obj, DeviceArray):
        return obj.dtype, True
    if isinstance(obj, np.generic):
        return obj.dtype, False
    if isinstance(obj, bool):
        return np.dtype(np.bool_), False
    if isinstance(obj, int):
        return int, False
    if isinstance(obj, float):
        return float, False
    if isinstance(obj, complex):
        return complex, False
    if isinstance(obj, np.ndarray) and obj.ndim == 0:
        return obj.dtype, False
    raise TypeError(f"unsupported operand type {type(obj).__name__}")


def _wire_dtype(loop_dtype):
    """The dtype a scalar operand is passed as: float16 goes as float32 (and is rounded to
    float16 in the kernel), so a Python float needs no conversion on the call path."""
    loop_dtype = np.dtype(loop_dtype)
    return np.dtype(np.float32) if loop_dtype == np.float16 else loop_dtype


def _scalar_operand(name, loop_dtype):
    """C of scalar parameter `name` as a value of loop_dtype's compute type."""
    if np.dtype(loop_dtype) == np.float16:
        return f"__half2float(__float2half({name}))"
    return name


_plans = {}


def binary_plan(op, x, y, inplace=False):
    """(kernel, out dtype, scalar converter or None, the integer dtype a Python int operand
    must fit or None) for `x op y`, each an array or a scalar. The kernel's arguments are
    (z, x, y): z the output array, x and y arrays or scalars."""
    (dx, x_arr), (dy, y_arr) = _desc(x), _desc(y)
    key = (op, dx, x_arr, dy, y_arr, inplace and x_arr and x.dtype)
    plan = _plans.get(key)
    if plan is None:
        plan = _plans[key] = _make_binary_plan(op, dx, x_arr, dy, y_arr,
                                               x.dtype if inplace else None)
    return plan


def _make_binary_plan(op, dx, x_arr, dy, y_arr, inplace_dtype):
    from .elementwise import ElementwiseKernel

    ufunc = _BINARY[op]
    lx, ly, lz = ufunc.resolve_dtypes((dx, dy, None))
    out = lz
    if inplace_dtype is not None:
        if not np.can_cast(lz, inplace_dtype, "same_kind"):
            raise TypeError(f"Cannot cast ufunc {op!r} output from {lz!r} to "
                            f"{np.dtype(inplace_dtype)!r} with casting rule 'same_kind'")
        out = np.dtype(inplace_dtype)
    args, xs = [f"{_cgen.dtype_to_ctype(out)} *z"], []
    converter = fits = None
    for name, d, is_arr, loop in (("x", dx, x_arr, lx), ("y", dy, y_arr, ly)):
        if is_arr:
            args.append(f"{_cgen.dtype_to_ctype(d)} *{name}")
            xs.append(load(name, f"{name}_i", d, loop))
        else:
            wire = _wire_dtype(loop)
            args.append(f"{_cgen.dtype_to_ctype(wire)} {name}")
            xs.append(_scalar_operand(name, loop))
            # A Python float or int meeting a bool loop (the logical operations) becomes a
            # NumPy bool first: the kernel's bool parameter takes only 0 and 1.
            if wire.kind == "c" or (isinstance(d, np.dtype) and d != wire) or \
                    (not isinstance(d, np.dtype) and wire.kind == "b"):
                converter = wire.type
            if d is int and wire.kind in "iu":
                fits = wire
    expr = _values(_binary_expr(op, (lx, ly, lz)))
    operation = (f"{compute_ctype(lx)} _x = {xs[0]}; {compute_ctype(ly)} _y = {xs[1]}; "
                 f"z[z_i] = {store(expr, lz, out)}")
    dtypes = [out, lx, ly] + [d for d in (dx, dy) if isinstance(d, np.dtype)]
    kernel = ElementwiseKernel(", ".join(args), operation, f"kiln_{op}",
                               preamble=_preamble(dtypes))
    return kernel, np.dtype(out), converter, fits


_COMPARISONS = {"less", "less_equal", "equal", "not_equal", "greater", "greater_equal"}


def _out_of_range(op, value, dtype, shape, out, stream, operands):
    """`array op value` for a Python int that dtype cannot hold: NumPy 2 compares it as the
    number it is (every element on one side of it) and refuses any other operation."""
    if op not in _COMPARISONS:
        raise OverflowError(f"Python integer {value} out of bounds for {dtype}")
    above = value > np.iinfo(dtype).max  # the int is above every element (else below)
    truth = {"less": above, "less_equal": above, "greater": not above,
             "greater_equal": not above, "equal": False, "not_equal": True}[op]
    if out is None:
        out = _result(operands, shape, np.bool_, stream)
    return fill(out, truth, stream=stream)


def unary_plan(op, x, out_dtype=None):
    """(kernel, out dtype) for op over array x; the kernel's arguments are (z, x)."""
    key = (op, x.dtype, out_dtype)
    plan = _plans.get(key)
    if plan is None:
        from .elementwise import ElementwiseKernel

        lx, lz = _UNARY[op].resolve_dtypes((x.dtype, None))
        out = np.dtype(out_dtype) if out_dtype is not None else lz
        expr = _values(_unary_expr(op, (lx, lz)))
        operation = (f"{compute_ctype(lx)} _x = {load('x', 'x_i', x.dtype, lx)}; "
                     f"z[z_i] = {store(expr, lz, out)}")
        kernel = ElementwiseKernel(f"{_cgen.dtype_to_ctype(out)} *z, "
                                   f"{_cgen.dtype_to_ctype(x.dtype)} *x", operation,
                                   f"kiln_{op}", preamble=_preamble([out, lx, x.dtype]))
        plan = _plans[key] = (kernel, out)
    return plan


_VALUE_NAME = re.compile(r"\b([xy])\b")


def _values(expr):
    """The operation's C, written with x and y, reading the values _x and _y (x and y name
    the arrays themselves)."""
    return _VALUE_NAME.sub(lambda m: "_" + m.group(1), expr)  # no template to parse


def _preamble(dtypes):
    complex_ = _cgen.needs_complex(*dtypes)
    return _cgen.includes_for(dtypes) + HELPERS + (COMPLEX_HELPERS if complex_ else "")


# ---- Views ------------------------------------------------------------------------------------

def _view(a, shape, strides, offset=0):
    """A view of a's memory with its own shape and strides (bytes), from offset bytes in."""
    return DeviceArray(tuple(shape), a.dtype, gpudata=a.ptr + offset, strides=tuple(strides),
                       base=a)


def broadcast_to(a, shape):
    """a seen with `shape` (NumPy's broadcasting: 0 strides where a has one element)."""
    shape = tuple(shape)
    if a.shape == shape:
        return a
    lead = len(shape) - a.ndim
    if lead < 0:
        raise ValueError(f"cannot broadcast shape {a.shape} to {shape}")
    strides = []
    for d, n in enumerate(shape):
        k = d - lead
        if k < 0:
            strides.append(0)
        elif a.shape[k] == n:
            strides.append(a.strides[k])
        elif a.shape[k] == 1:
            strides.append(0)
        else:
            raise ValueError(f"operands could not be broadcast together with shapes {a.shape} "
                             f"and {shape}")
    return _view(a, shape, strides)


def _shares_memory(a, b):
    """True when the byte ranges of two arrays overlap (a conservative test)."""
    if not (isinstance(a, DeviceArray) and isinstance(b, DeviceArray)) or not a.size or \
            not b.size:
        return False
    return _span(a)[0] < _span(b)[1] and _span(b)[0] < _span(a)[1]


def overlapping(arrays, same_ok=False):
    """True when the byte ranges of two of the device arrays among arrays meet (then a kernel
    taking them as __restrict__ would be told a lie), not counting arrays of the very same
    range when same_ok. The ranges follow shape and strides, never an nbytes a program set."""
    spans = [_span(a) for a in arrays if isinstance(a, DeviceArray) and a.size]
    spans = sorted(set(spans) if same_ok else spans)
    return any(spans[k + 1][0] < spans[k][1] for k in range(len(spans) - 1))


def _span(a):
    lo = hi = a.ptr
    for n, s in zip(a.shape, a.strides):
        if s < 0:
            lo += (n - 1) * s
        else:
            hi += (n - 1) * s
    return lo, hi + a.dtype.itemsize


def _same_layout(a, b):
    return a.ptr == b.ptr and a.shape == b.shape and a.strides == b.strides


# ---- Operations behind the array type ---------------------------------------------------------

def _empty(shape, dtype, stream):
    from ._kiln import empty
    return empty(tuple(shape), dtype, stream=stream)


def _laid_out(a, fortran):
    """Whether a's elements lie in memory in F order (fortran) or C order: the strides of its
    axes longer than one grow from the first axis to the last (F) or shrink (C)."""
    strides = [abs(st) for n, st in zip(a.shape, a.strides) if n > 1]
    if fortran:
        strides.reverse()
    return all(x >= y for x, y in zip(strides, strides[1:]))


def _order(arrays, shape):
    """The order of a new result of shape: "F" where NumPy's order="K" makes it so, every
    operand of that shape laid out in F order and one of them not in C order (an operation on
    Fortran-ordered arrays, whose result a program's F-order kernel then reads, as under
    PyCUDA); else "C". Broadcast operands have no say."""
    if len(shape) < 2:
        return "C"
    full = [a for a in arrays if isinstance(a, DeviceArray) and a.shape == shape]
    if not full or all(a.flags.c_contiguous for a in full) or \
            not all(_laid_out(a, True) for a in full):
        return "C"
    return "C" if all(_laid_out(a, False) for a in full) else "F"


def _plain_result(shape, dtype, allocator, stream, order="C"):
    """A plain DeviceArray for a result: allocator's memory when there is one, else the pool's,
    ordered on stream."""
    if allocator is None:
        from ._kiln import empty
        return empty(tuple(shape), dtype, stream=stream, order=order)
    return DeviceArray(shape, dtype, allocator=allocator, order=order)


def _result(like, shape, dtype, stream):
    """A new array for the result of an operation on like (a device array, or a tuple of the
    operands, of which the first device array of the result's shape is taken, as PyCUDA takes
    the one that is not broadcast). PyCUDA makes it with like._new_like_me(dtype), so a GPUArray
    subclass's results are of that subclass, made as it makes them (reikna's Array), and an
    array's allocator makes its results: kept for such arrays, the memory then ordered as their
    constructor orders it. Any other result is kiln's pool memory, ordered on stream."""
    shape = tuple(shape)
    arrays = [v for v in like if isinstance(v, DeviceArray)] if isinstance(like, tuple) \
        else [like]
    order = _order(arrays, shape)
    like = next((v for v in arrays if v.shape == shape), arrays[0] if arrays else None)
    if not isinstance(like, DeviceArray):
        return _empty(shape, dtype, stream)
    if like.shape != shape or (type(like) is DeviceArray and like._allocator is None):
        # a broadcast: none like it
        return _plain_result(shape, dtype, like._allocator, stream, order)
    dtype = np.dtype(dtype)
    try:
        # kiln's own _new_like_me keeps an F-ordered array's order for a dtype of its own too;
        # a subclass's is called as PyCUDA calls it
        made = (like._new_like_me(dtype, order="F")
                if order == "F" and type(like)._new_like_me is DeviceArray._new_like_me
                else like._new_like_me(dtype))
    except TypeError as e:
        if type(like)._new_like_me is not DeviceArray._new_like_me:
            raise
        # A subclass whose __init__ takes other arguments, with no _new_like_me of its own to
        # say how it is made (PyCUDA fails here): the result is a plain array, as a view is.
        _log.logger.debug("%s(shape, dtype, ...) failed (%s): a plain result",
                          type(like).__name__, e)
        return _plain_result(shape, dtype, like._allocator, stream, order)
    if not isinstance(made, DeviceArray) or made.shape != shape or made.dtype != dtype:
        got = (f"a {type(made).__name__} of shape {made.shape} and dtype {made.dtype}"
               if isinstance(made, DeviceArray) else f"a {type(made).__name__}")
        raise TypeError(f"{type(like).__name__}._new_like_me({dtype}) gave {got}, not a device "
                        f"array of shape {shape} and dtype {dtype}")
    return made


def _operand(v, other_out, stream):
    """An input that overlaps the output without being it is copied first, so the result is
    as if every input were read before anything was written (NumPy's rule)."""
    if isinstance(v, DeviceArray) and other_out is not None and _shares_memory(v, other_out) \
            and not _same_layout(v, other_out):
        return ascontiguous(v, stream=stream, force=True)
    return v


def _overrides(v, name):
    """Whether v is of a GPUArray subclass with a method `name` of its own."""
    return type(v) is not DeviceArray and isinstance(v, DeviceArray) and \
        getattr(type(v), name, None) is not getattr(DeviceArray, name)


def _subclass_formula(op, x, y, out):
    """PyCUDA's +, -, * and / (reflected and in place too) call the array's _axpbyz, _axpbz,
    _elwise_multiply, _div and _rdiv_scalar, so a GPUArray subclass that gives its own (GPAW's,
    with kernels of its own) has them called as PyCUDA calls them: into a result made by its
    _new_like_me, or into the array itself in place; a division by a scalar is its _axpbz by
    the scalar's reciprocal. NotImplemented when no operand overrides what its operation
    calls."""
    arr, other = (x, y) if isinstance(x, DeviceArray) else (y, x)
    both = isinstance(other, DeviceArray)
    if op == "true_divide":
        name = "_div" if both else "_axpbz" if arr is x else "_rdiv_scalar"
    else:
        name = "_elwise_multiply" if op == "multiply" and both else \
            "_axpbyz" if both else "_axpbz"
    if not _overrides(arr, name) or (both and arr.shape != other.shape) or \
            not both and not np.isscalar(other):
        return NotImplemented
    if out is not None and out is not x:
        return NotImplemented
    if out is None:
        if not both and arr is x and (op in ("add", "subtract") and other == 0 or
                                      op == "true_divide" and other == 1):
            return arr.copy()
        dtype = (binary_plan(op, x, y)[1] if op == "true_divide" else
                 _compyte_array.get_common_dtype(arr, other))
        out = arr._new_like_me(dtype)
    elif op == "true_divide" and not both and other == 1:
        return arr
    if op == "true_divide":
        if both:
            return arr._div(other, out)
        return arr._axpbz(1 / other, 0, out) if arr is x else arr._rdiv_scalar(other, out)
    if op == "multiply":
        return arr._elwise_multiply(other, out) if both else arr._axpbz(other, 0, out)
    if both:
        return arr._axpbyz(1, other, -1 if op == "subtract" else 1, out)
    if arr is not x:  # other - arr
        return arr._axpbz(-1, other, out)
    return arr._axpbz(1, -other if op == "subtract" else other, out)


def binary(op, x, y, out=None, stream=None, casting="same_kind"):
    """x op y with NumPy's broadcasting and promotion, into out when given (in place when out
    is x; with casting="unsafe", converted to out's dtype whatever it is). Every case the C path
    does not take comes here."""
    if op in ("add", "subtract", "multiply", "true_divide") and casting == "same_kind" and \
            stream is None and (type(x) is not DeviceArray or type(y) is not DeviceArray):
        done = _subclass_formula(op, x, y, out)
        if done is not NotImplemented:
            return done
    for v in (x, y):
        if isinstance(v, np.ndarray) and v.ndim:
            raise TypeError("a numpy array lives in host memory; copy it to the device first "
                            "(gpuarray.to_gpu) to combine it with a device array")
    # In place, the result's dtype is x's, by NumPy's same_kind rule; with casting="unsafe"
    # (PyCUDA's own methods into out) it is computed as NumPy would and then converted.
    inplace = out is not None and out is x and casting != "unsafe"
    kernel, out_dtype, converter, fits = binary_plan(op, x, y, inplace=inplace)
    shapes = [v.shape for v in (x, y) if isinstance(v, DeviceArray)]
    shape = np.broadcast_shapes(*shapes)
    if op == "power" and out_dtype.kind in "iub" and isinstance(y, (int, np.integer)) and \
            not isinstance(y, (bool, np.bool_)) and y < 0:
        raise ValueError("Integers to negative integer powers are not allowed.")
    if fits is not None:
        info = np.iinfo(fits)
        for side, v in (("left", x), ("right", y)):
            if type(v) is int and not info.min <= v <= info.max:
                flipped = {"less": "greater", "less_equal": "greater_equal",
                           "greater": "less", "greater_equal": "less_equal"}
                # `v op array` reads as `array flipped(op) v`
                name = flipped.get(op, op) if side == "left" else op
                return _out_of_range(name, v, fits, shape, out, stream, (x, y))
    if out is None:
        out = _result((x, y), shape, out_dtype, stream)
    elif tuple(out.shape) != tuple(shape):
        raise ValueError(f"the result has shape {shape}; out has {out.shape}")
    elif not inplace and out.dtype != out_dtype and not np.can_cast(out_dtype, out.dtype,
                                                                      casting):
        raise TypeError(f"Cannot cast {op} output from {out_dtype!r} to {out.dtype!r}")
    if out.size == 0:
        return out
    args = []
    for v in (x, y):
        if isinstance(v, DeviceArray):
            v = broadcast_to(_operand(v, out, stream), shape)
        elif isinstance(v, np.ndarray):
            v = v[()]
        if converter is not None and not isinstance(v, DeviceArray):
            v = converter(v)
        args.append(v)
    if out.dtype != out_dtype and not inplace:
        tmp = _empty(shape, out_dtype, stream)
        kernel(tmp, *args, stream=stream)
        copy(out, tmp, stream=stream)
        return out
    kernel(out, *args, stream=stream)
    return out


def unary(op, x, out=None, stream=None):
    """op over array x, into out when given. -x of a GPUArray subclass with an _axpbz of its
    own is that: x._axpbz(-1, 0, x._new_like_me()), as PyCUDA's __neg__."""
    if op == "negative" and out is None and stream is None and _overrides(x, "_axpbz"):
        return x._axpbz(-1, 0, x._new_like_me())
    kernel, out_dtype = unary_plan(op, x, None if out is None else out.dtype)
    if out is None:
        out = _result(x, x.shape, out_dtype, stream)
    elif tuple(out.shape) != tuple(x.shape):
        raise ValueError(f"the result has shape {x.shape}; out has {out.shape}")
    if out.size:
        kernel(out, _operand(x, out, stream), stream=stream)
    return out


def _copy_kernel(dst_dtype, src_dtype):
    key = ("copy", np.dtype(dst_dtype), np.dtype(src_dtype))
    k = _plans.get(key)
    if k is None:
        from .elementwise import ElementwiseKernel

        src, dst = np.dtype(src_dtype), np.dtype(dst_dtype)
        value = store(load("x", "x_i", src, src), src, dst)
        k = _plans[key] = ElementwiseKernel(
            f"{_cgen.dtype_to_ctype(dst)} *z, {_cgen.dtype_to_ctype(src)} *x",
            f"z[z_i] = {value}", "kiln_copy", preamble=_preamble([dst, src]), _same_ok=True)
    return k


def copy(dst, src, stream=None):
    """dst[...] = src elementwise, converting dtypes; src broadcasts to dst's shape; any
    strides on either side (the array type's hook for get/set/setitem of views)."""
    if not isinstance(src, DeviceArray):
        raise TypeError(f"copy() takes a device array to copy from, not {type(src).__name__}")
    if dst.size == 0:
        return dst
    src = broadcast_to(_operand(src, dst, stream), dst.shape)
    _copy_kernel(dst.dtype, src.dtype)(dst, src, stream=stream)
    return dst


def _fill_kernel(dtype):
    key = ("fill", np.dtype(dtype))
    k = _plans.get(key)
    if k is None:
        from .elementwise import ElementwiseKernel

        dtype = np.dtype(dtype)
        k = _plans[key] = ElementwiseKernel(
            f"{_cgen.dtype_to_ctype(dtype)} *z, {_cgen.dtype_to_ctype(dtype)} v", "z[z_i] = v",
            "kiln_fill", preamble=_preamble([dtype]))
    return k


def fill(dst, value, stream=None):
    """Every element of dst (any strides) set to value, converted as NumPy's fill does."""
    if dst.size == 0:
        return dst
    if isinstance(value, DeviceArray):
        return copy(dst, value, stream=stream)
    # NumPy's own fill of one element converts: a float truncated into an integer dtype, an
    # integer out of its range an OverflowError, as NumPy's fill and PyCUDA's struct.pack refuse.
    one = np.empty((), dst.dtype)
    with np.errstate(all="ignore"):
        one.fill(value)
    _fill_kernel(dst.dtype)(dst, one[()], stream=stream)
    return dst


def ascontiguous(a, stream=None, force=False, allocator=None):
    """a when it is C-contiguous (and not force), else a C-contiguous copy (in allocator's
    memory when one is given, else the pool's)."""
    if a.flags.c_contiguous and not force:
        return a
    out = _plain_result(a.shape, a.dtype, allocator, stream)
    if out.size:
        _copy_kernel(a.dtype, a.dtype)(out, a, stream=stream)
    return out


def astype(a, dtype, stream=None):
    """A new array of a's values as dtype (NumPy's unsafe casting), C-contiguous unless a's
    _new_like_me (a subclass's, or one with an allocator) makes it otherwise."""
    out = _result(a, a.shape, dtype, stream)
    if out.size:
        _copy_kernel(out.dtype, a.dtype)(out, a, stream=stream)
    return out


# ---- Reductions -------------------------------------------------------------------------------

# The plain sum of each dtype whose result needs no conversion: gpuarray.sum calls it directly.
SUM_KERNELS = {}
_REDUCTIONS = {}


def _lowest(dtype, highest=False):
    """C of the lowest (or highest) value of dtype's compute type: -inf for floats."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        bits = {False: ("0xff800000", "0xfff0000000000000ULL"),
                True: ("0x7f800000", "0x7ff0000000000000ULL")}[highest]
        return (f"__int_as_float({bits[0]})" if dtype.itemsize <= 4
                else f"__longlong_as_double({bits[1]})")
    if dtype.kind == "b":
        return "true" if highest else "false"
    info = np.iinfo(dtype)
    v = info.max if highest else info.min
    suffix = "ULL" if dtype.kind == "u" else "LL"
    if not highest and dtype.kind == "i" and dtype.itemsize == 8:
        return "(-9223372036854775807LL - 1)"
    return f"({_cgen.dtype_to_ctype(dtype)})({v}{suffix})"


def _reduction(kind, dtype, out_dtype, subset_dtype=None, second=None, conjugate=False,
               exact=False):
    """The ReductionKernel of `kind` over arrays of dtype (and second, for dot), folding in
    out_dtype's compute type; arguments (subset, x[, y]). Its result is of the dtype it folds
    in: float32 for a float16 out_dtype and bool for any and all, unless exact, when it folds
    in out_dtype and gives that (what PyCUDA's kernel getters return)."""
    dtype, out = np.dtype(dtype), np.dtype(out_dtype)
    if kind in ("any", "all"):
        acc = out if exact else np.dtype(np.bool_)
    else:
        acc = out if exact or out != np.float16 else np.dtype(np.float32)
    subset_dtype = None if subset_dtype is None else np.dtype(subset_dtype)
    second = None if second is None else np.dtype(second)
    key = (kind, dtype, out, subset_dtype, second, conjugate, acc)
    k = _REDUCTIONS.get(key)
    if k is not None:
        return k
    from .reduction import ReductionKernel

    index = "subset[i]" if subset_dtype is not None else "i"
    args = ([f"{_cgen.dtype_to_ctype(subset_dtype)} *subset"] if subset_dtype is not None
            else []) + [f"{_cgen.dtype_to_ctype(dtype)} *x"]
    x = load("x", index, dtype, acc if kind in ("sum", "dot", "max", "min") else dtype)
    cplx = acc.kind == "c"
    if kind == "sum":
        neutral, reduce, mapped = "0", "a + b", x
    elif kind == "dot":
        args.append(f"{_cgen.dtype_to_ctype(second)} *y")
        y = load("y", index, second, acc)
        neutral, reduce = "0", "a + b"
        mapped = f"kiln::conj({x}) * {y}" if conjugate and cplx else f"{x} * {y}"
    elif kind in ("max", "min"):
        highest = kind == "min"
        if cplx:
            neutral = (f"{compute_ctype(acc)}({_lowest(acc.type(0).real.dtype, highest)}, "
                       f"{_lowest(acc.type(0).real.dtype, highest)})")
            reduce = "_kiln_cmax(a, b)" if kind == "max" else "_kiln_cmin(a, b)"
        elif acc.kind == "f":
            neutral = _lowest(acc, highest)
            reduce = "_kiln_max(a, b)" if kind == "max" else "_kiln_min(a, b)"
        else:
            neutral = _lowest(acc, highest)
            reduce = "(a > b ? a : b)" if kind == "max" else "(a < b ? a : b)"
        mapped = x
    elif kind in ("any", "all"):
        mapped = (f"(({x}).re != 0 || ({x}).im != 0)" if dtype.kind == "c"
                  else f"(({x}) != 0)")
        neutral, op = ("false", "||") if kind == "any" else ("true", "&&")
        # Folded in the result's dtype: a complex one (get_any_kernel's dtype_out) is true
        # where a part is nonzero, as the elements are.
        reduce = f"((a) != 0) {op} ((b) != 0)" if cplx else f"a {op} b"
    else:
        raise ValueError(f"unknown reduction {kind!r}")
    if acc == np.float16 and kind not in ("any", "all"):
        mapped = store(mapped, acc, acc)  # computed in float, folded as __half
    preamble = _preamble([acc, dtype] + ([second] if second is not None else []))
    k = _REDUCTIONS[key] = ReductionKernel(acc, neutral, reduce, mapped, ", ".join(args),
                                           name=f"kiln_{kind}", preamble=preamble)
    k._result_dtype = out
    return k


def reduce(kind, a, dtype=None, stream=None, allocator=None, subset=None):
    """sum, max, min, any or all of a's elements (or of a[subset[i]]) as a 0-d array."""
    if not isinstance(a, DeviceArray):
        raise TypeError(f"{kind}() takes a device array, not {type(a).__name__}")
    if kind == "sum":
        out = np.dtype(dtype) if dtype is not None else np.zeros(0, a.dtype).sum().dtype
    elif kind in ("any", "all"):
        out = np.dtype(np.bool_)
    else:
        out = a.dtype
    n = a.size if subset is None else subset.size
    if n == 0 and kind in ("max", "min"):
        raise ValueError(f"zero-size array to reduction operation {kind}imum which has no "
                         "identity")
    # The result's memory as PyCUDA's: the allocator given, else the first array's.
    allocator = allocator or getattr(subset if subset is not None else a, "_allocator", None)
    a = ascontiguous(a, stream=stream)
    args = [a]
    if subset is not None:
        if not isinstance(subset, DeviceArray) or subset.dtype.kind not in "iu":
            raise TypeError("subset must be a device array of integer indices")
        args = [ascontiguous(subset, stream=stream), a]
    k = _reduction(kind, a.dtype, out, None if subset is None else subset.dtype)
    result = k(*args, stream=stream, allocator=allocator) if allocator is not None else \
        k(*args, stream=stream)
    if result.dtype != out:
        result = astype(result, out, stream=stream)
    elif kind == "sum" and subset is None and dtype is None and allocator is None:
        SUM_KERNELS[a.dtype] = k
    return result


def dot(a, b, dtype=None, stream=None, allocator=None, subset=None, conjugate=False):
    """sum(a * b) (conj(a) * b with conjugate) over all elements, as a 0-d array."""
    for v in (a, b):
        if not isinstance(v, DeviceArray):
            raise TypeError(f"dot() takes device arrays, not {type(v).__name__}")
    if a.size != b.size:
        raise ValueError(f"dot() of arrays of {a.size} and {b.size} elements")
    out = np.dtype(dtype) if dtype is not None else np.result_type(a.dtype, b.dtype)
    if out == np.bool_:
        out = np.dtype(np.bool_)
    allocator = allocator or getattr(subset if subset is not None else a, "_allocator", None)
    args = [ascontiguous(a, stream=stream), ascontiguous(b, stream=stream)]
    if subset is not None:
        args.insert(0, ascontiguous(subset, stream=stream))
    k = _reduction("dot", a.dtype, out, None if subset is None else subset.dtype, b.dtype,
                   conjugate)
    result = k(*args, stream=stream, allocator=allocator) if allocator is not None else \
        k(*args, stream=stream)
    return astype(result, out, stream=stream) if result.dtype != out else result


# ---- The array type's methods that run kernels (arrayops.c forwards them here) ---------------

def method_fill(a, value, stream=None):
    fill(a, value, stream=stream)
    return a


def method_astype(a, dtype, stream=None):
    return astype(a, dtype, stream=stream)


def method_conj(a, stream=None, out=None):
    """PyCUDA's conj: the array itself when real (unless out is given), else a new array.
    PyCUDA's is conj(out=None): a device array given first is out."""
    if isinstance(stream, DeviceArray) and out is None:
        stream, out = None, stream
    if a.dtype.kind != "c" and out is None:
        return a
    return unary("conjugate", a, out=out, stream=stream)


_AXPBYZ = {}


def _axpbyz_kernel(x_dtype, y_dtype, out_dtype, store_dtype):
    """z = p*x + q*y computed in out_dtype and stored as store_dtype; with y_dtype None,
    z = p*x + q (q a scalar)."""
    key = (x_dtype, y_dtype, out_dtype, store_dtype)
    k = _AXPBYZ.get(key)
    if k is None:
        from .elementwise import ElementwiseKernel

        wire = _wire_dtype(out_dtype)
        t = _cgen.dtype_to_ctype(wire)
        ct = compute_ctype(out_dtype)
        q = f"({ct})({_scalar_operand('q', out_dtype)})"
        value = (f"({ct})({_scalar_operand('p', out_dtype)}) * "
                 f"{load('x', 'x_i', x_dtype, out_dtype)} + ")
        args = f"{_cgen.dtype_to_ctype(store_dtype)} *z, {t} p, {_cgen.dtype_to_ctype(x_dtype)} *x, {t} q"
        if y_dtype is None:
            value += q
            dtypes = [out_dtype, store_dtype, x_dtype]
        else:
            value += f"{q} * {load('y', 'y_i', y_dtype, out_dtype)}"
            args += f", {_cgen.dtype_to_ctype(y_dtype)} *y"
            dtypes = [out_dtype, store_dtype, x_dtype, y_dtype]
        k = _AXPBYZ[key] = ElementwiseKernel(
            args, f"z[z_i] = {store(value, out_dtype, store_dtype)}",
            "kiln_axpbyz" if y_dtype is not None else "kiln_axpbz",
            preamble=_preamble(dtypes), _same_ok=True)
    return k


def _out_for(what, out, shape, result, casting):
    """Checks out (shape and, with casting="same_kind", that result casts to its dtype)."""
    if not isinstance(out, DeviceArray) or out.shape != shape:
        got = f"one of shape {out.shape}" if isinstance(out, DeviceArray) else type(out).__name__
        raise TypeError(f"{what}() takes as out a device array of shape {shape}, not {got}")
    if casting == "same_kind" and not np.can_cast(result, out.dtype, "same_kind"):
        raise TypeError(f"Cannot cast {what} output from {result!r} to {out.dtype!r}")


def _mul_add(what, a, selffac, other, otherfac, add_timer, stream, out, casting):
    """selffac * a + otherfac * other (other an array) or selffac * a + other (otherfac None,
    other a scalar), with NumPy's promotion of all four; a 0-d or broadcastable operand is
    broadcast."""
    if otherfac is None:
        if isinstance(other, DeviceArray):
            raise TypeError(f"{what}() takes a scalar as other")
        result = np.result_type(a.dtype, selffac, other)
        shape = a.shape
    else:
        if not isinstance(other, DeviceArray):
            raise TypeError(f"{what}() takes a device array as other")
        try:
            shape = np.broadcast_shapes(a.shape, other.shape)
        except ValueError:
            raise ValueError(f"{what}() of shapes {a.shape} and {other.shape}") from None
        result = np.result_type(a.dtype, other.dtype, selffac, otherfac)
    if out is not None:
        _out_for(what, out, shape, result, casting)
    store_dtype = result if out is None else out.dtype
    k = _axpbyz_kernel(a.dtype, None if otherfac is None else other.dtype, result, store_dtype)
    wire = _wire_dtype(result).type
    if out is None:
        out = _result((a, other), shape, result, stream)
    start = _timer_start(add_timer, stream)
    if out.size:
        x = broadcast_to(_operand(a, out, stream), shape)
        if otherfac is None:
            k(out, wire(selffac), x, wire(other), stream=stream)
        else:
            y = broadcast_to(_operand(other, out, stream), shape)
            k(out, wire(selffac), x, wire(otherfac), y, stream=stream)
    # PyCUDA counts the elements read and written.
    _timer_end(add_timer, start, stream, (2 if otherfac is None else 3) * out.size)
    return out


def method_mul_add(a, selffac, other, otherfac, add_timer=None, stream=None, out=None):
    """selffac * a + otherfac * other in one kernel, with NumPy's promotion of the four, into out
    when given (its dtype one the result casts to)."""
    return _mul_add("mul_add", a, selffac, other, otherfac, add_timer, stream, out, "same_kind")


# PyCUDA's GPUArray computes its operators through these, and programs that extend it or keep
# their own buffers call them directly. Each writes into the out it is given, converting to
# out's dtype as C would, and returns it.

def method__axpbyz(a, selffac, other, otherfac, out, add_timer=None, stream=None):
    """out = selffac * a + otherfac * other."""
    return _mul_add("_axpbyz", a, selffac, other, otherfac, add_timer, stream, out, "unsafe")


def method__axpbz(a, selffac, other, out, stream=None):
    """out = selffac * a + other, other a scalar."""
    return _mul_add("_axpbz", a, selffac, other, None, None, stream, out, "unsafe")


def method__elwise_multiply(a, other, out, stream=None):
    """out = a * other."""
    return binary("multiply", a, other, out=out, stream=stream, casting="unsafe")


def method__div(a, other, out, stream=None):
    """out = a / other."""
    return binary("true_divide", a, other, out=out, stream=stream, casting="unsafe")


def method__rdiv_scalar(a, other, out, stream=None):
    """out = other / a, other a scalar."""
    return binary("true_divide", other, a, out=out, stream=stream, casting="unsafe")


def method__pow(a, other, new):
    """a ** other, into a new array when new is true, else into a itself (converted to its
    dtype)."""
    return binary("power", a, other, out=None if new else a, casting="unsafe")


def _timer_start(add_timer, stream):
    if add_timer is None:
        return None
    from ._kiln import Event
    return Event().record(stream)


def _timer_end(add_timer, start, stream, count):
    """PyCUDA's add_timer(count, seconds) after a timed operation: seconds is what
    Function.prepared_timed_call returns, a callable that waits for the operation and gives
    its time in seconds, so the caller decides when to wait."""
    if add_timer is None:
        return
    from ._kiln import Event
    end = Event().record(stream)

    def seconds():
        end.synchronize()
        return start.elapsed(end) / 1000

    add_timer(count, seconds)


def method_reverse(a, stream=None):
    # In memory from a's allocator, as PyCUDA's _new_like_me makes it.
    if a.ndim == 1:
        return ascontiguous(a[::-1], stream=stream, force=True, allocator=a._allocator)
    # PyCUDA's reverses the array's memory and keeps its shape and order.
    order = "C" if a.flags.c_contiguous else "F" if a.flags.f_contiguous else None
    if order is None:
        raise ValueError("reverse() of an array of more than one axis reverses its memory, "
                         "as PyCUDA's: it takes a contiguous array, not a strided view")
    flat = a.reshape(a.size, order=order)
    return ascontiguous(flat[::-1], stream=stream, force=True,
                        allocator=a._allocator).reshape(a.shape, order=order)


def method_sum(a, dtype=None, stream=None):
    return reduce("sum", a, dtype=dtype, stream=stream)


def method_max(a, stream=None):
    return reduce("max", a, stream=stream)


def method_min(a, stream=None):
    return reduce("min", a, stream=stream)


def method_any(a, stream=None, allocator=None):
    return reduce("any", a, stream=stream, allocator=allocator)


def method_all(a, stream=None, allocator=None):
    return reduce("all", a, stream=stream, allocator=allocator)
