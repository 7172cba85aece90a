"""CUDA source of the math functions `kiln.cumath` generates itself: the complex functions
kiln's complex header does not have (or has without NumPy's treatment of a zero imaginary
part), and the C operations of frexp, modf and ldexp.

The complex inverse functions follow Kahan ("Branch cuts for complex elementary functions",
1987): they are built from sqrt(1 - z) and sqrt(1 + z), never from z * z, so they neither
overflow early nor lose the sign of a zero, and their branch cuts are C99's (and NumPy's).
tanh follows Kahan too: with t = tan(y) and s = sinh(x),
tanh(x + iy) = (s * sqrt(1 + s^2) * (1 + t^2) + i t) / (1 + (1 + t^2) s^2), which neither
overflows nor divides infinity by infinity where sinh / cosh would; past |x| = 9 (float) or
22 (double) the real part is +-1 to the last bit. sin, cos, tan, asin, acos and atan are the
hyperbolic ones turned by i, as C99 defines them.
"""
import numpy as np

from . import _ops

# Functions whose complex loop kiln.cumath runs from COMPLEX_MATH (NumPy's name: the C name).
COMPLEX_FUNCS = {
    "exp": "kiln_cexp", "exp2": "kiln_cexp2", "expm1": "kiln_cexpm1", "log2": "kiln_clog2",
    "log1p": "kiln_clog1p", "sin": "kiln_csin", "cos": "kiln_ccos", "tan": "kiln_ctan",
    "sinh": "kiln_csinh", "cosh": "kiln_ccosh", "tanh": "kiln_ctanh", "arcsin": "kiln_casin",
    "arccos": "kiln_cacos", "arctan": "kiln_catan", "arcsinh": "kiln_casinh",
    "arccosh": "kiln_cacosh", "arctanh": "kiln_catanh", "rint": "kiln_crint",
    "sign": "kiln_csign",
}

COMPLEX_MATH = r"""
template <typename T> using kiln_c = kiln::complex<T>;
/* exp(x + i0) is exp(x) + i0, also where exp(x) overflows (cos and sin would give inf * 0). */
template <typename T> __device__ kiln_c<T> kiln_cexp(kiln_c<T> z) {
  if (z.im == T(0)) return kiln_c<T>(::exp(z.re), z.im);
  T e = ::exp(z.re);
  return kiln_c<T>(e * ::cos(z.im), e * ::sin(z.im));
}
template <typename T> __device__ kiln_c<T> kiln_cexp2(kiln_c<T> z) {
  const T ln2 = T(0.693147180559945309417232121458176568);
  return kiln_cexp(kiln_c<T>(z.re * ln2, z.im * ln2));
}
/* exp(z) - 1 = expm1(x) cos(y) - 2 sin^2(y / 2) + i exp(x) sin(y): no cancellation near 0
 * (and, as NumPy's, NaN for the imaginary part of expm1(inf + 0i)). */
template <typename T> __device__ kiln_c<T> kiln_cexpm1(kiln_c<T> z) {
  T h = ::sin(z.im / T(2));
  return kiln_c<T>(::expm1(z.re) * ::cos(z.im) - T(2) * h * h, ::exp(z.re) * ::sin(z.im));
}
template <typename T> __device__ kiln_c<T> kiln_clog2(kiln_c<T> z) {
  const T inv_ln2 = T(1.44269504088896340735992468100189214);
  kiln_c<T> l = kiln::log(z);
  return kiln_c<T>(l.re * inv_ln2, l.im * inv_ln2);
}
/* log(1 + z): near z = 0, log|1 + z| = log1p(2x + x^2 + y^2) / 2 keeps its digits. */
template <typename T> __device__ kiln_c<T> kiln_clog1p(kiln_c<T> z) {
  T x = z.re, y = z.im;
  T re = (::fabs(x) < T(0.5) && ::fabs(y) < T(0.5)) ? T(0.5) * ::log1p(x * (T(2) + x) + y * y)
                                                     : ::log(::hypot(T(1) + x, y));
  return kiln_c<T>(re, ::atan2(y, T(1) + x));
}
template <typename T> __device__ kiln_c<T> kiln_csinh(kiln_c<T> z) {
  if (z.im == T(0)) return kiln_c<T>(::sinh(z.re), z.im);
  if (z.re == T(0)) return kiln_c<T>(z.re, ::sin(z.im));
  return kiln_c<T>(::sinh(z.re) * ::cos(z.im), ::cosh(z.re) * ::sin(z.im));
}
template <typename T> __device__ kiln_c<T> kiln_ccosh(kiln_c<T> z) {
  if (z.im == T(0)) return kiln_c<T>(::cosh(z.re), ::copysign(T(0), z.re) * z.im);
  if (z.re == T(0)) return kiln_c<T>(::cos(z.im), ::copysign(T(0), z.im) * z.re);
  return kiln_c<T>(::cosh(z.re) * ::cos(z.im), ::sinh(z.re) * ::sin(z.im));
}
template <typename T> __device__ kiln_c<T> kiln_ctanh(kiln_c<T> z) {
  T x = z.re, y = z.im;
  const T big = sizeof(T) == 4 ? T(9) : T(22);
  if (::fabs(x) >= big) {
    T e = ::exp(T(-2) * ::fabs(x));
    return kiln_c<T>(::copysign(T(1), x), y == T(0) ? y : T(4) * ::sin(y) * ::cos(y) * e);
  }
  if (y == T(0)) return kiln_c<T>(::tanh(x), y);
  if (x == T(0) && !::isfinite(y)) return kiln_c<T>(x, y - y); /* C11: +-0 + i NaN */
  T t = ::tan(y), beta = T(1) + t * t, s = ::sinh(x), rho = ::sqrt(T(1) + s * s);
  T d = T(1) + beta * s * s;
  return kiln_c<T>(beta * rho * s / d, t / d);
}
/* f(z) = -i g(iz), with iz = -y + ix and -i(a + ib) = b - ia. */
template <typename T> __device__ kiln_c<T> kiln_csin(kiln_c<T> z) {
  kiln_c<T> w = kiln_csinh(kiln_c<T>(-z.im, z.re));
  return kiln_c<T>(w.im, -w.re);
}
template <typename T> __device__ kiln_c<T> kiln_ccos(kiln_c<T> z) {
  return kiln_ccosh(kiln_c<T>(-z.im, z.re));
}
template <typename T> __device__ kiln_c<T> kiln_ctan(kiln_c<T> z) {
  kiln_c<T> w = kiln_ctanh(kiln_c<T>(-z.im, z.re));
  return kiln_c<T>(w.im, -w.re);
}
/* sqrt with C99's infinities (kiln::sqrt(x + i inf) would be inf + i NaN), for the functions
 * below; the principal branch, sign of a zero imaginary part kept. */
template <typename T> __device__ kiln_c<T> kiln_csqrt(kiln_c<T> z) {
  T x = z.re, y = z.im;
  if (::isinf(y)) return kiln_c<T>(::fabs(y), y);
  if (::isinf(x)) {
    if (x > T(0)) return kiln_c<T>(x, ::isnan(y) ? y : ::copysign(T(0), y));
    return kiln_c<T>(::isnan(y) ? ::fabs(y) : T(0), ::copysign(-x, y));
  }
  return kiln::sqrt(z);
}
/* Kahan: asin z = atan(x / Re(sqrt(1-z) sqrt(1+z))) + i asinh(Im(conj(sqrt(1-z)) sqrt(1+z))),
 * for finite z. */
template <typename T> __device__ kiln_c<T> kiln_casin_finite(kiln_c<T> z) {
  kiln_c<T> a = kiln_csqrt(kiln_c<T>(T(1) - z.re, -z.im));
  kiln_c<T> b = kiln_csqrt(kiln_c<T>(T(1) + z.re, z.im));
  return kiln_c<T>(::atan2(z.re, a.re * b.re - a.im * b.im), ::asinh(a.re * b.im - a.im * b.re));
}
/* asinh w = -i asin(iw); an infinite part makes it inf + i(the angle of w), as C99's. */
template <typename T> __device__ kiln_c<T> kiln_casinh(kiln_c<T> w) {
  T u = w.re, v = w.im;
  if (v == T(0)) return kiln_c<T>(::asinh(u), v);
  if (::isinf(u) || ::isinf(v)) {
    T inf = ::isinf(u) ? ::fabs(u) : ::fabs(v);
    T re = ::isnan(u) ? inf : ::copysign(inf, u);
    return kiln_c<T>(re, ::isnan(v) || ::isnan(u) ? T(::nan("")) : ::copysign(::atan2(::fabs(v), ::fabs(u)), v));
  }
  kiln_c<T> r = kiln_casin_finite(kiln_c<T>(-v, u));
  return kiln_c<T>(r.im, -r.re);
}
template <typename T> __device__ kiln_c<T> kiln_casin(kiln_c<T> z) {
  kiln_c<T> w = kiln_casinh(kiln_c<T>(-z.im, z.re));
  return kiln_c<T>(w.im, -w.re);
}
/* Kahan: acos z = 2 atan(Re sqrt(1-z) / Re sqrt(1+z)) + i asinh(Im(conj(sqrt(1+z)) sqrt(1-z))). */
template <typename T> __device__ kiln_c<T> kiln_cacos(kiln_c<T> z) {
  kiln_c<T> a = kiln_csqrt(kiln_c<T>(T(1) - z.re, -z.im));
  kiln_c<T> b = kiln_csqrt(kiln_c<T>(T(1) + z.re, z.im));
  return kiln_c<T>(T(2) * ::atan2(a.re, b.re), ::asinh(b.re * a.im - b.im * a.re));
}
/* Kahan: acosh z = asinh(Re(conj(sqrt(z-1)) sqrt(z+1))) + 2i atan(Im sqrt(z-1) / Re sqrt(z+1)). */
template <typename T> __device__ kiln_c<T> kiln_cacosh(kiln_c<T> z) {
  kiln_c<T> a = kiln_csqrt(kiln_c<T>(z.re - T(1), z.im));
  kiln_c<T> b = kiln_csqrt(kiln_c<T>(z.re + T(1), z.im));
  return kiln_c<T>(::asinh(a.re * b.re + a.im * b.im), T(2) * ::atan2(a.im, b.re));
}
/* atanh z = log1p(4x / ((1-x)^2 + y^2)) / 4 + i atan2(2y, (1-x)(1+x) - y^2) / 2. */
template <typename T> __device__ kiln_c<T> kiln_catanh_right(T x, T y);
/* atanh is odd: it is computed where Re z >= 0, so that 4x / ((1-x)^2 + y^2) >= 0 and log1p
 * loses nothing to cancellation (near z = -1 it would), then negated. */
template <typename T> __device__ kiln_c<T> kiln_catanh(kiln_c<T> z) {
  if (!::signbit(z.re)) return kiln_catanh_right(z.re, z.im);
  kiln_c<T> w = kiln_catanh_right(-z.re, -z.im);
  return kiln_c<T>(-w.re, -w.im);
}
template <typename T> __device__ kiln_c<T> kiln_catanh_right(T x, T y) {
  T u = T(1) - x;
  const T half_pi = T(1.57079632679489661923132169163975144);
  if (::isinf(x) || ::isinf(y)) return kiln_c<T>(::copysign(T(0), x), ::isnan(y) ? y : ::copysign(half_pi, y));
  if (x == T(0) && ::isnan(y)) return kiln_c<T>(x, y); /* C99: +-0 + i NaN */
  const T big = sizeof(T) == 4 ? T(1e18) : T(1e150);
  if (::fabs(x) > big || ::fabs(y) > big) {
    /* atanh z = 1/z + O(1/z^3) real part and +-pi/2 imaginary part: no squares to overflow. */
    T h = ::hypot(x, y);
    return kiln_c<T>((x / h) / h, ::copysign(half_pi, y));
  }
  T re = T(0.25) * ::log1p(T(4) * x / (u * u + y * y));
  return kiln_c<T>(re, T(0.5) * ::atan2(T(2) * y, u * (T(1) + x) - y * y));
}
template <typename T> __device__ kiln_c<T> kiln_catan(kiln_c<T> z) {
  kiln_c<T> w = kiln_catanh(kiln_c<T>(-z.im, z.re));
  return kiln_c<T>(w.im, -w.re);
}
template <typename T> __device__ kiln_c<T> kiln_crint(kiln_c<T> z) {
  return kiln_c<T>(::rint(z.re), ::rint(z.im));
}
/* NumPy 2's sign of a complex number: z / |z|, and 0 for 0. */
template <typename T> __device__ kiln_c<T> kiln_csign(kiln_c<T> z) {
  T m = kiln::abs(z);
  if (m == T(0)) return kiln_c<T>(T(0), T(0));
  if (::isinf(m)) {
    /* An infinite part dominates: its direction, or NaN where both are infinite. */
    T r = ::isinf(z.re) ? ::copysign(T(1), z.re) : T(0), i = ::isinf(z.im) ? ::copysign(T(1), z.im) : T(0);
    if (r != T(0) && i != T(0)) return kiln_c<T>(T(::nan("")), T(::nan("")));
    return kiln_c<T>(r, i);
  }
  return kiln_c<T>(z.re / m, z.im / m);
}
"""


def preamble(dtypes):
    """What a cumath kernel over dtypes includes: the operators' helpers, and the complex
    functions when a dtype is complex."""
    base = _ops._preamble(dtypes)
    if any(np.dtype(d).kind == "c" for d in dtypes):
        base += COMPLEX_MATH
    return base


def complex_call(func, value):
    """C of NumPy's `func` of a complex value (the C of a kiln::complex)."""
    return f"{COMPLEX_FUNCS[func]}({value})"


def frexp(src, sig_dtype):
    """C of frexp over array x (of src): significand to sig, exponent to ex."""
    t = _ops.compute_ctype(src)
    return (f"{t} _v = {_ops.load('x', 'x_i', src, src)}; int _e; "
            f"{t} _m = frexp(_v, &_e); "
            f"sig[sig_i] = {_ops.store('_m', src, sig_dtype)}; ex[ex_i] = _e")


def modf(src, frac_dtype, int_dtype):
    """C of modf over array x: fractional part to frac, integral part to whole."""
    t = _ops.compute_ctype(src)
    return (f"{t} _v = {_ops.load('x', 'x_i', src, src)}; {t} _w; "
            f"{t} _f = modf(_v, &_w); "
            f"frac[frac_i] = {_ops.store('_f', src, frac_dtype)}; "
            f"whole[whole_i] = {_ops.store('_w', src, int_dtype)}")


# Exponents past these change no result (they overflow or underflow every finite
# significand), so clamping them to an int loses nothing.
_EXP_LIMIT = 100000


def ldexp(sig, exp, loop, out, exp_is_array):
    """C of ldexp(s, e) into z: s an array of sig, e an array (or scalar) of exp, the
    result computed as the float dtype loop and stored as out. Float exponents are
    truncated toward zero first (PyCUDA passes its exponents as floats)."""
    e = _ops.load("e", "e_i", exp, exp) if exp_is_array else "e"
    exp = np.dtype(exp)
    if exp.kind == "f":
        clamp = f"(int)fmax(fmin(trunc((double)({e})), {_EXP_LIMIT}.0), -{_EXP_LIMIT}.0)"
    elif exp.kind == "u" or exp.kind == "b":
        clamp = f"(int)((unsigned long long)({e}) > {_EXP_LIMIT}ull ? {_EXP_LIMIT} : ({e}))"
    else:
        clamp = (f"(int)((long long)({e}) > {_EXP_LIMIT}ll ? {_EXP_LIMIT}ll : "
                 f"(long long)({e}) < -{_EXP_LIMIT}ll ? -{_EXP_LIMIT}ll : (long long)({e}))")
    value = f"ldexp({_ops.load('s', 's_i', sig, loop)}, {clamp})"
    return f"z[z_i] = {_ops.store(value, loop, out)}"
