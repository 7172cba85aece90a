"""kiln.scan: PyCUDA's InclusiveScanKernel and ExclusiveScanKernel. Without a GPU: the
signatures, the kernels compile for every dtype, bad input is refused before anything is
launched (device arrays that are never launched stand in, from a CUDA array interface). On
the GPU: sums and maxima against np.cumsum and np.maximum.accumulate around the tile
boundaries and up to 10**7 elements, in place and out of place, of views.

Float sums are checked to |got - want| <= rtol * cumsum(|x|), with want the cumulative sum in
float64 and rtol 1e-5 for float32 and complex64, 1e-12 for float64 and complex128: the scan
adds in another order than np.cumsum (tile by tile), so its rounding differs by a few units
of the running magnitude."""
import inspect

import numpy as np
import pytest

import kiln
from kiln import _scan_src
from kiln.scan import ExclusiveScanKernel, InclusiveScanKernel

TILE = _scan_src.TILE
DTYPES = [np.int32, np.int64, np.float32, np.float64, np.complex64, np.complex128]


def stand_in(shape, dtype, strides=None):
    """A DeviceArray over memory that is never touched: enough for the checks made before a
    launch."""
    class Interface:
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                    "data": (0x10000, False), "version": 3,
                                    "strides": strides, "stream": None}
    return kiln.asarray(Interface())


# ---- without a GPU ---------------------------------------------------------------------------

def test_signatures_are_pycudas():
    inc = inspect.signature(InclusiveScanKernel)
    assert list(inc.parameters) == ["dtype", "scan_expr", "neutral", "name_prefix", "options",
                                    "preamble", "devices"]
    assert inc.parameters["neutral"].default is None
    assert inc.parameters["name_prefix"].default == "scan"
    exc = inspect.signature(ExclusiveScanKernel)
    assert list(exc.parameters)[:3] == ["dtype", "scan_expr", "neutral"]
    assert exc.parameters["neutral"].default is inspect.Parameter.empty
    call = inspect.signature(InclusiveScanKernel.__call__)
    assert list(call.parameters)[:5] == ["self", "input_ary", "output_ary", "allocator",
                                         "stream"]


@pytest.mark.parametrize("dtype", DTYPES + [np.float16, np.uint8, np.int16, np.uint64])
def test_kernels_compile_for_every_dtype(dtype):
    for expr, neutral in (("a+b", "0"), ("(a > b) ? a : b", None)):
        if np.dtype(dtype).kind == "c" and ">" in expr:
            continue
        inc = InclusiveScanKernel(dtype, expr, neutral, name_prefix="kiln_test")
        assert len(inc.module.kernels) == 3
        for name in ("kiln_test_tiles", "kiln_test_inclusive", "kiln_test_exclusive"):
            assert inc.module.get_function(name).name in inc.module.kernels
    exc = ExclusiveScanKernel(dtype, "a+b", "0")
    assert exc.dtype == np.dtype(dtype) and exc.neutral == "0"


def test_a_preamble_and_options_reach_the_compiler():
    k = InclusiveScanKernel(np.float32, "my_op(a, b)", preamble="__device__ float my_op("
                            "float a, float b) { return a + 2 * b; }", options=["-DKILN_X=1"])
    assert k.preamble.startswith("__device__") and k.options == ["-DKILN_X=1"]


def test_maximum_neutrals_compile():
    for dtype, lowest in ((np.int64, "(-9223372036854775807LL - 1)"),
                          (np.float32, "-__int_as_float(0x7f800000)"),
                          (np.float64, "-__longlong_as_double(0x7ff0000000000000ULL)")):
        ExclusiveScanKernel(dtype, "(a > b) ? a : b", lowest)


def test_bad_construction_is_refused():
    with pytest.raises(ValueError, match="exclusive scan needs neutral"):
        ExclusiveScanKernel(np.int32, "a+b", None)
    with pytest.raises(kiln.CompileError, match="undefined"):
        InclusiveScanKernel(np.int32, "a + not_declared")
    with pytest.raises(ValueError, match="C identifier"):
        InclusiveScanKernel(np.int32, "a+b", name_prefix="my scan")
    with pytest.raises(TypeError, match="scan_expr"):
        InclusiveScanKernel(np.int32, "")
    with pytest.raises(ValueError, match="no C type"):
        InclusiveScanKernel(np.dtype("U3"), "a+b")


def test_bad_calls_are_refused_before_a_launch():
    k = InclusiveScanKernel(np.float32, "a+b")
    with pytest.raises(TypeError, match="takes a device array"):
        k(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="built for float32; the input is float64"):
        k(stand_in((4,), np.float64))
    with pytest.raises(ValueError, match="same shape"):
        k(stand_in((4,), np.float32), stand_in((5,), np.float32))
    with pytest.raises(TypeError, match="the output is int32"):
        k(stand_in((4,), np.float32), stand_in((4,), np.int32))
    with pytest.raises(ValueError, match="'new'"):
        k(stand_in((4,), np.float32), "fresh")
    empty = stand_in((0,), np.float32)
    assert k(empty) is empty  # nothing to scan, nothing launched


def test_integers_of_the_same_width_scan_as_the_kernels_dtype_and_others_are_refused():
    k = InclusiveScanKernel(np.uint32, "a+b")
    empty = stand_in((0,), np.int32)  # read as uint32, as PyCUDA reads any array's memory
    assert k(empty) is empty
    with pytest.raises(TypeError, match="built for uint32; the input is int64"):
        k(stand_in((4,), np.int64))
    with pytest.raises(TypeError, match="built for uint32; the input is float32"):
        k(stand_in((4,), np.float32))
    with pytest.raises(TypeError, match="built for uint32; the output is int16"):
        k(stand_in((4,), np.int32), stand_in((4,), np.int16))


# ---- on the GPU ------------------------------------------------------------------------------

def host_values(dtype, n, rng):
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        return rng.integers(-5 if dtype.kind == "i" else 0, 10, n).astype(dtype)
    if dtype.kind == "f":
        return rng.random(n).astype(dtype)
    return (rng.random(n) + 1j * rng.random(n) - 0.5j).astype(dtype)


def check_sum(got, x, exclusive=False):
    want = np.cumsum(x.astype(np.complex128 if x.dtype.kind == "c" else
                              np.float64 if x.dtype.kind == "f" else x.dtype))
    if exclusive:
        want = np.concatenate([np.zeros(1, want.dtype), want[:-1]])
    assert got.dtype == x.dtype and got.shape == x.shape
    if x.dtype.kind in "iu":
        np.testing.assert_array_equal(got, want.astype(x.dtype))
        return
    rtol = 1e-5 if x.dtype in (np.float32, np.complex64) else 1e-12
    scale = np.cumsum(np.abs(x).astype(np.float64)) + 1
    assert np.all(np.abs(got - want) <= rtol * scale), np.max(np.abs(got - want) / scale)


SIZES = [1, 2, 255, 256, 257, TILE - 1, TILE, TILE + 1, 3 * TILE + 17, TILE * TILE - 1,
         TILE * TILE, TILE * TILE + 1, 10**6 + 3]


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES)
def test_inclusive_and_exclusive_sums_match_cumsum(dtype):
    rng = np.random.default_rng(1)
    inc = InclusiveScanKernel(dtype, "a+b")
    exc = ExclusiveScanKernel(dtype, "a+b", "0")
    for n in SIZES:
        x = host_values(dtype, n, rng)
        a = kiln.to_device(x)
        out = exc(a, "new")
        check_sum(out.get(), x, exclusive=True)
        assert inc(a) is a  # in place
        check_sum(a.get(), x)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.float32])
def test_ten_million_elements(dtype):
    rng = np.random.default_rng(2)
    x = host_values(dtype, 10**7, rng)
    a = kiln.to_device(x)
    out = kiln.empty(x.shape, dtype)
    assert InclusiveScanKernel(dtype, "a+b")(a, out) is out
    check_sum(out.get(), x)
    np.testing.assert_array_equal(a.get(), x)  # the input is left as it was


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.float32, np.float64])
def test_maximum_scans_match_maximum_accumulate(dtype):
    rng = np.random.default_rng(3)
    lowest = {np.int32: "(-2147483647 - 1)", np.int64: "(-9223372036854775807LL - 1)",
              np.float32: "-__int_as_float(0x7f800000)",
              np.float64: "-__longlong_as_double(0x7ff0000000000000ULL)"}[dtype]
    inc = InclusiveScanKernel(dtype, "(a > b) ? a : b")
    exc = ExclusiveScanKernel(dtype, "(a > b) ? a : b", lowest)
    for n in (1, 257, TILE + 1, TILE * TILE + 5, 10**6):
        x = (rng.standard_normal(n) * 1000).astype(dtype)
        a = kiln.to_device(x)
        want = np.maximum.accumulate(x)
        np.testing.assert_array_equal(inc(a, "new").get(), want)
        first = -np.inf if np.dtype(dtype).kind == "f" else np.iinfo(dtype).min
        np.testing.assert_array_equal(exc(a, "new").get(),
                                      np.concatenate([[first], want[:-1]]).astype(dtype))


@pytest.mark.gpu
def test_views_that_are_not_contiguous_are_scanned_in_c_order():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 10, (300, 40)).astype(np.int64)
    a = kiln.to_device(x)
    k = InclusiveScanKernel(np.int64, "a+b")
    out = k(a[:, ::2], "new")
    np.testing.assert_array_equal(out.get(), np.cumsum(x[:, ::2]).reshape(300, 20))
    k(a[:, ::2])  # in place, through a contiguous copy written back
    expect = x.copy()
    expect[:, ::2] = np.cumsum(x[:, ::2]).reshape(300, 20)
    np.testing.assert_array_equal(a.get(), expect)
    dst = kiln.zeros((300, 40), np.int64)
    k(kiln.to_device(x[:, 1::2].copy()), dst[:, 1::2])
    expect = np.zeros_like(x)
    expect[:, 1::2] = np.cumsum(x[:, 1::2]).reshape(300, 20)
    np.testing.assert_array_equal(dst.get(), expect)


@pytest.mark.gpu
def test_an_output_overlapping_the_input_reads_the_input_first():
    x = np.arange(1, 5001, dtype=np.int32)
    a = kiln.to_device(x)
    InclusiveScanKernel(np.int32, "a+b")(a[:-1], a[1:])
    np.testing.assert_array_equal(a.get(), np.concatenate([[1], np.cumsum(x[:-1])]))


@pytest.mark.gpu
def test_streams_empty_arrays_and_wrong_dtypes():
    k = ExclusiveScanKernel(np.float64, "a+b", "0")
    s = kiln.Stream()
    x = np.random.default_rng(5).random(TILE * 3)
    out = k(kiln.to_device(x), "new", stream=s)
    s.synchronize()
    check_sum(out.get(), x, exclusive=True)
    e = kiln.empty(0, np.float64)
    assert k(e) is e
    with pytest.raises(TypeError, match="built for float64"):
        k(kiln.zeros(3, np.float32))


@pytest.mark.gpu
def test_pycudas_documented_example():
    knl = InclusiveScanKernel(np.int32, "a+b")
    n = 2**20 - 2**18 + 5
    host_data = np.random.randint(0, 10, n).astype(np.int32)
    dev_data = kiln.to_device(host_data)
    knl(dev_data)
    assert (dev_data.get() == np.cumsum(host_data, axis=0)).all()


@pytest.mark.gpu
@pytest.mark.parametrize("doubles", [3, 16])
def test_structs_too_large_for_a_full_tile_are_scanned(doubles):
    # Elements of 24 and 128 bytes: tiles of fewer items, then fewer threads (_scan_src.shape),
    # across several tiles, inclusive and exclusive. The fields are named for this test: the
    # registry gives a dtype the first name it was registered under (PyCUDA's rule), and
    # test_codegen registers doubles named v0, v1, ... under another.
    from kiln.tools import get_or_register_dtype
    name = f"kiln_scan{doubles}_t"
    dt = get_or_register_dtype(name, np.dtype([(f"s{k}", np.float64) for k in range(doubles)]))
    fields = " ".join(f"double s{k};" for k in range(doubles))
    adds = ", ".join(f"a.s{k} + b.s{k}" for k in range(doubles))
    zeros = ", ".join("0" for _ in range(doubles))
    pre = (f"struct {name} {{ {fields} }};\n"
           f"__device__ {name} add({name} a, {name} b) {{ return {{ {adds} }}; }}\n"
           f"__device__ {name} zero() {{ return {{ {zeros} }}; }}\n")
    tile = _scan_src.shape(dt)[2]
    n = 3 * tile + 5
    rng = np.random.default_rng(doubles)
    host = np.zeros(n, dt)
    for k in range(doubles):
        host[f"s{k}"] = rng.integers(-50, 50, n)  # exact in float64 whatever the order
    x = kiln.to_device(host)
    inc = InclusiveScanKernel(dt, "add(a, b)", preamble=pre)(x, "new").get()
    exc = ExclusiveScanKernel(dt, "add(a, b)", "zero()", preamble=pre)(x, "new").get()
    for k in range(doubles):
        want = np.cumsum(host[f"s{k}"])
        np.testing.assert_array_equal(inc[f"s{k}"], want)
        np.testing.assert_array_equal(exc[f"s{k}"], np.concatenate([[0], want[:-1]]))
