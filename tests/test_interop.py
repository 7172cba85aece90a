"""Streams and arrays of other libraries: stream= takes the same things everywhere, and the
CUDA array interface is read one way, ordering kiln's work after the producer's stream. What
needs no GPU (reading arguments before the device is touched) runs everywhere."""
import gc
import weakref

import numpy as np
import pytest

import kiln


def _have_gpu():
    try:
        return kiln.Device.count() > 0
    except kiln.NoDeviceError:
        return False


# A compile arch that works with or without a GPU: the device's own where there is one.
ARCH = None if _have_gpu() else "sm_90"

SRC = r"""
extern "C" __global__ void copy(const float *src, float *dst, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[i]; }
"""


@pytest.fixture(scope="module")
def copy():
    return kiln.SourceModule(SRC, arch=ARCH).get_function("copy")


class Named:
    """Another library's stream object, as kiln sees one: it names its handle."""

    def __init__(self, attr, handle):
        setattr(self, attr, handle)


class Protocol:
    """cuda.core's spelling: __cuda_stream__() gives (version, handle)."""

    def __init__(self, handle):
        self.handle_value = handle

    def __cuda_stream__(self):
        return (0, self.handle_value)


# ---- stream= : no GPU needed ---------------------------------------------------------------------

STREAMS = [None, 0, 7, 2**64 - 1, Named("handle", 7), Named("cuda_stream", 7), Named("ptr", 7),
           Protocol(7)]
STREAM_IDS = ["None", "0", "int", "max", "handle", "cuda_stream", "ptr", "__cuda_stream__"]


@pytest.mark.parametrize("stream", STREAMS, ids=STREAM_IDS)
def test_array_calls_read_stream_as_a_launch_does(copy, stream):
    # Empty arrays touch no GPU: what is seen here is the reading of stream= alone.
    a = kiln.empty(0, np.float32, stream=stream)
    z = kiln.zeros((0, 3), stream=stream)
    h = kiln.to_device(np.zeros(0, np.float32), stream=stream)
    assert a.get(stream=stream).shape == (0,) and z.get(stream=stream).shape == (0, 3)
    h.copy_to(np.zeros(0, np.float32), stream=stream)
    h.copy_from(np.zeros(0, np.float32), stream=stream)
    # A launch reads it the same way (a zero grid stops it before the GPU).
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(0, 0, 0, block=1, grid=0, stream=stream)


@pytest.mark.parametrize("bad", ["s", 1.5, object(), Named("cuda_stream", "7"), Protocol(None)],
                         ids=["str", "float", "object", "named-non-int", "protocol-non-int"])
def test_every_stream_argument_refuses_the_same_things(copy, bad):
    phrase = r"stream must be None, an int CUstream handle, or a stream object \(a kiln.Stream"
    a = kiln.empty(0, np.float32)
    calls = [
        lambda: kiln.empty(0, stream=bad),
        lambda: kiln.zeros(0, stream=bad),
        lambda: kiln.to_device(np.zeros(0), stream=bad),
        lambda: a.get(stream=bad),
        lambda: a.copy_to(np.zeros(0, np.float32), stream=bad),
        lambda: a.copy_from(np.zeros(0, np.float32), stream=bad),
        lambda: a.__dlpack__(stream=bad),
        lambda: kiln.Stream.from_handle(bad),
        lambda: copy(0, 0, 0, block=1, stream=bad),
    ]
    for call in calls:
        with pytest.raises(TypeError, match=phrase):
            call()


def test_a_negative_handle_is_refused():
    with pytest.raises(OverflowError):
        kiln.empty(0, stream=-5)


def test_dlpack_stream_minus_one_asks_for_no_synchronization():
    capsule = kiln.empty(0, np.float32).__dlpack__(stream=-1)
    assert type(capsule).__name__ == "PyCapsule"


def test_from_handle_takes_any_stream():
    assert kiln.Stream.from_handle(Protocol(7)).handle == 7
    assert kiln.Stream.from_handle(Named("ptr", 9)).handle == 9


# ---- stream= on a GPU ------------------------------------------------------------------------------

@pytest.mark.gpu
def test_copies_on_a_foreign_stream_are_done_when_the_call_returns():
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    host = np.arange(1 << 20, dtype=np.float32)
    for stream in (s.handle, Named("cuda_stream", s.handle), Protocol(s.handle)):
        a = kiln.to_device(host, stream=stream)
        out = np.zeros_like(host)
        a.get(out=out, stream=stream)
        np.testing.assert_array_equal(out, host)  # no synchronize: the call waited
        b = kiln.zeros(host.shape, np.float32, stream=stream)
        b.copy_from(host * 2, stream=stream)
        np.testing.assert_array_equal(b.get(stream=stream), host * 2)
        kiln.Event().record(stream=stream).synchronize()


@pytest.mark.gpu
def test_an_array_keeps_the_stream_object_it_was_made_on():
    s = kiln.Stream()
    named = Named("handle", s.handle)
    alive = weakref.ref(named)
    a = kiln.empty(1000, np.float32, stream=named)
    del named
    gc.collect()
    assert alive() is not None, "the array's memory is freed on that stream: it must live"
    del a
    gc.collect()
    assert alive() is None


@pytest.mark.gpu
def test_a_torch_stream_in_array_calls():
    torch = pytest.importorskip("torch")
    host = np.arange(4096, dtype=np.float32)
    ts = torch.cuda.Stream()
    a = kiln.to_device(host, stream=ts)
    np.testing.assert_array_equal(a.get(stream=ts), host)
    b = kiln.empty_like(a, stream=ts)
    b.copy_from(a, stream=ts)
    ts.synchronize()
    np.testing.assert_array_equal(b.get(), host)


@pytest.mark.gpu
def test_a_cupy_stream_in_array_calls():
    cp = pytest.importorskip("cupy")
    host = np.arange(4096, dtype=np.float32)
    cs = cp.cuda.Stream(non_blocking=True)
    a = kiln.to_device(host, stream=cs)
    b = kiln.zeros(host.shape, np.float32, stream=cs)
    b.copy_from(a, stream=cs)
    cs.synchronize()
    np.testing.assert_array_equal(b.get(), host)
