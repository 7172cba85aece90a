"""Arrays that compute, against NumPy: every operator for every dtype kiln supports, scalars on
either side, views that are not contiguous, empty arrays, sizes around block and vector-width
boundaries, NaN and infinity; reductions; gpuarray's functions; ElementwiseKernel and
ReductionKernel as PyCUDA's documentation uses them."""
import concurrent.futures
import operator
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import kiln
import kiln.gpuarray as gpuarray
from kiln import _ops
from kiln.elementwise import ElementwiseKernel
from kiln.reduction import ReductionKernel

from helpers import HAVE_GPU

pytestmark = pytest.mark.gpu

INTS = [np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64, np.uint64]
FLOATS = [np.float16, np.float32, np.float64]
COMPLEX = [np.complex64, np.complex128]
DTYPES = [np.bool_] + INTS + FLOATS + COMPLEX
SIZES = [0, 1, 3, 255, 256, 257, 1023, 1024, 1025, 2**20 + 1]

BINARY = {"add": operator.add, "subtract": operator.sub, "multiply": operator.mul,
          "true_divide": operator.truediv, "floor_divide": operator.floordiv,
          "remainder": operator.mod, "power": operator.pow, "bitwise_and": operator.and_,
          "bitwise_or": operator.or_, "bitwise_xor": operator.xor,
          "left_shift": operator.lshift, "right_shift": operator.rshift,
          "less": operator.lt, "less_equal": operator.le, "equal": operator.eq,
          "not_equal": operator.ne, "greater": operator.gt, "greater_equal": operator.ge}
UNARY = {"negative": operator.neg, "positive": operator.pos, "absolute": abs,
         "invert": operator.invert}
SCALARS = [3, -2, 2.5, 1 + 2j, True, np.float32(1.5), np.int8(3), np.float64(-0.5)]


def values(dtype, n, rng, op=None, second=False):
    """Random values of dtype that exercise op without undefined behaviour: small integers
    (products and powers stay in range), positive bases for float powers, shift counts from 0
    to a few past the width, zeros among divisors (NumPy's division by zero is defined)."""
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.random(n) < 0.5
    if dtype.kind in "iu":
        if op in ("left_shift", "right_shift") and second:
            return rng.integers(0, dtype.itemsize * 8 + 3, n).astype(dtype)
        if op == "power" and second:
            return rng.integers(0, 5, n).astype(dtype)
        lo = 0 if dtype.kind == "u" else -9
        return rng.integers(lo, 10, n).astype(dtype)
    if dtype.kind == "f":
        v = rng.standard_normal(n) * 4
        if op == "power" and not second:
            v = np.abs(v) + 0.1
        v = v.astype(dtype)
        if n > 8:  # NaN and infinity where floats are involved
            v[1], v[5] = np.nan, np.inf
            v[7] = -np.inf
        return v
    v = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(dtype)
    if op == "power" and not second:
        v += 2
    return v


def close(got, want, dtype=None):
    """got (from kiln) equals NumPy's want: exactly for integers and booleans, within the
    result's precision for floats, NaN matching NaN."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, (got.shape, want.shape)
    assert got.dtype == want.dtype, (got.dtype, want.dtype)
    if want.dtype.kind in "fc":
        tol = {2: 2e-3, 4: 2e-6, 8: 1e-13, 16: 1e-13}[want.dtype.itemsize
                                                       if want.dtype.kind == "f"
                                                       else want.dtype.itemsize // 2]
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


def numpy_or_none(fn, *args):
    try:
        with np.errstate(all="ignore"):
            return fn(*args)
    except (TypeError, OverflowError, ValueError):
        return None


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(7)


@pytest.fixture(scope="module", autouse=True)
def compiled_in_parallel():
    """The plans these tests use, compiled on every core first (NVRTC runs without the GIL):
    a fresh cache would otherwise spend minutes compiling them one by one."""
    if not HAVE_GPU:
        return
    jobs = []
    for dt in DTYPES:
        a = kiln.zeros(4, dt)
        for op in BINARY:
            for other in [a] + SCALARS:
                jobs.append((_ops.binary_plan, op, a, other))
        for op in UNARY:
            jobs.append((_ops.unary_plan, op, a))
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        for f in [pool.submit(*j) for j in jobs]:
            try:
                f.result()
            except TypeError:
                pass


# ---- operators -------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(BINARY))
def test_binary_operators_on_arrays_match_numpy(rng, dtype, op):
    fn = BINARY[op]
    x, y = values(dtype, 300, rng, op), values(dtype, 300, rng, op, second=True)
    want = numpy_or_none(fn, x, y)
    a, b = kiln.to_device(x), kiln.to_device(y)
    if want is None:
        with pytest.raises(TypeError):
            fn(a, b)
        return
    close(fn(a, b).get(), want)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["add", "subtract", "multiply", "true_divide", "floor_divide",
                                "remainder", "power", "less", "equal", "bitwise_and",
                                "left_shift"])
def test_binary_operators_with_scalars_on_either_side_match_numpy(rng, dtype, op):
    fn = BINARY[op]
    x = values(dtype, 257, rng, op)
    a = kiln.to_device(x)
    for s in SCALARS:
        for left in (False, True):
            if op in ("power", "left_shift") and (left or not isinstance(s, (int, np.integer))):
                continue  # negative or huge integer powers and shifts differ by design
            args = (s, x) if left else (x, s)
            want = numpy_or_none(fn, *args)
            if want is None:
                with pytest.raises((TypeError, ValueError, OverflowError)):
                    fn(*((s, a) if left else (a, s)))
                continue
            got = fn(*((s, a) if left else (a, s))).get()
            close(got, want)


@pytest.mark.parametrize("dtype", [np.int32, np.float32, np.float64, np.complex64])
def test_a_0d_host_array_is_a_scalar_on_either_side(rng, dtype):
    # A reduction's .get() is a 0-d numpy array, and programs combine it with arrays
    # (x - gpuarray.sum(x).get() / n), as NumPy and PyCUDA take it: as its scalar.
    x = values(dtype, 257, rng)
    a = kiln.to_device(x)
    for s in [np.array(2.5), np.array(3, np.int16), np.array(1 - 1j, np.complex64)]:
        for fn in [operator.sub, operator.mul, operator.lt]:
            for args in [(x, s), (s, x)]:
                want = numpy_or_none(fn, *args)
                device_args = tuple(a if v is x else v for v in args)
                if want is None:
                    with pytest.raises(TypeError):
                        fn(*device_args)
                    continue
                got = fn(*device_args)
                assert got.dtype == want.dtype, (fn, args)
                close(got.get(), want)
    b = kiln.to_device(x)
    b -= np.array(1, dtype)
    close(b.get(), x - np.array(1, dtype))
    with pytest.raises(TypeError, match="host memory"):
        a + np.ones(3, dtype)  # an array with elements stays refused


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", list(UNARY))
def test_unary_operators_match_numpy(rng, dtype, op):
    fn = UNARY[op]
    x = values(dtype, 300, rng)
    want = numpy_or_none(fn, x)
    if want is None:
        with pytest.raises(TypeError):
            fn(kiln.to_device(x))
        return
    close(fn(kiln.to_device(x)).get(), want)


@pytest.mark.parametrize("n", SIZES)
def test_sizes_around_block_and_vector_boundaries(rng, n):
    x = rng.standard_normal(n).astype(np.float32)
    y = rng.standard_normal(n).astype(np.float32)
    a, b = kiln.to_device(x), kiln.to_device(y)
    close((a * b + 1).get(), x * y + 1)
    close((2.0 - a).get(), 2.0 - x)
    c = a.copy()
    c += b
    close(c.get(), x + y)


def test_mixed_dtypes_promote_as_numpy_does(rng):
    pairs = [(np.int8, np.uint8), (np.int32, np.float32), (np.uint64, np.int64),
             (np.float16, np.float32), (np.complex64, np.float64), (np.bool_, np.int16)]
    for dx, dy in pairs:
        x, y = values(dx, 100, rng), values(dy, 100, rng)
        for fn in (operator.add, operator.mul, operator.lt):
            close(fn(kiln.to_device(x), kiln.to_device(y)).get(), fn(x, y))


def test_non_contiguous_views_compute_the_right_elements(rng):
    x = rng.standard_normal((64, 34)).astype(np.float32)
    y = rng.standard_normal((64, 34)).astype(np.float32)
    a, b = kiln.to_device(x), kiln.to_device(y)
    for key in [(slice(None), 1), (slice(None, None, 2),), (slice(3, None, 3), slice(None, None, -2)),
                (Ellipsis, 5)]:
        close((a[key] * b[key] - 1).get(), x[key] * y[key] - 1)
        close(abs(a[key]).get(), abs(x[key]))
    close((a.T + 1).get(), x.T + 1)
    close((a[:, ::2] + b[:, 1::2]).get(), x[:, ::2] + y[:, 1::2])


def test_broadcasting_matches_numpy(rng):
    x = rng.standard_normal((5, 1, 7)).astype(np.float64)
    y = rng.standard_normal((4, 1)).astype(np.float64)
    close((kiln.to_device(x) * kiln.to_device(y)).get(), x * y)


def test_in_place_operators_write_in_place_and_refuse_unsafe_casts(rng):
    x = values(np.float32, 1000, rng)
    a = kiln.to_device(x)
    ptr = a.ptr
    a *= 2
    a -= kiln.to_device(x)
    assert a.ptr == ptr
    close(a.get(), x * 2 - x)
    ints = kiln.to_device(np.arange(10, dtype=np.int32))
    with pytest.raises(TypeError, match="same_kind"):
        ints += 1.5
    view = kiln.to_device(np.arange(20, dtype=np.float64))
    host = np.arange(20, dtype=np.float64)
    view[::2] += 100
    host[::2] += 100
    close(view.get(), host)


def test_overlapping_operands_read_before_they_are_written():
    x = np.arange(10, dtype=np.int64)
    a = kiln.to_device(x)
    a[1:] += a[:-1]
    x[1:] += x[:-1].copy()
    close(a.get(), x)


def test_host_arrays_and_strangers_are_refused():
    a = kiln.to_device(np.arange(4, dtype=np.float32))
    with pytest.raises(TypeError, match="host memory"):
        a + np.arange(4, dtype=np.float32)
    with pytest.raises(TypeError, match="host memory"):
        np.arange(4, dtype=np.float32) + a
    with pytest.raises(TypeError):
        a + "text"
    assert (a == None) is False  # noqa: E711  (identity, as for any object)


def test_empty_arrays(rng):
    a = kiln.empty((0, 3), np.float32)
    assert (a + 1).shape == (0, 3)
    assert float(gpuarray.sum(a).get()) == 0.0
    with pytest.raises(ValueError, match="zero-size"):
        gpuarray.max(a)


# ---- reductions ------------------------------------------------------------------------------

@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("n", [1, 3, 1000, 2**20 + 1])
def test_reductions_match_numpy(rng, dtype, n):
    x = values(dtype, n, rng)
    if np.dtype(dtype).kind == "f":
        x[np.isnan(x) | np.isinf(x)] = 1  # the NaN rules are tested below
    a = kiln.to_device(x)
    want = x.sum()
    got = gpuarray.sum(a).get()
    if want.dtype.kind in "fc":
        scale = np.abs(x.astype(np.complex128 if want.dtype.kind == "c" else np.float64)).sum()
        eps = {2: 1e-2, 4: 1e-5, 8: 1e-12}[want.dtype.itemsize if want.dtype.kind == "f"
                                            else want.dtype.itemsize // 2]
        assert got.dtype == want.dtype
        assert abs(complex(got) - complex(want)) <= eps * max(scale, 1)
    else:
        close(got, want)
    close(gpuarray.max(a).get(), x.max())
    close(gpuarray.min(a).get(), x.min())
    assert bool(gpuarray.any(a).get()) == bool(x.any())
    assert bool(gpuarray.all(a).get()) == bool(x.all())


def test_max_and_min_propagate_nan():
    x = np.array([1, np.nan, 3], np.float32)
    assert np.isnan(float(gpuarray.max(kiln.to_device(x)).get()))
    assert np.isnan(float(gpuarray.min(kiln.to_device(x)).get()))


def test_sum_of_a_hundred_million_floats_against_float64():
    rng = np.random.default_rng(3)
    x = rng.random(10**8, dtype=np.float32)
    got = float(gpuarray.sum(kiln.to_device(x)).get())
    want = float(x.astype(np.float64).sum())
    assert abs(got - want) / want < 1e-5, (got, want)  # float32 accumulation, stated tolerance


def test_dot_vdot_and_subsets(rng):
    x = values(np.complex64, 5000, rng)
    y = values(np.complex64, 5000, rng)
    a, b = kiln.to_device(x), kiln.to_device(y)
    np.testing.assert_allclose(complex(gpuarray.dot(a, b).get()), np.sum(x * y), rtol=1e-4)
    np.testing.assert_allclose(complex(gpuarray.vdot(a, b).get()), np.vdot(x, y), rtol=1e-4)
    idx = rng.integers(0, 5000, 300).astype(np.int32)
    s = kiln.to_device(idx)
    xr = values(np.float64, 5000, rng)
    xr[~np.isfinite(xr)] = 0
    ar = kiln.to_device(xr)
    np.testing.assert_allclose(float(gpuarray.subset_sum(s, ar).get()), xr[idx].sum(), rtol=1e-12)
    assert float(gpuarray.subset_max(s, ar).get()) == xr[idx].max()
    assert float(gpuarray.subset_min(s, ar).get()) == xr[idx].min()
    np.testing.assert_allclose(float(gpuarray.subset_dot(s, ar, ar).get()),
                               (xr[idx] ** 2).sum(), rtol=1e-12)


def test_reductions_on_streams_and_of_views(rng):
    x = values(np.float64, 100000, rng)
    x[~np.isfinite(x)] = 0
    a = kiln.to_device(x.reshape(1000, 100))
    s1, s2 = kiln.Stream(), kiln.Stream()
    r1 = gpuarray.sum(a[:, ::3], stream=s1)
    r2 = gpuarray.sum(a[::2], stream=s2)
    s1.synchronize()
    s2.synchronize()
    np.testing.assert_allclose(float(r1.get()), x.reshape(1000, 100)[:, ::3].sum(), rtol=1e-12)
    np.testing.assert_allclose(float(r2.get()), x.reshape(1000, 100)[::2].sum(), rtol=1e-12)


# ---- the host mirror of a reduction's result -------------------------------------------------

def _mirrors():
    info = kiln.staging_info()
    return info["mirror_reads"], info["mirrors_held"]


def _warm_mirrors():
    """Past the first reductions of the process, which go without a mirror."""
    a = kiln.to_device(np.ones(10, np.float32))
    for _ in range(10):
        gpuarray.sum(a)
    kiln.synchronize()
    assert kiln.staging_info()["mirror_slots"] > 0


def test_a_result_read_on_the_host_is_read_from_its_mirror(rng):
    """get(), float() and complex() of a new result take its host mirror, for every dtype and
    reduction, as often as asked; each value right."""
    _warm_mirrors()
    reads = _mirrors()[0]
    taken = 0
    for dtype in DTYPES:
        x = values(dtype, 1000, rng)
        if np.dtype(dtype).kind in "fc":
            x[~np.isfinite(x)] = 1
        a = kiln.to_device(x)
        r = gpuarray.sum(a)
        want = x.sum()
        got = r.get()
        assert got.dtype == want.dtype and got.shape == ()
        if want.dtype.kind in "fc":
            scale = np.abs(x.astype(np.complex128)).sum()
            eps = {2: 1e-2, 4: 1e-5, 8: 1e-12}[want.dtype.itemsize if want.dtype.kind == "f"
                                                else want.dtype.itemsize // 2]
            assert abs(complex(got) - complex(want)) <= eps * max(scale, 1)
            assert complex(r) == complex(got)  # read again, the same bytes
        else:
            assert got == want and int(r) == int(got)
        close(gpuarray.max(a).get(), x.max())
        # float16 folds in float32, and the result read is the conversion's, a copy's
        taken += 0 if dtype == np.float16 else 3
    assert _mirrors()[0] == reads + taken


def test_a_result_written_after_its_reduction_is_read_from_the_device(rng):
    """Any work kiln queues after the reduction ends the mirror: the read is the device's."""
    _warm_mirrors()
    a = kiln.to_device(np.arange(100, dtype=np.float32))
    r = gpuarray.sum(a)
    r.fill(7)
    assert float(r) == 7.0
    r = gpuarray.sum(a)
    r.set(np.array(5, np.float32))
    assert float(r) == 5.0
    r = gpuarray.sum(a)
    k = _ops.SUM_KERNELS[np.dtype(np.float32)]
    k(kiln.to_device(np.ones(3, np.float32)), out=r)  # into r, on the same stream
    assert float(r) == 3.0
    r = gpuarray.sum(a)
    gpuarray.sum(kiln.to_device(np.ones(4, np.float32)))  # any other work, even one not r's
    assert float(r) == 4950.0


def _driver_memset(address, value):
    """A write kiln does not queue, as another library's would be: cuMemsetD32 by ctypes."""
    import ctypes
    cuda = ctypes.CDLL("libcuda.so.1")
    bits = int(np.array(value, np.float32).view(np.uint32))
    assert cuda.cuMemsetD32_v2(ctypes.c_ulonglong(address), ctypes.c_uint(bits),
                               ctypes.c_size_t(1)) == 0


@pytest.mark.parametrize("handed_out", ["ptr", "gpudata", "cuda_array_interface", "view"])
def test_a_result_whose_address_was_handed_out_is_read_from_the_device(handed_out):
    """Another library could write the result once it has the address: the mirror ends
    there."""
    _warm_mirrors()
    a = kiln.to_device(np.arange(100, dtype=np.float32))
    r = gpuarray.sum(a)
    kiln.synchronize()
    address = {"ptr": lambda: r.ptr, "gpudata": lambda: int(r.gpudata),
               "cuda_array_interface": lambda: r.__cuda_array_interface__["data"][0],
               "view": lambda: r.reshape(1).ptr}[handed_out]()
    _driver_memset(address, 2.5)
    assert float(r) == 2.5


def test_more_live_results_than_slots_and_results_never_read(rng):
    """Results past the slots copy as before; those dropped unread give their slots back once
    their kernels have written them."""
    _warm_mirrors()
    x = values(np.float64, 300, rng)
    x[~np.isfinite(x)] = 0
    a = kiln.to_device(x)
    held = _mirrors()[1]
    results = [gpuarray.sum(a) for _ in range(1500)]
    assert _mirrors()[1] - held <= 1024
    for r in results[::50] + results[-3:]:
        np.testing.assert_allclose(float(r), x.sum(), rtol=1e-12)
    del results, r
    assert _mirrors()[1] == held
    for _ in range(5000):  # dropped unread, each before its kernel may have run
        gpuarray.sum(a)
    kiln.synchronize()
    np.testing.assert_allclose(float(gpuarray.sum(a)), x.sum(), rtol=1e-12)
    assert _mirrors()[1] == held


def test_results_on_streams_and_in_captures():
    """A result on a kiln.Stream has a mirror; one recorded into a graph has none (a replay
    would write a slot given to another result since)."""
    _warm_mirrors()
    x = np.arange(1000, dtype=np.float32)
    a = kiln.to_device(x)
    s = kiln.Stream()
    reads = _mirrors()[0]
    assert float(gpuarray.sum(a, stream=s)) == x.sum()
    assert _mirrors()[0] == reads + 1
    k = _ops.SUM_KERNELS[np.dtype(np.float32)]
    out = kiln.empty((), np.float32)
    held = _mirrors()[1]
    with s.capture() as g:
        r = k(a, stream=s)
        k(a, out=out, stream=s)
    assert _mirrors()[1] == held
    g.launch()
    s.synchronize()
    assert float(r) == x.sum() and float(out) == x.sum()


def test_a_fault_in_a_reduction_ends_the_wait_for_its_result():
    """The flag never comes from a kernel that faulted: the read raises the fault."""
    script = textwrap.dedent("""\
        import numpy as np
        import kiln
        import kiln.gpuarray
        from kiln.reduction import ReductionKernel
        far = ReductionKernel(np.float32, "0", "a+b", "x[i + 100000000000LL]", "const float *x",
                              name="far_sum")
        x = kiln.to_device(np.ones(1000, np.float32))
        for _ in range(10):
            float(kiln.gpuarray.sum(x))
        assert kiln.staging_info()["mirror_slots"] > 0
        kiln.synchronize()
        reads = kiln.staging_info()["mirror_reads"]
        for _ in range(3):
            float(kiln.gpuarray.sum(x))
        assert kiln.staging_info()["mirror_reads"] == reads + 3
        r = far(x)
        try:
            r.get()
            print("no fault")
        except kiln.CudaError as e:
            print("name", e.name)
            print("kernel", e.kernel)
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert "name CUDA_ERROR_ILLEGAL_ADDRESS\n" in run.stdout, run.stdout + run.stderr
    # the sums read from their mirrors since the synchronize are known to have finished: one
    # launch is left to have faulted
    assert "kernel far_sum\n" in run.stdout, run.stdout


def test_the_mirror_slots_are_made_at_the_ninth_reduction():
    script = textwrap.dedent("""\
        import numpy as np
        import kiln, kiln.gpuarray as gpuarray
        a = kiln.to_device(np.arange(10, dtype=np.float32))
        slots = []
        for k in range(11):
            assert float(gpuarray.sum(a)) == 45.0
            slots.append(kiln.staging_info()["mirror_slots"] > 0)
        print(slots)
        """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    assert run.stdout.strip().splitlines()[-1] == str([False] * 8 + [True] * 3)


# ---- gpuarray's functions --------------------------------------------------------------------

def test_making_arrays():
    close(gpuarray.zeros((3, 4), np.float32).get(), np.zeros((3, 4), np.float32))
    close(gpuarray.ones(5, np.int16).get(), np.ones(5, np.int16))
    for args in [(10,), (2, 12, 3), (0.5, 3.0, 0.25), (5, 0, -1)]:
        close(gpuarray.arange(*args).get(), np.arange(*args))
    close(gpuarray.arange(0, 10, 2, dtype=np.float32).get(), np.arange(0, 10, 2, dtype=np.float32))
    a = gpuarray.to_gpu(np.arange(12.0).reshape(3, 4))
    close(gpuarray.zeros_like(a).get(), np.zeros((3, 4)))
    close(gpuarray.ones_like(a, dtype=np.int32).get(), np.ones((3, 4), np.int32))
    assert gpuarray.empty_like(a).shape == (3, 4)


def test_multi_put_and_take_put_write_only_where_the_indices_say():
    # A destination larger than the values put: the kernel runs over the indices, never over
    # the destination's size (reading indices past their end).
    dest = [gpuarray.zeros(1000, np.float32), gpuarray.zeros(1000, np.float32)]
    idx = np.array([7, 999, 2, 500], np.int64)
    vals = [np.array([1, 2, 3, 4], np.float32), np.array([5, 6, 7, 8], np.float32)]
    gpuarray.multi_put([gpuarray.to_gpu(v) for v in vals], gpuarray.to_gpu(idx), out=dest)
    for d, v in zip(dest, vals):
        want = np.zeros(1000, np.float32)
        want[idx] = v
        np.testing.assert_array_equal(d.get(), want)
    # A lower triangle moved into a band layout (a program preparing cublasStbsv's input).
    n = 37
    a = np.arange(n * n, dtype=np.float32)
    ii, jj = np.tril_indices(n)
    out = gpuarray.zeros(n * n, np.float32)
    gpuarray.multi_take_put([gpuarray.to_gpu(a)], gpuarray.to_gpu(ii + jj * (n - 1)),
                            gpuarray.to_gpu(ii + jj * n), (n * n,), out=[out])
    want = np.zeros(n * n, np.float32)
    want[ii + jj * (n - 1)] = a[ii + jj * n]
    np.testing.assert_array_equal(out.get(), want)
    with pytest.raises(IndexError, match="out of bounds for an array of size 1000"):
        gpuarray.multi_put([gpuarray.to_gpu(vals[0])], gpuarray.to_gpu(idx + 1), out=dest[:1])


def test_take_and_put_count_a_fortran_arrays_elements_in_memory_order(rng):
    # PyCUDA's take and put index the array's memory: a Fortran-ordered matrix's columns one
    # after another, which a program moving a triangle into cuBLAS's band storage relies on.
    n = 9
    t = np.tril(rng.random((n, n))).astype(np.float32)
    f = gpuarray.to_gpu(np.asfortranarray(t))
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    memory = t.ravel(order="F")
    idx = np.array([0, 1, n, n + 1, n * n - 1, 5], np.int32)
    np.testing.assert_array_equal(gpuarray.take(f, gpuarray.to_gpu(idx)).get(), memory[idx])
    ii, jj = np.tril_indices(n)
    band = gpuarray.multi_take_put([f], gpuarray.to_gpu(ii + jj * (n - 1)),
                                   gpuarray.to_gpu(ii + jj * n), (n, n))[0]
    want = np.zeros(n * n, np.float32)
    want[ii + jj * (n - 1)] = memory[ii + jj * n]
    got = band.get().ravel()  # a C-ordered result: its memory is its C order
    written = ii + jj * (n - 1)
    np.testing.assert_array_equal(got[written], want[written])
    # put into a Fortran-ordered destination writes its memory in place, from a Fortran-
    # ordered array of values read in memory order too
    dest = gpuarray.to_gpu(np.asfortranarray(np.zeros((n, n), np.float32)))
    vals = np.asfortranarray(rng.random((2, 3)).astype(np.float32))
    gpuarray.multi_put([gpuarray.to_gpu(vals)], gpuarray.to_gpu(idx), out=[dest])
    want = np.zeros(n * n, np.float32)
    want[idx] = vals.ravel(order="F")
    assert dest.flags.f_contiguous
    np.testing.assert_array_equal(dest.get().ravel(order="F"), want)
    # a strided view, whose memory holds other elements, is read in C order
    c = gpuarray.to_gpu(t)
    np.testing.assert_array_equal(gpuarray.take(c[:, ::2], gpuarray.to_gpu(idx[:4])).get(),
                                  t[:, ::2].ravel()[idx[:4]])


def test_an_elementwise_return_leaves_its_own_element_alone_undone(rng):
    # A guard that returns skips its element only, at every size (PyCUDA's one element a
    # thread), and a parameter named like an array's index keeps its value.
    k = ElementwiseKernel("float *x, int *m, float *y", "if (m[i] == 0) return; y[i] = 2 * x[i]")
    for n in (1, 1000, 2**20 + 3):
        x = rng.random(n).astype(np.float32)
        m = (rng.random(n) < 0.5).astype(np.int32)
        y = gpuarray.zeros(n, np.float32)
        k(gpuarray.to_gpu(x), gpuarray.to_gpu(m), y)
        np.testing.assert_array_equal(y.get(), np.where(m != 0, 2 * x, 0))
    named = ElementwiseKernel("float *x, int x_i, float *y", "y[i] = x[i] + x_i")
    y = gpuarray.zeros(5, np.float32)
    named(gpuarray.to_gpu(np.arange(5, dtype=np.float32)), 100, y)
    np.testing.assert_array_equal(y.get(), np.arange(5, dtype=np.float32) + 100)


def test_multi_calls_check_their_arguments_as_pycudas_and_take_with_offsets():
    a = [gpuarray.to_gpu(np.arange(10, dtype=np.float32) + 100 * k) for k in range(3)]
    src = gpuarray.to_gpu(np.array([0, 3, 5], np.int32))
    dest = gpuarray.to_gpu(np.array([2, 0, 1], np.int32))
    got = gpuarray.multi_take(a, src)
    for g, x in zip(got, a):
        np.testing.assert_array_equal(g.get(), x.get()[[0, 3, 5]])
    out = gpuarray.multi_take_put(a, dest, src, dest_shape=(4,), src_offsets=[0, 1, 4])
    for k, o in enumerate(out):
        want = np.arange(10, dtype=np.float32) + 100 * k
        np.testing.assert_array_equal(o.get()[:3], want[[3 + [0, 1, 4][k], 5 + [0, 1, 4][k],
                                                         0 + [0, 1, 4][k]]])
    assert gpuarray.multi_take([], src) == [] and gpuarray.multi_put([], dest) == []
    mixed = a[:1] + [gpuarray.to_gpu(np.arange(10.0))]
    with pytest.raises(TypeError, match="one dtype"):
        gpuarray.multi_take(mixed, src)
    with pytest.raises(TypeError, match="one dtype"):
        gpuarray.multi_put(mixed, dest, dest_shape=(3,))
    with pytest.raises(ValueError, match="same length"):
        gpuarray.multi_take(a, src, out=[gpuarray.empty(3, np.float32)])
    with pytest.raises(TypeError, match="same dtype"):
        gpuarray.multi_put(a[:1], dest, out=[gpuarray.empty(3, np.float64)])
    with pytest.raises(TypeError, match="same dtype"):
        gpuarray.multi_take_put(a, dest, src.astype(np.int64), dest_shape=(3,))
    with pytest.raises(ValueError, match="same shape"):
        gpuarray.multi_take_put(a, dest, src[:2], dest_shape=(3,))
    with pytest.raises(ValueError, match="one offset for each"):
        gpuarray.multi_take_put(a, dest, src, dest_shape=(3,), src_offsets=[1, 2])
    with pytest.raises(ValueError, match="1D"):
        gpuarray.multi_put(a[:1], gpuarray.to_gpu(np.zeros((1, 3), np.int32)), dest_shape=(3,))
    # Fewer values than indices would read past the values: refused, never read.
    with pytest.raises(ValueError, match="a value for every index"):
        gpuarray.multi_put([a[0][:2]], dest, dest_shape=(3,))
    # More values than indices: the first ones are put, as PyCUDA's
    out = gpuarray.multi_put([a[1]], dest, dest_shape=(3,))
    np.testing.assert_array_equal(out[0].get(), (np.arange(10, dtype=np.float32) + 100)[[1, 2, 0]])
    with pytest.raises(TypeError, match="dest_shape"):
        gpuarray.multi_put(a, dest)


def test_take_concatenate_stack_where(rng):
    x = values(np.float32, 100, rng)
    a = gpuarray.to_gpu(x)
    idx = np.array([0, 5, 99, -1, 42], np.int64)
    close(gpuarray.take(a, gpuarray.to_gpu(idx)).get(), np.take(x, idx))
    with pytest.raises(IndexError, match="out of bounds"):
        gpuarray.take(a, gpuarray.to_gpu(np.array([100], np.int32)))
    p, q = values(np.float64, (12), rng).reshape(3, 4), values(np.float64, 8, rng).reshape(2, 4)
    close(gpuarray.concatenate([gpuarray.to_gpu(p), gpuarray.to_gpu(q)]).get(),
          np.concatenate([p, q]))
    for axis in (0, 1, 2, -1):  # PyCUDA's layout: C order along a new first axis, else F
        s = gpuarray.stack([gpuarray.to_gpu(p), gpuarray.to_gpu(p * 2)], axis=axis)
        assert s.flags.c_contiguous == (axis == 0) and s.flags.f_contiguous == (axis != 0)
        close(s.get(), np.stack([p, p * 2], axis=axis))
    s = gpuarray.stack([gpuarray.to_gpu(x[:4]), gpuarray.to_gpu(np.arange(4))], axis=1)
    assert s.dtype == np.float64 and s.strides == (8, 32)
    close(s.get(), np.stack([x[:4], np.arange(4)], axis=1))
    from kiln.tools import DeviceMemoryPool
    pool = DeviceMemoryPool()
    pooled = gpuarray.to_gpu(p, allocator=pool.allocate)
    assert gpuarray.stack([pooled, pooled], axis=1).allocator == pool.allocate
    assert gpuarray.concatenate([gpuarray.to_gpu(q), pooled]).allocator == pool.allocate
    c = x > 0
    close(gpuarray.where(gpuarray.to_gpu(c), a, 0.0).get(), np.where(c, x, 0.0))
    close(gpuarray.if_positive(a, a, -a).get(), np.where(x > 0, x, -x))
    close(gpuarray.maximum(a, 0).get(), np.maximum(x, 0))
    close(gpuarray.minimum(a, a[::-1]).get(), np.minimum(x, x[::-1]))


def test_results_of_an_array_with_an_allocator_take_its_memory(rng):
    # PyCUDA makes these results with the operand's allocator (_new_like_me, empty_like, or
    # the first array's in a reduction); a program's pool then counts them.
    import kiln.driver as drv
    asked = []

    def counting(nbytes):
        asked.append(nbytes)
        return drv.mem_alloc(nbytes)

    x = values(np.float32, 300, rng)
    z = (x + 1j * x[::-1]).astype(np.complex64)
    a = gpuarray.to_gpu(x, allocator=counting)
    m = gpuarray.to_gpu(x.reshape(20, 15), allocator=counting)
    c = gpuarray.to_gpu(z, allocator=counting)
    plain = gpuarray.to_gpu(x)
    idx = gpuarray.to_gpu(np.array([3, 0, 299, 7], np.int32))
    sub = gpuarray.to_gpu(np.array([1, 2, 5], np.int64), allocator=counting)
    positive = plain > 0
    sum_kernel = ReductionKernel(np.float32, "0", "a+b", "x[i]*2", "const float *x")
    own_kernel = ReductionKernel(np.float32, "0", "a+b", "x[i]*2", "const float *x",
                                 allocator=counting)
    made = {
        "where": (lambda: gpuarray.where(positive, a, plain), np.where(x > 0, x, x)),
        "where, then_ a scalar": (lambda: gpuarray.where(positive, 1.0, a),
                                  np.where(x > 0, 1, x)),
        "if_positive": (lambda: gpuarray.if_positive(plain, a, -plain), np.where(x > 0, x, -x)),
        "take": (lambda: gpuarray.take(a, idx), x[[3, 0, 299, 7]]),
        "copy": (lambda: a.copy(), x),
        "copy of a view": (lambda: m[:, ::2].copy(), x.reshape(20, 15)[:, ::2]),
        "reverse": (lambda: a.reverse(), x[::-1]),
        "reverse of a matrix": (lambda: m.reverse(), x[::-1].reshape(20, 15)),
        "real": (lambda: c.real, z.real),
        "imag": (lambda: c.imag, z.imag),
        "imag of a real array": (lambda: a.imag, np.zeros_like(x)),
        "sum": (lambda: gpuarray.sum(a), x.sum(dtype=np.float64)),
        "sum of a view": (lambda: gpuarray.sum(a[::3]), x[::3].sum(dtype=np.float64)),
        "max": (lambda: a.max(), x.max()),
        "dot": (lambda: gpuarray.dot(a, plain), np.dot(x.astype(np.float64), x)),
        "subset_sum": (lambda: gpuarray.subset_sum(sub, a), x[[1, 2, 5]].sum()),
        "a ReductionKernel": (lambda: sum_kernel(a), 2 * x.sum(dtype=np.float64)),
        "a ReductionKernel's own allocator": (lambda: own_kernel(plain),
                                              2 * x.sum(dtype=np.float64)),
    }
    for what, (make, want) in made.items():
        before = len(asked)
        got = make()
        assert got.allocator is counting and len(asked) == before + 1, what
        np.testing.assert_allclose(got.get(), want, rtol=1e-5, atol=1e-4, err_msg=what)
    # The pool's arrays keep the pool, on the C path of reductions too; where takes then_'s.
    before = len(asked)
    assert sum_kernel(plain)._allocator is None and gpuarray.sum(plain)._allocator is None
    assert plain.copy()._allocator is None and len(asked) == before
    assert gpuarray.where(positive, plain, a)._allocator is None and len(asked) == before
    # An allocator's failure is the call's, and one that frees the array first is caught.
    def once(nbytes, calls=[]):  # noqa: B006 (the calls so far)
        calls.append(nbytes)
        return counting(nbytes) if len(calls) == 1 else 1 / 0

    refusing = gpuarray.to_gpu(x, allocator=once)
    with pytest.raises(ZeroDivisionError):
        refusing.copy()
    mem = drv.mem_alloc(x.nbytes)
    freeing = gpuarray.GPUArray(x.shape, x.dtype, gpudata=mem,
                                allocator=lambda n: mem.free() or counting(n))
    with pytest.raises(ValueError, match="freed"):
        freeing.copy()


def test_array_methods_that_run_kernels(rng):
    x = values(np.float32, 1000, rng)
    a = gpuarray.to_gpu(x)
    close(a.astype(np.float64).get(), x.astype(np.float64))
    b = gpuarray.empty(1000, np.float32)
    assert b.fill(3.5) is b
    i = gpuarray.empty(5, np.int16)
    np.testing.assert_array_equal(i.fill(-7.9).get(), np.full(5, -7, np.int16))  # NumPy's fill
    np.testing.assert_array_equal(i.fill(np.uint64(300)).get(), np.full(5, 300, np.int16))
    close(b.get(), np.full(1000, 3.5, np.float32))
    close(a.mul_add(2, b, -1).get(), 2 * x - np.full(1000, 3.5, np.float32))
    # PyCUDA's add_timer(count, seconds): seconds a callable that waits for the kernel.
    timed = []
    c = a.mul_add(2, b, -1, lambda count, seconds: timed.append((count, seconds)))
    assert len(timed) == 1 and timed[0][0] == 3 * 1000 and callable(timed[0][1])
    assert 0 <= timed[0][1]() < 10
    close(c.get(), 2 * x - np.full(1000, 3.5, np.float32))
    close(a.reverse().get(), x[::-1])
    # More than one axis: PyCUDA's reverses the memory and keeps shape and order.
    m = np.arange(12, dtype=np.int32).reshape(3, 4)
    np.testing.assert_array_equal(gpuarray.to_gpu(m).reverse().get(),
                                  m.ravel()[::-1].reshape(3, 4))
    mf = np.asfortranarray(m)
    got = gpuarray.to_gpu(mf).reverse()
    assert got.flags.f_contiguous and got.shape == (3, 4)
    np.testing.assert_array_equal(got.get(), mf.ravel("F")[::-1].reshape((3, 4), order="F"))
    with pytest.raises(ValueError, match="takes a contiguous array"):
        gpuarray.to_gpu(m)[:, ::2].reverse()
    # arange's dtype last among the positions: PyCUDA's np.dtype, NumPy's fourth
    close(gpuarray.arange(0, 5, np.dtype(np.float32)).get(), np.arange(0, 5, dtype=np.float32))
    assert gpuarray.arange(0, 5, 1, np.int16).dtype == np.int16
    z = values(np.complex64, 10, rng)
    close(gpuarray.to_gpu(z).conj().get(), np.conj(z))
    assert np.isnan(float(a.sum().get()))  # x holds NaN
    finite = np.where(np.isfinite(x), x, 0).astype(np.float32)
    assert abs(float(gpuarray.to_gpu(finite).sum().get()) - finite.sum(dtype=np.float64)) < 1e-3
    assert float(gpuarray.to_gpu(finite).max().get()) == finite.max()


# ---- ElementwiseKernel and ReductionKernel as PyCUDA documents them --------------------------

def test_elementwise_kernel_linear_combination():
    lin_comb = ElementwiseKernel("float a, float *x, float b, float *y, float *z",
                                 "z[i] = a*x[i] + b*y[i]", "linear_combination")
    rng = np.random.default_rng(1)
    x, y = rng.random(50000, np.float32), rng.random(50000, np.float32)
    a_gpu, b_gpu = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    c_gpu = gpuarray.empty_like(a_gpu)
    lin_comb(5, a_gpu, 6, b_gpu, c_gpu)
    close(c_gpu.get(), 5 * x + 6 * y)


def test_elementwise_kernel_range_slice_stream_and_aliasing():
    k = ElementwiseKernel("float *x, float *z", "z[i] = x[i] * 2", "twice")
    x = np.arange(100, dtype=np.float32)
    a = gpuarray.to_gpu(x)
    z = gpuarray.zeros(100, np.float32)
    k(a, z, range=slice(10, 50, 3))
    want = np.zeros(100, np.float32)
    want[10:50:3] = x[10:50:3] * 2
    close(z.get(), want)
    z.fill(0)
    k(a, z, slice=slice(-10, None))
    want[:] = 0
    want[-10:] = x[-10:] * 2
    close(z.get(), want)
    s = kiln.Stream()
    k(a, a, stream=s)  # the same array in and out: the variant without __restrict__
    s.synchronize()
    close(a.get(), x * 2)


@pytest.mark.parametrize("n", [1, 257, 3 * 2**20 + 5])
def test_an_operation_that_steps_i_itself_visits_each_element_once(n):
    # PyCUDA's MD5 generator writes elements total_threads apart and steps i past them; its
    # loop then goes on from there, so each element is written by one thread, once.
    k = ElementwiseKernel("unsigned int *count",
                          "atomicAdd(&count[i], 1u); i += total_threads; "
                          "if (i < n) atomicAdd(&count[i], 1u)", "count_twice_apart")
    count = gpuarray.zeros(n, np.uint32)
    k(count)
    got = count.get()
    assert (got == 1).all(), np.flatnonzero(got != 1)[:10]


def test_elementwise_kernel_on_strided_views_with_x_i():
    k = ElementwiseKernel("float *x, float *z", "z[z_i] = x[x_i] + 1", "plus_one")
    x = np.arange(60, dtype=np.float32).reshape(6, 10)
    a = gpuarray.to_gpu(x)
    out = gpuarray.zeros((6, 5), np.float32)
    k(a[:, ::2], out)
    close(out.get(), x[:, ::2] + 1)
    bare = ElementwiseKernel("float *x, float *z", "z[i] = x[i] + 1", "plus_one_i")
    with pytest.raises(ValueError, match="not contiguous"):
        bare(a[:, ::2], out)


def test_reduction_kernel_dot_product():
    dot = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b", map_expr="x[i]*y[i]",
                          arguments="float *x, float *y")
    rng = np.random.default_rng(2)
    x, y = rng.random(2**20 + 1, np.float32), rng.random(2**20 + 1, np.float32)
    got = dot(gpuarray.to_gpu(x), gpuarray.to_gpu(y)).get()
    np.testing.assert_allclose(float(got), float(np.dot(x.astype(np.float64), y)), rtol=1e-5)
    out = gpuarray.empty((), np.float32)
    assert dot(gpuarray.to_gpu(x), gpuarray.to_gpu(y), out=out) is out
    # PyCUDA's kernel_wrapper is given each launch, called as a prepared_async_call, and
    # what it returns is launched in its place (a program's timer).
    launches = []

    def timer(launch):
        def timed(grid, block, stream, *args, **kwargs):
            start = kiln.driver.Event().record(stream)
            launch(grid, block, stream, *args, **kwargs)
            launches.append(kiln.driver.Event().record(stream).synchronize().time_since(start))
        return timed

    wrapped = dot(gpuarray.to_gpu(x), gpuarray.to_gpu(y), kernel_wrapper=timer).get()
    np.testing.assert_allclose(float(wrapped), float(got), rtol=1e-6)
    assert len(launches) >= 1 and all(t >= 0 for t in launches)
    part = dot(gpuarray.to_gpu(x), gpuarray.to_gpu(y), range=slice(100, 1000, 7)).get()
    np.testing.assert_allclose(float(part), float(np.dot(x[100:1000:7], y[100:1000:7])),
                               rtol=1e-5)
    # out= is checked on every path (range= takes the general one): a raw address, an
    # allocation or an array of another dtype or no room is refused, not written through.
    xs, ys = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    for bad, error in [(0, TypeError), (-1, TypeError), (out.gpudata, TypeError),
                       (gpuarray.empty((), np.int32), ValueError),
                       (gpuarray.empty(0, np.float32), ValueError),
                       (gpuarray.empty((4, 4), np.float32)[:, 1], ValueError)]:
        for kw in ({}, {"range": slice(0, 10)}):
            with pytest.raises(error, match="out must be a"):
                dot(xs, ys, out=bad, **kw)
    np.testing.assert_allclose(float(dot(xs, ys, out=out, range=slice(0, 10)).get()),
                               float(np.dot(x[:10], y[:10])), rtol=1e-5)


def test_reduction_kernel_maximum_and_complex():
    mx = ReductionKernel(np.float64, neutral="-1e300", reduce_expr="a > b ? a : b",
                         map_expr="fabs(x[i])", arguments="double *x")
    x = np.random.default_rng(4).standard_normal(12345)
    assert float(mx(gpuarray.to_gpu(x)).get()) == np.abs(x).max()
    cs = ReductionKernel(np.complex64, "0", "a+b", "x[i]*x[i]", "pycuda::complex<float> *x")
    z = (np.arange(1000) * (1 + 1j) / 1000).astype(np.complex64)
    np.testing.assert_allclose(complex(cs(gpuarray.to_gpu(z)).get()), np.sum(z * z), rtol=1e-4)


def test_pycudas_call_forms():
    """The forms PyCUDA's own test files call, with NumPy's values."""
    import kiln.cumath as cumath
    import kiln.driver as drv
    from kiln.tools import DeviceMemoryPool
    rng = np.random.default_rng(9)
    x = rng.random(40) - 0.5
    xd = gpuarray.to_gpu(x)
    # cumath's second argument: out when an array, else the stream.
    out = gpuarray.empty_like(xd)
    assert cumath.exp(xd, out) is out
    close(out.get(), np.exp(x))
    s = drv.Stream()
    close(cumath.sin(xd, s).get(), np.sin(x))
    with pytest.raises(TypeError, match="got out twice"):
        cumath.exp(xd, out, out=out)
    # mul_add into out; conj into out; any/all with an allocator.
    a, b = np.arange(10, dtype=np.float32), np.arange(10, dtype=np.float32) * 10
    ad, bd, cd = gpuarray.to_gpu(a), gpuarray.to_gpu(b), gpuarray.empty(10, np.float32)
    assert ad.mul_add(2, bd, 3, out=cd) is cd
    np.testing.assert_array_equal(cd.get(), 2 * a + 3 * b)
    wide = gpuarray.empty(10, np.float64)
    ad.mul_add(2, bd, 3, out=wide)
    np.testing.assert_array_equal(wide.get(), 2 * a + 3 * b)
    with pytest.raises(TypeError, match="Cannot cast mul_add output"):
        ad.mul_add(2, bd, 3, out=gpuarray.empty(10, np.int32))
    z = (x + 1j * x[::-1]).astype(np.complex64)
    zout = gpuarray.empty(40, np.complex64)
    assert gpuarray.to_gpu(z).conj(out=zout) is zout
    np.testing.assert_array_equal(zout.get(), np.conj(z))
    assert xd.conj() is xd
    pool = DeviceMemoryPool()
    some = gpuarray.to_gpu(np.array([0.5, 0.0, 2.0]))
    assert bool(some.any(allocator=pool.allocate).get()) and \
        not bool(gpuarray.all(some, allocator=pool.allocate).get()) and \
        bool(xd.all(allocator=pool.allocate).get())
    # where with PyCUDA's keyword names.
    np.testing.assert_array_equal(
        gpuarray.where(xd > 0, then_=xd, else_=0.0).get(), np.where(x > 0, x, 0.0))
    # transpose(axes=) on a view that is not contiguous.
    d = gpuarray.to_gpu(rng.random((4, 6, 5)).astype(np.float32))
    np.testing.assert_array_equal(d[:, 2:4, :].transpose(axes=(1, 0, 2)).get(),
                                  d.get()[:, 2:4, :].transpose(1, 0, 2))
    # The CUDA array interface gives strides, as NumPy's.
    assert d.__cuda_array_interface__["strides"] == d.get().strides
    # retain_primary_context takes no arguments and gives the context kiln uses.
    ctx = drv.Context.get_device().retain_primary_context()
    assert isinstance(ctx, drv.Context)
    with pytest.raises(TypeError):
        drv.Context.get_device().retain_primary_context(0)


def test_reshape_in_an_order_gives_that_order_with_numpys_values():
    h = np.arange(128, dtype=np.float32).reshape(4, 32)
    a = gpuarray.to_gpu(h)
    f = a.reshape(4, 32, order="F")  # the same shape, asked for in the other order: a copy
    assert f.flags.f_contiguous and not f.flags.c_contiguous
    np.testing.assert_array_equal(f.get(), h.reshape(4, 32, order="F"))
    back = f.reshape((4, 32))
    assert back.flags.c_contiguous and not back.flags.f_contiguous
    np.testing.assert_array_equal(back.get(), h)
    g = a.reshape(8, 16, order="F")
    assert g.flags.f_contiguous
    np.testing.assert_array_equal(g.get(), h.reshape(8, 16, order="F"))
    assert a.reshape(4, 32).gpudata == a.gpudata  # in its own order, still a view


def test_ravel_is_contiguous_as_numpys():
    h = np.arange(20, dtype=np.float32)
    a = gpuarray.to_gpu(h)
    r = a[::3].ravel()
    assert r.flags.c_contiguous and r.gpudata != a.gpudata
    np.testing.assert_array_equal(r.get(), h[::3])
    assert a.ravel().gpudata == a.gpudata  # contiguous already: a view


def test_operations_on_fortran_ordered_arrays_give_fortran_ordered_results():
    # NumPy's order="K": a result of F-ordered operands is F-ordered, its values NumPy's. A
    # program's F-order kernel reads it as PyCUDA's (whose result keeps the operands' strides).
    import kiln.cumath as cumath
    rng = np.random.default_rng(5)
    h = np.asfortranarray(rng.random((33, 70)) - 0.5)
    c = np.ascontiguousarray(rng.random((33, 70)))
    a, ac, row = gpuarray.to_gpu(h), gpuarray.to_gpu(c), gpuarray.to_gpu(c[0])
    cases = [(a + a, h + h), (a * 2.5, h * 2.5), (-a, -h), (abs(a), abs(h)), (a ** 2, h ** 2),
             (a > 0, h > 0), (a.astype(np.float32), h.astype(np.float32)),
             (cumath.exp(a), np.exp(h)), (a + row, h + c[0]), (gpuarray.maximum(a, 0.1),
             np.maximum(h, 0.1)), (gpuarray.if_positive(a, a, -a), np.where(h > 0, h, -h)),
             (a[:, ::2] * 3, h[:, ::2] * 3), (a.conj(), h.conj())]
    for got, want in cases:
        assert got.flags.f_contiguous and not got.flags.c_contiguous, (want.dtype, got.strides)
        np.testing.assert_allclose(got.get(), want, rtol=1e-6)
    mixed = a + ac  # C and F operands: C, as NumPy's
    assert mixed.flags.c_contiguous
    np.testing.assert_allclose(mixed.get(), h + c)
    # a kernel that indexes in F order, as a Fortran-minded program's does
    mod = kiln.SourceModule("""
    __global__ void col_sums(double *out, const double *m, int rows, int cols) {
      int j = blockIdx.x * blockDim.x + threadIdx.x;
      if (j >= cols) return;
      double s = 0;
      for (int i = 0; i < rows; i++) s += m[i + j * rows];
      out[j] = s;
    }""")
    out = gpuarray.empty(70, np.float64)
    mod.get_function("col_sums")(out, a + a, np.int32(33), np.int32(70), block=(128, 1, 1))
    np.testing.assert_allclose(out.get(), (h + h).sum(axis=0))


@pytest.mark.parametrize("to_gpu", [gpuarray.to_gpu, gpuarray.to_gpu_async])
def test_to_gpu_keeps_a_transposed_arrays_layout_packed_as_pycudas(to_gpu):
    # PyCUDA's to_gpu packs a host array with its axes in the order its strides give them
    # (_compact_strides): a kernel given the copy's memory reads it in that order, and get()
    # gives a host array laid out alike.
    h = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    for src in (h.transpose(1, 0, 2), h.swapaxes(0, 2)[:, ::2], h.transpose(2, 0, 1)[1:]):
        g = to_gpu(src)
        want = list(gpuarray._compact_strides(src))
        assert list(g.strides) == want
        kiln.synchronize()
        got = g.get()
        np.testing.assert_array_equal(got, src)
        assert list(got.strides) == want
        raw = np.empty(src.size, np.float32)
        kiln.driver.memcpy_dtoh(raw, g.gpudata)  # memory order, as a kernel sees it
        packed = np.lib.stride_tricks.as_strided(np.empty(src.shape, np.float32), strides=want)
        packed[...] = src
        np.testing.assert_array_equal(raw, packed.ravel(order="K"))
        np.testing.assert_array_equal((g * 2).get(), src * 2)  # and it computes
        into = np.empty_like(got)  # into a host array laid out alike, as PyCUDA's takes
        assert g.get(ary=into) is into
        np.testing.assert_array_equal(into, src)
        locked = g.get(pagelocked=True)  # page-locked, laid out alike, as PyCUDA's
        assert list(locked.strides) == want
        np.testing.assert_array_equal(locked, src)
        owner = locked.base
        while isinstance(owner, np.ndarray):
            owner = owner.base
        assert isinstance(owner, kiln.driver.PagelockedHostAllocation)
    g = gpuarray.to_gpu(h.transpose(1, 0, 2))
    assert not (g.flags.c_contiguous or g.flags.f_contiguous)
    g.set(np.ascontiguousarray(h.transpose(1, 0, 2)) + 1)  # a C host array into it
    np.testing.assert_array_equal(g.get(), h.transpose(1, 0, 2) + 1)


def test_get_into_a_host_array_of_another_shape_warns_and_a_wrong_dtype_is_a_type_error():
    # PyCUDA's get: a DeprecationWarning and ary reshaped; "self and ary must have the same
    # dtype" is a TypeError.
    a = gpuarray.to_gpu(np.arange(6, dtype=np.float32).reshape(2, 3))
    flat = np.empty(6, np.float32)
    with pytest.warns(DeprecationWarning, match="another shape"):
        got = a.get(flat)
    assert got.shape == (2, 3) and np.shares_memory(got, flat)
    np.testing.assert_array_equal(flat, np.arange(6))
    with pytest.raises(TypeError, match="has dtype"):
        a.get(np.empty((2, 3)))
    with pytest.raises(ValueError, match="has dtype"):  # set's is a ValueError, as PyCUDA's
        a.set(np.empty((2, 3)))
    # The warning runs the program's code, which may resize the host array: it is looked at
    # again before the copy.
    big = gpuarray.to_gpu(np.arange(1 << 20, dtype=np.float64))
    host = np.empty((1 << 10, 1 << 10))

    def show(message, category, filename, lineno, file=None, line=None):
        host.resize((1,), refcheck=False)

    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = show
        with pytest.raises(ValueError, match="1 elements"):
            big.get(host)


def test_empty_is_the_constructor_with_its_arguments_in_its_order():
    # PyCUDA's gpuarray.empty is GPUArray: base=, gpudata= and strides= make a view of memory.
    import inspect
    assert list(inspect.signature(gpuarray.empty).parameters) == \
        list(inspect.signature(gpuarray.GPUArray).parameters)
    a = gpuarray.to_gpu(np.arange(8, dtype=np.float32))
    v = gpuarray.empty((2, 2), np.float32, None, a, a.gpudata, (4, 8))
    assert v.base is a and v.ptr == a.ptr and v.strides == (4, 8)
    np.testing.assert_array_equal(v.get(), np.arange(4, dtype=np.float32).reshape(2, 2).T)
    assert gpuarray.empty(3, order="F").dtype == np.float64


@pytest.mark.parametrize("func", [gpuarray.empty_like, gpuarray.zeros_like, gpuarray.ones_like])
def test_like_functions_keep_the_order_for_a_and_k(func):
    h = np.ones((16, 8), np.float32)
    for src in (gpuarray.to_gpu(h), gpuarray.to_gpu(np.asfortranarray(h))):
        for order in ("A", "K"):
            new = func(src, order=order)
            assert (new.flags.c_contiguous, new.flags.f_contiguous) == \
                (src.flags.c_contiguous, src.flags.f_contiguous)
        assert func(src, order="F").flags.f_contiguous
        assert func(src, order="C").flags.c_contiguous


@pytest.mark.parametrize("op", ["logical_and", "logical_or"])
def test_logical_operations_with_scalars_and_allocators(op):
    from kiln.tools import DeviceMemoryPool
    x = np.random.default_rng(0).random((10, 4))
    x[0, :2] = 0
    xd = gpuarray.to_gpu(x)
    f, g = getattr(gpuarray, op), getattr(np, op)
    for scalar in (1.0, 0.0, 0, 2, 0.5, True, np.float32(0)):
        np.testing.assert_array_equal(f(xd, scalar).get(), g(x, scalar))
        np.testing.assert_array_equal(f(scalar, xd).get(), g(scalar, x))
    both = f(1.0, 0.0)
    assert both.shape == () and bool(both.get()) == g(1.0, 0.0)
    pool = DeviceMemoryPool()
    pooled = f(xd, xd, allocator=pool.allocate)
    assert pool.active_blocks == 1
    np.testing.assert_array_equal(pooled.get(), g(x, x))
    np.testing.assert_array_equal(gpuarray.logical_not(xd, allocator=pool.allocate).get(),
                                  np.logical_not(x))
    assert bool(gpuarray.logical_not(0.0).get())


@pytest.mark.parametrize("n", [0, 1, 255, 256, 257, 10**6 + 3])
def test_pycudas_launch_shape_and_new_like_me_serve_a_kernel_of_ones_own(n):
    # Programs that extend GPUArray launch their own kernels over an array's elements with
    # f.prepared_call(a._grid, a._block, ...), and make results with a._new_like_me().
    a = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    grid, block = a._grid, a._block
    assert (grid, block) == gpuarray.splay(n) and grid[0] * block[0] >= n
    f = kiln.SourceModule("""
    __global__ void twice(float *out, const float *in, unsigned long n)
    { for (unsigned long i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
           i += gridDim.x * blockDim.x) out[i] = 2 * in[i]; }
    """).get_function("twice")
    f.prepare("PPL")
    out = a._new_like_me()
    assert out.shape == a.shape and out.dtype == a.dtype and out.ptr != a.ptr or n == 0
    if n:  # an empty array's gpudata is None, as PyCUDA's
        f.prepared_call(grid, block, out.gpudata, a.gpudata, a.mem_size)
    np.testing.assert_array_equal(out.get(), 2 * np.arange(n, dtype=np.float32))
    doubled = a._new_like_me(dtype=np.float64)
    assert doubled.dtype == np.float64 and doubled.shape == (n,)


def test_a_complex_kernel_written_for_pycuda_includes_its_header():
    # PyCUDA's demo_complex.py: the preamble includes <pycuda-complex.hpp>.
    rng = np.random.default_rng(7)
    a = (rng.standard_normal(400) + 1j * rng.standard_normal(400)).astype(np.complex64)
    b = (rng.standard_normal(400) + 1j * rng.standard_normal(400)).astype(np.complex64)
    complex_mul = ElementwiseKernel(
        "pycuda::complex<float> *x, pycuda::complex<float> *y, pycuda::complex<float> *z",
        "z[i] = x[i] * y[i]", "complex_mul", preamble="#include <pycuda-complex.hpp>")
    a_gpu, b_gpu = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    c_gpu = gpuarray.empty_like(a_gpu)
    complex_mul(a_gpu, b_gpu, c_gpu)
    np.testing.assert_allclose(c_gpu.get(), a * b, rtol=1e-5, atol=1e-6)
