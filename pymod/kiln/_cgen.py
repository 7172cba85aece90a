"""What generated kernels share: the C type of each NumPy dtype, kernel argument lists
(PyCUDA's VectorArg and ScalarArg, and the parser of "float *x, int n"), CUDA's vector types
as NumPy dtypes, and the small complex-number header kiln's kernels include.

Everything here is plain Python run once per kernel that is generated; nothing here is on the
path of a call.
"""
import inspect
import re

import numpy as np

# ---- C types of dtypes -----------------------------------------------------------------------

# The names PyCUDA's dtype_to_ctype gives, so source built from them reads the same; 64-bit
# integers are `long`, which is 64 bits in device code on the 64-bit platforms CUDA supports.
_CTYPE = {
    np.dtype(np.bool_): "bool",
    np.dtype(np.int8): "signed char",
    np.dtype(np.uint8): "unsigned char",
    np.dtype(np.int16): "short",
    np.dtype(np.uint16): "unsigned short",
    np.dtype(np.int32): "int",
    np.dtype(np.uint32): "unsigned int",
    np.dtype(np.int64): "long",
    np.dtype(np.uint64): "unsigned long",
    np.dtype(np.float16): "__half",
    np.dtype(np.float32): "float",
    np.dtype(np.float64): "double",
    np.dtype(np.complex64): "pycuda::complex<float>",
    np.dtype(np.complex128): "pycuda::complex<double>",
}

# Registered struct dtypes (CUDA's vector types, and any a user registers) by their C name.
_REGISTERED = {}


def register_dtype(dtype, c_name):
    """Makes `dtype` known to dtype_to_ctype and the argument parser as the C type `c_name`."""
    dtype = np.dtype(dtype)
    _REGISTERED[dtype] = c_name
    _NAMED[c_name] = dtype


# The types <pycuda-helpers.hpp> defines for floats read through a texture as ints, which
# with_fp_tex_hack names as PyCUDA's does.
_FP_TEX = {np.dtype(np.float32): "fp_tex_float", np.dtype(np.float64): "fp_tex_double",
           np.dtype(np.complex64): "fp_tex_cfloat", np.dtype(np.complex128): "fp_tex_cdouble"}


def dtype_to_ctype(dtype, with_fp_tex_hack=False):
    """The C type that holds one element of `dtype` in a kernel (PyCUDA's names)."""
    if dtype is None:
        raise ValueError("dtype may not be None")
    dtype = np.dtype(dtype)
    if with_fp_tex_hack and dtype in _FP_TEX:
        return _FP_TEX[dtype]
    if dtype.byteorder == ">":
        raise ValueError(f"dtype {dtype} is big-endian; GPUs are little-endian")
    if dtype.isbuiltin and dtype.newbyteorder("=") in _CTYPE:
        return _CTYPE[dtype.newbyteorder("=")]
    try:
        return _REGISTERED[dtype]
    except KeyError:
        raise ValueError(f"no C type is known for dtype {dtype!r}; register_dtype() names "
                         "one for a struct dtype") from None


# C spellings of types (after qualifiers and extra spaces are gone) and their dtypes.
_NAMED = {
    "bool": np.dtype(np.bool_),
    "char": np.dtype(np.int8), "signed char": np.dtype(np.int8), "int8_t": np.dtype(np.int8),
    "unsigned char": np.dtype(np.uint8), "uint8_t": np.dtype(np.uint8),
    "short": np.dtype(np.int16), "short int": np.dtype(np.int16),
    "signed short": np.dtype(np.int16), "int16_t": np.dtype(np.int16),
    "unsigned short": np.dtype(np.uint16), "unsigned short int": np.dtype(np.uint16),
    "uint16_t": np.dtype(np.uint16),
    "int": np.dtype(np.int32), "signed int": np.dtype(np.int32), "signed": np.dtype(np.int32),
    "int32_t": np.dtype(np.int32),
    "unsigned": np.dtype(np.uint32), "unsigned int": np.dtype(np.uint32),
    "uint32_t": np.dtype(np.uint32),
    "long": np.dtype(np.int64), "long int": np.dtype(np.int64), "signed long": np.dtype(np.int64),
    "long long": np.dtype(np.int64), "long long int": np.dtype(np.int64),
    "int64_t": np.dtype(np.int64), "ptrdiff_t": np.dtype(np.int64),
    "ssize_t": np.dtype(np.int64), "intptr_t": np.dtype(np.int64),
    "unsigned long": np.dtype(np.uint64), "unsigned long int": np.dtype(np.uint64),
    "unsigned long long": np.dtype(np.uint64), "unsigned long long int": np.dtype(np.uint64),
    "uint64_t": np.dtype(np.uint64), "size_t": np.dtype(np.uint64),
    "uintptr_t": np.dtype(np.uint64),
    "half": np.dtype(np.float16), "__half": np.dtype(np.float16),
    "float": np.dtype(np.float32), "double": np.dtype(np.float64),
}
# The other orders of the same words that PyCUDA's registry (compyte's dtypes) knows.
for _name, _dtype in (("signed short int", np.int16), ("short signed int", np.int16),
                      ("short unsigned int", np.uint16), ("signed long int", np.int64),
                      ("long signed int", np.int64), ("long unsigned int", np.uint64),
                      ("signed long long int", np.int64), ("long long signed int", np.int64),
                      ("long long unsigned int", np.uint64)):
    _NAMED[_name] = np.dtype(_dtype)
for _ns in ("pycuda", "kiln"):
    _NAMED[f"{_ns}::complex<float>"] = np.dtype(np.complex64)
    _NAMED[f"{_ns}::complex<double>"] = np.dtype(np.complex128)


def ctype_to_dtype(c_type):
    """The dtype of a C type name ("unsigned int", "float2", "pycuda::complex<float>")."""
    key = _normalize_type(c_type)
    try:
        return _NAMED[key]
    except KeyError:
        raise ValueError(f"unknown C type {c_type!r}: kiln knows the arithmetic types, "
                         "CUDA's vector types (float4, ...), pycuda::complex<float|double> "
                         "and types given to register_dtype()") from None


_QUALIFIERS = re.compile(r"\b(const|volatile|__restrict__|__restrict|restrict|__global|"
                         r"__global__|__device__)\b")


_PUNCTUATION = re.compile(r"\s*([<>,:])\s*")


def _normalize_type(text):
    text = _QUALIFIERS.sub(" ", text)
    text = _PUNCTUATION.sub(lambda m: m.group(1), text)  # no template to parse
    return " ".join(text.split())


# ---- CUDA's vector types ---------------------------------------------------------------------

class vec:  # noqa: N801  (PyCUDA's name)
    """CUDA's vector types as NumPy dtypes with fields x, y, z, w: `vec.float4`, and a maker
    for each, `vec.make_float4(1, 2, 3, 4)` (PyCUDA's gpuarray.vec)."""


def _vec_maker(name, dtype, fields):
    """make_<name>(x, y, ...): a 0-d array of the vector type, as PyCUDA's gives (its fields by
    position or by name)."""
    def maker(*values, **named):
        if len(values) > len(fields) or set(named) - set(fields[len(values):]) or \
                len(values) + len(named) != len(fields):
            given = ", ".join([*map(repr, values), *(f"{k}={v!r}" for k, v in named.items())])
            raise TypeError(f"make_{name} takes {len(fields)} values, {', '.join(fields)}, not "
                            f"({given})")
        values = values + tuple(named[f] for f in fields[len(values):])
        return np.array(values, dtype=dtype)

    maker.__name__ = maker.__qualname__ = f"make_{name}"
    maker.__signature__ = inspect.Signature(
        [inspect.Parameter(f, inspect.Parameter.POSITIONAL_OR_KEYWORD) for f in fields])
    return maker


def _make_vec_types():
    # CUDA aligns a 2- or 4-element vector to its whole size (up to 16 bytes); 3-element ones
    # to their element. NumPy's dtype keeps the size; kiln passes scalars at the kernel's own
    # alignment, read from the PTX.
    bases = [("char", np.int8), ("uchar", np.uint8), ("short", np.int16),
             ("ushort", np.uint16), ("int", np.int32), ("uint", np.uint32),
             ("long", np.int64), ("ulong", np.uint64), ("longlong", np.int64),
             ("ulonglong", np.uint64), ("float", np.float32), ("double", np.float64)]
    fields = "xyzw"
    for base, scalar in bases:
        for count in (1, 2, 3, 4):
            name = f"{base}{count}"
            dtype = np.dtype([(fields[i], scalar) for i in range(count)])
            setattr(vec, name, dtype)
            if dtype in _REGISTERED:  # longlong2 after long2: read as one, written as long2,
                _NAMED[name] = dtype  # as PyCUDA's registry keeps a dtype's first name
            else:
                register_dtype(dtype, name)

            setattr(vec, f"make_{name}", staticmethod(_vec_maker(name, dtype, fields[:count])))


_make_vec_types()


# ---- Kernel arguments ------------------------------------------------------------------------

class Argument:
    """A kernel parameter: its dtype and its name."""

    def __init__(self, dtype, name):
        self.dtype = np.dtype(dtype)
        self.name = name

    def __repr__(self):
        return f"{type(self).__name__}({self.name!r}, {self.dtype})"

    def __eq__(self, other):
        return type(self) is type(other) and (self.dtype, self.name) == (other.dtype, other.name)

    def __hash__(self):
        return hash((type(self), self.dtype, self.name))


class VectorArg(Argument):
    """A pointer to elements of `dtype`: passed an array (or a device pointer)."""

    struct_char = "P"

    def declarator(self):
        return f"{dtype_to_ctype(self.dtype)} *{self.name}"


class ScalarArg(Argument):
    """One value of `dtype`, passed by value."""

    def declarator(self):
        return f"{dtype_to_ctype(self.dtype)} {self.name}"

    @property
    def struct_char(self):
        char = self.dtype.char
        return f"{self.dtype.itemsize}s" if char == "V" else char


_DECLARATOR = re.compile(r"^(?P<type>.*?)(?P<stars>[\s*]*\*)?\s*(?P<name>[A-Za-z_]\w*)\s*"
                         r"(?P<array>\[\s*\d*\s*\])?\s*$", re.S)


def parse_c_arg(c_arg):
    """A VectorArg or ScalarArg from one C declarator: "float *x", "const int n",
    "pycuda::complex<float> *z", "float4 v"."""
    text = _QUALIFIERS.sub(" ", c_arg).strip()
    m = _DECLARATOR.match(text)
    if not m or not m.group("type").strip():
        raise ValueError(f"cannot read the C declarator {c_arg!r}; write it as in C, e.g. "
                         "'float *x' or 'int n'")
    dtype = ctype_to_dtype(m.group("type"))
    pointer = bool(m.group("stars")) or bool(m.group("array"))
    if m.group("stars") and m.group("stars").count("*") > 1:
        raise ValueError(f"{c_arg!r}: pointers to pointers are not kernel arrays")
    return (VectorArg if pointer else ScalarArg)(dtype, m.group("name"))


def _split_args(text):
    """Splits "float *x, pycuda::complex<float> *y" at the commas outside <...>."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch == "<":
            depth += 1
        elif ch == ">":
            depth -= 1
        elif ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p for p in (p.strip() for p in parts) if p]


def parse_arguments(arguments):
    """A list of Arguments from a string of C declarators or a list of them and Arguments."""
    if isinstance(arguments, str):
        items = _split_args(arguments)
    else:
        items = list(arguments)
    out = []
    for item in items:
        if isinstance(item, Argument):
            out.append(item)
        elif isinstance(item, str):
            out.append(parse_c_arg(item))
        else:
            raise TypeError(f"an argument is a C declarator (str), a VectorArg or a ScalarArg, "
                            f"not {type(item).__name__}")
    names = [a.name for a in out]
    dup = {n for n in names if names.count(n) > 1}
    if dup:
        raise ValueError(f"argument names repeat: {', '.join(sorted(dup))}")
    return out


def get_arg_type(c_arg):
    """PyCUDA's prepare() type character of one C declarator."""
    return parse_c_arg(c_arg).struct_char


# ---- The headers generated kernels include ---------------------------------------------------

COMPLEX_HEADER_NAME = "kiln_complex.h"

# A small complex type (with kiln::complex as another name for it): <cuda/std/complex> takes
# 0.6 s to compile, this a few milliseconds. Division is Smith's, abs uses hypot, as NumPy's.
# It is declared in namespace pycuda, as PyCUDA's is, so that a function a program adds to that
# namespace for it (skcuda's parray operators) is found by argument-dependent lookup.
COMPLEX_HEADER = r"""
#pragma once
extern "C++" {  /* PyCUDA's compile() puts the source, and so this header, in extern "C" */
namespace pycuda {
template <bool B> struct _kiln_if {};
template <> struct _kiln_if<true> { typedef int type; };
/* Aligned as its parts are, as PyCUDA's and NumPy's complex types are (complex64: 4 bytes):
 * a struct holding one lays out as NumPy's aligned record of the same fields does. */
template <typename T> struct complex {
  /* _M_re and _M_im are PyCUDA's header's names for the parts, which kernels written for it
   * use (sincos(t, &z._M_re, &z._M_im)). */
  union { T re; T _M_re; };
  union { T im; T _M_im; };
  __host__ __device__ complex(T r = T(0), T i = T(0)) : re(r), im(i) {}
  /* Widening is implicit and narrowing explicit, as std::complex's; assignment takes either,
   * as PyCUDA's does. */
  template <typename U, typename _kiln_if<(sizeof(U) < sizeof(T))>::type = 0>
  __host__ __device__ complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}
  template <typename U, typename _kiln_if<(sizeof(U) >= sizeof(T))>::type = 0>
  __host__ __device__ explicit complex(const complex<U> &o) : re(T(o.re)), im(T(o.im)) {}
  template <typename U> __host__ __device__ complex &operator=(const complex<U> &o) { re = T(o.re); im = T(o.im); return *this; }
  __host__ __device__ complex &operator=(T x) { re = x; im = T(0); return *this; }
  /* Assignment to a volatile complex and + and * of volatile ones, as PyCUDA's header has them
   * for reductions through volatile shared memory (and structs written for those, which
   * define volatile operators of their own over these). Templates, so that the type keeps its
   * implicit (trivial) copy assignment. */
  template <typename U> __host__ __device__ volatile complex &operator=(const complex<U> &o) volatile { re = T(o.re); im = T(o.im); return *this; }
  __host__ __device__ volatile complex &operator=(T x) volatile { re = x; im = T(0); return *this; }
  template <typename U> __host__ __device__ complex &operator=(const volatile complex<U> &o) { re = T(o.re); im = T(o.im); return *this; }
  __host__ __device__ T real() const { return re; }
  __host__ __device__ T imag() const { return im; }
  __host__ __device__ void real(T v) { re = v; }
  __host__ __device__ void imag(T v) { im = v; }
  __host__ __device__ complex &operator+=(const complex &o) { re += o.re; im += o.im; return *this; }
  __host__ __device__ complex &operator-=(const complex &o) { re -= o.re; im -= o.im; return *this; }
  __host__ __device__ complex &operator*=(const complex &o) { *this = *this * o; return *this; }
  __host__ __device__ complex &operator/=(const complex &o) { *this = *this / o; return *this; }
  __host__ __device__ friend complex operator+(const complex &a, const complex &b) { return complex(a.re + b.re, a.im + b.im); }
  __host__ __device__ friend complex operator-(const complex &a, const complex &b) { return complex(a.re - b.re, a.im - b.im); }
  __host__ __device__ friend complex operator*(const complex &a, const complex &b) { return complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
  __host__ __device__ friend complex operator/(const complex &a, const complex &b) {
    T ar = b.re < 0 ? -b.re : b.re, ai = b.im < 0 ? -b.im : b.im;
    if (ar >= ai) {
      if (ar == T(0) && ai == T(0)) return complex(a.re / ar, a.im / ai);
      T r = b.im / b.re, d = b.re + b.im * r;
      return complex((a.re + a.im * r) / d, (a.im - a.re * r) / d);
    }
    T r = b.re / b.im, d = b.re * r + b.im;
    return complex((a.re * r + a.im) / d, (a.im * r - a.re) / d);
  }
  __host__ __device__ friend complex operator+(const volatile complex &a, const volatile complex &b) { return complex(a.re + b.re, a.im + b.im); }
  __host__ __device__ friend complex operator*(const volatile complex &a, const volatile complex &b) { return complex(a.re * b.re - a.im * b.im, a.re * b.im + a.im * b.re); }
  __host__ __device__ friend complex operator+(const complex &a) { return a; }
  __host__ __device__ friend complex operator-(const complex &a) { return complex(-a.re, -a.im); }
  __host__ __device__ friend bool operator==(const complex &a, const complex &b) { return a.re == b.re && a.im == b.im; }
  __host__ __device__ friend bool operator!=(const complex &a, const complex &b) { return !(a == b); }
};
template <typename T> __host__ __device__ T real(const complex<T> &z) { return z.re; }
template <typename T> __host__ __device__ T imag(const complex<T> &z) { return z.im; }
template <typename T> __host__ __device__ complex<T> conj(const complex<T> &z) { return complex<T>(z.re, -z.im); }
/* Templates, as PyCUDA's are: kernels name them pycuda::abs<double>(z). */
template <typename T> __host__ __device__ T abs(const complex<T> &z) { return ::hypot(z.re, z.im); }
template <typename T> __host__ __device__ T arg(const complex<T> &z) { return ::atan2(z.im, z.re); }
template <typename T> __host__ __device__ T norm(const complex<T> &z) { return z.re * z.re + z.im * z.im; }
__host__ __device__ inline complex<float> polar(float r, float t = 0) { return complex<float>(r * cosf(t), r * sinf(t)); }
__host__ __device__ inline complex<double> polar(double r, double t = 0) { return complex<double>(r * cos(t), r * sin(t)); }
__host__ __device__ inline complex<float> exp(const complex<float> &z) { float e = expf(z.re); return complex<float>(e * cosf(z.im), e * sinf(z.im)); }
__host__ __device__ inline complex<double> exp(const complex<double> &z) { double e = ::exp(z.re); return complex<double>(e * ::cos(z.im), e * ::sin(z.im)); }
__host__ __device__ inline complex<float> log(const complex<float> &z) { return complex<float>(logf(abs(z)), arg(z)); }
__host__ __device__ inline complex<double> log(const complex<double> &z) { return complex<double>(::log(abs(z)), arg(z)); }
template <typename T> __host__ __device__ complex<T> log10(const complex<T> &z) { complex<T> l = log(z); return complex<T>(l.re / T(2.302585092994045684), l.im / T(2.302585092994045684)); }
__host__ __device__ inline complex<float> sqrt(const complex<float> &z) {
  float m = abs(z);
  if (m == 0.0f) return complex<float>(0.0f, z.im);
  float t = sqrtf(0.5f * (m + fabsf(z.re)));
  return z.re >= 0.0f ? complex<float>(t, z.im / (2.0f * t)) : complex<float>(fabsf(z.im) / (2.0f * t), copysignf(t, z.im));
}
__host__ __device__ inline complex<double> sqrt(const complex<double> &z) {
  double m = abs(z);
  if (m == 0.0) return complex<double>(0.0, z.im);
  double t = ::sqrt(0.5 * (m + fabs(z.re)));
  return z.re >= 0.0 ? complex<double>(t, z.im / (2.0 * t)) : complex<double>(fabs(z.im) / (2.0 * t), copysign(t, z.im));
}
template <typename T> __host__ __device__ complex<T> sin(const complex<T> &z) { return complex<T>(::sin(z.re) * ::cosh(z.im), ::cos(z.re) * ::sinh(z.im)); }
template <typename T> __host__ __device__ complex<T> cos(const complex<T> &z) { return complex<T>(::cos(z.re) * ::cosh(z.im), -::sin(z.re) * ::sinh(z.im)); }
template <typename T> __host__ __device__ complex<T> tan(const complex<T> &z) { return sin(z) / cos(z); }
template <typename T> __host__ __device__ complex<T> sinh(const complex<T> &z) { return complex<T>(::sinh(z.re) * ::cos(z.im), ::cosh(z.re) * ::sin(z.im)); }
template <typename T> __host__ __device__ complex<T> cosh(const complex<T> &z) { return complex<T>(::cosh(z.re) * ::cos(z.im), ::sinh(z.re) * ::sin(z.im)); }
template <typename T> __host__ __device__ complex<T> tanh(const complex<T> &z) { return sinh(z) / cosh(z); }
template <typename T> __host__ __device__ complex<T> pow(const complex<T> &a, const complex<T> &b) {
  if (a.re == T(0) && a.im == T(0)) return (b.re == T(0) && b.im == T(0)) ? complex<T>(T(1)) : complex<T>(T(0));
  return exp(b * log(a));
}
template <typename T> __host__ __device__ complex<T> pow(const complex<T> &a, T b) { return pow(a, complex<T>(b)); }
template <typename T> __host__ __device__ complex<T> pow(T a, const complex<T> &b) { return pow(complex<T>(a), b); }
// PyCUDA's header has these as plain functions, so that the real or integer argument of
// pow(z, 2), pow(zf, 2.0) or pow(z, n) converts, where a template's T could not be deduced.
__host__ __device__ inline complex<float> pow(const complex<float> &a, const float &b) { return pow(a, complex<float>(b)); }
__host__ __device__ inline complex<float> pow(const float &a, const complex<float> &b) { return pow(complex<float>(a), b); }
__host__ __device__ inline complex<double> pow(const complex<double> &a, const double &b) { return pow(a, complex<double>(b)); }
__host__ __device__ inline complex<double> pow(const double &a, const complex<double> &b) { return pow(complex<double>(a), b); }
// A real of another type (pow(zf, 2.0), pow(zf, n) with a double or an unsigned n) converts
// to the complex number's part type, and two complex types meet in the wider, as nvcc picks
// among PyCUDA's overloads; without these NVRTC finds such a call ambiguous. Templates, so that
// the plain functions above stay the exact matches they are.
template <typename U> struct _kiln_real { enum { value = 0 }; };
template <> struct _kiln_real<char> { enum { value = 1 }; };
template <> struct _kiln_real<signed char> { enum { value = 1 }; };
template <> struct _kiln_real<unsigned char> { enum { value = 1 }; };
template <> struct _kiln_real<short> { enum { value = 1 }; };
template <> struct _kiln_real<unsigned short> { enum { value = 1 }; };
template <> struct _kiln_real<int> { enum { value = 1 }; };
template <> struct _kiln_real<unsigned> { enum { value = 1 }; };
template <> struct _kiln_real<long> { enum { value = 1 }; };
template <> struct _kiln_real<unsigned long> { enum { value = 1 }; };
template <> struct _kiln_real<long long> { enum { value = 1 }; };
template <> struct _kiln_real<unsigned long long> { enum { value = 1 }; };
template <> struct _kiln_real<float> { enum { value = 1 }; };
template <> struct _kiln_real<double> { enum { value = 1 }; };
template <typename T, typename U, typename _kiln_if<_kiln_real<U>::value>::type = 0>
__host__ __device__ complex<T> pow(const complex<T> &a, const U &b) { return pow(a, complex<T>(T(b))); }
template <typename T, typename U, typename _kiln_if<_kiln_real<U>::value>::type = 0>
__host__ __device__ complex<T> pow(const U &a, const complex<T> &b) { return pow(complex<T>(T(a)), b); }
__host__ __device__ inline complex<double> pow(const complex<float> &a, const complex<double> &b) { return pow(complex<double>(a), b); }
__host__ __device__ inline complex<double> pow(const complex<double> &a, const complex<float> &b) { return pow(a, complex<double>(b)); }
}  // namespace pycuda
/* PyCUDA's header defines these two where nothing has, and sources that include it use them;
 * spelled as kiln's <float.h> has them, so that either may come first. */
#ifndef FLT_MAX
#define FLT_MAX 3.40282346638528859811704183484516925e+38F
#endif
#ifndef DBL_MAX
#define DBL_MAX 1.79769313486231570814527423731704357e+308
#endif
/* kiln's name for the type, which its generated kernels use. */
namespace kiln { using pycuda::complex; using pycuda::real; using pycuda::imag; using pycuda::conj;
using pycuda::abs; using pycuda::arg; using pycuda::norm; using pycuda::polar; using pycuda::exp;
using pycuda::log; using pycuda::log10; using pycuda::sqrt; using pycuda::sin; using pycuda::cos;
using pycuda::tan; using pycuda::sinh; using pycuda::cosh; using pycuda::tanh; using pycuda::pow; }
}  // extern "C++"
"""

# PyCUDA's headers, which sources written for it include (its SourceModule has them on every
# include path): kiln's complex type under PyCUDA's header name, and of <pycuda-helpers.hpp>
# what CUDA 12 leaves of it (the fp_tex_* types; its texture fetches need texture references,
# which CUDA 12 removed). SourceModule gives them to a source that names one.
_PYCUDA_COMPLEX = f'#pragma once\n#include "{COMPLEX_HEADER_NAME}"\n'
_PYCUDA_HELPERS = ("#pragma once\n#include <pycuda-complex.hpp>\n"
                   "typedef float fp_tex_float;\ntypedef int2 fp_tex_double;\n"
                   "typedef uint2 fp_tex_cfloat;\ntypedef int4 fp_tex_cdouble;\n")


def _pycuda_complex_impl(real_one):
    """PyCUDA's out-of-line half of its complex type, which pycuda-complex.hpp includes and some
    preambles name alone: kiln's type has all of itself in one header. PyCUDA's own
    pycuda-complex.hpp (PYCUDA_COMPLEX_HPP_SEEN), found in a folder of the caller's, needs
    PyCUDA's half instead: real_one says where it is looked for next, or None to stop there."""
    if real_one:
        found = f"#include <{real_one}>\n"
    else:
        found = ("#error PyCUDA's own pycuda-complex.hpp, from a folder of the compile's, needs its"
                 " pycuda-complex-impl.hpp, which no include folder holds: add the folder that"
                 " holds both (PyCUDA's pycuda/cuda), or drop the copy so that kiln's complex"
                 " type serves\n")
    return (f"#pragma once\n#ifdef PYCUDA_COMPLEX_HPP_SEEN\n{found}#else\n"
            f'#include "{COMPLEX_HEADER_NAME}"\n#endif\n')


# PyCUDA's headers, which sources written for it include (its SourceModule has them on every
# include path; an older PyCUDA installed them in a folder pycuda/ of the include folder):
# kiln's complex type under PyCUDA's header names, and of <pycuda-helpers.hpp> what CUDA 12
# leaves of it (the fp_tex_* types; its texture fetches need texture references, which CUDA 12
# removed). SourceModule gives them to a source that names one, each unless a folder of the
# compile holds a file of that name, which then wins as under PyCUDA.
PYCUDA_HEADERS = {
    COMPLEX_HEADER_NAME: COMPLEX_HEADER,
    "pycuda-complex.hpp": _PYCUDA_COMPLEX,
    "pycuda-complex-impl.hpp": _pycuda_complex_impl("pycuda/pycuda-complex-impl.hpp"),
    "pycuda-helpers.hpp": _PYCUDA_HELPERS,
    "pycuda/pycuda-complex.hpp": _PYCUDA_COMPLEX,
    "pycuda/pycuda-complex-impl.hpp": _pycuda_complex_impl(None),
    "pycuda/pycuda-helpers.hpp": _PYCUDA_HELPERS,
}


HALF_HEADER = "#include <cuda_fp16.h>\n"


def needs_complex(*dtypes):
    return any(np.dtype(d).kind == "c" for d in dtypes if d is not None)


def needs_half(*dtypes):
    return any(np.dtype(d) == np.float16 for d in dtypes if d is not None)


_FLOAT_H_NAME = re.compile(r"\b(FLT|DBL|LDBL)_[A-Z_]+\b")


def includes_for(dtypes, text=""):
    """The #include lines a kernel over `dtypes` (or whose source mentions one) needs."""
    out = []
    if needs_half(*dtypes) or "__half" in text:
        out.append(HALF_HEADER)
    if needs_complex(*dtypes) or "complex<" in text:
        out.append(f'#include "{COMPLEX_HEADER_NAME}"\n')
    # PyCUDA's generated sources include its complex header, which defines FLT_MAX and DBL_MAX;
    # programs use them (and <float.h>'s other names) as neutrals and in expressions bare.
    # (The substrings first: the pattern over kiln's 3 KB of helpers took 70 us, a tenth of
    # a process's first operator.)
    if ("FLT_" in text or "DBL_" in text) and _FLOAT_H_NAME.search(text):
        out.append("#include <float.h>\n")
    return "".join(out)


def headers_for(source):
    """The in-memory headers a generated source needs (for SourceModule(headers=...))."""
    return {COMPLEX_HEADER_NAME: COMPLEX_HEADER} if COMPLEX_HEADER_NAME in source else None
