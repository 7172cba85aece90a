"""Graphs: `with stream.capture() as g:` records kernel calls, copies and memsets; g.launch()
replays them; g.update() replaces arguments without instantiating again; a capture joins one
PyTorch began. The checks at the top need no device; the rest are marked gpu."""
import gc

import numpy as np
import pytest

import kiln
import kiln.driver as drv
from helpers import ARCH

SRC = r"""
extern "C" __global__ void add(float *x, float v, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += v; }
// Order matters: x = x * a + b.
extern "C" __global__ void axpb(float *x, float a, float b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * a + b; }
"""

N = 1000


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(SRC, arch=ARCH)


# ---- Checks that need no device -------------------------------------------------------------


def test_the_legacy_default_stream_cannot_be_captured():
    with pytest.raises(ValueError, match="legacy default stream cannot be captured"):
        kiln.Graph.capture(None)
    with pytest.raises(TypeError, match="cannot create"):
        kiln.Graph()


def test_a_graph_not_captured_cannot_launch_or_update():
    # Another library's stream handle (an aligned, readable address stands in for one): not
    # touched until `with`.
    stand_in = bytearray(64)
    g = kiln.Graph.capture(id(stand_in))
    assert len(g) == 0 and g.kernel_count == 0 and not g.joined
    with pytest.raises(RuntimeError, match="has not been captured"):
        g.launch()
    with pytest.raises(RuntimeError, match="has not been captured"):
        g.update(0, 1, 2)
    assert "not captured" in repr(g)


# ---- On the GPU -----------------------------------------------------------------------------


def _sequence(i):
    """The arguments of call i of the recorded sequence: a and b vary, so order matters."""
    return np.float32(1 + (i % 3) * 0.5), np.float32(i % 5 - 2)


@pytest.mark.gpu
def test_captured_sequence_of_100_calls_matches_the_calls_one_by_one(mod):
    f = mod.get_function("axpb")
    x0 = np.linspace(-1, 1, N).astype(np.float32)
    s = kiln.Stream()
    one_by_one = kiln.to_device(x0)
    for i in range(100):
        f(one_by_one, *_sequence(i), np.int32(N), block=256, grid=4, stream=s)
    s.synchronize()
    want = one_by_one.get()

    x = kiln.to_device(x0)
    with s.capture() as g:
        for i in range(100):
            f(x, *_sequence(i), np.int32(N), block=256, grid=4, stream=s)
    assert g.kernel_count == 100 and len(g) == 100
    assert g.kernels[7][0] is f and g.kernels[7][1][0] is x
    s.synchronize()
    assert (x.get() == x0).all()  # recorded, not run
    g.launch()
    s.synchronize()
    assert (x.get() == want).all()
    # A replay on another stream, twice: the same calls again.
    x.set(x0)
    other = kiln.Stream()
    g.launch(stream=other)
    other.synchronize()
    assert (x.get() == want).all()


@pytest.mark.gpu
def test_update_changes_the_result_as_expected(mod):
    f = mod.get_function("add")
    s = kiln.Stream()
    x = kiln.zeros(N, np.float32)
    y = kiln.zeros(N, np.float32)
    f(x, 0.0, N, block=256, grid=4, stream=s)  # loads the module before the capture
    with kiln.Graph.capture(s) as g:
        for i in range(10):
            f(x, float(i), N, block=256, grid=4, stream=s)
    g.launch()
    s.synchronize()
    assert (x.get() == 45).all()
    g.update(3, x, 1000.0, N)  # kernel 3 adds 1000 instead of 3
    g.launch()
    s.synchronize()
    assert (x.get() == 45 + 45 - 3 + 1000).all()
    g.update(-1, y, 7.0, N)  # the last kernel now adds 7 to y instead of 9 to x
    g.launch()
    s.synchronize()
    assert (x.get() == 45 + 45 - 3 + 1000 + 45 - 3 + 1000 - 9).all()
    assert (y.get() == 7).all()
    assert g.kernels[9][1][0] is y
    # Partial n: only the first 10 elements of y.
    g.update(9, y, 1.0, 10)
    g.launch()
    s.synchronize()
    assert y.get()[:10].tolist() == [8.0] * 10 and (y.get()[10:] == 7).all()
    with pytest.raises(TypeError, match="takes 3 arguments"):
        g.update(0, x, 1.0)
    with pytest.raises(IndexError, match="has 10 kernels"):
        g.update(10, x, 1.0, N)
    with pytest.raises(ValueError, match="In/Out/InOut cannot be a graph's arguments"):
        g.update(0, kiln.In(np.zeros(N, np.float32)), 1.0, N)


@pytest.mark.gpu
def test_update_from_a_capture_of_the_same_shape(mod):
    f = mod.get_function("add")
    s = kiln.Stream()
    x = kiln.zeros(N, np.float32)
    z = kiln.zeros(N, np.float32)
    f(x, 0.0, N, block=256, grid=4, stream=s)

    def record(array, step):
        with s.capture() as g:
            for i in range(20):
                f(array, float(step), N, block=256, grid=4, stream=s)
        return g

    g = record(x, 1)
    h = record(z, 2)
    g.update(h)  # cuGraphExecUpdate: g now adds 2 twenty times to z
    g.launch()
    s.synchronize()
    assert (x.get() == 0).all() and (z.get() == 40).all()
    assert g.kernels[0][1][0] is z
    g.update(0, x, 5.0, N)  # and one kernel can still be replaced after it
    g.launch()
    s.synchronize()
    assert (x.get() == 5).all() and (z.get() == 40 + 38).all()
    with s.capture() as shorter:
        f(x, 1.0, N, block=256, grid=4, stream=s)
    with pytest.raises(ValueError, match="not of one shape"):
        g.update(shorter)


@pytest.mark.gpu
def test_copies_and_memsets_are_recorded(mod):
    f = mod.get_function("add")
    s = kiln.Stream()
    x = kiln.zeros(N, np.float32)
    y = kiln.zeros(N, np.float32)
    h_in = kiln.pagelocked_empty(N, np.float32)
    h_out = kiln.pagelocked_empty(N, np.float32)
    h_in[:] = 3
    f(x, 0.0, N, block=256, grid=4, stream=s)
    s.synchronize()
    with s.capture() as g:
        drv.memset_d32_async(y.ptr, 0, N, stream=s)
        drv.memcpy_htod_async(x.ptr, h_in, stream=s)
        f(x, 1.0, N, block=256, grid=4, stream=s)
        drv.memcpy_dtod_async(y.ptr, x.ptr, 4 * N, stream=s)
        f(y, 10.0, N, block=256, grid=4, stream=s)
        drv.memcpy_dtoh_async(h_out, y.ptr, stream=s)
    assert g.kernel_count == 2
    g.launch()
    s.synchronize()
    assert (h_out == 14).all()
    h_in[:] = np.arange(N)  # a replay reads the page-locked memory anew
    g.launch()
    s.synchronize()
    assert (h_out == np.arange(N) + 11).all()


@pytest.mark.gpu
def test_in_out_pageable_copies_and_timing_inside_a_capture_raise(mod):
    f = mod.get_function("add")
    s = kiln.Stream()
    host = np.zeros(N, np.float32)
    f(kiln.InOut(host), 1.0, N, block=256, grid=4, stream=s)  # loads the module
    s.synchronize()
    with pytest.raises(ValueError, match="cannot be recorded in a stream capture"):
        with s.capture() as g:
            f(kiln.InOut(host), 1.0, N, block=256, grid=4, stream=s)
    with pytest.raises(RuntimeError, match="capture failed"):
        g.launch()
    x = kiln.zeros(N, np.float32)
    with pytest.raises(ValueError, match="pageable host memory"):
        with s.capture():
            drv.memcpy_htod_async(x.ptr, host, stream=s)
    with pytest.raises(ValueError, match="timed launch cannot be recorded"):
        with s.capture():
            f(x, 1.0, N, block=256, grid=4, stream=s, time_kernel=True)
    # The stream works as before.
    f(kiln.InOut(host), 1.0, N, block=256, grid=4, stream=s)
    s.synchronize()
    assert (host == 2).all()


@pytest.mark.gpu
def test_a_graph_keeps_its_arrays_and_functions_alive(mod):
    s = kiln.Stream()
    f = mod.get_function("add")
    x = kiln.zeros(N, np.float32)
    f(x, 0.0, N, block=256, grid=4, stream=s)
    with s.capture() as g:
        f(x, 2.5, N, block=256, grid=4, stream=s)
    kept = g.kernels[0][1][0]
    del f, x
    gc.collect()
    for _ in range(4):
        g.launch()
    s.synchronize()
    assert (kept.get() == 10).all()


def _let_go_during_a_capture(mod, flags, make_victims):
    """Captures two adds on a stream with `flags` while what make_victims(s) made is dropped
    in between, then replays: the capture must hold and x must be 2 everywhere."""
    f = mod.get_function("add")
    s = kiln.Stream(flags) if flags else kiln.Stream()
    x = kiln.zeros(N, np.float32)
    kiln.synchronize()
    victims = make_victims(s, f)
    with s.capture() as g:
        f(x, 1.0, N, block=256, grid=4, stream=s)
        victims.clear()
        gc.collect()
        f(x, 1.0, N, block=256, grid=4, stream=s)
    assert g.kernel_count == 2
    g.launch()
    s.synchronize()
    assert (x.get() == 2).all()


def _array_used_on_the_captured_stream(s, f):
    # Its home is the legacy stream and it was used on s: its free waits for that use on the
    # legacy stream, which a blocking stream's capture forbids.
    a = kiln.zeros(N, np.float32)
    f(a, 1.0, N, block=256, grid=4, stream=s)
    return [a]


def _replayed_graph(s, f):
    t = kiln.Stream()
    y = kiln.zeros(N, np.float32)
    with t.capture() as h:
        f(y, 1.0, N, block=256, grid=4, stream=t)
    h.launch()
    return [h, y, t]


def _mixed(s, f):
    return [kiln.zeros(N, np.float32), drv.mem_alloc(4096), *_array_used_on_the_captured_stream(s, f),
            *_replayed_graph(s, f)]


@pytest.mark.gpu
@pytest.mark.parametrize("flags", [0, kiln.STREAM_NON_BLOCKING], ids=["blocking", "non-blocking"])
@pytest.mark.parametrize("make_victims", [_array_used_on_the_captured_stream, _replayed_graph,
                                          _mixed], ids=["array", "graph", "mixed"])
def test_arrays_and_graphs_let_go_during_a_capture_do_not_break_it(mod, flags, make_victims):
    _let_go_during_a_capture(mod, flags, make_victims)


@pytest.mark.gpu
def test_memory_let_go_during_a_capture_is_freed_when_it_ends(mod):
    f = mod.get_function("add")
    s = kiln.Stream()
    x = kiln.zeros(N, np.float32)
    big = 64 << 20
    a = kiln.zeros(big // 4, np.float32)
    f(a, 1.0, 16, block=16, grid=1, stream=s)
    kiln.synchronize()
    used = kiln.pool_stats()["used"]
    with s.capture() as g:
        del a
        gc.collect()
        f(x, 1.0, N, block=256, grid=4, stream=s)
        assert kiln.pool_stats()["used"] >= used  # held until the capture ends
    s.synchronize()
    kiln.synchronize()
    assert kiln.pool_stats()["used"] <= used - big
    g.launch()
    s.synchronize()
    assert (x.get() == 1).all()


@pytest.mark.gpu
def test_one_capture_at_a_time_and_once_each(mod):
    s, t = kiln.Stream(), kiln.Stream()
    with s.capture() as g:
        with pytest.raises(RuntimeError, match="another kiln capture is open"):
            with t.capture():
                pass
    with pytest.raises(RuntimeError, match="records once"):
        with g:
            pass
    assert g.kernel_count == 0
    g.launch()  # an empty graph replays as nothing
    s.synchronize()


@pytest.mark.gpu
def test_capture_inside_torch_cuda_graph_replays(mod):
    torch = pytest.importorskip("torch")
    f = mod.get_function("add")
    x = kiln.zeros(N, np.float32)
    f(x, 0.0, N, block=256, grid=4)  # loads the module before any capture
    kiln.synchronize()
    tg = torch.cuda.CUDAGraph()
    side = torch.cuda.Stream()
    with torch.cuda.graph(tg, stream=side):
        t = torch.cuda.current_stream()
        assert kiln.Graph.capture(t).stream is t
        with kiln.Graph.capture(t) as kg:
            f(x, 1.0, N, block=256, grid=4, stream=t)
            f(x, 2.0, N, block=256, grid=4, stream=t)
        # A plain kiln call inside torch's capture is recorded there too.
        f(x, 4.0, N, block=256, grid=4, stream=t)
    assert kg.joined and kg.kernel_count == 2
    with pytest.raises(ValueError, match="another library's capture"):
        kg.launch()
    torch.cuda.synchronize()
    assert (x.get() == 0).all()  # recorded, not run
    tg.replay()
    tg.replay()
    torch.cuda.synchronize()
    assert (x.get() == 14).all()
