"""Large copies of pageable NumPy arrays go through the stager (engine/src/stage.c): split into
chunks, copied by several threads through page-locked buffers. Every byte must arrive in its
place whatever the size, dtype, alignment, direction or number of threads; page-locked arrays
skip the stager; a failure on the device is an exception, never a hang."""
import json
import os

import numpy as np
import pytest

import kiln
from helpers import DTYPES, run_in_threads, run_python

COPY = r"""
extern "C" __global__ void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
extern "C" __global__ void add_one(unsigned char *x, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        x[i] += 1;
}
"""
LAUNCH = {"block": (256, 1, 1), "grid": (512, 1)}


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(COPY)


def big_nbytes(extra=0):
    """A size that is staged and ends partway into a chunk."""
    info = kiln.staging_info()
    return max(info["min_bytes"], 2 * info["chunk_bytes"]) + 4099 + extra


def sample(dtype, n):
    rng = np.random.default_rng(n)
    x = rng.integers(0, 100, size=n)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * x
    return x.astype(dtype)


def copies():
    return kiln.staging_info()["copies"]


def run_child(code, env, timeout=120):
    """Runs code in a new Python with the staging variables of env (they are read once)."""
    done = run_python(code, env, timeout)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


# ---- no GPU needed ---------------------------------------------------------------------------

def test_staging_info_names_its_settings():
    info = kiln.staging_info()
    assert set(info) == {"min_bytes", "chunk_bytes", "threads", "copies", "bytes",
                         "pinned_buffers", "pinned_bytes", "small_buffer_bytes",
                         "small_put_bytes", "mirror_slots", "mirrors_held", "mirror_reads"}
    assert info["pinned_buffers"] == 0 and info["pinned_bytes"] == 0  # nothing copied here
    assert info["chunk_bytes"] % 4096 == 0 and info["chunk_bytes"] >= 4096
    assert 1 <= info["threads"] <= len(os.sched_getaffinity(0))


def test_staging_settings_come_from_the_environment():
    out = run_child("""
        import kiln
        print(kiln.staging_info())
    """, {"KILN_STAGING_MIN": "3m", "KILN_STAGING_CHUNK": "1m", "KILN_STAGING_THREADS": "1"})
    info = eval(out)
    assert info["min_bytes"] == 3 << 20
    assert info["chunk_bytes"] == 1 << 20
    assert info["threads"] == 1


# ---- on the GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_every_dtype_round_trips_through_the_stager(dtype):
    itemsize = np.dtype(dtype).itemsize
    h = sample(dtype, big_nbytes() // itemsize + 1)
    before = copies()
    d = kiln.to_device(h)
    back = np.zeros_like(h)
    d.get(out=back)
    np.testing.assert_array_equal(back, h)
    assert copies() - before == 2
    a = kiln.mem_alloc(h.nbytes)
    kiln.memcpy_htod(a, h)
    back[...] = 0
    kiln.memcpy_dtoh(back, a)
    np.testing.assert_array_equal(back, h)
    assert copies() - before == 4


@pytest.mark.gpu
def test_in_out_and_inout_go_through_the_stager(mod):
    n = big_nbytes(extra=12345)
    src = sample(np.uint8, n)
    out = np.zeros(n, np.uint8)
    before = copies()
    mod.get_function("copy_bytes")(kiln.Out(out), kiln.In(src), np.uint64(n), **LAUNCH)
    np.testing.assert_array_equal(out, src)
    x = src.copy()
    mod.get_function("add_one")(kiln.InOut(x), np.uint64(n), **LAUNCH)
    np.testing.assert_array_equal(x, src + np.uint8(1))
    assert copies() - before == 4


@pytest.mark.gpu
def test_unaligned_host_arrays(mod):
    n = big_nbytes() // 4
    raw = np.zeros(n * 4 + 8, np.uint8)
    h = np.ndarray((n,), np.float32, raw, offset=1)  # a float32 array at an odd address
    assert not h.flags.aligned
    h[...] = np.arange(n, dtype=np.float32)
    d = kiln.to_device(h)
    raw2 = np.zeros(n * 4 + 8, np.uint8)
    back = np.ndarray((n,), np.float32, raw2, offset=3)
    d.get(out=back)
    np.testing.assert_array_equal(back, np.arange(n, dtype=np.float32))


@pytest.mark.gpu
def test_page_locked_arrays_skip_the_stager():
    n = big_nbytes()
    h = kiln.pagelocked_empty(n, np.uint8)
    h[...] = sample(np.uint8, n)
    before = copies()
    back = kiln.pagelocked_zeros(n, np.uint8)
    kiln.to_device(h).get(out=back)
    np.testing.assert_array_equal(back, h)
    assert copies() == before


@pytest.mark.gpu
def test_small_copies_skip_the_stager():
    h = sample(np.uint8, 4096)
    before = copies()
    np.testing.assert_array_equal(kiln.to_device(h).get(), h)
    assert copies() == before


@pytest.mark.gpu
def test_stream_order_and_the_source_reusable_on_return(mod):
    n = big_nbytes()
    s = kiln.Stream()
    h = sample(np.uint8, n)
    want = h + np.uint8(1)
    d = kiln.to_device(h, stream=s)
    h[...] = 0  # the copy has taken the bytes already
    mod.get_function("add_one")(d, np.uint64(n), stream=s, **LAUNCH)
    back = np.zeros(n, np.uint8)
    d.get(out=back, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, want)
    # In and Out queued on the stream: In waits for nothing else, Out is written on return.
    src = sample(np.uint8, n)
    out = np.zeros(n, np.uint8)
    mod.get_function("copy_bytes")(kiln.Out(out), kiln.In(src), np.uint64(n), stream=s,
                                   **LAUNCH)
    s.synchronize()
    np.testing.assert_array_equal(out, src)


# Copies to the host of up to 1 MiB that block go through a page-locked buffer of kiln's.
SMALL = [1, 3, 4096 // 4 + 1, (1 << 20) // 4, (1 << 20) // 4 + 1]


@pytest.mark.gpu
@pytest.mark.parametrize("n", SMALL, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.int8, np.complex128], ids=lambda d: np.dtype(d).name)
def test_small_copies_to_the_host_are_right(n, dtype):
    import kiln.driver as drv
    h = sample(dtype, n)
    d = kiln.to_device(h)
    np.testing.assert_array_equal(d.get(), h)
    back = np.zeros_like(h)
    d.get(out=back)
    np.testing.assert_array_equal(back, h)
    back[...] = 0
    drv.memcpy_dtoh(back, d.gpudata)
    np.testing.assert_array_equal(back, h)
    other = np.zeros_like(h)                          # a second get leaves the first's bytes
    d[:1].get(out=other[:1])
    np.testing.assert_array_equal(back, h)
    assert other[0] == h[0]


def sizes_over_twelve_round_trips(key):
    """staging_info()[key] after each of a new process's first 12 small to_device + get round
    trips, each checked for the right values."""
    out = run_child(f"""
        import numpy as np
        import kiln
        sizes = []
        for k in range(12):
            h = np.arange(100 + 7 * k, dtype=np.float32) * (k + 1)
            d = kiln.to_device(h)
            assert np.array_equal(d.get(), h), k
            sizes.append(kiln.staging_info()[{key!r}])
        print(sizes)
    """, {})
    return eval(out.strip().splitlines()[-1])


@pytest.mark.gpu
def test_the_small_copy_buffer_is_made_at_the_ninth_small_copy():
    """The first 8 small blocking copies go the driver's way (the buffer costs a process more
    than it saves a copy or two); from the ninth on, kiln's page-locked buffer. Each is right."""
    sizes = sizes_over_twelve_round_trips("small_buffer_bytes")
    assert sizes[:8] == [0] * 8 and sizes[8:] == [1 << 20] * 4, sizes


# ---- Calls whose arrays go through kiln's page-locked buffer --------------------------------------

CAT = r"""
extern "C" __global__ void cat3(unsigned char *out, const unsigned char *a, size_t na,
                                const unsigned char *b, size_t nb, unsigned char *c, size_t nc)
{
  size_t n = na + nb + nc;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    unsigned char v = i < na ? a[i] : i < na + nb ? b[i - na] : c[i - na - nb];
    out[i] = v;
    if (i >= na + nb) c[i - na - nb] = (unsigned char)(v + 1);
  }
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("sizes", [(1, 2, 3), (65535, 1, 2), (65536, 65536, 60000),
                                   (100, 70000, 3), (1, 131071, 60000), (0, 130000, 0),
                                   (200000, 0, 20000)])
def test_the_arrays_of_a_small_call_share_the_page_locked_buffer_and_each_is_right(sizes):
    # Up to 256 KiB in all, the arrays of a call go through kiln's page-locked buffer, laid
    # out one after another: inputs first, then those in and out, then outputs.
    na, nb, nc = sizes
    f = kiln.SourceModule(CAT).get_function("cat3")
    a, b, c = sample(np.uint8, na + 1)[:na], sample(np.uint8, nb + 2)[:nb], sample(np.uint8, nc)
    want_c = c + np.uint8(1)
    out = np.zeros(na + nb + nc, np.uint8)
    f(kiln.Out(out), kiln.In(a), np.uint64(na), kiln.In(b), np.uint64(nb), kiln.InOut(c),
      np.uint64(nc), block=(256, 1, 1), grid=(64, 1))
    np.testing.assert_array_equal(out, np.concatenate([a, b, want_c - np.uint8(1)]))
    np.testing.assert_array_equal(c, want_c)


# ---- Small copies to the device: a ring of page-locked slots ------------------------------------

SLOT = 256 << 10  # the most bytes one slot of the ring takes

SPIN = r"""
extern "C" __global__ void spin_then_fill(unsigned char *x, size_t n, long long cycles,
                                          unsigned char v)
{
  long long t0 = clock64();
  while (clock64() - t0 < cycles) {}
  for (size_t i = threadIdx.x; i < n; i += blockDim.x) x[i] = v;
}
"""


@pytest.mark.gpu
def test_the_ring_is_made_at_the_ninth_small_copy_to_the_device_and_each_copy_is_right():
    sizes = sizes_over_twelve_round_trips("small_put_bytes")
    assert sizes[:8] == [0] * 8 and sizes[8:] == [8 * SLOT] * 4, sizes


def warm_ring():
    for _ in range(9):
        kiln.to_device(np.zeros(4, np.uint8))
    assert kiln.staging_info()["small_put_bytes"] > 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 3, 4095, 4096, SLOT - 1, SLOT, SLOT + 1])
def test_small_copies_to_the_device_around_the_slot_size_take_the_callers_bytes(n):
    warm_ring()
    h = sample(np.uint8, n)
    want = h.copy()
    d = kiln.to_device(h)
    h[...] = 7                                    # the bytes were taken during the call
    np.testing.assert_array_equal(d.get(), want)
    d.set(h)
    h[...] = 9
    np.testing.assert_array_equal(d.get(), np.full(n, 7, np.uint8))
    d.copy_from(h)
    h[...] = 1
    np.testing.assert_array_equal(d.get(), np.full(n, 9, np.uint8))


@pytest.mark.gpu
def test_many_small_copies_in_a_row_more_than_the_ring_holds_all_land():
    warm_ring()
    arrays, wants = [], []
    for k in range(100):                          # the ring's 8 slots wrap twelve times
        h = sample(np.uint8, 1000 + 61 * k)
        wants.append(h.copy())
        arrays.append(kiln.to_device(h))
        h[...] = 0
    d = kiln.zeros(4096, np.uint8)
    for k in range(100):                          # one array set again and again: the last wins
        d.set(np.full(4096, k, np.uint8))
    for a, want in zip(arrays, wants):
        np.testing.assert_array_equal(a.get(), want)
    np.testing.assert_array_equal(d.get(), np.full(4096, 99, np.uint8))


@pytest.mark.gpu
def test_a_small_copy_to_the_device_waits_for_the_work_queued_before_it():
    # Only the copy itself may be in flight when the call returns, as after the driver's own
    # copy: a kernel still running before it is over by then, and its writes come first.
    warm_ring()
    f = kiln.SourceModule(SPIN).get_function("spin_then_fill")
    cycles = np.int64(60_000_000)  # about 30 ms
    d = kiln.zeros(4096, np.uint8)
    before = kiln.Event()
    f(d, np.uint64(4096), cycles, np.uint8(5), block=(256, 1, 1), grid=(1, 1))
    before.record()
    d.set(np.full(4096, 6, np.uint8))
    assert before.query(), "set() returned before the kernel queued ahead of it was over"
    np.testing.assert_array_equal(d.get(), np.full(4096, 6, np.uint8))


@pytest.mark.gpu
def test_a_kernel_after_a_small_copy_sees_its_bytes_on_a_stream_that_waits_for_it(mod):
    # The copy is queued on the legacy default stream, as the driver's own is: a launch there,
    # or on a blocking kiln.Stream, runs after it.
    warm_ring()
    f = mod.get_function("add_one")
    d = kiln.zeros(8192, np.uint8)
    s = kiln.Stream()
    for k in range(20):
        d.set(np.full(8192, k, np.uint8))
        f(d, np.uint64(8192), **LAUNCH, stream=s if k % 2 else None)
        s.synchronize()
        np.testing.assert_array_equal(d.get(), np.full(8192, k + 1, np.uint8))


@pytest.mark.gpu
def test_a_small_copy_into_an_array_of_a_non_blocking_stream_is_right_after_its_free(mod):
    # The array's memory is the pool's on its own stream: the copy on the legacy stream is
    # noted as a use there, so the memory goes back to the pool only after it.
    warm_ring()
    f = mod.get_function("add_one")
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    for k in range(30):
        d = kiln.zeros(4096, np.uint8, stream=s)
        s.synchronize()
        d.set(np.full(4096, k, np.uint8))
        del d                                     # freed on s, after the copy
        e = kiln.zeros(4096, np.uint8, stream=s)  # may get the block back
        f(e, np.uint64(4096), **LAUNCH, stream=s)
        s.synchronize()
        np.testing.assert_array_equal(e.get(), np.ones(4096, np.uint8))


@pytest.mark.gpu
def test_small_copies_to_the_device_from_many_threads():
    warm_ring()

    def worker(k):
        for r in range(50):
            h = sample(np.uint8, 1 + 131 * k + r)
            want = h.copy()
            d = kiln.to_device(h)
            h[...] = 0
            if not np.array_equal(d.get(), want):
                return f"round {r}: values differ"

    errors = run_in_threads(worker, 8)
    assert not errors, errors


@pytest.mark.gpu
def test_small_copies_to_the_host_from_many_threads():
    def worker(k):
        for r in range(50):
            h = sample(np.float32, 1 + 37 * k + r)
            d = kiln.to_device(h)
            if not np.array_equal(d.get(), h):
                return f"round {r}: values differ"

    errors = run_in_threads(worker, 8)
    assert not errors, errors


@pytest.mark.gpu
def test_concurrent_threads_each_get_their_own_bytes():
    n = big_nbytes()

    def worker(k):
        for r in range(6):
            h = sample(np.uint8, n + 977 * k + r)
            back = np.zeros_like(h)
            kiln.to_device(h).get(out=back)
            if not np.array_equal(back, h):
                return f"round {r}: bytes differ"

    errors = run_in_threads(worker, 8)
    assert not errors, errors


@pytest.mark.gpu
def test_chunk_boundaries_with_one_page_chunks():
    """A page per chunk and four threads: odd sizes, every dtype, both directions."""
    run_child("""
        import numpy as np
        import kiln
        DTYPES = [np.bool_, np.int8, np.uint16, np.int32, np.float16, np.float32, np.float64,
                  np.complex64, np.complex128]
        rng = np.random.default_rng(5)
        n_copies = 0
        for n in (1, 2, 4095, 4096, 4097, 8191, 8193, 3 * 4096 + 1, 65521, 1000003):
            raw = rng.integers(0, 256, n + 16, dtype=np.uint8)
            for off in (0, 1, 3):
                h = raw[off:off + n]
                back = np.zeros(n + 16, np.uint8)[3 - off:3 - off + n]
                kiln.to_device(h).get(out=back)
                assert np.array_equal(back, h), (n, off)
                n_copies += 2
        for dtype in DTYPES:
            h = (rng.integers(0, 100, 30011) * 3).astype(dtype)
            assert np.array_equal(kiln.to_device(h).get(), h), dtype
            n_copies += 2
        assert kiln.staging_info()["copies"] == n_copies, kiln.staging_info()
        print("ok")
    """, {"KILN_STAGING_MIN": "0", "KILN_STAGING_CHUNK": "4096", "KILN_STAGING_THREADS": "4"})


@pytest.mark.gpu
def test_a_failed_kernel_makes_the_copy_raise_not_hang():
    out = run_child("""
        import numpy as np
        import kiln
        n = 64 << 20
        h = np.ones(n, np.uint8)
        d = kiln.to_device(h)
        m = kiln.SourceModule('extern "C" __global__ void poke(int *p) { p[threadIdx.x] = 1; }')
        m.get_function("poke")(np.uint64(16), block=(32, 1, 1), grid=(1, 1))
        for what, call in (("get", lambda: d.get(out=h)), ("to_device", lambda: kiln.to_device(h))):
            try:
                call()
            except kiln.CudaError as e:
                assert "ILLEGAL_ADDRESS" in str(e), e
                print(what, "raised")
            else:
                raise SystemExit(what + " did not raise")
    """, {}, timeout=60)
    assert out.split("\n")[:2] == ["get raised", "to_device raised"]


# ---- Large arrays copied again and again are page-locked in place --------------------------------

PIN = 32 << 20  # above the 16 MiB from which a reused array is page-locked
PIN_MIN = 16 << 20


def pinned():
    info = kiln.staging_info()
    return info["pinned_buffers"], info["pinned_bytes"]


@pytest.mark.gpu
def test_an_array_copied_twice_is_page_locked_until_it_is_collected():
    import gc
    base = pinned()
    h = sample(np.uint8, PIN)
    d = kiln.to_device(h)                             # seen once: staged
    assert pinned() == base
    staged = copies()
    back = np.zeros(PIN, np.uint8)
    d.get(out=back)                                   # back seen once
    h[:7] = 200
    d.set(h)                                          # h again: page-locked, then copied
    assert pinned()[0] == base[0] + 1 and pinned()[1] >= base[1] + PIN
    assert copies() == staged + 1                     # only back's copy was staged
    d.get(out=back)                                   # back again: page-locked too
    np.testing.assert_array_equal(back, h)
    assert pinned()[0] == base[0] + 2
    for _ in range(3):                                # each copy takes the bytes of its call
        h[:1000] += np.uint8(1)
        d.set(h)
        d.get(out=back)
        np.testing.assert_array_equal(back, h)
    del h, back
    gc.collect()
    assert pinned() == base                           # the registrations ended with the arrays


@pytest.mark.gpu
def test_in_out_of_a_reused_array_and_of_a_view_are_page_locked_and_right(mod):
    import gc
    base = pinned()
    whole = sample(np.uint8, PIN + 8192)
    src = whole[4096:4096 + PIN]                     # a view: its owner is page-locked whole
    out = np.zeros(PIN, np.uint8)
    f = mod.get_function("copy_bytes")
    for i in range(3):
        src[:5] = i
        f(kiln.Out(out), kiln.In(src), np.uint64(PIN), **LAUNCH)
        np.testing.assert_array_equal(out, src)
    assert pinned()[0] == base[0] + 2
    assert pinned()[1] >= base[1] + 2 * PIN + 8192
    del src, out
    gc.collect()
    assert pinned()[0] == base[0] + 1                 # whole still holds its memory
    del whole
    gc.collect()
    assert pinned() == base


@pytest.mark.gpu
def test_a_small_view_of_a_much_larger_array_is_not_page_locked():
    # Registering the whole array would cost about a copy of all of it, which copies of a
    # quarter of it or less would not repay.
    base = pinned()
    whole = sample(np.uint8, 5 * PIN)
    view = whole[PIN:2 * PIN]
    d = kiln.empty(PIN, np.uint8)
    for i in range(3):
        view[:4] = i
        d.set(view)
        np.testing.assert_array_equal(d.get(), view)
    assert pinned() == base


@pytest.mark.gpu
def test_a_page_locked_array_cannot_move_its_memory_from_under_the_registration():
    # NumPy refuses to resize an array that is weakly referenced, as page-locked owners are:
    # their registered memory can never be freed while registered.
    base = pinned()
    h = sample(np.uint8, PIN)
    d = kiln.to_device(h)
    d.set(h)                                          # the second copy: page-locked
    assert pinned()[0] == base[0] + 1
    with pytest.raises(ValueError):
        h.resize(2 * PIN, refcheck=False)
    h[:3] = 9
    d.set(h)
    np.testing.assert_array_equal(d.get(), h)


@pytest.mark.gpu
def test_queued_copies_are_not_page_locked(mod):
    # A copy queued on a kiln.Stream from page-locked memory would read the array after the call
    # returned, where a staged copy has taken its bytes already.
    base = pinned()
    s = kiln.Stream()
    h = sample(np.uint8, PIN)
    want = h.copy()
    d = kiln.empty(PIN, np.uint8)
    for _ in range(3):
        d.set(h, stream=s, async_=True)
    h[...] = 0
    s.synchronize()
    np.testing.assert_array_equal(d.get(), want)
    assert pinned() == base


@pytest.mark.gpu
def test_copies_on_a_stream_done_on_return_are_page_locked_as_others():
    # set(stream=s) without async_ returns with the array read, so reusing its memory page-locked
    # is as safe as on the null stream.
    import gc
    base = pinned()
    s = kiln.Stream()
    h = sample(np.uint8, PIN)
    d = kiln.empty(PIN, np.uint8)
    for k in range(3):
        h[:3] = k
        d.set(h, stream=s)
    h[...] = 0
    np.testing.assert_array_equal(d.get()[:3], [2, 2, 2])
    assert pinned()[0] == base[0] + 1
    del h
    gc.collect()
    assert pinned() == base


@pytest.mark.gpu
def test_page_locking_reused_arrays_can_be_turned_off():
    out = run_child("""
import json
import numpy as np
import kiln
h = np.ones(32 << 20, np.uint8)
d = kiln.to_device(h)
for _ in range(3):
    d.set(h)
    d.get(out=h)
print(json.dumps(kiln.staging_info()["pinned_buffers"]))
""", {"KILN_PIN_REUSED": "0"})
    assert json.loads(out.strip().splitlines()[-1]) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("n", [PIN_MIN - 1, PIN_MIN])
def test_arrays_from_16_mib_copied_again_are_page_locked_and_smaller_ones_are_not(n):
    import gc
    base = pinned()
    h = sample(np.uint8, n)
    back = np.zeros(n, np.uint8)
    d = kiln.to_device(h)
    for k in range(3):
        h[:3] = k
        d.set(h)
        d.get(out=back)
        np.testing.assert_array_equal(back, h)
        m = kiln.mem_alloc(n)
        kiln.memcpy_htod(m, h)
        back[...] = 0
        kiln.memcpy_dtoh(back, m)
        np.testing.assert_array_equal(back, h)
    locked = 2 if n >= PIN_MIN else 0             # h and back
    assert pinned()[0] == base[0] + locked
    del h, back
    gc.collect()
    assert pinned() == base


@pytest.mark.gpu
def test_small_arrays_copied_again_and_again_can_still_be_registered_by_the_program():
    # Arrays of the heap share their first and last pages with their neighbours; kiln locks
    # none of them, so the program's own registration of any of them is never refused.
    import kiln.driver as drv
    hs = [sample(np.uint8, (64 << 10) + 8 * k) for k in range(6)]
    ds = [kiln.to_device(h) for h in hs]
    for r in range(3):
        for h, d in zip(hs, ds):
            h[:2] = r
            d.set(h)
            back = np.empty_like(h)
            d.get(out=back)
            np.testing.assert_array_equal(back, h)
    for h in hs:
        reg = drv.register_host_memory(h)
        reg.base.unregister()


@pytest.mark.gpu
def test_an_array_kiln_page_locked_can_still_be_registered_by_the_program():
    # PyCUDA's register_host_memory of an array its program copied before: kiln locked it
    # already, and the program's registration with no flags is that one, where the driver would
    # refuse a second. It holds the array, so the memory stays locked while it lives.
    import gc
    import kiln.driver as drv
    base = pinned()
    h = sample(np.uint8, PIN)
    d = kiln.to_device(h)
    d.set(h)                                           # the second copy locks it
    assert pinned()[0] == base[0] + 1
    reg = drv.register_host_memory(h)
    half = drv.register_host_memory(h[PIN // 2:])      # a part of it too
    reg[:3] = 9
    d.set(reg)
    np.testing.assert_array_equal(d.get(), h)
    assert reg.base.base is h and half.base.base is not None
    reg.base.unregister()                              # kiln's lock is kiln's to end
    half.base.unregister()
    reg[:3] = 4
    d.set(h)
    np.testing.assert_array_equal(d.get(), h)
    assert pinned()[0] == base[0] + 1
    del reg, half, h
    gc.collect()
    assert pinned() == base


BUSY = np.int64(100_000_000)  # about 50 ms of a GPU's clock: a stream still busy at the copy


def fill_after_a_while(d, value, stream=None, cycles=BUSY):
    """Queues a kernel that waits cycles, then fills d's PIN bytes with value."""
    f = kiln.SourceModule(SPIN).get_function("spin_then_fill")
    f(d, np.uint64(PIN), cycles, np.uint8(value), block=(1024, 1, 1), grid=(1, 1), stream=stream)


def locked_array(n=PIN):
    """A pageable array of n bytes that kiln has page-locked in place, and its device copy."""
    base = pinned()
    h = sample(np.uint8, n)
    d = kiln.to_device(h)
    d.get(out=h)                                       # the second copy locks it
    assert pinned()[0] == base[0] + 1
    return h, d


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["memcpy_dtoh_async", "get_async", "Memcpy2D"])
def test_a_queued_copy_into_an_array_kiln_page_locked_is_done_when_it_returns(how):
    # The program gave a pageable array, so PyCUDA's queued copy into it has finished when the
    # call returns (the driver's rule for pageable memory), and programs read it at once; from
    # memory page-locked in place the copy would still be behind the stream's work.
    import kiln.driver as drv
    h, d = locked_array()
    s = kiln.Stream()
    fill_after_a_while(d, 7, s)
    if how == "memcpy_dtoh_async":
        drv.memcpy_dtoh_async(h, d.gpudata, s)
    elif how == "get_async":
        assert d.get_async(stream=s, ary=h) is not None
    else:
        c = drv.Memcpy2D()
        c.set_src_device(d.gpudata)
        c.set_dst_host(h)
        c.width_in_bytes = c.src_pitch = c.dst_pitch = 4096
        c.height = PIN // 4096
        c(s)
    assert s.is_done()
    assert (h == 7).all()


@pytest.mark.gpu
@pytest.mark.parametrize("how", ["memcpy_htod_async", "set_async"])
def test_a_queued_copy_from_an_array_kiln_page_locked_has_read_it_when_it_returns(how):
    # As the driver's copy from pageable memory: the program may write its array again as soon
    # as the call returns.
    import kiln.driver as drv
    h, d = locked_array()
    want = h.copy()
    s = kiln.Stream()
    fill_after_a_while(d, 0, s)
    if how == "memcpy_htod_async":
        drv.memcpy_htod_async(d.gpudata, h, s)
    else:
        d.set_async(h, stream=s)
    h[...] = 1
    s.synchronize()
    np.testing.assert_array_equal(d.get(), want)


@pytest.mark.gpu
def test_an_array_kiln_page_locked_can_be_registered_mapped_by_the_program():
    # register_host_memory(ary, DEVICEMAP) of an array kiln locked: the driver would refuse a
    # second registration, so kiln's own, portable and mapped, serves it.
    import kiln.driver as drv
    h, d = locked_array()
    flags = drv.mem_host_register_flags.DEVICEMAP | drv.mem_host_register_flags.PORTABLE
    reg = drv.register_host_memory(h, flags=flags)
    ptr = reg.base.get_device_pointer()
    fill_after_a_while(np.uintp(ptr), 5, cycles=np.int64(0))
    kiln.Context.synchronize()
    assert (h == 5).all() and (reg == 5).all()
    reg.base.unregister()
    assert pinned()[0] >= 1
