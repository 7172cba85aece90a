"""DeviceArray, page-locked host arrays and the memory pool; zero-copy exchange with PyTorch
and CuPy. What needs no GPU (argument checks made before the device is touched) runs in CI."""
import numpy as np
import pytest

import kiln
import kiln.driver as drv
from helpers import DTYPES, run_in_threads, run_python

SHAPES = [(), (0,), (7,), (3, 5), (2, 3, 4), (2, 1, 3, 2)]

SCALE = r"""
extern "C" __global__ void scale(float *x, float s, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }
extern "C" __global__ void twice_into(const float *a, float *b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) b[i] = 2 * a[i]; }
extern "C" __global__ void spin(long long cycles)
{ long long t = clock64(); while (clock64() - t < cycles) {} }
"""


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(SCALE)


def sample(dtype, shape):
    rng = np.random.default_rng(abs(hash((np.dtype(dtype).str, shape))) % 2**32)
    x = rng.integers(0, 100, size=shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x
    return np.asarray(x).astype(dtype)


# ---- no GPU needed ---------------------------------------------------------------------------

def test_to_device_takes_numpy_arrays_only():
    with pytest.raises(TypeError, match="numpy array"):
        kiln.to_device([1, 2, 3])


@pytest.mark.gpu
def test_to_device_takes_a_numpy_scalar_as_0d():
    a = kiln.to_device(np.complex64(3 + 4j))
    assert a.shape == () and a.get() == np.complex64(3 + 4j)


def test_asarray_explains_what_it_wraps():
    with pytest.raises(TypeError, match="__cuda_array_interface__ or __dlpack__"):
        kiln.asarray([1, 2])
    with pytest.raises(ValueError, match="not in CUDA device memory"):
        kiln.asarray(np.ones(3))  # numpy offers DLPack, on the CPU


def test_device_array_needs_a_shape_and_a_dtype():
    with pytest.raises(TypeError, match="'shape'"):
        kiln.DeviceArray()
    with pytest.raises(TypeError, match="'dtype'"):
        kiln.DeviceArray(3)


# ---- round trips -------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_round_trip_every_dtype_and_rank(dtype):
    for shape in SHAPES:
        host = sample(dtype, shape)
        a = kiln.to_device(host)
        assert a.shape == shape and a.dtype == np.dtype(dtype) and a.size == host.size
        assert a.nbytes == host.nbytes and a.ndim == len(shape)
        assert a.strides == np.empty(shape, dtype).strides or host.size == 0
        back = a.get()
        assert back.dtype == host.dtype and back.shape == shape
        np.testing.assert_array_equal(back, host)
        out = np.empty_like(host)
        assert a.get(out=out) is out
        np.testing.assert_array_equal(out, host)


@pytest.mark.gpu
def test_empty_zeros_and_like():
    z = kiln.zeros((3, 4), np.int32)
    np.testing.assert_array_equal(z.get(), np.zeros((3, 4), np.int32))
    e = kiln.empty(5)
    assert e.dtype == np.float64 and e.shape == (5,)
    like = kiln.zeros_like(np.ones((2, 2), np.float32))
    assert like.shape == (2, 2) and like.dtype == np.float32
    assert kiln.empty_like(z).shape == (3, 4)
    assert kiln.zeros(0).get().shape == (0,)


@pytest.mark.gpu
def test_views_along_the_first_axis():
    host = np.arange(24, dtype=np.float32).reshape(6, 4)
    a = kiln.to_device(host)
    np.testing.assert_array_equal(a[1:4].get(), host[1:4])
    np.testing.assert_array_equal(a[-1].get(), host[-1])
    assert a[2].shape == (4,) and a[2].ptr == a.ptr + 2 * 16
    assert a[5:2].shape == (0, 4)
    assert len(a) == 6
    with pytest.raises(IndexError, match="out of bounds"):
        a[6]
    assert a[1, 2].shape == () and a[1, 2].ptr == a.ptr + 16 + 8
    # A view keeps its parent's memory alive.
    v = kiln.to_device(host)[3:5]
    import gc
    gc.collect()
    np.testing.assert_array_equal(v.get(), host[3:5])


@pytest.mark.gpu
def test_bad_inputs_say_what_was_wrong():
    a = kiln.to_device(np.arange(6, dtype=np.float32))
    with pytest.raises(TypeError, match="dtype"):  # PyCUDA's get raises TypeError there
        a.get(out=np.empty(6, np.float64))
    with pytest.raises(ValueError, match="shape"):
        a.get(out=np.empty(5, np.float32))
    with pytest.raises(ValueError, match="not C-contiguous"):
        a.get(out=np.empty(12, np.float32)[::2])
    ro = np.empty(6, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="read-only"):
        a.get(out=ro)
    with pytest.raises(ValueError, match="dtype"):
        a.copy_from(np.zeros(6, np.int32))
    with pytest.raises(TypeError, match="kiln.Stream"):
        a.get(stream="5")
    with pytest.raises(TypeError, match="Python objects"):
        kiln.empty(3, dtype=object)


@pytest.mark.gpu
def test_a_kernel_writes_a_device_array_and_a_view(mod):
    scale = mod.get_function("scale")
    host = np.arange(8, dtype=np.float32)
    a = kiln.to_device(host)
    scale(a, np.float32(2), np.int32(8), block=(8, 1, 1))
    np.testing.assert_array_equal(a.get(), host * 2)
    scale(a[4:], np.float32(10), np.int32(4), block=(4, 1, 1))
    np.testing.assert_array_equal(a.get(), np.r_[host[:4] * 2, host[4:] * 20])


@pytest.mark.gpu
def test_copies_between_device_arrays_and_on_a_stream():
    host = np.arange(1000, dtype=np.int64)
    a = kiln.to_device(host)
    b = kiln.empty_like(a)
    b.copy_from(a)
    np.testing.assert_array_equal(b.get(), host)
    s = kiln.Stream()
    c = kiln.to_device(host * 3, stream=s)
    out = kiln.pagelocked_empty(1000, np.int64)
    c.copy_to(out, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(out, host * 3)


@pytest.mark.gpu
def test_cuda_array_interface_and_asarray():
    a = kiln.to_device(np.arange(12, dtype=np.int16).reshape(3, 4))
    cai = a.__cuda_array_interface__
    assert cai["version"] == 3 and cai["shape"] == (3, 4) and cai["typestr"] == "<i2"
    assert cai["data"] == (a.ptr, False) and cai["strides"] == (8, 2)

    class Foreign:  # any producer of the interface
        __cuda_array_interface__ = cai

    w = kiln.asarray(Foreign())
    assert w.ptr == a.ptr and w.shape == (3, 4) and w.dtype == np.int16
    np.testing.assert_array_equal(w.get(), a.get())
    assert kiln.asarray(a) is a


# ---- PyTorch and CuPy --------------------------------------------------------------------------

@pytest.mark.gpu
def test_torch_both_ways_without_copies(mod):
    torch = pytest.importorskip("torch")
    scale = mod.get_function("scale")
    # kiln -> torch through DLPack: the same memory, and torch sees the kernel's writes.
    a = kiln.to_device(np.arange(16, dtype=np.float32))
    t = torch.from_dlpack(a)
    assert t.data_ptr() == a.ptr and t.device.type == "cuda"
    scale(a, np.float32(3), np.int32(16), block=(16, 1, 1))
    kiln.synchronize()
    assert torch.equal(t.cpu(), torch.arange(16, dtype=torch.float32) * 3)
    # torch -> kiln through the CUDA array interface, and through DLPack.
    x = torch.arange(8, dtype=torch.float32, device="cuda")
    w = kiln.asarray(x)
    assert w.ptr == x.data_ptr() and w.shape == (8,) and w.dtype == np.float32
    stream = kiln.Stream.from_handle(torch.cuda.current_stream().cuda_stream)
    scale(w, np.float32(2), np.int32(8), block=(8, 1, 1), stream=stream)
    torch.cuda.synchronize()
    assert torch.equal(x.cpu(), torch.arange(8, dtype=torch.float32) * 2)
    t = torch.arange(16, dtype=torch.float32, device="cuda").reshape(4, 4).t()
    v = kiln.asarray(t)  # a strided view, no copy
    assert v.ptr == t.data_ptr() and v.strides == (4, 16) and not v.flags.c_contiguous
    assert v.flags.f_contiguous


@pytest.mark.gpu
def test_torch_through_dlpack_only(mod):
    torch = pytest.importorskip("torch")

    class OnlyDLPack:
        def __init__(self, t):
            self.t = t

        def __dlpack__(self, stream=None):
            return self.t.__dlpack__(stream=stream)

        def __dlpack_device__(self):
            return self.t.__dlpack_device__()

    x = torch.ones(5, dtype=torch.float64, device="cuda")
    w = kiln.asarray(OnlyDLPack(x))
    assert w.ptr == x.data_ptr() and w.dtype == np.float64 and w.shape == (5,)
    np.testing.assert_array_equal(w.get(), np.ones(5))


@pytest.mark.gpu
def test_cupy_both_ways_without_copies(mod):
    cp = pytest.importorskip("cupy")
    scale = mod.get_function("scale")
    x = cp.arange(10, dtype=cp.float32)
    w = kiln.asarray(x)
    assert w.ptr == x.data.ptr
    scale(w, np.float32(5), np.int32(10), block=(10, 1, 1))
    kiln.synchronize()
    assert (x.get() == np.arange(10, dtype=np.float32) * 5).all()
    a = kiln.to_device(np.arange(6, dtype=np.int32))
    y = cp.from_dlpack(a)
    assert y.data.ptr == a.ptr and (y.get() == np.arange(6)).all()
    z = cp.asarray(a)  # through __cuda_array_interface__
    assert z.data.ptr == a.ptr


# ---- memory --------------------------------------------------------------------------------------

@pytest.mark.gpu
def test_pagelocked_arrays():
    p = kiln.pagelocked_zeros((4, 4), np.float32)
    assert p.dtype == np.float32 and p.shape == (4, 4) and (p == 0).all()
    assert p.flags.c_contiguous and p.flags.writeable
    q = kiln.pagelocked_empty_like(p)
    q[:] = 7
    np.testing.assert_array_equal(kiln.to_device(q).get(), q)
    for _ in range(200):  # freed with the array
        kiln.pagelocked_empty(1 << 20, np.uint8)


@pytest.mark.gpu
def test_pool_reuses_memory_and_reports():
    free, total = kiln.mem_info()
    assert 0 < free <= total
    a = kiln.empty(64 << 20, np.uint8)
    stats = kiln.pool_stats()
    assert stats["used"] >= 64 << 20 and stats["reserved"] >= stats["used"]
    del a
    kiln.synchronize()
    assert kiln.pool_stats()["reserved"] >= 64 << 20  # kept for reuse, not returned
    kiln.pool_trim()
    assert kiln.pool_stats()["reserved"] < 64 << 20


@pytest.mark.gpu
def test_memory_an_array_freed_is_free_to_mem_info_and_to_mem_alloc():
    """PyCUDA's cuMemFree gives a freed array's memory back at once; kiln's pool keeps it, and
    hands it back where a program would see the difference: mem_info counts it as free, and
    mem_alloc (cuMemAlloc, outside the pool) gets it rather than running out."""
    free0, total = kiln.mem_info()
    big = (free0 // 2) & ~((1 << 21) - 1)
    a = kiln.empty(big, np.uint8)
    assert kiln.mem_info()[0] <= free0 - big + (64 << 20)
    del a
    kiln.synchronize()
    assert kiln.pool_stats()["reserved"] >= big                  # kept for reuse ...
    assert kiln.mem_info()[0] >= free0 - (64 << 20)              # ... and yet free
    assert kiln.pool_stats()["reserved"] < big
    # The pool holds three quarters of what was free; cuMemAlloc asks for half of it.
    a = kiln.empty((free0 // 4) * 3, np.uint8)
    del a
    kiln.synchronize()
    assert kiln.pool_stats()["reserved"] >= (free0 // 4) * 3
    p = kiln.mem_alloc(big)
    try:
        assert int(p) != 0
        assert kiln.pool_stats()["reserved"] < big
    finally:
        p.free()
    a = kiln.empty((free0 // 4) * 3, np.uint8)                  # the same, pitched
    del a
    kiln.synchronize()
    assert kiln.pool_stats()["reserved"] >= (free0 // 4) * 3
    pitched, pitch = drv.mem_alloc_pitch(1 << 20, big >> 20, 4)
    pitched.free()
    assert pitch >= 1 << 20


@pytest.mark.gpu
def test_out_of_memory_says_how_much():
    with pytest.raises(kiln.OutOfMemoryError, match=r"asked for \d+ bytes, \d+ of \d+ free"):
        kiln.empty(1 << 50, np.uint8)


# ---- streams, events, threads --------------------------------------------------------------------

@pytest.mark.gpu
def test_streams_and_events(mod):
    spin = mod.get_function("spin")
    lo, hi = kiln.Stream.priority_range()
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING, priority=hi)
    assert s.handle != 0 and s.__cuda_stream__() == (0, s.handle)
    start, end = kiln.Event(), kiln.Event()
    start.record(s)
    spin(np.int64(20_000_000), block=(1, 1, 1), stream=s)
    end.record(s)
    end.synchronize()
    assert s.query() and end.query()
    assert start.elapsed(end) > 0 and end.time_since(start) == start.elapsed(end)
    other = kiln.Stream()
    other.wait(end)
    other.synchronize()
    with pytest.raises(ValueError, match="priority"):
        kiln.Stream(priority=lo + 100)
    with pytest.raises(ValueError, match="without timing"):
        a, b = kiln.Event(timing=False).record(), kiln.Event(timing=False).record()
        b.synchronize()
        a.elapsed(b)


@pytest.mark.gpu
def test_a_copy_overlaps_a_kernel_on_two_streams(mod):
    spin = mod.get_function("spin")
    host = kiln.pagelocked_zeros(256 << 20, np.uint8)
    dev = kiln.empty(host.shape, np.uint8)
    s1, s2 = kiln.Stream(kiln.STREAM_NON_BLOCKING), kiln.Stream(kiln.STREAM_NON_BLOCKING)
    k0, k1, c0, c1 = (kiln.Event() for _ in range(4))
    k0.record(s1)
    spin(np.int64(200_000_000), block=(1, 1, 1), stream=s1)  # ~0.1 s
    k1.record(s1)
    c0.record(s2)
    dev.copy_from(host, stream=s2)
    c1.record(s2)
    s1.synchronize()
    s2.synchronize()
    # The copy started before the kernel ended and ended before it too: they ran at once.
    assert k0.elapsed(c0) < k0.elapsed(k1)
    assert k0.elapsed(c1) < k0.elapsed(k1)


@pytest.mark.gpu
def test_get_and_set_on_a_stream_return_done_unless_async(mod):
    # PyCUDA's get and set take stream= but use it only with async_=True: otherwise the copy
    # is done when they return, into or out of page-locked memory too. kiln queues it on the
    # stream, behind the stream's work, and waits.
    spin, scale = mod.get_function("spin"), mod.get_function("scale")
    n = 1 << 16
    s = kiln.Stream()
    a = kiln.to_device(np.ones(n, np.float32))
    spin(np.int64(100_000_000), block=(1, 1, 1), stream=s)  # ~50 ms before the scale
    scale(a, np.float32(3), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1), stream=s)
    pinned = kiln.pagelocked_zeros(n, np.float32)
    assert a.get(ary=pinned, stream=s) is pinned
    assert np.all(pinned == 3)  # no synchronize: the copy followed the scale, and is done
    spin(np.int64(100_000_000), block=(1, 1, 1), stream=s)
    p = a.get(pagelocked=True, stream=s)
    assert np.all(p == 3)
    src = kiln.pagelocked_empty(n, np.float32)
    src[...] = 5
    spin(np.int64(100_000_000), block=(1, 1, 1), stream=s)
    a.set(src, stream=s)
    src[...] = -1  # the copy has read it already
    s.synchronize()
    assert np.all(a.get() == 5)
    # async_=True and get_async stay queued: done once the stream is.
    spin(np.int64(100_000_000), block=(1, 1, 1), stream=s)
    later = kiln.pagelocked_zeros(n, np.float32)
    a.get(ary=later, async_=True, stream=s)
    s.synchronize()
    assert np.all(later == 5)


@pytest.mark.gpu
def test_in_out_on_a_kiln_stream_are_queued(mod):
    import gc
    import time
    spin, scale, twice = (mod.get_function(k) for k in ("spin", "scale", "twice_into"))
    n = 1 << 20
    s = kiln.Stream()
    x = kiln.pagelocked_empty(n, np.float32)
    x[:] = 1
    spin(np.int64(500_000_000), block=(1, 1, 1), stream=s)  # keeps s busy for a while
    t = time.perf_counter()
    scale(kiln.InOut(x), np.float32(2), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1),
          stream=s)
    queued_in = time.perf_counter() - t
    assert not s.query(), "the call waited for the stream"
    s.synchronize()
    assert (x == 2).all()
    assert queued_in < 0.05
    # The stream keeps the In array alive though the caller dropped it before the copy ran.
    y = np.full(n, 3, np.float32)
    out = kiln.pagelocked_zeros(n, np.float32)
    spin(np.int64(100_000_000), block=(1, 1, 1), stream=s)
    twice(kiln.In(y), kiln.Out(out), np.int32(n), block=(256, 1, 1), grid=(n // 256, 1),
          stream=s)
    del y
    gc.collect()
    s.synchronize()
    assert (out == 6).all()
    # With a raw handle, In/Out are complete when the call returns.
    z = np.ones(256, np.float32)
    scale(kiln.InOut(z), np.float32(4), np.int32(256), block=(256, 1, 1), stream=s.handle)
    assert (z == 4).all()


@pytest.mark.gpu
def test_eight_threads_launching(mod):
    scale = mod.get_function("scale")

    def work(seed):
        host = np.full(256, seed, np.float32)
        a = kiln.to_device(host)
        for _ in range(500):
            scale(a, np.float32(1), np.int32(256), block=(256, 1, 1))
        scale(a, np.float32(2), np.int32(256), block=(256, 1, 1))
        x = np.full(256, seed, np.float32)
        scale(kiln.InOut(x), np.float32(3), np.int32(256), block=(256, 1, 1))
        if not ((a.get() == 2 * seed).all() and (x == 3 * seed).all()):
            return "wrong result"

    errors = run_in_threads(work, 8)
    assert not errors, errors


@pytest.mark.gpu
@pytest.mark.gpus2
def test_one_module_runs_on_two_devices(mod):
    scale = mod.get_function("scale")
    kept = {}
    for dev in (0, 1):
        with kiln.Device(dev):
            host = np.arange(32, dtype=np.float32) + dev
            a = kiln.to_device(host)
            assert a.device == dev
            scale(a, np.float32(2), np.int32(32), block=(32, 1, 1))
            x = host.copy()
            scale(kiln.InOut(x), np.float32(3), np.int32(32), block=(32, 1, 1))
            np.testing.assert_array_equal(a.get(), host * 2)
            np.testing.assert_array_equal(x, host * 3)
            kept[dev] = [kiln.empty(1000, np.float32) for _ in range(4)]
    # Back on device 0: an array of device 1 is refused before the launch.
    with pytest.raises(ValueError, match="on device 1; the launch is on device 0"):
        scale(kept[1][0], np.float32(1), np.int32(4), block=(4, 1, 1))
    # Device 1's arrays are freed on device 1, so device 0 never reuses their memory.
    del kept
    b = kiln.to_device(np.ones(1000, np.float32))
    scale(b, np.float32(5), np.int32(1000), block=(256, 1, 1), grid=(4, 1))
    assert b.device == 0 and (b.get() == 5).all()


@pytest.mark.gpu
def test_with_device_restores_the_current_one():
    with kiln.Device(0) as d:
        assert isinstance(d, kiln.Device)
        assert kiln.to_device(np.ones(2)).device == 0


MILLION = r"""
import resource, sys
import numpy as np, kiln
mod = kiln.SourceModule('extern "C" __global__ void inc(float *x, int n)'
                        '{ int i = threadIdx.x; if (i < n) x[i] += 1; }')
inc = mod.get_function("inc")
x = np.zeros(64, np.float32)
def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096
def batch(n):
    for _ in range(n):
        inc(kiln.InOut(x), 64, block=(64, 1, 1))
batch(100_000)                      # warm-up
rss0, free0 = rss(), kiln.mem_info()[0]
batch(900_000)
rss1, free1 = rss(), kiln.mem_info()[0]
assert (x == 1_000_000).all(), x[:4]
print(rss1 - rss0, free0 - free1)
"""


@pytest.mark.gpu
def test_a_million_launches_with_in_out_stay_flat():
    r = run_python(MILLION, timeout=600)
    assert r.returncode == 0, r.stderr
    grew_rss, grew_device = map(int, r.stdout.split())
    assert grew_rss < 4 << 20, f"RSS grew by {grew_rss} bytes over 900,000 launches"
    assert grew_device < 4 << 20, f"device memory in use grew by {grew_device} bytes"
