"""PyCUDA's documented programs on kiln, with only their import lines changed (pycuda.X became
kiln.X), checked against NumPy: the tutorial, the driver page's (constant memory, prepared calls,
streams and events, page-locked and registered memory), the tools page's (memory pools,
contexts, occupancy), device printf and assert, and a DynamicSourceModule whose kernel launches
a kernel. All need a GPU; on the GPU machine nothing here may skip."""
import numpy
import numpy as np
import pytest

from helpers import run_python

pytestmark = pytest.mark.gpu


@pytest.fixture
def cuda():
    """`import kiln.driver as cuda; import kiln.autoinit`, as the tutorial begins."""
    import kiln.autoinit  # noqa: F401
    import kiln.driver as cuda
    return cuda


# ---- The tutorial --------------------------------------------------------------------------------

def test_tutorial_doublify(cuda):
    from kiln.compiler import SourceModule

    a = numpy.random.randn(4, 4)
    a = a.astype(numpy.float32)
    a_gpu = cuda.mem_alloc(a.nbytes)
    cuda.memcpy_htod(a_gpu, a)
    mod = SourceModule("""
      __global__ void doublify(float *a)
      {
        int idx = threadIdx.x + threadIdx.y*4;
        a[idx] *= 2;
      }
      """)
    func = mod.get_function("doublify")
    func(a_gpu, block=(4, 4, 1))
    a_doubled = numpy.empty_like(a)
    cuda.memcpy_dtoh(a_doubled, a_gpu)
    assert numpy.array_equal(a_doubled, 2 * a)

    # Shortcuts for explicit memory copies
    b = a.copy()
    func(cuda.InOut(b), block=(4, 4, 1))
    assert numpy.array_equal(b, 2 * a)

    # Prepared invocations
    grid = (1, 1)
    block = (4, 4, 1)
    func.prepare("P")
    func.prepared_call(grid, block, a_gpu)
    cuda.memcpy_dtoh(a_doubled, a_gpu)
    assert numpy.array_equal(a_doubled, 4 * a)


def test_tutorial_structures(cuda):
    from kiln.compiler import SourceModule

    mod = SourceModule("""
        struct DoubleOperation {
            int datalen, __padding; // so 64-bit ptrs can be aligned
            float *ptr;
        };

        __global__ void double_array(DoubleOperation *a) {
            a = &a[blockIdx.x];
            for (int idx = threadIdx.x; idx < a->datalen; idx += blockDim.x) {
                a->ptr[idx] *= 2;
            }
        }
        """)

    class DoubleOpStruct:
        mem_size = 8 + numpy.intp(0).nbytes

        def __init__(self, array, struct_arr_ptr):
            self.data = cuda.to_device(array)
            self.shape, self.dtype = array.shape, array.dtype
            cuda.memcpy_htod(int(struct_arr_ptr), numpy.int32(array.size))
            cuda.memcpy_htod(int(struct_arr_ptr) + 8, numpy.intp(int(self.data)))

        def get(self):
            return cuda.from_device(self.data, self.shape, self.dtype)

    struct_arr = cuda.mem_alloc(2 * DoubleOpStruct.mem_size)
    do2_ptr = int(struct_arr) + DoubleOpStruct.mem_size
    array1 = DoubleOpStruct(numpy.array([1, 2, 3], dtype=numpy.float32), struct_arr)
    array2 = DoubleOpStruct(numpy.array([0, 4], dtype=numpy.float32), do2_ptr)

    func = mod.get_function("double_array")
    func(struct_arr, block=(32, 1, 1), grid=(2, 1))
    assert array1.get().tolist() == [2, 4, 6] and array2.get().tolist() == [0, 8]
    func(numpy.intp(do2_ptr), block=(32, 1, 1), grid=(1, 1))
    assert array1.get().tolist() == [2, 4, 6] and array2.get().tolist() == [0, 16]


def test_front_page_multiply_them(cuda):
    from kiln.compiler import SourceModule

    mod = SourceModule("""
    __global__ void multiply_them(float *dest, float *a, float *b)
    {
      const int i = threadIdx.x;
      dest[i] = a[i] * b[i];
    }
    """)
    multiply_them = mod.get_function("multiply_them")
    a = numpy.random.randn(400).astype(numpy.float32)
    b = numpy.random.randn(400).astype(numpy.float32)
    dest = numpy.zeros_like(a)
    multiply_them(cuda.Out(dest), cuda.In(a), cuda.In(b), block=(400, 1, 1), grid=(1, 1))
    assert numpy.array_equal(dest, a * b)


# ---- The driver page -----------------------------------------------------------------------------

def test_constant_memory_through_get_global(cuda):
    from kiln.compiler import SourceModule

    mod = SourceModule("""
    __constant__ float coeffs[8];
    __device__ int calls;
    __global__ void poly(float *out, const float *x, int n)
    {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i == 0) atomicAdd(&calls, 1);
      if (i >= n) return;
      float acc = 0.0f;
      for (int k = 7; k >= 0; --k) acc = acc * x[i] + coeffs[k];
      out[i] = acc;
    }
    """)
    coeffs = numpy.arange(1, 9, dtype=numpy.float32) / 8
    const_ptr, size = mod.get_global("coeffs")
    assert size == coeffs.nbytes
    cuda.memcpy_htod(const_ptr, coeffs)
    calls_ptr, calls_size = mod.get_global("calls")
    assert calls_size == 4
    cuda.memset_d32(calls_ptr, 0, 1)
    back = numpy.empty_like(coeffs)
    cuda.memcpy_dtoh(back, const_ptr)
    assert numpy.array_equal(back, coeffs)

    x = numpy.linspace(-1, 1, 1000).astype(numpy.float32)
    out = numpy.empty_like(x)
    poly = mod.get_function("poly")
    poly(cuda.Out(out), cuda.In(x), numpy.int32(x.size), block=(256, 1, 1), grid=(4, 1))
    poly(cuda.Out(out), cuda.In(x), numpy.int32(x.size), block=(256, 1, 1), grid=(4, 1))
    want = numpy.polyval(coeffs[::-1].astype(numpy.float64), x.astype(numpy.float64))
    assert numpy.allclose(out, want, rtol=1e-5, atol=1e-6)
    calls = numpy.empty(1, numpy.int32)
    cuda.memcpy_dtoh(calls, calls_ptr)
    assert calls[0] == 2
    with pytest.raises(ValueError, match="runs past its allocation"):
        cuda.memcpy_htod(const_ptr, numpy.zeros(9, numpy.float32))


def test_prepared_calls_with_scalars_pointers_and_vectors(cuda):
    from kiln.compiler import SourceModule

    mod = SourceModule("""
    struct Pair { int n; float scale; };
    __global__ void axpb(float *y, const float *x, float a, float b, int n)
    {
      int i = blockIdx.x * blockDim.x + threadIdx.x;
      if (i < n) y[i] = a * x[i] + b;
    }
    __global__ void vec(float4 *out, float4 v, double d, Pair p, unsigned short h)
    {
      out[threadIdx.x] = make_float4(v.x * p.scale, v.y + (float)d, v.z + p.n, v.w + h);
    }
    """)
    n = 1000
    x = numpy.random.randn(n).astype(numpy.float32)
    x_gpu = cuda.to_device(x)
    y_gpu = cuda.mem_alloc(x.nbytes)
    axpb = mod.get_function("axpb").prepare("PPffi")
    axpb.prepared_call((4, 1), (256, 1, 1), y_gpu, x_gpu, 2.0, numpy.float32(0.5), n)
    y = cuda.from_device(y_gpu, (n,), numpy.float32)
    assert numpy.array_equal(y, numpy.float32(2) * x + numpy.float32(0.5))

    float4 = numpy.dtype([("x", numpy.float32), ("y", numpy.float32), ("z", numpy.float32),
                          ("w", numpy.float32)], align=True)
    pair = numpy.dtype([("n", numpy.int32), ("scale", numpy.float32)], align=True)
    vec = mod.get_function("vec").prepare([numpy.intp, float4, numpy.float64, pair,
                                           numpy.uint16])
    out_gpu = cuda.mem_alloc(32 * 16)
    v = numpy.array((1, 2, 3, 4), float4)
    p = numpy.array((10, 3.0), pair)
    vec.prepared_call((1, 1), (32, 1, 1), out_gpu, v, 0.25, p, 7)
    out = cuda.from_device(out_gpu, (32, 4), numpy.float32)
    assert (out == [3.0, 2.25, 13.0, 11.0]).all()

    # The same on a stream, and timed.
    stream = cuda.Stream()
    axpb.prepared_async_call((4, 1), (256, 1, 1), stream, y_gpu, x_gpu, 3.0, 0.0, n)
    stream.synchronize()
    assert numpy.array_equal(cuda.from_device_like(y_gpu, x), numpy.float32(3) * x)
    seconds = axpb.prepared_timed_call((4, 1), (256, 1, 1), y_gpu, x_gpu, 1.0, 1.0, n)()
    assert 0 < seconds < 1.0


def test_events_time_a_kernel(cuda):
    from kiln.compiler import SourceModule

    mod = SourceModule("""
    __global__ void spin(float *x, int rounds)
    {
      float v = x[threadIdx.x];
      for (int r = 0; r < rounds; ++r) v = v * 0.999f + 0.001f;
      x[threadIdx.x] = v;
    }
    """)
    spin = mod.get_function("spin")
    x = cuda.mem_alloc(4 * 256)
    cuda.memset_d32(x, 0, 256)
    start, end = cuda.Event(), cuda.Event()
    start.record()
    spin(x, numpy.int32(1 << 16), block=(256, 1, 1))
    end.record()
    end.synchronize()
    assert end.query()
    ms = end.time_since(start)
    assert ms > 0 and start.time_till(end) == ms
    no_timing = cuda.Event(cuda.event_flags.DISABLE_TIMING | cuda.event_flags.BLOCKING_SYNC)
    no_timing.record(cuda.Stream())
    no_timing.synchronize()
    # kiln's sentence, a ValueError as its checks are, and PyCUDA's LogicError for the driver's
    # refusal, which programs catch.
    with pytest.raises(cuda.LogicError, match="made without timing") as refused:
        no_timing.time_since(start)
    assert isinstance(refused.value, ValueError)
    assert refused.value.name == "CUDA_ERROR_INVALID_HANDLE"


def test_page_locked_memory_and_async_copies(cuda):
    a = cuda.pagelocked_empty((1024,), numpy.float32)
    a[:] = numpy.arange(1024)
    a_gpu = cuda.mem_alloc(a.nbytes)
    stream = cuda.Stream()
    cuda.memcpy_htod_async(a_gpu, a, stream)
    b = cuda.pagelocked_zeros_like(a)
    cuda.memcpy_dtoh_async(b, a_gpu, stream)
    stream.synchronize()
    assert numpy.array_equal(a, b)
    c_gpu = cuda.mem_alloc(a.nbytes)
    cuda.memcpy_dtod_async(c_gpu, a_gpu, a.nbytes, stream)
    cuda.memset_d8_async(a_gpu, 0, a.nbytes, stream)
    stream.synchronize()
    assert numpy.array_equal(cuda.from_device_like(c_gpu, a), a)
    assert not cuda.from_device_like(a_gpu, a).any()


# ---- The tools page ------------------------------------------------------------------------------

def test_device_memory_pool_reuses_blocks(cuda):
    import kiln.tools
    from kiln.compiler import SourceModule

    pool = kiln.tools.DeviceMemoryPool()
    first = pool.allocate(1000)
    address = int(first)
    assert len(first) == 1000 and pool.active_blocks == 1
    first.free()
    assert pool.held_blocks == 1 and pool.active_blocks == 0
    second = pool.allocate(900)  # the same bin of sizes: the same block
    assert int(second) == address and pool.held_blocks == 0
    fill = SourceModule("__global__ void fill(int *p, int v) { p[threadIdx.x] = v; }\n")
    fill.get_function("fill")(second, numpy.int32(5), block=(225, 1, 1))
    got = numpy.empty(225, numpy.int32)
    cuda.memcpy_dtoh(got, second)
    assert (got == 5).all()
    del second  # collected: back to the pool
    assert pool.held_blocks == 1
    pool.stop_holding()
    assert pool.held_blocks == 0


def test_page_locked_memory_pool_reuses_blocks(cuda):
    import kiln.tools

    pool = kiln.tools.PageLockedMemoryPool()
    a = pool.allocate((256,), numpy.float32)
    address = a.ctypes.data
    a[:] = 1
    del a
    b = pool.allocate((16, 16), numpy.float32)
    assert b.ctypes.data == address and isinstance(b.base, kiln.tools.PooledHostAllocation)
    b_gpu = cuda.to_device(b)
    assert numpy.array_equal(cuda.from_device_like(b_gpu, b), b)


def test_default_context_device_data_and_occupancy(cuda):
    import kiln.autoinit
    import kiln.tools
    from kiln.compiler import SourceModule

    assert kiln.autoinit.device == cuda.Context.get_device()
    ctx = kiln.tools.make_default_context()
    try:
        assert cuda.Context.get_current() == ctx
        devdata = kiln.tools.DeviceData()
        assert devdata.warp_size == 32 and devdata.max_threads == 1024
        assert devdata.align(100) == 128 and devdata.align_words(4) == 32
        f = SourceModule("__global__ void k(float *p) { p[threadIdx.x] *= 2; }\n")
        f = f.get_function("k")
        occ = kiln.tools.OccupancyRecord(devdata, 256, f.shared_size_bytes, f.num_regs)
        assert 0 < occ.occupancy <= 1 and occ.limited_by in ("device", "warps", "regs", "smem")
    finally:
        ctx.pop()

    @kiln.tools.context_dependent_memoize
    def kernel(n):
        return SourceModule(f"__global__ void k{n}(int *p) {{ *p = {n}; }}\n")

    assert kernel(3) is kernel(3)


# ---- printf, assert, dynamic parallelism ---------------------------------------------------------

def test_device_printf_reaches_stdout():
    done = run_python("""
        import kiln.autoinit
        import kiln.driver as cuda
        from kiln.compiler import SourceModule
        mod = SourceModule('''
        #include <stdio.h>
        __global__ void say_hi()
        {
          printf("I am %d.%d\\\\n", threadIdx.x, threadIdx.y);
        }
        ''')
        func = mod.get_function("say_hi")
        func(block=(4, 4, 1))
        cuda.Context.synchronize()
    """)
    assert done.returncode == 0, done.stderr
    lines = sorted(done.stdout.split("\n"))
    assert [ln for ln in lines if ln] == sorted(f"I am {x}.{y}" for x in range(4)
                                                 for y in range(4)), done.stdout


def test_device_assert_is_a_cuda_error_at_the_next_synchronize():
    done = run_python("""
        import numpy
        import kiln.autoinit
        import kiln.driver as cuda
        from kiln.compiler import SourceModule
        mod = SourceModule('''
        #include <assert.h>
        __global__ void check(const int *x) { assert(x[threadIdx.x] == 1); }
        ''')
        check = mod.get_function("check")
        check(cuda.In(numpy.ones(32, numpy.int32)), block=(32, 1, 1))
        print("passed")
        x = cuda.to_device(numpy.arange(32, dtype=numpy.int32))
        check(x, block=(32, 1, 1))
        try:
            cuda.Context.synchronize()
        except cuda.Error as e:
            print("raised", type(e).__name__, e.name)
    """)
    # The device's own report of the failed assertion is printed too, by the driver's stdio,
    # in an order of its own against Python's.
    lines = done.stdout.split("\n")
    assert "passed" in lines, done.stdout + done.stderr
    assert "raised CudaError CUDA_ERROR_ASSERT" in lines, done.stdout + done.stderr


def test_dynamic_source_module_launches_a_child_kernel(cuda):
    from kiln.compiler import DynamicSourceModule

    mod = DynamicSourceModule("""
    __global__ void child(int *out, int base)
    {
      out[base + threadIdx.x] = base + threadIdx.x;
    }
    __global__ void parent(int *out)
    {
      child<<<1, 32>>>(out, 32 * threadIdx.x);
    }
    """)
    out = numpy.zeros(128, numpy.int32)
    mod.get_function("parent")(cuda.Out(out), block=(4, 1, 1))
    assert numpy.array_equal(out, numpy.arange(128, dtype=numpy.int32))


def test_code_keeps_its_arch_when_run(cuda):
    from kiln.compiler import SourceModule

    major, minor = cuda.Device(0).compute_capability()
    arch = f"sm_{major}{minor}"
    mod = SourceModule("__global__ void k(int *p) { *p = 7; }\n", arch=f"compute_{major}0",
                       code=arch, cache_dir=False)
    assert mod.arch == arch
    out = numpy.zeros(1, numpy.int32)
    mod.get_function("k")(cuda.Out(out), block=(1, 1, 1))
    assert out[0] == 7


def test_registered_host_memory_is_page_locked(cuda):
    buf = np.empty(8192, np.uint8)
    offset = -buf.ctypes.data % 4096
    ary = buf[offset:offset + 4096].view(np.float32)
    ary[:] = np.arange(1024)
    pinned = cuda.register_host_memory(ary, cuda.mem_host_register_flags.PORTABLE)
    assert isinstance(pinned.base, cuda.RegisteredHostMemory) and pinned.base.base is ary
    gpu = cuda.mem_alloc(ary.nbytes)
    stream = cuda.Stream()
    cuda.memcpy_htod_async(gpu, pinned, stream)
    stream.synchronize()
    assert np.array_equal(cuda.from_device_like(gpu, ary), ary)
