"""What programs written for PyCUDA lean on beyond its documented examples, each checked
against NumPy: objects that carry only a gpudata attribute passed where a device pointer goes,
0-d arrays passed as numbers, host helpers and globals in the source, to_gpu and set given a
GPUArray, a scan over integers of the other signedness, the parts of pycuda::complex by their
member names, the names pycuda.autoinit holds, what nvcc gives a kernel bare (INFINITY,
INT_MAX, int64_t) or by a C++ header NVRTC lacks (<type_traits>, <limits>), Context.handle and
a clean-up loop over Context.get_current(), and a ReductionKernel's own index arithmetic over
F-order arrays. All need a GPU;
on the GPU machine nothing here may skip."""
import numpy as np
import pytest

import kiln
import kiln.driver as drv
import kiln.gpuarray as gpuarray
from kiln.compiler import SourceModule
from kiln.elementwise import ElementwiseKernel
from kiln.scan import ExclusiveScanKernel, InclusiveScanKernel
from helpers import run_python

pytestmark = pytest.mark.gpu


class Holder:
    """A stand-in of another library's array: its device address, and the flags PyCUDA's
    elementwise kernels read."""

    def __init__(self, gpudata, like=None):
        self.gpudata = gpudata
        if like is not None:
            self.flags = like.flags


# ---- gpudata ---------------------------------------------------------------------------------

def test_an_object_with_gpudata_is_launched_on_as_its_pointer():
    f = SourceModule("__global__ void put(int *p, int v) { p[threadIdx.x] = v + threadIdx.x; }"
                     ).get_function("put")
    alloc = drv.mem_alloc(4 * 8)
    f(Holder(alloc), np.int32(10), block=(8, 1, 1), grid=(1, 1))
    assert drv.from_device(alloc, (8,), np.int32).tolist() == list(range(10, 18))
    f(Holder(int(alloc)), 20, block=(8, 1, 1), grid=(1, 1))
    assert drv.from_device(alloc, (8,), np.int32).tolist() == list(range(20, 28))
    f.prepare("Pi")
    f.prepared_call((1, 1), (8, 1, 1), Holder(np.uintp(int(alloc))), 30)
    assert drv.from_device(alloc, (8,), np.int32).tolist() == list(range(30, 38))


def test_a_gpudata_the_gpu_cannot_reach_is_refused_before_the_launch():
    f = SourceModule("__global__ void put(int *p) { p[0] = 1; }").get_function("put")
    host = np.zeros(4, np.int32)
    with pytest.raises(TypeError, match=r"argument 0 of put.*cannot reach"):
        f(Holder(host.ctypes.data), block=(1, 1, 1), grid=(1, 1))
    freed = drv.mem_alloc(16)
    freed.free()
    with pytest.raises(ValueError, match="its gpudata was freed"):
        f(Holder(freed), block=(1, 1, 1), grid=(1, 1))
    assert host.tolist() == [0, 0, 0, 0]


def test_an_elementwise_kernel_takes_holders_after_its_first_array():
    # pycbc's thresholding passed page-locked mapped memory this way: the first vector is a
    # GPUArray (it gives the size), the others carry only gpudata and flags.
    n = 1000
    x = gpuarray.to_gpu(np.arange(n, dtype=np.float32))
    out = np.zeros(n, np.float32)
    mapped = drv.pagelocked_empty(n, np.float32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    mapped[:] = 0
    dest = Holder(np.intp(mapped.base.get_device_pointer()), like=x)
    scale = ElementwiseKernel("float *x, float *y, float a", "y[i] = a * x[i]", "scale")
    scale(x, dest, np.float32(3))
    drv.Context.synchronize()
    np.testing.assert_array_equal(mapped, 3 * np.arange(n, dtype=np.float32))
    y = gpuarray.zeros(n, np.float32)
    scale(x, Holder(y.gpudata, like=y), 2)
    np.testing.assert_array_equal(y.get(out), 2 * np.arange(n, dtype=np.float32))


# ---- numbers and sources as nvcc took them ---------------------------------------------------

def test_a_zero_dimensional_array_passes_as_its_number():
    x = gpuarray.to_gpu(np.arange(8, dtype=np.float32))
    y = gpuarray.empty_like(x)
    total = np.array(x.get().sum())  # a float32 0-d array, as a reduction's result on the host
    ElementwiseKernel("float *y, float *x, float s", "y[i] = x[i] / s", "norm")(y, x, total)
    np.testing.assert_allclose(y.get(), np.arange(8) / 28, rtol=1e-6)


def test_host_helpers_and_globals_compile_as_device_ones():
    # Written for nvcc, where these are host code the kernel never touches (or, as here, a
    # helper it calls and a global it reads once NVRTC makes them device entities).
    mod = SourceModule("""
    int scale = 3;
    float offsets[4];
    int twice(int x) { return 2 * x; }
    __global__ void k(float *p) { int i = threadIdx.x; p[i] = twice(scale) * i + offsets[i]; }
    """)
    address, size = mod.get_global("offsets")
    assert size == 16
    drv.memcpy_htod(address, np.array([0.5, 1.5, 2.5, 3.5], np.float32))
    p = gpuarray.zeros(4, np.float32)
    mod.get_function("k")(p, block=(4, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(p.get(), 6 * np.arange(4) + np.array([0.5, 1.5, 2.5, 3.5]))


# ---- to_gpu and set given a GPUArray ----------------------------------------------------------

def test_to_gpu_of_a_gpuarray_is_a_copy_on_the_device():
    host = np.arange(24, dtype=np.float64).reshape(4, 6)
    a = gpuarray.to_gpu(host)
    b = gpuarray.to_gpu(a)
    assert b.gpudata != a.gpudata and b.shape == (4, 6) and b.dtype == np.float64
    a.fill(-1)
    np.testing.assert_array_equal(b.get(), host)
    view = gpuarray.to_gpu(host)[:, 1::2]  # not contiguous: copied into a C-ordered array
    c = gpuarray.to_gpu(view)
    assert c.flags.c_contiguous
    np.testing.assert_array_equal(c.get(), host[:, 1::2])
    fortran = gpuarray.to_gpu(np.asfortranarray(host))
    d = gpuarray.to_gpu(fortran)
    assert d.flags.f_contiguous and not d.flags.c_contiguous
    np.testing.assert_array_equal(d.get(), host)
    s = drv.Stream()
    e = gpuarray.to_gpu_async(b, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(e.get(), host)


def test_set_takes_a_gpuarray_of_the_same_size_and_dtype():
    host = np.arange(12, dtype=np.int32)
    a = gpuarray.zeros(12, np.int32)
    a.set(gpuarray.to_gpu(host))
    np.testing.assert_array_equal(a.get(), host)
    s = drv.Stream()
    a.set_async(gpuarray.to_gpu(2 * host), stream=s)
    s.synchronize()
    np.testing.assert_array_equal(a.get(), 2 * host)
    grid = gpuarray.zeros((3, 4), np.int32)
    grid.set(gpuarray.to_gpu(3 * host))  # C-contiguous: the same elements in C order
    np.testing.assert_array_equal(grid.get(), (3 * host).reshape(3, 4))
    with pytest.raises(ValueError, match="holds 11 elements"):
        a.set(gpuarray.zeros(11, np.int32))
    with pytest.raises(ValueError, match="float32"):
        a.set(gpuarray.zeros(12, np.float32))


# ---- scans ------------------------------------------------------------------------------------

def test_a_scan_takes_integers_of_the_other_signedness_and_the_same_width():
    # A program built a uint32 scan and gave it int32 data; PyCUDA's reads the memory as its
    # own dtype, and so does kiln's, where the bits of a sum are the same.
    rng = np.random.default_rng(3)
    host = rng.integers(-50, 50, 3000).astype(np.int32)
    knl = InclusiveScanKernel(np.uint32, "a+b")
    a = gpuarray.to_gpu(host)
    assert knl(a) is a and a.dtype == np.int32
    np.testing.assert_array_equal(a.get(), np.cumsum(host, dtype=np.int32))
    new = knl(gpuarray.to_gpu(host), "new")
    assert new.dtype == np.uint32
    np.testing.assert_array_equal(new.get(), np.cumsum(host, dtype=np.int32).view(np.uint32))
    out = gpuarray.zeros(3000, np.int32)
    assert ExclusiveScanKernel(np.int32, "a+b", "0")(gpuarray.to_gpu(host.view(np.uint32)),
                                                     out) is out
    np.testing.assert_array_equal(out.get()[1:], np.cumsum(host, dtype=np.int32)[:-1])
    with pytest.raises(TypeError, match="built for uint32; the input is int64"):
        knl(gpuarray.zeros(3, np.int64))
    with pytest.raises(TypeError, match="built for uint32; the input is float32"):
        knl(gpuarray.zeros(3, np.float32))


# ---- pycuda::complex ----------------------------------------------------------------------------

def test_complex_parts_by_pycudas_member_names():
    mod = SourceModule("""
    #include <pycuda-complex.hpp>
    __global__ void rotate(pycuda::complex<double> *z, const double *phase)
    {
      int i = threadIdx.x;
      pycuda::complex<double> r;
      sincos(phase[i], &r._M_im, &r._M_re);
      z[i] = r * pycuda::complex<double>(z[i]._M_re, 0);
    }
    """)
    phase = np.linspace(0, 3, 16)
    z = gpuarray.to_gpu(np.arange(16, dtype=np.complex128))
    mod.get_function("rotate")(z, gpuarray.to_gpu(phase), block=(16, 1, 1), grid=(1, 1))
    want = np.arange(16) * (np.cos(phase) + 1j * np.sin(phase))
    np.testing.assert_allclose(z.get(), want, rtol=1e-12, atol=1e-12)
    conj = ElementwiseKernel("pycuda::complex<float> *z", "z[i]._M_im = -z[i]._M_im", "conj")
    c = gpuarray.to_gpu((np.arange(5) + 2j).astype(np.complex64))
    conj(c)
    np.testing.assert_array_equal(c.get(), (np.arange(5) - 2j).astype(np.complex64))


def test_a_tree_reduction_through_volatile_shared_complex_numbers():
    """The reduction PyCUDA's older kernels write: the last warp folds through volatile
    shared memory, which its complex header serves with volatile assignment, + and *."""
    mod = SourceModule("""
    #include <pycuda-complex.hpp>
    typedef pycuda::complex<float> complexf;
    __global__ void fold(complexf *out, const complexf *in)
    {
      __shared__ complexf s[64];
      unsigned t = threadIdx.x;
      s[t] = in[t];
      __syncthreads();
      if (t < 32) {
        volatile complexf *v = s;
        for (unsigned w = 32; w > 0; w >>= 1) { if (t < w) v[t] = v[t] + v[t + w]; __syncwarp(); }
      }
      if (t == 0) { out[0] = s[0]; volatile complexf p; p = in[1]; out[1] = p * p; }
    }
    """)
    z = (np.arange(64) + 1j * np.arange(64)[::-1]).astype(np.complex64)
    out = gpuarray.zeros(2, np.complex64)
    mod.get_function("fold")(out, gpuarray.to_gpu(z), block=(64, 1, 1), grid=(1, 1))
    np.testing.assert_allclose(out.get(), [z.sum(), z[1] * z[1]], rtol=1e-6)


# ---- autoinit ----------------------------------------------------------------------------------

def test_autoinit_holds_pycudas_names():
    import kiln.autoinit
    import kiln.autoprimaryctx
    import kiln.tools

    for module in (kiln.autoinit, kiln.autoprimaryctx):
        assert module.cuda is drv
        assert module.make_default_context is kiln.tools.make_default_context
        assert module.device == drv.Context.get_device()
    event = kiln.autoinit.cuda.Event()  # as programs reach the driver through it
    event.record()
    event.synchronize()
    assert event.query()


def test_autoinit_prints_a_kernels_printf_when_the_program_ends_without_waiting():
    # The hello world of "Hands-On GPU Programming with Python and CUDA" (6/hello-world_gpu.py):
    # PyCUDA's context, destroyed at exit, waits for the kernel and so prints its lines.
    r = run_python(r'''
        import kiln.autoinit
        from kiln.compiler import SourceModule
        ker = SourceModule("""
        __global__ void hello_world_ker()
        {
            printf("Hello world from thread %d, in block %d!\\n", threadIdx.x, blockIdx.x);
        }
        """)
        ker.get_function("hello_world_ker")(block=(5, 1, 1), grid=(2, 1, 1))
    ''')
    assert r.returncode == 0, r.stderr
    lines = sorted(r.stdout.splitlines())
    assert lines == sorted(f"Hello world from thread {t}, in block {b}!"
                           for t in range(5) for b in range(2)), r.stdout


def test_autoinits_finish_up_is_pycudas_and_runs_once():
    # Programs that end the context themselves take autoinit's clean-up off atexit by its name,
    # or call it; the book's scan example asserts the name is there.
    r = run_python(r'''
        import atexit
        import numpy as np
        import kiln.autoinit, kiln.autoprimaryctx
        from kiln import gpuarray
        kiln.autoprimaryctx._finish_up()
        assert kiln.autoinit.context is None and kiln.autoprimaryctx.context is None
        kiln.autoinit._finish_up()  # a second time does nothing, at exit as here
        atexit.unregister(kiln.autoinit._finish_up)
        print(gpuarray.to_gpu(np.arange(3.0)).get().sum())
    ''')
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3.0"], r.stdout


@pytest.mark.parametrize("imported, unregistered, runs", [
    (["autoprimaryctx"], [], 1),
    (["autoprimaryctx"], ["autoprimaryctx"], 0),
    (["autoinit"], ["autoinit"], 0),
    (["autoinit", "autoprimaryctx"], [], 1),
    (["autoinit", "autoprimaryctx"], ["autoinit"], 1),
    (["autoinit", "autoprimaryctx"], ["autoinit", "autoprimaryctx"], 0),
])
def test_each_auto_modules_finish_up_is_its_own_as_pycudas(imported, unregistered, runs):
    # Each registers its own clean-up, which a program takes off by that module's name; with
    # both imported, the one left runs it, once (the context is one).
    r = run_python(f'''
        import atexit, importlib, sys
        modules = [importlib.import_module("kiln." + name) for name in {imported!r}]
        assert {{m for m in sys.modules if m in ("kiln.autoinit", "kiln.autoprimaryctx")}} == \\
            {{m.__name__ for m in modules}}
        class Probe:
            def synchronize(self): print("finished up")
            def detach(self): pass
        for m in modules:
            m.context = Probe()
        for name in {unregistered!r}:
            atexit.unregister(sys.modules["kiln." + name]._finish_up)
    ''')
    assert r.returncode == 0, r.stderr
    assert r.stdout.count("finished up") == runs, r.stdout


PRINTF_WITHOUT_AUTOINIT = r'''
    from kiln import driver, compiler
    driver.init()
    context = driver.Device(0).make_context()
    f = compiler.SourceModule("""
    #include <stdio.h>
    __global__ void hello() { printf("thread %u\\n", threadIdx.x); }
    """).get_function("hello")
    f(grid=(1, 1, 1), block=(4, 1, 1))
    context.pop()
'''


@pytest.mark.parametrize("ending", ["context.pop()", "pass"])
def test_a_program_without_autoinit_prints_its_kernels_printf_when_it_ends(ending):
    # A course's solution (make_context, a printf kernel, pop, the end): PyCUDA's context is
    # destroyed when the program ends, which waits for the kernel; kiln waits at the end.
    r = run_python(PRINTF_WITHOUT_AUTOINIT.replace("context.pop()", ending))
    assert r.returncode == 0, r.stderr
    assert sorted(r.stdout.splitlines()) == [f"thread {t}" for t in range(4)], r.stdout


# ---- what nvcc gives a kernel without an #include, and C++ headers NVRTC lacks --------------

def test_names_nvcc_gives_bare_have_their_values_on_the_device():
    mod = SourceModule("""
    __global__ void bare(float *f, long long *i) {
      f[0] = INFINITY; f[1] = -INFINITY; f[2] = NAN; f[3] = (float)M_PI;
      i[0] = INT_MAX; i[1] = INT_MIN; i[2] = UINT_MAX; i[3] = CHAR_BIT; i[4] = LLONG_MIN;
      i[5] = SHRT_MAX; i[6] = (int64_t)1 << 40; i[7] = sizeof(int64_t);
    }""")
    f, i = np.zeros(4, np.float32), np.zeros(8, np.int64)
    mod.get_function("bare")(drv.Out(f), drv.Out(i), block=(1, 1, 1), grid=(1, 1))
    assert np.isposinf(f[0]) and np.isneginf(f[1]) and np.isnan(f[2])
    assert f[3] == np.float32(np.pi)
    info = np.iinfo
    assert i.tolist() == [info(np.int32).max, info(np.int32).min, info(np.uint32).max, 8,
                          info(np.int64).min, info(np.int16).max, 1 << 40, 8]


def test_pow_of_mixed_types_computes_in_the_promoted_type():
    # nvcc's device pow template: double unless both are float, as <cmath>'s promotion.
    mod = SourceModule("""
    __global__ void p(double *d, float x, int n, unsigned u) {
      d[0] = pow(x, 2.0); d[1] = pow(n, 2); d[2] = pow(u, 0.5); d[3] = pow(2.0, x);
      d[4] = pow(n, x); d[5] = pow(x, 2.0f); d[6] = sizeof(pow(x, 2.0)); d[7] = sizeof(pow(n, 2));
    }""")
    d = np.zeros(8, np.float64)
    x = np.float32(1.1)
    mod.get_function("p")(drv.Out(d), x, np.int32(7), np.uint32(10), block=(1, 1, 1))
    want = [np.float64(x) ** 2, 49.0, np.sqrt(10.0), 2.0 ** np.float64(x), 7.0 ** np.float64(x),
            np.float32(x) * np.float32(x), 8, 8]
    np.testing.assert_allclose(d, want, rtol=1e-6)
    assert d[0] == pytest.approx(np.float64(x) ** 2, rel=1e-15)  # in double, not float


def test_a_prepared_unsigned_type_reaches_an_int_parameter_as_its_bits():
    # neon's magic-number division: prepare("PI") and 2863311531 for an int, as struct.pack
    # packs it; the kernel reads the bits back as unsigned.
    mod = SourceModule("""
    __global__ void magic(unsigned *o, int m, unsigned n) { o[0] = (unsigned)m; o[1] = n; }""")
    f = mod.get_function("magic").prepare("Pii")
    out = gpuarray.zeros(2, np.uint32)
    f.prepared_call((1, 1), (1, 1, 1), out.gpudata, 2863311531 - 2**32, -1)
    assert out.get().tolist() == [2863311531, 2**32 - 1]
    f = mod.get_function("magic").prepare("PIi")
    f.prepared_call((1, 1), (1, 1, 1), out.gpudata, 2863311531, -2)
    assert out.get().tolist() == [2863311531, 2**32 - 2]


def test_floating_constants_made_of_others_read_as_nvcc_folds_them():
    mod = SourceModule("""
    const float dx = 0.1; const int n = 8;
    const float dt = dx * dx / n;
    const double wide = dt * 3.0;
    __global__ void k(float *f, double *d) { f[0] = dt; d[0] = wide; }
    """)
    f, d = np.zeros(1, np.float32), np.zeros(1)
    mod.get_function("k")(drv.Out(f), drv.Out(d), block=(1, 1, 1))
    dt = np.float32(np.float32(0.1) * np.float32(0.1) / np.float32(8))
    assert f[0] == dt
    assert d[0] == pytest.approx(np.float64(dt) * 3.0, rel=1e-15)


def test_pow_of_pycudas_complex_and_another_type_computes_as_under_nvcc():
    # A real of another type converts to the complex number's part type (float for
    # complex<float>), and two complex types meet in the wider.
    mod = SourceModule("""
    #include <pycuda-complex.hpp>
    __global__ void p(pycuda::complex<float> *f, pycuda::complex<double> *z, double d, int n) {
      f[1] = pow(f[0], d); f[2] = pow(d, f[0]); f[3] = pow(f[0], 2.0); f[4] = pow(f[0], n);
      z[1] = pow(f[0], z[0]); z[2] = pow(z[0], f[0]);
    }""")
    f = np.array([1.5 + 0.5j, 0, 0, 0, 0], np.complex64)
    z = np.array([0.25 - 2j, 0, 0], np.complex128)
    mod.get_function("p")(drv.InOut(f), drv.InOut(z), 0.75, np.int32(3), block=(1, 1, 1))
    f0, z0 = f[0], z[0]
    np.testing.assert_allclose(f[1:], [f0 ** np.float32(0.75), np.float32(0.75) ** f0, f0 ** 2,
                                       f0 ** 3], rtol=2e-6)
    np.testing.assert_allclose(z[1:], [np.complex128(f0) ** z0, z0 ** np.complex128(f0)],
                               rtol=1e-13)


def test_cpp_headers_nvrtc_lacks_are_libcudacxx_ones_in_std():
    mod = SourceModule("""
    #include <type_traits>
    #include <limits>
    #include <utility>
    template <typename T>
    __device__ typename std::enable_if<std::is_floating_point<T>::value, T>::type top() {
      return std::numeric_limits<T>::max();
    }
    __global__ void limits(float *f, double *d, int *i) {
      f[0] = top<float>(); f[1] = std::numeric_limits<float>::epsilon();
      f[2] = std::numeric_limits<float>::infinity();
      d[0] = top<double>(); d[1] = std::numeric_limits<double>::lowest();
      int a = 1, b = 2; std::swap(a, b);
      i[0] = a; i[1] = std::is_same<int, int>::value; i[2] = std::is_same<int, float>::value;
      i[3] = std::numeric_limits<int>::min();
    }""")
    f, d, i = np.zeros(3, np.float32), np.zeros(2, np.float64), np.zeros(4, np.int32)
    mod.get_function("limits")(drv.Out(f), drv.Out(d), drv.Out(i), block=(1, 1, 1), grid=(1, 1))
    assert f[0] == np.finfo(np.float32).max and f[1] == np.finfo(np.float32).eps
    assert np.isposinf(f[2])
    assert d.tolist() == [np.finfo(np.float64).max, np.finfo(np.float64).min]
    assert i.tolist() == [2, 1, 0, np.iinfo(np.int32).min]


# ---- contexts ------------------------------------------------------------------------------

def test_context_handle_is_the_cucontext_and_get_current_ends_after_the_last_pop():
    """PyCUDA's Context.handle is the CUcontext as an int; code that cleans up pops "while
    Context.get_current() is not None", which must end once the thread's pushes are popped.
    Run on a thread of its own, whose stack holds nothing another test pushed."""
    import threading
    failed = []

    def body():
        try:
            _context_handle_and_pop_loop()
        except BaseException as e:  # reported on the test's thread
            failed.append(e)

    t = threading.Thread(target=body)
    t.start()
    t.join()
    if failed:
        raise failed[0]


def _context_handle_and_pop_loop():
    import ctypes
    assert drv.Context.get_current() is not None  # kiln's context, before any push
    dev = drv.Device(0)
    ctx = dev.make_context()
    try:
        assert isinstance(ctx.handle, int) and ctx.handle != 0
        assert drv.Context.get_current().handle == ctx.handle == drv.Context(dev).handle
        libcuda = ctypes.CDLL("libcuda.so.1")
        current = ctypes.c_void_p()
        assert libcuda.cuCtxGetCurrent(ctypes.byref(current)) == 0
        assert current.value == ctx.handle  # the primary context, current on this thread
        ctx.push()  # a second push of the same context, as a library's own would be
        popped = 0
        while drv.Context.get_current() is not None:
            assert drv.Context.get_current() == ctx
            drv.Context.pop()
            popped += 1
            assert popped <= 2, "get_current() never became None"
        assert popped == 2
        with pytest.raises(drv.LogicError):
            drv.Context.pop()
    finally:  # leave this thread with nothing pushed, whatever failed above
        for _ in range(3):
            if drv.Context.get_current() is None:
                break
            drv.Context.pop()
    # kiln works on in its current device's context without a push
    a = gpuarray.to_gpu(np.arange(4, dtype=np.float32))
    assert (2 * a).get().tolist() == [0, 2, 4, 6]


# ---- ReductionKernel over F-order arrays --------------------------------------------------------

def test_reduction_kernel_reads_f_order_arrays_as_their_memory_lies():
    """GPy's traceDot: trace(A @ B) of F-order matrices, indexing B's memory in F order itself.
    PyCUDA passes F-contiguous arrays as they lie; copying them to C order gave another sum."""
    from kiln.reduction import ReductionKernel
    trace_dot = ReductionKernel(np.float64, neutral="0", reduce_expr="a+b",
                                map_expr="A[i]*B[(i%a1)*a2+i/a1]",
                                arguments="double *A, double *B, int a1, int a2")
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((5, 7)), rng.standard_normal((7, 5))
    got = trace_dot(gpuarray.to_gpu(np.asfortranarray(a)), gpuarray.to_gpu(np.asfortranarray(b)),
                    5, 7).get()
    np.testing.assert_allclose(float(got), np.trace(a @ b), rtol=1e-12)
    # Contiguous in different orders: copied to C order, i the same element of each.
    dot = ReductionKernel(np.float64, "0", "a+b", "x[i]*y[i]", "const double *x, const double *y")
    c = rng.standard_normal((5, 7))
    got = dot(gpuarray.to_gpu(np.asfortranarray(a)), gpuarray.to_gpu(c)).get()
    np.testing.assert_allclose(float(got), float((a * c).sum()), rtol=1e-12)


# ---- GPUArray's own arithmetic methods -------------------------------------------------------

def test_gpuarrays_arithmetic_methods_write_into_out_as_pycudas_do():
    """_axpbyz, _axpbz, _elwise_multiply, _div, _rdiv_scalar and _pow: PyCUDA's GPUArray computes
    its operators through them, and neural-network and array libraries built on it call them
    (a weight update in place, param._axpbyz(1., grad, -rate, param))."""
    # The GPU fuses a*x + b into one rounding where NumPy rounds twice.
    CLOSE = dict(rtol=1e-5, atol=1e-5)  # noqa: N806
    rng = np.random.default_rng(9)
    x = rng.standard_normal(1000).astype(np.float32)
    y = rng.standard_normal(1000).astype(np.float32) + 3
    a, b = gpuarray.to_gpu(x), gpuarray.to_gpu(y)
    out = gpuarray.empty_like(a)
    assert a._axpbyz(2.0, b, -0.5, out) is out
    np.testing.assert_allclose(out.get(), 2 * x - 0.5 * y, **CLOSE)
    w = gpuarray.to_gpu(x)
    w._axpbyz(1.0, b, -0.1, w)  # in place, as a weight update
    np.testing.assert_allclose(w.get(), x - 0.1 * y, **CLOSE)
    s = gpuarray.to_gpu(np.array(4.0, np.float32))  # a 0-d operand on either side
    np.testing.assert_allclose(a._axpbyz(1, s, 2, out).get(), x + 8, **CLOSE)
    np.testing.assert_allclose(s._axpbyz(3, a, 1, out).get(), 12 + x, **CLOSE)
    np.testing.assert_allclose(a._axpbz(3.0, 1.5, out).get(), 3 * x + 1.5, **CLOSE)
    np.testing.assert_allclose(a._elwise_multiply(b, out).get(), x * y, **CLOSE)
    np.testing.assert_allclose(a._div(b, out).get(), x / y, **CLOSE)
    np.testing.assert_allclose(b._rdiv_scalar(2.0, out).get(), 2 / y, **CLOSE)
    stream = drv.Stream()
    a._axpbyz(1, b, 1, out, stream=stream)
    stream.synchronize()
    np.testing.assert_allclose(out.get(), x + y, **CLOSE)
    # Into an out of another dtype, converted as C converts (PyCUDA's kernels store so).
    ints = gpuarray.empty(1000, np.int32)
    np.testing.assert_array_equal(b._elwise_multiply(b, ints).get(), (y * y).astype(np.int32))
    # _pow: a new array, or in place.
    p = a._pow(2, True)
    assert p is not a
    np.testing.assert_allclose(p.get(), x ** 2, **CLOSE)
    assert b._pow(b, False) is b
    np.testing.assert_allclose(b.get(), y ** y, rtol=1e-5)
    assert gpuarray._get_common_dtype(a, 2.0) == np.float32
    # In place into an array of another dtype, as PyCUDA's __imul__, __itruediv__ and __ipow__
    # call them: computed as NumPy would, then converted to the array's dtype.
    n = np.arange(1, 9, dtype=np.int32)
    i = gpuarray.to_gpu(n)
    half = gpuarray.to_gpu(np.full(8, 0.5, np.float32))
    assert i._elwise_multiply(half, i) is i
    np.testing.assert_array_equal(i.get(), (n * 0.5).astype(np.int32))
    i.set(n)
    i._div(gpuarray.to_gpu(np.full(8, 4, np.int32)), i)
    np.testing.assert_array_equal(i.get(), (n / 4).astype(np.int32))
    roots = np.array([2, 3, 5, 6, 7, 8, 10, 11], np.int32)  # square roots far from integers
    i.set(roots)
    assert i._pow(0.5, False) is i
    np.testing.assert_array_equal(i.get(), (roots ** 0.5).astype(np.int32))
    i.set(n)
    i._axpbyz(1.5, half, 2, i)
    np.testing.assert_array_equal(i.get(), (1.5 * n + 1.0).astype(np.int32))


def test_a_gpuarray_subclass_adds_through_axpbyz():
    """A subclass overriding + with _get_common_dtype and _axpbyz, as array libraries on PyCUDA
    broadcast a 0-d operand: its result is of its own class."""
    class Broadcasting(gpuarray.GPUArray):
        def __add__(self, other):
            if isinstance(other, gpuarray.GPUArray):
                result = type(self)(np.broadcast_shapes(self.shape, other.shape),
                                    gpuarray._get_common_dtype(self, other))
                return self._axpbyz(1, other, 1, result)
            return super().__add__(other)

    x = np.arange(6, dtype=np.float32)
    a = Broadcasting(x.shape, np.float32)
    a.set(x)
    got = a + gpuarray.to_gpu(np.array(0.5, np.float64))
    assert type(got) is Broadcasting and got.dtype == np.float64
    np.testing.assert_allclose(got.get(), x + 0.5)


def test_results_of_a_subclass_are_made_by_its_new_like_me():
    """PyCUDA makes the result of an operator, astype and cumath with self._new_like_me(dtype):
    reikna's Array overrides it to make arrays of its own (with its thread), and an array's
    allocator makes its results. Views stay plain arrays, as PyCUDA's __getitem__ makes them."""
    import kiln.cumath as cumath
    asked = []

    def allocator(nbytes):
        asked.append(nbytes)
        return drv.mem_alloc(nbytes)

    class Owned(gpuarray.GPUArray):
        def __init__(self, owner, shape, dtype):
            gpuarray.GPUArray.__init__(self, shape, dtype, allocator=allocator)
            self.owner = owner

        def _new_like_me(self, dtype=None, order="C"):
            return Owned(self.owner, self.shape, self.dtype if dtype is None else dtype)

    x = np.linspace(0.5, 3, 12).astype(np.float32).reshape(3, 4)
    a = Owned("thread", x.shape, x.dtype)
    a.set(x)
    plain = gpuarray.to_gpu(x)
    results = {"a + a": (a + a, x + x), "a * 2.0": (a * 2.0, x * 2.0), "2 - a": (2 - a, 2 - x),
               "-a": (-a, -x), "a < 1": (a < 1, x < 1), "a + plain": (a + plain, x + plain.get()),
               "astype": (a.astype(np.float64), x.astype(np.float64)),
               "sqrt": (cumath.sqrt(a), np.sqrt(x)), "mul_add": (a.mul_add(2, a, 3), 5 * x)}
    for what, (got, want) in results.items():
        assert type(got) is Owned and got.owner == "thread", what
        assert got.dtype == want.dtype, what
        np.testing.assert_allclose(got.get(), want, rtol=1e-6, err_msg=what)
    assert asked and all(n in (48, 12, 96) for n in asked)
    assert type(plain + a) is gpuarray.GPUArray  # the left operand's: a plain array
    assert type(a[1:]) is gpuarray.GPUArray
    allocated = gpuarray.GPUArray(x.shape, np.float32, allocator=allocator)
    before = len(asked)
    r = allocated + 1
    assert type(r) is gpuarray.GPUArray and r.allocator is allocator and len(asked) == before + 1


def test_a_reduction_to_a_struct_of_eight_floats_and_an_argument_named_v():
    """PyNX folds registered structs larger than 16 bytes (eight floats; nine complex numbers),
    and names an argument v; kiln folds them through its general path."""
    from kiln.reduction import ReductionKernel
    from kiln.tools import get_or_register_dtype
    float8 = np.dtype([(c, np.float32) for c in "abcdefgh"])
    get_or_register_dtype("idiom_float8", float8)
    k = ReductionKernel(float8, "of(0)", "add8(a, b)", "term(v, i, j)", "float *v, int j",
                        preamble="""
    struct idiom_float8 { float a, b, c, d, e, f, g, h; };
    __device__ idiom_float8 add8(idiom_float8 p, idiom_float8 q) {
      return {p.a + q.a, p.b + q.b, p.c + q.c, p.d + q.d, p.e + q.e, p.f + q.f, p.g + q.g,
              p.h + q.h};
    }
    __device__ idiom_float8 of(float x) { return {x, x, x, x, x, x, x, x}; }
    __device__ idiom_float8 term(const float *v, long i, int j) {
      float x = v[i];
      return {x, x * x, (float)j, 1, -x, x > 0 ? x : 0, 2 * x, x - 1};
    }""")
    for n in (1, 1000, 3 << 20):
        x = np.random.default_rng(n).standard_normal(n).astype(np.float32)
        got = k(gpuarray.to_gpu(x), np.int32(3)).get()
        assert got.dtype == float8 and got.shape == ()
        x64 = x.astype(np.float64)
        want = [x64.sum(), (x64 * x64).sum(), 3 * n, n, -x64.sum(), np.maximum(x64, 0).sum(),
                2 * x64.sum(), (x64 - 1).sum()]
        np.testing.assert_allclose([float(got[c]) for c in "abcdefgh"], want,
                                   rtol=1e-4, atol=1e-2 * np.sqrt(n))


def test_in_of_a_numpy_scalar_passes_its_value_in_device_memory():
    """A Floyd-Warshall program passes its vertex count as drv.In(numpy.int32(V)), read in the
    kernel through a pointer."""
    mod = SourceModule("""
    __global__ void scale(float *a, int *n, float *s) {
      int i = threadIdx.x;
      if (i < *n) a[i] *= *s;
    }""")
    a = np.arange(8, dtype=np.float32)
    mod.get_function("scale")(drv.InOut(a), drv.In(np.int32(5)), drv.In(np.float32(3)),
                              block=(8, 1, 1))
    assert a.tolist() == [0, 3, 6, 9, 12, 5, 6, 7]


def test_memcpy_discontig_copies_between_any_strides():
    """gpuarray._memcpy_discontig, which libraries over PyCUDA copy views with (reikna's
    Array.copy): device and host arrays of one shape and dtype, of any strides."""
    x = np.arange(48, dtype=np.float32).reshape(6, 8)
    dev = gpuarray.to_gpu(x)
    out = gpuarray.zeros((3, 4), np.float32)
    gpuarray._memcpy_discontig(out, dev[::2, 1::2])  # a strided view into a contiguous array
    np.testing.assert_array_equal(out.get(), x[::2, 1::2])
    big = gpuarray.zeros((6, 8), np.float32)
    gpuarray._memcpy_discontig(big[1::2, ::2], out, async_=True, stream=drv.Stream())
    want = np.zeros((6, 8), np.float32)
    want[1::2, ::2] = x[::2, 1::2]
    kiln.synchronize()
    np.testing.assert_array_equal(big.get(), want)
    host = np.zeros((8, 6), np.float32).T  # F-ordered host array
    gpuarray._memcpy_discontig(host, dev)
    np.testing.assert_array_equal(host, x)
    gpuarray._memcpy_discontig(big[::-1], np.asfortranarray(x))  # host into a reversed view
    np.testing.assert_array_equal(big.get(), x[::-1])
    with pytest.raises(ValueError, match="same shape"):
        gpuarray._memcpy_discontig(out, dev)
    with pytest.raises(TypeError, match="same dtype"):
        gpuarray._memcpy_discontig(gpuarray.zeros((6, 8), np.float64), dev)
    with pytest.raises(TypeError, match="src must be GPUArray or ndarray"):
        gpuarray._memcpy_discontig(out, [1, 2])



@pytest.mark.gpu
def test_a_subclasss_own_formulas_compute():
    from test_array_object import SUBCLASS_FORMULAS
    exec("CHECK = True\n" + SUBCLASS_FORMULAS, {})


def test_generated_kernels_leave_out_arguments_past_their_parameters_as_pycudas_do():
    # howdoespycudawork calls a two-array ElementwiseKernel with three arrays: PyCUDA pairs
    # arguments with parameters and stops at the shorter.
    from kiln.elementwise import ArgumentWarning
    from kiln.reduction import ReductionKernel
    h = np.arange(1000, dtype=np.float32)
    a, b, c = (gpuarray.to_gpu(h * k) for k in (1, 2, 3))
    add = ElementwiseKernel("float *a, const float *b", "a[i] += b[i]", "add_into")
    with pytest.warns(ArgumentWarning, match="add_into takes 2 arguments; the 1 more"):
        add(a, b, c)
    np.testing.assert_array_equal(a.get(), 3 * h)
    total = ReductionKernel(np.float32, "0", "a+b", "x[i]", "const float *x", name="total")
    with pytest.warns(ArgumentWarning, match="total takes 1 argument; the 2 more"):
        assert float(total(b, c, np.float32(1)).get()) == float((2 * h).sum())


# ---- Closing PyCUDA's extern "C" block -------------------------------------------------------

CLOSES = '}\ntemplate <class T> __device__ T twice(T x) { return 2 * x; }\nextern "C" {\n'


def test_a_source_that_closes_the_extern_c_block_computes():
    # PyCUDA compiles a SourceModule's source, and an elementwise kernel's preamble with it,
    # inside extern "C" { }; programs close it with "}" to write C++ templates (voltools).
    f = SourceModule(CLOSES + "__global__ void k(float *p) { p[threadIdx.x] = "
                     "twice(p[threadIdx.x]); }\n").get_function("k")
    a = np.arange(32, dtype=np.float32)
    f(drv.InOut(a), block=(32, 1, 1), grid=(1, 1))
    assert np.array_equal(a, 2 * np.arange(32, dtype=np.float32))
    x = gpuarray.to_gpu(np.arange(1000, dtype=np.float64))
    y = gpuarray.empty_like(x)
    ElementwiseKernel("double *x, double *y", "y[i] = twice(x[i]) + 1", "tw",
                      preamble=CLOSES)(x, y)
    assert np.array_equal(y.get(), 2 * np.arange(1000) + 1.0)
