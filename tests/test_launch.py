"""Launching on the GPU: transfers, every scalar class, structs, timing, errors."""
import numpy as np
import pytest

import kiln
from helpers import run_python

pytestmark = pytest.mark.gpu

SCALARS = r"""
struct Mixed { char c; double d; int i; };
__global__ void scalars(double *out, int i, unsigned u, char c, unsigned char uc, short s,
                        unsigned short us, bool b, long long l, unsigned long long ul,
                        float f, double d)
{
    out[0] = i; out[1] = u; out[2] = c; out[3] = uc; out[4] = s; out[5] = us; out[6] = b;
    out[7] = (double)l; out[8] = (double)ul; out[9] = f; out[10] = d;
}
__global__ void after_pointer(int *out, int4 v, Mixed m, float tail)
{
    out[0] = v.x; out[1] = v.y; out[2] = v.z; out[3] = v.w;
    out[4] = m.c; out[5] = (int)m.d; out[6] = m.i; out[7] = (int)tail;
}
extern "C" __global__ void scale(float *x, float s, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }
extern "C" __global__ void float_bits(unsigned *out, float f) { out[0] = __float_as_uint(f); }
"""


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(SCALARS)


def test_every_scalar_class(mod):
    out = np.zeros(11, np.float64)
    mod.get_function("scalars")(kiln.Out(out), -7, 4000000000, -3, 250, -300, 65000, True,
                                -2**40, 2**63, 1.5, 2.25, block=1, grid=1)
    assert out.tolist() == [-7, 4000000000, -3, 250, -300, 65000, 1, -2**40, 2**63, 1.5, 2.25]


WIDE = r"""
__global__ void echo(long long *out, signed char a, unsigned short b, int c, unsigned d,
                     long long e, float f, double g, long long *also)
{
    out[0] = a; out[1] = b; out[2] = c; out[3] = d; out[4] = e; out[5] = (long long)(f * 4);
    out[6] = (long long)(g * 8); out[7] = (long long)(also - out);
}
extern "C" __global__ void args64(long long *out, %s) { out[0] = %s; }
extern "C" __global__ void wide(long long *out, %s) { out[0] = %s; }
""" % (", ".join(f"int x{i}" for i in range(63)), " + ".join(f"(long long)x{i} * {i + 1}"
                                                            for i in range(63)),
       ", ".join(f"int w{i}" for i in range(300)), " + ".join(f"(long long)w{i} * {i + 1}"
                                                             for i in range(300)))


class Index:
    """An int only through __index__: packed after the plain ints, whatever its place."""

    def __init__(self, value):
        self.value = value

    def __index__(self):
        return self.value


def test_plain_and_other_arguments_mixed_reach_the_kernel():
    m = kiln.SourceModule(WIDE)
    echo = m.get_function("echo")
    out = kiln.mem_alloc(8 * 8)
    got = np.zeros(8, np.int64)
    echo(out, -5, 7, -9, 2**32 - 1, -2**40, 1.25, -0.5, int(out) + 24, block=1, grid=1)
    kiln.memcpy_dtoh(got, out)
    assert got.tolist() == [-5, 7, -9, 2**32 - 1, -2**40, 5, -4, 3]
    # NumPy scalars, __index__, bool and an allocation between plain ints and floats.
    arr = kiln.to_device(np.zeros(4, np.int64))
    echo(out, np.int8(-6), True, Index(-10), np.uint32(11), -2**41, np.float32(0.75), 2.5,
         arr, block=(1, 1, 1), grid=(1, 1))
    kiln.memcpy_dtoh(got, out)
    assert got.tolist()[:7] == [-6, 1, -10, 11, -2**41, 3, 20]
    assert got[7] == (arr.ptr - int(out)) // 8


@pytest.mark.parametrize("name, count", [("args64", 63), ("wide", 300)])
def test_many_parameters_reach_the_kernel(name, count):
    """63 ints after a pointer, and 300 ints, past what is packed on the stack; each weighted
    by its place, so a swapped or dropped one shows."""
    f = kiln.SourceModule(WIDE).get_function(name)
    out = kiln.mem_alloc(8)
    got = np.zeros(1, np.int64)
    values = [(-1) ** i * (i + 3) for i in range(count)]
    want = sum(v * (i + 1) for i, v in enumerate(values))
    f(out, *values, block=1, grid=1)
    kiln.memcpy_dtoh(got, out)
    assert got[0] == want
    values[count // 2] = np.int32(values[count // 2])  # one argument off the one-pass path
    f.prepared_call((1, 1), (1, 1, 1), out, *values)
    kiln.memcpy_dtoh(got, out)
    assert got[0] == want


def test_python_float_into_float_is_a_float(mod):
    bits = np.zeros(1, np.uint32)
    mod.get_function("float_bits")(kiln.Out(bits), 0.1, block=1, grid=1)
    assert bits[0] == np.float32(0.1).view(np.uint32)


def test_int4_and_struct_after_a_pointer(mod):
    out = np.zeros(8, np.int32)
    mixed = np.dtype([("c", "i1"), ("d", "f8"), ("i", "i4")], align=True)
    m = np.array((5, 6.0, 7), dtype=mixed)[()]
    assert mixed.itemsize == 24
    mod.get_function("after_pointer")(kiln.Out(out), np.array([1, 2, 3, 4], np.int32), m, 8.0,
                                      block=1, grid=1)
    assert out.tolist() == [1, 2, 3, 4, 5, 6, 7, 8]


def test_inout_and_time_kernel(mod):
    x = np.arange(10000, dtype=np.float32)
    expect = x * 3
    seconds = mod.get_function("scale")(kiln.InOut(x), 3.0, x.size, block=256,
                                        grid=(x.size + 255) // 256, time_kernel=True)
    assert isinstance(seconds, float) and 0 < seconds < 1
    assert np.array_equal(x, expect)


def test_a_programs_subclasses_of_in_and_inout_copy_their_way(mod):
    class Sent(kiln.In):
        pass

    class Both(kiln.InOut):
        pass

    x = np.arange(256, dtype=np.float32)
    kept = x.copy()
    mod.get_function("scale")(Sent(x), 2.0, x.size, block=256, grid=1)
    assert np.array_equal(x, kept)  # sent, not brought back
    mod.get_function("scale")(Both(x), 2.0, x.size, block=256, grid=1)
    assert np.array_equal(x, kept * 2)


def test_large_in_out_goes_through_the_pool(mod):
    x = np.random.rand(4 << 20).astype(np.float32)  # 16 MiB: past the staging buffers
    expect = x * 0.5
    mod.get_function("scale")(kiln.InOut(x), 0.5, x.size, block=256,
                              grid=(x.size + 255) // 256)
    assert np.array_equal(x, expect)


HISTOGRAM = r"""
extern "C" __global__ void hist(int *bins, const unsigned char *v, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        atomicAdd(&bins[v[i]], 1);
}
extern "C" __global__ void poke(int *out, int n) { if (threadIdx.x < n) out[threadIdx.x] = 7; }
"""


@pytest.mark.parametrize("count", [1000, 3 << 20])  # staged, and pooled (past 256 KiB)
def test_out_memory_starts_as_zeros_so_kernels_may_count_into_it(count):
    # Under PyCUDA an Out buffer is a new cuMemAlloc, which the driver gives zeroed; programs
    # atomicAdd a histogram into drv.Out(bins). Run twice: the second call's memory is the
    # first's, reused, and must not carry its counts.
    m = kiln.SourceModule(HISTOGRAM)
    v = np.random.default_rng(1).integers(0, 256, count, dtype=np.uint8)
    for _ in range(2):
        bins = np.full(256, -1, np.int32)  # the host array's values never reach the device
        m.get_function("hist")(kiln.Out(bins), kiln.In(v), np.int32(count), block=256, grid=64)
        assert np.array_equal(bins, np.bincount(v, minlength=256))
    # What a kernel leaves unwritten comes back as zeros, after a call that wrote it.
    out = np.zeros(64, np.int32)
    m.get_function("poke")(kiln.Out(out), np.int32(64), block=64, grid=1)
    assert (out == 7).all()
    m.get_function("poke")(kiln.Out(out), np.int32(10), block=64, grid=1)
    assert (out[:10] == 7).all() and (out[10:] == 0).all()


def test_mem_alloc_memcpy_and_pointers(mod):
    x = np.arange(1000, dtype=np.float32)
    buf = kiln.mem_alloc(x.nbytes)
    assert buf.size == x.nbytes and int(buf) != 0
    kiln.memcpy_htod(buf, x)
    f = mod.get_function("scale")
    f(buf, 2.0, x.size, block=256, grid=4)
    f(int(buf), 2.0, x.size, block=(256, 1, 1), grid=(4, 1, 1))
    out = np.empty_like(x)
    kiln.memcpy_dtoh(out, buf)
    assert np.array_equal(out, x * 4)
    with pytest.raises(ValueError, match="copying 8000 bytes, but the destination allocation"):
        kiln.memcpy_htod(buf, np.zeros(2000, np.float32))
    with pytest.raises(ValueError, match="runs past its allocation"):
        kiln.memcpy_htod(int(buf) + 8, x)
    buf.free()
    with pytest.raises(ValueError, match="freed"):
        f(buf, 2.0, x.size, block=256, grid=4)


def test_an_allocation_takes_a_programs_attributes_as_pycudas_does(mod):
    # PyCUDA's DeviceAllocation is a Boost.Python object that takes any attribute; quantumsim
    # sets its own `size` on one. kiln's copies still go by the allocation's true size.
    import gc
    import kiln.driver as drv
    x = np.arange(1000, dtype=np.float32)
    buf = kiln.mem_alloc(x.nbytes)
    buf.size = 100
    buf.shape = x.shape
    assert buf.size == 100 and buf.shape == (1000,) and buf.__dict__ == {"size": 100,
                                                                         "shape": (1000,)}
    kiln.memcpy_htod(buf, x)                          # 4000 bytes: the true size bounds it
    with pytest.raises(ValueError, match="copying 8000 bytes"):
        kiln.memcpy_htod(buf, np.zeros(2000, np.float32))
    out = np.empty_like(x)
    kiln.memcpy_dtoh(out, buf)
    assert np.array_equal(out, x)
    del buf.size
    assert buf.size == x.nbytes
    # An allocation in a reference cycle through its attributes is collected, its memory freed.
    big = 1 << 30
    free_before = drv.mem_get_info()[0]
    held = kiln.mem_alloc(big)
    held.me = held
    assert drv.mem_get_info()[0] <= free_before - big
    del held
    gc.collect()
    assert drv.mem_get_info()[0] >= free_before - (64 << 20)


def test_cuda_array_interface_objects(mod):
    torch = pytest.importorskip("torch")
    t = torch.arange(100, dtype=torch.float32, device="cuda")
    mod.get_function("scale")(t, 2.0, 100, block=128, grid=1,
                              stream=torch.cuda.current_stream().cuda_stream)
    torch.cuda.synchronize()
    assert torch.equal(t.cpu(), torch.arange(100, dtype=torch.float32) * 2)


def test_device_information():
    n = kiln.Device.count()
    assert n >= 1
    d = kiln.Device(0)
    assert d.name()
    major, minor = d.compute_capability()
    assert major >= 7
    assert d.total_memory() > 1 << 30
    with pytest.raises(ValueError, match=f"device {n} does not exist"):
        kiln.Device(n)


def test_limits_of_the_device_and_kernel(mod):
    f = mod.get_function("scale")
    x = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match="block.z is 128"):
        f(kiln.InOut(x), 1.0, 4, block=(1, 1, 128))
    with pytest.raises(ValueError, match="dynamic shared memory"):
        f(kiln.InOut(x), 1.0, 4, block=1, shared=1 << 30)
    with pytest.raises(ValueError, match="grid.y"):
        f(kiln.InOut(x), 1.0, 4, block=1, grid=(1, 1 << 20))
    # Each refusal is also the driver's error under PyCUDA: a LogicError for an invalid value,
    # a LaunchError for a block more than the kernel's registers (here its bounds) allow.
    with pytest.raises(kiln.LogicError) as refused:
        f(kiln.InOut(x), 1.0, 4, block=1, shared=1 << 30)
    assert refused.value.name == "CUDA_ERROR_INVALID_VALUE"
    bounded = kiln.SourceModule("__global__ void __launch_bounds__(256) b(int *p) { p[0] = 1; }")
    b = bounded.get_function("b")
    assert b.max_threads_per_block == 256
    with pytest.raises(kiln.LaunchError, match=r"has 512 threads; kernel b can launch with at "
                                               r"most 256") as refused:
        b(kiln.InOut(np.zeros(1, np.int32)), block=512)
    assert isinstance(refused.value, ValueError) and isinstance(refused.value,
                                                                kiln.LaunchConfigError)
    assert refused.value.name == "CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"


def test_illegal_address_raises_cuda_error_with_its_name():
    # A lost context stays lost for the process: this runs in its own.
    out = run_python("""
        import kiln
        f = kiln.SourceModule("__global__ void poke(int *p) { p[threadIdx.x] = 1; }")
        f = f.get_function("poke")
        f(16, block=32)
        try:
            kiln.synchronize()
        except kiln.CudaError as e:
            print("raised", type(e).__name__, e.code, e.name)
    """)
    assert "raised CudaError 700 CUDA_ERROR_ILLEGAL_ADDRESS" in out.stdout, out.stderr


def test_numbers_for_complex_parameters_arrive_as_complex_numbers():
    from kiln.elementwise import ElementwiseKernel
    f = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    __global__ void put(pycuda::complex<float> *z, pycuda::complex<float> a,
                        pycuda::complex<double> *w, const pycuda::complex<double> b)
    { z[0] = a; w[0] = b; }""").get_function("put")
    z, w = kiln.zeros(1, np.complex64), kiln.zeros(1, np.complex128)
    for v in (0.5, 2, 1 + 2j, np.float32(0.25), np.float64(-1.5), np.int32(3), np.complex64(1j),
              np.complex128(2 - 1j), np.array(2.5), True):
        f(z, v, w, v, block=(1, 1, 1), grid=(1, 1))
        assert z.get()[0] == np.complex64(v) and w.get()[0] == np.complex128(v), v
    # a scale as a NumPy float, for a complex scalar of an elementwise kernel (a CG solver's)
    axpy = ElementwiseKernel("pycuda::complex<float> *out, pycuda::complex<float> *x, "
                             "pycuda::complex<float> a, pycuda::complex<float> *y",
                             "out[i] = x[i] + a * y[i]", "axpy_c")
    h = (np.arange(300) + 1j * np.arange(300)[::-1]).astype(np.complex64)
    x, y, out = kiln.to_device(h), kiln.to_device(h * 2), kiln.empty(300, np.complex64)
    axpy(out, x, np.float32(0.5), y)
    np.testing.assert_allclose(out.get(), h + np.float32(0.5) * (h * 2), rtol=1e-6)


def test_a_binarys_extern_c_kernel_takes_floats_by_their_size():
    # A CUBIN's extern "C" kernel: the driver gives each parameter's size and nothing more, so
    # a 4-byte one may be a float (PyCUDA's compile() then module_from_file()).
    src = """extern "C" __global__ void age(unsigned n, float dt, float *x, double d, double *y)
    { unsigned i = threadIdx.x; if (i < n) { x[i] += dt; y[i] = d * i; } }"""
    mod = kiln.driver.module_from_buffer(kiln.compiler.compile(src, no_extern_c=True))
    f = mod.get_function("age")
    assert f.signature == ("b32", "b32", "b64", "b64", "b64")
    x, y = kiln.zeros(8, np.float32), kiln.zeros(8, np.float64)
    f(np.uint32(5), np.float32(0.5), x, np.float64(0.25), y, block=(32, 1, 1), grid=(1, 1))
    f(5, 0.25, x, 1.5, y, block=(32, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(x.get(), [0.75] * 5 + [0] * 3)
    np.testing.assert_array_equal(y.get(), [1.5 * i for i in range(5)] + [0] * 3)
    f(5, 2, x, 0, y, block=(32, 1, 1), grid=(1, 1))  # an int is an int's bits, as ever
    assert x.get()[0] == np.float32(0.75) + np.uint32(2).view(np.float32)
    f(5, np.float64(-0.75), x, 0.0, y, block=(32, 1, 1), grid=(1, 1))  # a Python float too
    assert x.get()[0] == 0
    with pytest.raises(TypeError, match=r"argument 1 .* expected an int or a float of 4 bytes "
                                        r"\(the binary gives the parameter's size, not its "
                                        r"type\), got numpy.float16"):
        f(5, np.float16(0.5), x, 0.0, y, block=(32, 1, 1), grid=(1, 1))
