"""kiln.cumath: PyCUDA's cumath with NumPy's names and dtypes. Without a GPU: every function
exists with PyCUDA's signature, the kernel of every (function, dtype) NumPy has a loop for
compiles, bad input is refused before anything is launched (device arrays that are never
launched stand in, from a CUDA array interface), and the complex formulas, compiled for the
host, agree with NumPy. On the GPU: every function and dtype against NumPy, at sizes around
block boundaries, on views, with NaN and infinity, in place and into out=."""
import concurrent.futures
import inspect
import shutil
import subprocess
import zlib

import numpy as np
import pytest

import kiln
import kiln.cumath as cumath
from kiln import _cgen, _cumath_src, _ops

PYCUDA_UNARY = ["fabs", "ceil", "floor", "exp", "log", "log10", "sqrt", "sin", "cos", "tan",
                "asin", "acos", "atan", "sinh", "cosh", "tanh"]
NUMPY_UNARY = ["arcsin", "arccos", "arctan", "arcsinh", "arccosh", "arctanh", "asinh",
               "acosh", "atanh", "exp2", "expm1", "log2", "log1p", "trunc", "rint", "cbrt",
               "square", "reciprocal", "negative", "absolute", "abs", "sign", "signbit",
               "isnan", "isinf", "isfinite", "conj", "conjugate", "real", "imag"]
# cumath's name: NumPy's function of the same meaning.
NUMPY_OF = {"asin": np.arcsin, "acos": np.arccos, "atan": np.arctan, "asinh": np.arcsinh,
            "acosh": np.arccosh, "atanh": np.arctanh, "abs": np.absolute, "conj": np.conjugate,
            "atan2": np.arctan2}
UNARY = sorted(set(PYCUDA_UNARY + NUMPY_UNARY))
DTYPES = [np.bool_, np.int8, np.uint8, np.int32, np.int64, np.uint64, np.float16, np.float32,
          np.float64, np.complex64, np.complex128]


def numpy_of(name):
    return NUMPY_OF.get(name) or getattr(np, name)


def ufunc_name(name):
    """The name of NumPy's ufunc behind a cumath function (its _ops name)."""
    return numpy_of(name).__name__


def stand_in(shape, dtype):
    """A DeviceArray over memory that is never touched: enough for the checks made before a
    launch."""
    class Interface:
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                    "data": (0x10000, False), "version": 3, "strides": None,
                                    "stream": None}
    return kiln.asarray(Interface())


# ---- without a GPU ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", PYCUDA_UNARY + NUMPY_UNARY)
def test_one_array_functions_take_pycudas_arguments(name):
    params = inspect.signature(getattr(cumath, name)).parameters
    if name in ("real", "imag"):  # views, not kernels: kiln's own
        assert list(params) == ["array", "stream", "out"]
    else:
        assert list(params) == ["array", "stream_or_out", "stream", "out"]  # PyCUDA's
        assert params["out"].kind is inspect.Parameter.KEYWORD_ONLY
    assert params["stream"].default is None and params["out"].default is None


def test_the_other_functions_take_pycudas_arguments():
    def names(f):
        return list(inspect.signature(f).parameters)
    assert names(cumath.fmod)[:3] == ["arg", "mod", "stream"]
    assert names(cumath.frexp)[:2] == ["arg", "stream"]
    assert names(cumath.ldexp)[:3] == ["significand", "exponent", "stream"]
    assert names(cumath.modf)[:2] == ["arg", "stream"]
    for name in ("arctan2", "atan2", "hypot", "copysign"):
        assert len(names(getattr(cumath, name))) == 4
    assert set(cumath.__all__) >= set(PYCUDA_UNARY + NUMPY_UNARY)
    assert all(callable(getattr(cumath, n)) for n in cumath.__all__)


def test_the_kernel_of_every_function_and_dtype_compiles_where_numpy_has_a_loop():
    jobs = []
    for name in UNARY:
        if name in ("real", "imag"):
            continue
        for dtype in DTYPES:
            try:
                numpy_of(name).resolve_dtypes((np.dtype(dtype), None))
            except TypeError:
                with pytest.raises(TypeError):
                    cumath.unary_kernel(ufunc_name(name), dtype)
                continue
            jobs.append((cumath.unary_kernel, ufunc_name(name), dtype))
    for dtype in (np.float16, np.float32, np.float64):
        jobs += [(cumath.frexp_kernel, dtype), (cumath.modf_kernel, dtype),
                 (cumath.ldexp_kernel, dtype, np.int64, False)]
        jobs += [(cumath.ldexp_kernel, dtype, e)
                 for e in (np.int8, np.int32, np.int64, np.uint64, np.float32, np.float64)]
    jobs.append((cumath.ldexp_kernel, np.int32, np.int32))
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        kernels = [f.result() for f in [pool.submit(*j) for j in jobs]]
    assert len(kernels) > 400


def test_complex_functions_have_their_own_kernels_and_the_rest_the_operators():
    assert "kiln_casin" in cumath.unary_kernel("arcsin", np.complex64).operation
    assert "sqrt" in cumath.unary_kernel("sqrt", np.complex128).operation
    assert cumath.unary_kernel("sin", np.float32) is _ops.unary_plan(
        "sin", cumath._Like(np.float32))[0]


@pytest.mark.parametrize("name", ["fmod", "arctan2", "hypot", "copysign"])
def test_two_operand_functions_compile_for_float_dtypes(name):
    for dtype in (np.float16, np.float32, np.float64):
        plan = _ops.binary_plan(ufunc_name(name), stand_in((2,), dtype), stand_in((2,), dtype))
        assert plan[1] == np.dtype(dtype)
    assert _ops.binary_plan("fmod", stand_in((2,), np.int32), 3)[1] == np.int32


def test_bad_input_is_refused_before_a_launch():
    f32, i32 = stand_in((4,), np.float32), stand_in((4,), np.int32)
    with pytest.raises(TypeError, match="takes a device array"):
        cumath.sin(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="takes a device array"):
        cumath.sqrt(2.0)
    with pytest.raises(TypeError, match="floating-point array .* not int32"):
        cumath.frexp(i32)
    with pytest.raises(TypeError, match="floating-point array .* not complex64"):
        cumath.modf(stand_in((4,), np.complex64))
    with pytest.raises(TypeError, match="floating-point array"):
        cumath.frexp_kernel(np.int16)
    with pytest.raises(ValueError, match="could not be broadcast|shape mismatch"):
        cumath.fmod(f32, stand_in((5,), np.float32))
    with pytest.raises(ValueError, match=r"result has shape \(4,\); out has \(5,\)"):
        cumath.exp(f32, out=stand_in((5,), np.float32))
    with pytest.raises(ValueError, match=r"result has shape \(4,\); out has \(5,\)"):
        cumath.exp(f32, stand_in((5,), np.float32))  # PyCUDA's out as the second argument
    with pytest.raises(TypeError, match="exp\\(\\) got out twice"):
        cumath.exp(f32, f32, out=f32)
    with pytest.raises(TypeError, match="exp\\(\\) got stream twice"):
        cumath.exp(f32, 0, stream=0)
    with pytest.raises(TypeError, match="cannot cast the result from float64 to out's int32"):
        cumath.sqrt(i32, out=stand_in((4,), np.int32))
    with pytest.raises(TypeError, match="out is a pair"):
        cumath.frexp(f32, out=f32)
    with pytest.raises(TypeError, match="integer or float exponents, not complex64"):
        cumath.ldexp(f32, stand_in((4,), np.complex64))
    with pytest.raises(TypeError, match="exponent that is a device array or an int"):
        cumath.ldexp(f32, 2.5)
    with pytest.raises(TypeError, match="real significand"):
        cumath.ldexp(stand_in((4,), np.complex128), 3)
    with pytest.raises(TypeError, match="at least one device array"):
        cumath.hypot(3.0, 4.0)
    with pytest.raises(TypeError):  # NumPy has no complex fabs, floor or arctan2
        cumath.fabs(stand_in((4,), np.complex64))
    with pytest.raises(TypeError):
        cumath.arctan2(stand_in((4,), np.complex64), f32)


# The complex functions of _cumath_src, compiled for the host (device qualifiers emptied),
# run on values read from stdin: each line "f x y" prints "re im".
HOST_MAIN = r"""
#include <stdio.h>
#include <string.h>
template <typename T> static void run(const char *f, T x, T y) {
  kiln::complex<T> z(x, y), r;
  %s
  printf("%%.17g %%.17g\n", (double)r.re, (double)r.im);
}
int main() {
  char f[32], p[4];
  double x, y;
  while (scanf("%%31s %%3s %%lf %%lf", f, p, &x, &y) == 4) {
    if (p[0] == 'f') run<float>(f, (float)x, (float)y); else run<double>(f, x, y);
  }
}
"""

COMPLEX_SPECIALS = [0j, complex(0.0, -0.0), complex(-0.0, 0.0), 2 + 0j, complex(2, -0.0),
                    -2 + 0j, complex(-2, -0.0), 2j, -2j, 0.5 + 0j, 1 + 0j, -1 + 0j, 3e5 + 2e5j,
                    complex(-3e5, 3), 30 + 1j, -30 + 1j, 1 + 30j, 1 - 30j, 50 + 0j, 0.5 + 40j,
                    complex(np.inf, 0), complex(-np.inf, 0), complex(np.nan, 0), 3 + 1.5707963j]


def complex_values(rng, n):
    return np.concatenate([rng.standard_normal(n) * 2 + 1j * rng.standard_normal(n) * 2,
                           COMPLEX_SPECIALS])


def assert_complex_close(got, want, dtype):
    """Parts NaN where NumPy's are, infinite where NumPy's are, the rest within a few units
    of the precision of |want|."""
    rtol = 2e-5 if np.dtype(dtype) == np.complex64 else 1e-13
    for part in ("real", "imag"):
        g, w = getattr(got, part), getattr(want, part)
        np.testing.assert_array_equal(np.isnan(g), np.isnan(w), err_msg=part)
        inf = np.isinf(w)
        np.testing.assert_array_equal(g[inf], w[inf], err_msg=part)
        ok = ~np.isnan(w) & ~inf
        err = np.abs(g[ok] - w[ok])
        mag = np.abs(want[ok])  # the part's own size where the other part is NaN
        bound = rtol * np.where(np.isnan(mag), np.abs(w[ok]), mag) + 1e-30
        assert np.all(err <= bound), (part, got[ok][err > bound], want[ok][err > bound])


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
def test_complex_formulas_compiled_for_the_host_agree_with_numpy(tmp_path):
    calls = "\n  ".join(f'if (!strcmp(f, "{k}")) r = {v}(z);'
                        for k, v in _cumath_src.COMPLEX_FUNCS.items())
    src = ("#define __device__\n#define __host__\n#define __forceinline__ inline\n"
           "#include <math.h>\n" + _cgen.COMPLEX_HEADER.replace("#pragma once", "")
           + _cumath_src.COMPLEX_MATH + HOST_MAIN % calls)
    (tmp_path / "c.cpp").write_text(src)
    exe = tmp_path / "c"
    subprocess.run(["c++", "-std=c++17", "-O1", "-w", str(tmp_path / "c.cpp"), "-o", str(exe)],
                   check=True)
    rng = np.random.default_rng(11)
    z = complex_values(rng, 300)
    for func in _cumath_src.COMPLEX_FUNCS:
        for dtype, p in ((np.complex128, "d"), (np.complex64, "f")):
            zz = z.astype(dtype)
            lines = "".join(f"{func} {p} {float(v.real)!r} {float(v.imag)!r}\n" for v in zz)
            out = subprocess.run([str(exe)], input=lines, capture_output=True, text=True,
                                 check=True).stdout.split()
            got = np.array(out, dtype=np.float64).view(np.complex128)
            with np.errstate(all="ignore"):
                want = getattr(np, func)(zz).astype(np.complex128)
            if dtype == np.complex64:  # NumPy's float trigonometry of 1e5 is not ours
                keep = np.abs(zz) < 1e3
                got, want = got[keep], want[keep]
            assert_complex_close(got, want, dtype)


# ---- on the GPU ------------------------------------------------------------------------------

FLOAT_SPECIALS = [0.0, -0.0, 1.0, -1.0, 0.5, 2.0, -2.0, np.nan, np.inf, -np.inf]

DOMAIN = {"exp": (-20, 20), "exp2": (-20, 20), "expm1": (-20, 20), "sinh": (-20, 20),
          "cosh": (-20, 20), "log": (0, 100), "log2": (0, 100), "log10": (0, 100),
          "log1p": (-1, 100), "sqrt": (0, 100), "arcsin": (-1, 1), "arccos": (-1, 1),
          "arctanh": (-1, 1), "arccosh": (1, 100), "tan": (-1.5, 1.5)}


def host_values(name, dtype, n, rng):
    """n values of dtype for the function: most in its domain, then 0, -0, 1, -1, 0.5, 2, -2,
    NaN, inf and -inf (or small integers, or complex values of moderate size)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if dtype.kind in "iu":
        lo = 1 if name == "reciprocal" else (0 if dtype.kind == "u" else -10)
        return rng.integers(lo, 10, n).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(n) * 1.5 + 1j * rng.standard_normal(n) * 1.5).astype(dtype)
    lo, hi = DOMAIN.get(ufunc_name(name), (-10, 10))
    v = rng.uniform(lo, hi, n)
    k = min(n, len(FLOAT_SPECIALS))
    v[:k] = FLOAT_SPECIALS[:k]
    return v.astype(dtype)


def close(got, want):
    """Equal dtypes; NaN and infinity where NumPy has them; values within the precision of
    the result's dtype (a few units of its last place)."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, want.dtype,
                                                                 got.shape, want.shape)
    if want.dtype.kind == "c":
        assert_complex_close(got.ravel(), want.ravel(), want.dtype)
    elif want.dtype.kind == "f":
        tol = {2: 2e-3, 4: 4e-6, 8: 1e-13}[want.dtype.itemsize]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def numpy_result(name, x):
    """NumPy's result, computed one precision up for complex arrays (complex64 in complex128,
    complex128 in the platform's long double) and rounded to NumPy's dtype: NumPy's own complex
    formulas (log1p(z) as log(1 + z), say) lose digits near their cancellations, which a
    careful kernel does not, so the reference must not."""
    f = numpy_of(name)
    with np.errstate(all="ignore"):
        if x.dtype.kind != "c":
            return f(x)
        dtype = f(x[:0]).dtype
        up = np.complex128 if x.dtype == np.complex64 else np.clongdouble
        return f(x.astype(up)).astype(dtype)


@pytest.fixture(scope="module")
def compiled_in_parallel():
    """Every kernel these tests use, compiled on every core first."""
    jobs = [(cumath.unary_kernel, ufunc_name(n), d) for n in UNARY if n not in ("real", "imag")
            for d in DTYPES]

    def job(f, *args):
        try:
            f(*args)
        except TypeError:
            pass
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        list(pool.map(lambda j: job(*j), jobs))


SIZES = [0, 1, 3, 255, 256, 257, 1025]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", UNARY)
def test_every_function_matches_numpy(compiled_in_parallel, name, dtype):
    rng = np.random.default_rng(zlib.crc32(f"{name} {np.dtype(dtype)}".encode()))
    try:
        numpy_of(name)(np.zeros(1, dtype))
    except TypeError:
        with pytest.raises(TypeError):
            getattr(cumath, name)(kiln.zeros(3, dtype))
        return
    for n in SIZES:
        x = host_values(name, dtype, n, rng)
        got = getattr(cumath, name)(kiln.to_device(x))
        close(got.get(), numpy_result(name, x))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.complex64])
@pytest.mark.parametrize("name", ["sin", "exp", "sqrt", "arctan", "log1p", "tanh"])
def test_a_million_and_one_elements(name, dtype):
    x = host_values(name, dtype, 2**20 + 1, np.random.default_rng(3))
    close(getattr(cumath, name)(kiln.to_device(x)).get(), numpy_result(name, x))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.complex128])
def test_views_that_are_not_contiguous(dtype):
    rng = np.random.default_rng(4)
    x = host_values("exp", dtype, 64 * 50, rng).reshape(64, 50)
    a = kiln.to_device(x)
    for name in ("exp", "sin", "sqrt", "absolute", "real", "imag", "tanh"):
        close(getattr(cumath, name)(a[:, ::2]).get(), numpy_result(name, x[:, ::2]))
    out = kiln.zeros((64, 50), np.dtype(dtype))
    cumath.cos(a[:, 1::2], out=out[:, ::2])
    want = np.zeros_like(x)
    want[:, ::2] = np.cos(x[:, 1::2])
    close(out.get(), want)


@pytest.mark.gpu
def test_nan_and_infinity_as_numpy_gives_them():
    x = kiln.to_device(np.array([0.0, -1.0, np.inf, -np.inf, np.nan, 2.0]))
    log = cumath.log(x).get()
    assert log[0] == -np.inf and np.isnan(log[1]) and log[2] == np.inf and np.isnan(log[4])
    sq = cumath.sqrt(x).get()
    assert np.isnan(sq[1]) and sq[2] == np.inf and np.isnan(sq[3])
    assert cumath.exp(x).get()[3] == 0.0 and cumath.exp(x).get()[2] == np.inf
    assert np.isnan(cumath.arccos(x).get()[5]) and cumath.arctanh(
        kiln.to_device(np.array([1.0]))).get()[0] == np.inf
    assert cumath.log1p(kiln.to_device(np.array([-1.0], np.float32))).get()[0] == -np.inf
    np.testing.assert_array_equal(cumath.isnan(x).get(), np.isnan(x.get()))
    np.testing.assert_array_equal(cumath.isinf(x).get(), np.isinf(x.get()))


@pytest.mark.gpu
def test_out_in_place_other_dtypes_and_streams():
    x = np.linspace(0.1, 3, 1000)
    a = kiln.to_device(x)
    assert cumath.sqrt(a, out=a) is a
    close(a.get(), np.sqrt(x))
    out32 = kiln.empty(1000, np.float32)
    cumath.exp(a, out=out32)  # float64 into float32: same_kind
    close(out32.get(), np.exp(np.sqrt(x)).astype(np.float32))
    s = kiln.Stream()
    r = cumath.tanh(a, stream=s)
    s.synchronize()
    close(r.get(), np.tanh(np.sqrt(x)))
    assert cumath.sqrt(kiln.to_device(np.arange(5, dtype=np.int32))).dtype == np.float64
    assert cumath.sin(kiln.empty((0, 3), np.float32)).shape == (0, 3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_fmod_arctan2_hypot_copysign(dtype):
    rng = np.random.default_rng(5)
    x = host_values("fmod", dtype, 1025, rng)
    y = host_values("fmod", dtype, 1025, rng)[::-1].copy()
    a, b = kiln.to_device(x), kiln.to_device(y)
    for name in ("fmod", "arctan2", "hypot", "copysign", "atan2"):
        with np.errstate(all="ignore"):
            close(getattr(cumath, name)(a, b).get(), numpy_of(name)(x, y))
    with np.errstate(all="ignore"):
        close(cumath.fmod(a, 1.5).get(), np.fmod(x, 1.5))
    x2 = x[:1024].reshape(32, 32)
    with np.errstate(all="ignore"):
        close(cumath.fmod(kiln.to_device(x2), kiln.to_device(y[:32])).get(),
              np.fmod(x2, y[:32]))
    ints = np.arange(-20, 20, dtype=np.int32)
    close(cumath.fmod(kiln.to_device(ints), 7).get(), np.fmod(ints, 7))
    with pytest.raises(ValueError):
        cumath.fmod(a, kiln.to_device(y[:7]))


def float_specials(dtype):
    info = np.finfo(dtype)
    return np.array([0.0, -0.0, 1.0, -1.0, 0.75, 3.5, -1234.5, float(info.max),
                     float(info.tiny), float(info.smallest_subnormal), -float(info.tiny) / 4,
                     np.inf, -np.inf, np.nan], dtype=dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_frexp_modf_and_ldexp(dtype):
    rng = np.random.default_rng(6)
    x = np.concatenate([float_specials(dtype),
                        (rng.standard_normal(1000) * 100).astype(dtype)])
    a = kiln.to_device(x)
    sig, ex = cumath.frexp(a)
    want_sig, want_ex = np.frexp(x)
    assert sig.dtype == dtype and ex.dtype == np.int32
    np.testing.assert_array_equal(sig.get(), want_sig)
    np.testing.assert_array_equal(ex.get(), want_ex)
    frac, whole = cumath.modf(a)
    want_frac, want_whole = np.modf(x)
    for got, want in ((frac.get(), want_frac), (whole.get(), want_whole)):
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))  # modf(-inf) = -0
    back = cumath.ldexp(sig, ex)
    np.testing.assert_array_equal(back.get(), x)
    # PyCUDA's exponents are floats: truncated toward zero.
    e = rng.uniform(-30, 30, x.size)
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(
            cumath.ldexp(a, kiln.to_device(e)).get(), np.ldexp(x, np.trunc(e).astype(np.int32)))
        np.testing.assert_array_equal(cumath.ldexp(a, 3).get(), np.ldexp(x, 3))
        big = np.array([2**40, -2**40] * (x.size // 2), dtype=np.int64)
        np.testing.assert_array_equal(cumath.ldexp(a[:big.size], kiln.to_device(big)).get(),
                                      np.ldexp(x[:big.size], big))
    with pytest.raises(TypeError, match="floating-point"):
        cumath.frexp(kiln.to_device(np.arange(4)))


@pytest.mark.gpu
def test_real_imag_and_conj():
    z = (np.arange(10) + 1j * np.arange(10, 20)).astype(np.complex64)
    a = kiln.to_device(z)
    re, im = cumath.real(a), cumath.imag(a)
    # PyCUDA's contiguous copies of the parts, in memory of their own
    assert re.flags.c_contiguous and im.flags.c_contiguous and re.dtype == np.float32
    assert len({re.ptr, im.ptr, a.ptr}) == 3
    close(re.get(), z.real)
    close(im.get(), z.imag)
    close(cumath.conj(a).get(), np.conj(z))
    out = kiln.empty(10, np.float64)
    assert cumath.imag(a, out=out) is out
    close(out.get(), z.imag.astype(np.float64))
    assert cumath.real(a[::-2], out=kiln.empty(5, np.float32)).get().tolist() == \
        z.real[::-2].tolist()  # from a strided view of the parts, in one copy
    # with stream=, the copy is made on it, in the array's order
    s = kiln.Stream()
    f = kiln.to_device(np.asfortranarray(z[:6].reshape(2, 3)))
    fi = cumath.imag(f, stream=s)
    s.synchronize()
    assert fi.flags.f_contiguous and not fi.flags.c_contiguous and fi.dtype == np.float32
    close(fi.get(), z[:6].imag.reshape(2, 3))
    r = kiln.to_device(np.arange(5.0))
    assert cumath.real(r) is r
    close(cumath.imag(r).get(), np.zeros(5))
    out = kiln.to_device(np.ones(5))
    close(cumath.imag(r, out=out).get(), np.zeros(5))
    close(cumath.real(r, out=out).get(), np.arange(5.0))
    close(cumath.conjugate(r).get(), np.arange(5.0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_complex_functions_at_special_points(dtype):
    z = np.array(COMPLEX_SPECIALS, dtype=dtype)
    if dtype == np.complex64:
        z = z[np.abs(z) < 1e3]
    a = kiln.to_device(z)
    for func in _cumath_src.COMPLEX_FUNCS:
        with np.errstate(all="ignore"):
            want = getattr(np, func)(z)
        assert_complex_close(getattr(cumath, func)(a).get(), want, dtype)
