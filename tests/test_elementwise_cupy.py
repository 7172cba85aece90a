"""CuPy's spelling of ElementwiseKernel (in_params, out_params, operation, name): how it is
told from PyCUDA's, its parameter lists, the kernels it generates for every dtype (compiled
without a GPU), and on the GPU what it computes against NumPy: outputs allocated or given,
placeholders, scalars, broadcasting, raw arrays, views that are not contiguous, in place."""
import numpy as np
import pytest

import kiln
from kiln import _elwise_cupy
from kiln.elementwise import ElementwiseKernel

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]
gpu = pytest.mark.gpu


# ---- without a GPU ---------------------------------------------------------------------------

def test_the_two_spellings_are_told_apart():
    cupy_style = ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y", "mul")
    assert isinstance(cupy_style, _elwise_cupy.CupyElementwiseKernel)
    by_keyword = ElementwiseKernel(in_params="T x", out_params="T y", operation="y = x",
                                   name="copy")
    assert isinstance(by_keyword, _elwise_cupy.CupyElementwiseKernel)
    operation_keyword = ElementwiseKernel("T x", "T y", operation="y = x")
    assert isinstance(operation_keyword, _elwise_cupy.CupyElementwiseKernel)
    pycuda_style = ElementwiseKernel("float a, float *x, float *z", "z[i] = a * x[i]", "ax")
    assert type(pycuda_style) is ElementwiseKernel
    assert pycuda_style.name == "ax"


def test_parameters_are_read_as_cupy_reads_them():
    k = ElementwiseKernel("T x, raw T y, float64 a", "T z", "z = x * y[i] + a", "f")
    assert [(p.name, p.type, p.raw, p.out) for p in k.params] == [
        ("x", "T", False, False), ("y", "T", True, False), ("a", "float64", False, False),
        ("z", "T", False, True)]
    assert k.params[2].dtype == np.float64 and k.params[0].dtype is None
    assert "raw T y" in repr(k)


@pytest.mark.parametrize("ins, outs, phrase", [
    ("float x", "float32 y", "not a NumPy dtype name"),     # C's name: CuPy wants NumPy's
    ("float32 x, float32 x", "float32 y", "declared twice"),
    ("float32 i", "float32 y", "reserved"),
    ("float32 x", "float32 *y", "cannot read the parameter"),
])
def test_bad_parameter_lists_are_refused(ins, outs, phrase):
    with pytest.raises(ValueError, match=phrase):
        _elwise_cupy.CupyElementwiseKernel(ins, outs, "y = x", "k")


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_generates_a_kernel_that_compiles(dtype):
    dtype = np.dtype(dtype)
    k = ElementwiseKernel("T x, T y", "T z", "z = x + y", "add_" + dtype.name)
    arrays = ((dtype, True),) * 3
    for variant, ndim in (("contig", 0), ("alias", 0), ("strided", 2)):
        f = k._compile(arrays, {"T": dtype}, variant, ndim)
        assert f.name.startswith(f"_Z{len(k.name)}{k.name}") or f.name == k.name


def test_a_converted_input_scalars_raw_arrays_and_strides_compile():
    k = ElementwiseKernel("float64 x, raw int32 idx, float32 s", "float64 z",
                          "z = x * s + idx[_ind.size() - 1 - i]", "mix")
    f32, i32, f64 = np.dtype(np.float32), np.dtype(np.int32), np.dtype(np.float64)
    # x arrives as float32 and is converted to the declared float64 in the kernel.
    for variant, ndim in (("contig", 0), ("strided", 3)):
        f = k._compile(((f32, True), (i32, True), (f32, False), (f64, True)), {}, variant, ndim)
        assert f is not None


# ---- on the GPU ------------------------------------------------------------------------------

@gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_placeholder_kernel_against_numpy_for_every_dtype(dtype):
    rng = np.random.default_rng(7)
    a = (rng.random(1025) * 10).astype(dtype)
    b = (rng.random(1025) * 10).astype(dtype)
    k = ElementwiseKernel("T x, T y", "T z", "z = x + y", "add")
    got = k(kiln.to_device(a), kiln.to_device(b))
    assert got.dtype == np.dtype(dtype) and got.shape == a.shape
    want = (a + b).astype(dtype)
    if np.dtype(dtype).kind in "fc":
        np.testing.assert_allclose(got.get(), want, rtol=1e-3 if dtype == np.float16 else 1e-6)
    else:
        np.testing.assert_array_equal(got.get(), want)


@gpu
def test_outputs_given_scalars_and_several_outputs():
    x = np.arange(1000, dtype=np.float32)
    k = ElementwiseKernel("float32 x, float32 a", "float32 y, float32 z",
                          "y = a * x; z = x - a", "two")
    y, z = kiln.empty(1000, np.float32), kiln.empty(1000, np.float32)
    got = k(kiln.to_device(x), 2, y, z)
    assert got[0] is y and got[1] is z
    np.testing.assert_array_equal(y.get(), 2 * x)
    np.testing.assert_array_equal(z.get(), x - 2)
    single = ElementwiseKernel("float32 x", "float32 y", "y = -x", "neg", return_tuple=True)
    assert isinstance(single(kiln.to_device(x)), tuple)
    quiet = ElementwiseKernel("float32 x", "float32 y", "y = -x", "neg", no_return=True)
    assert quiet(kiln.to_device(x), y) is None
    np.testing.assert_array_equal(y.get(), -x)


@gpu
def test_inputs_convert_when_numpy_casts_them_safely_and_are_refused_otherwise():
    k = ElementwiseKernel("float64 x", "float64 y", "y = x / 2", "half")
    ints = np.arange(-5, 5, dtype=np.int32)
    np.testing.assert_array_equal(k(kiln.to_device(ints)).get(), ints / 2)
    with pytest.raises(TypeError, match="does not cast safely"):
        ElementwiseKernel("int32 x", "int32 y", "y = x", "c")(kiln.to_device(np.ones(3)))
    with pytest.raises(TypeError, match="declares float64"):
        k(kiln.to_device(ints), kiln.empty(10, np.float32))
    with pytest.raises(TypeError, match="kiln array"):
        k(np.ones(3))


@gpu
def test_broadcasting_and_views_that_are_not_contiguous():
    rng = np.random.default_rng(3)
    m = rng.random((37, 64)).astype(np.float32)
    row = rng.random(64).astype(np.float32)
    k = ElementwiseKernel("T x, T r", "T z", "z = x * r + i % 3", "bc")
    got = k(kiln.to_device(m), kiln.to_device(row)).get()
    np.testing.assert_allclose(got, m * row + np.arange(m.size).reshape(m.shape) % 3,
                               rtol=1e-6)
    col = rng.random((37, 1)).astype(np.float32)
    np.testing.assert_allclose(k(kiln.to_device(m), kiln.to_device(col)).get(),
                               m * col + np.arange(m.size).reshape(m.shape) % 3, rtol=1e-6)
    dm = kiln.to_device(m)
    view = dm[::2, 1::3]
    copy = ElementwiseKernel("T x", "T z", "z = x + 1", "plus1")
    np.testing.assert_array_equal(copy(view).get(), m[::2, 1::3] + 1)
    with pytest.raises(ValueError, match="do not broadcast"):
        k(kiln.to_device(m), kiln.to_device(rng.random(63).astype(np.float32)))


@gpu
def test_raw_arrays_size_and_in_place():
    x = np.arange(300, dtype=np.int64)
    rev = ElementwiseKernel("raw T x", "T y", "y = x[_ind.size() - 1 - i]", "rev")
    dx = kiln.to_device(x)
    out = kiln.empty(300, np.int64)
    rev(dx, out)
    np.testing.assert_array_equal(out.get(), x[::-1])
    fill = ElementwiseKernel("int64 v", "raw int64 y", "y[i] = v * i", "fill")
    fill(3, out, size=300)
    np.testing.assert_array_equal(out.get(), 3 * x)
    inc = ElementwiseKernel("T x", "T y", "y = x + 1", "inc")
    inc(dx, dx)   # the output is the input: the kernel without __restrict__
    np.testing.assert_array_equal(dx.get(), x + 1)
    with pytest.raises(ValueError, match="size="):
        fill(3, out)


@gpu
@pytest.mark.parametrize("n", [0, 1, 3, 255, 256, 257, 2**20 + 1])
def test_sizes_around_block_boundaries(n):
    x = np.arange(n, dtype=np.float32)
    k = ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y", "mul")
    np.testing.assert_array_equal(k(kiln.to_device(x), kiln.to_device(x)).get(), x * x)
