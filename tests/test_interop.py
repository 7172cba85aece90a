"""Streams and arrays of other libraries: stream= takes the same things everywhere, and the
CUDA array interface is read one way, ordering kiln's work after the producer's stream. What
needs no GPU (reading arguments before the device is touched) runs everywhere."""
import gc
import weakref

import numpy as np
import pytest

import kiln
import kiln.driver as drv


def _have_gpu():
    try:
        return kiln.Device.count() > 0
    except kiln.NoDeviceError:
        return False


HAVE_GPU = _have_gpu()
# A compile arch that works with or without a GPU: the device's own where there is one.
ARCH = None if HAVE_GPU else "sm_90"

SRC = r"""
extern "C" __global__ void copy(const float *src, float *dst, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dst[i] = src[i]; }
extern "C" __global__ void spin(long long cycles)
{ long long t = clock64(); while (clock64() - t < cycles) {} }
"""

# About a quarter of a second of a GPU's clock: a producer that is still writing when the
# consumer's work is queued.
SLOW = 500_000_000


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(SRC, arch=ARCH)


@pytest.fixture(scope="module")
def copy(mod):
    return mod.get_function("copy")


@pytest.fixture(scope="module")
def spin(mod):
    return mod.get_function("spin")


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

# Handles of another library's streams, as kiln sees them: aligned addresses of readable host
# memory (kiln refuses any other handle before the driver sees it). These tests never let one
# reach the driver, which would take them for streams.
_FAKE_STREAMS = np.zeros(16, np.uint64)
FAKE = _FAKE_STREAMS.ctypes.data
FAKE2 = FAKE + 64

STREAMS = [None, 0, FAKE, Named("handle", FAKE), Named("cuda_stream", FAKE), Named("ptr", FAKE),
           Protocol(FAKE)]
STREAM_IDS = ["None", "0", "int", "handle", "cuda_stream", "ptr", "__cuda_stream__"]


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
    assert kiln.Stream.from_handle(Protocol(FAKE)).handle == FAKE
    assert kiln.Stream.from_handle(Named("ptr", FAKE2)).handle == FAKE2


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
def test_an_array_made_on_a_kiln_streams_handle_keeps_that_stream():
    """Memory ordered on a kiln.Stream named by its handle (an int, or another object naming
    it) is freed on that stream: the array keeps the kiln.Stream, so dropping the Stream first
    cannot leave a free queued on a destroyed stream (a crash in the driver)."""
    for name in (lambda s: s.handle, lambda s: Named("cuda_stream", s.handle),
                 lambda s: Protocol(s.handle)):
        s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
        alive = weakref.ref(s)
        a = kiln.to_device(np.arange(1000, dtype=np.float32), stream=name(s))
        b = kiln.empty(10, np.int8, stream=name(s))
        del s
        gc.collect()
        assert alive() is not None
        np.testing.assert_array_equal(a.get(), np.arange(1000, dtype=np.float32))
        del a, b
        gc.collect()
        assert alive() is None


@pytest.mark.gpu
def test_an_array_keeps_the_stream_object_it_was_made_on():
    """Another library's stream object (here a torch stream, behind an object naming its
    handle) lives as long as memory ordered on it."""
    torch = pytest.importorskip("torch")
    s = torch.cuda.Stream()
    named = Named("handle", s.cuda_stream)
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


# ---- __cuda_array_interface__ : no GPU needed -----------------------------------------------------

class Producer:
    """Another library's array, as kiln sees one: it offers the CUDA array interface."""

    def __init__(self, cai):
        self.cai = cai

    @property
    def __cuda_array_interface__(self):
        return self.cai


def interface(**changes):
    cai = {"shape": (4,), "typestr": "<f4", "data": (2**40 + 256, False), "version": 3}
    cai.update(changes)
    return {k: v for k, v in cai.items() if v is not ...}


BAD_INTERFACES = [
    (["not", "a dict"], TypeError, "must be a dict, not list"),
    (interface(data=...), TypeError, "has no valid 'data'"),
    (interface(data=("0x10", False)), TypeError, "has no valid 'data'"),
    (interface(data=(-8, False)), TypeError, "has no valid 'data'"),
    (interface(data=(2**64, False)), TypeError, "has no valid 'data'"),
    (interface(data=(256,)), TypeError, "has no valid 'data'"),
    (interface(stream="7"), TypeError, "'stream' of type str; it must be an int"),
    (interface(stream=0), ValueError, "'stream' 0; .*0 is disallowed"),
    (interface(stream=-1), ValueError, "'stream' -1"),
]
BAD_IDS = ["list", "no-data", "str-pointer", "negative-pointer", "huge-pointer", "short-data",
           "str-stream", "stream-0", "negative-stream"]


@pytest.mark.parametrize("cai, error, phrase", BAD_INTERFACES, ids=BAD_IDS)
def test_a_bad_interface_in_a_launch_names_the_argument_and_the_entry(copy, cai, error, phrase):
    with pytest.raises(error, match=r"argument 0 of copy \(a b64 parameter\): the "
                                    r"__cuda_array_interface__ of Producer .*" + phrase):
        copy(Producer(cai), 0, 0, block=1, grid=0)


@pytest.mark.parametrize("cai, error, phrase", BAD_INTERFACES + [
    (interface(typestr=...), TypeError, "has no 'typestr'"),
    (interface(shape=...), TypeError, "has no 'shape'"),
    (interface(typestr="<q9"), TypeError, "'typestr' '<q9', which is no numpy dtype"),
    (interface(shape="four"), TypeError, "'shape' 'four'; it must be a tuple of ints"),
    (interface(strides=(4, 4)), TypeError, "'strides' \\(4, 4\\); it must be None or a tuple of 1"),
    (interface(strides="x"), TypeError, "'strides' 'x'"),
    (interface(shape=(2, 2), strides=(4, 6)), ValueError, "stride 6 of axis 1 is no multiple "
                                                          "of the itemsize, 4"),
], ids=BAD_IDS + ["no-typestr", "no-shape", "bad-typestr", "bad-shape", "strides-count",
                  "str-strides", "odd-strides"])
def test_a_bad_interface_in_asarray_says_what_is_wrong(cai, error, phrase):
    with pytest.raises(error, match=phrase):
        kiln.asarray(Producer(cai))


class Fresh:
    """PyTorch's way: a new dict, with new objects in it, at every access."""

    def __init__(self):
        self.reads = 0

    @property
    def __cuda_array_interface__(self):
        self.reads += 1
        return {"shape": (2, 3), "typestr": "<i2", "data": (int("1099511627776") + 512, True),
                "strides": (6, 2), "version": 2}


def test_the_interface_is_read_once_and_copied(copy):
    f = Fresh()
    w = kiln.asarray(f)  # no stream named: no GPU work
    assert f.reads == 1
    assert w.ptr == 2**40 + 512 and w.shape == (2, 3) and w.dtype == np.int16
    assert w.__cuda_array_interface__["data"] == (2**40 + 512, False)
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(f, 0, 0, block=1, grid=0)
    assert f.reads == 2


@pytest.mark.parametrize("producer, launch", [(1, None), (1, 1), (FAKE, FAKE)],
                         ids=["legacy-as-1-and-None", "legacy-as-1", "same-handle"])
def test_a_launch_on_the_producer_stream_does_not_wait(copy, producer, launch):
    # No wait is queued, so nothing reaches the GPU before the zero grid is refused.
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(Producer(interface(stream=producer)), 0, 0, block=1, grid=0, stream=launch)


@pytest.mark.parametrize("no_stream", [..., None], ids=["absent", "None"])
def test_a_launch_without_a_producer_stream_does_not_wait(copy, no_stream):
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(Producer(interface(stream=no_stream)), 0, 0, block=1, grid=0, stream=FAKE)


def test_a_launch_on_another_stream_waits_for_the_producer(copy):
    if HAVE_GPU:  # the wait is queued, then the zero grid is refused
        producer, launch = kiln.Stream(), kiln.Stream()
        with pytest.raises(ValueError, match="grid.x is 0"):
            copy(Producer(interface(stream=producer.handle)), 0, 0, block=1, grid=0,
                 stream=launch)
    else:  # the wait is what needs the device
        with pytest.raises(kiln.NoDeviceError):
            copy(Producer(interface(stream=FAKE)), 0, 0, block=1, grid=0, stream=None)


def test_asarray_waits_for_the_producer_stream_it_names():
    if HAVE_GPU:
        producer = kiln.Stream()
        w = kiln.asarray(Producer(interface(stream=producer.handle)))
        assert w.ptr == 2**40 + 256
    else:  # synchronizing that stream is what needs the device
        with pytest.raises(kiln.NoDeviceError):
            kiln.asarray(Producer(interface(stream=FAKE)))


# ---- What a kernel argument must be: contiguous, and in device memory -----------------------------

@pytest.mark.parametrize("shape, strides", [
    ((4, 4), (4, 16)),   # a transpose
    ((4, 4), (32, 4)),   # every other row
    ((8,), (8,)),        # every other element
    ((2, 1, 3), (4, 100, 8)),
], ids=["transposed", "rows", "elements", "with-a-unit-axis"])
def test_a_strided_interface_in_a_launch_is_refused(copy, shape, strides):
    with pytest.raises(ValueError, match=r"argument 0 of copy \(a b64 parameter\): the Producer "
                                         r"is not contiguous .*x\.contiguous\(\).*"
                                         r"x\.data_ptr\(\)"):
        copy(Producer(interface(shape=shape, strides=strides)), 0, 0, block=1, grid=0)


@pytest.mark.parametrize("shape, strides", [
    ((4, 4), None), ((4, 4), (16, 4)), ((4, 1), (4, 999)), ((1, 4), (0, 4)), ((0, 4), (4, 64)),
    ((), ()),
], ids=["None", "C-order", "unit-axis", "unit-axis-zero", "empty", "scalar"])
def test_a_contiguous_interface_with_strides_is_taken(copy, shape, strides):
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(Producer(interface(shape=shape, strides=strides)), 0, 0, block=1, grid=0)


class Clearing:
    """An int of the interface's shape whose __index__ empties, then refills, the interface dict
    with objects nothing else holds."""

    def __init__(self, value, cai):
        self.value, self.cai = value, cai

    def __index__(self):
        self.cai.clear()
        self.cai.update(interface(data=(int("7") << 40, False), shape=(1,), strides=(4,)))
        return self.value


@pytest.mark.parametrize("strides, contiguous", [((16, 4), True), ((4, 16), False)])
def test_an_interface_changed_while_it_is_read(copy, strides, contiguous):
    cai = interface(strides=strides)
    cai["shape"] = (Clearing(4, cai), 4)
    producer = Producer(cai)
    if contiguous:
        with pytest.raises(ValueError, match="grid.x is 0"):
            copy(producer, 0, 0, block=1, grid=0)
    else:
        with pytest.raises(ValueError, match="is not contiguous"):
            copy(producer, 0, 0, block=1, grid=0)
    assert cai["data"][0] == 7 << 40  # it was changed, and read before that


class OneElementHostTensor:
    """A one-element CPU tensor as PyTorch makes one: __index__ gives its value, and it offers
    NumPy's and DLPack's protocols, which say it is in host memory."""

    def __index__(self):
        return 4096

    def __array__(self, dtype=None, copy=None):
        return np.array([4096])

    def __dlpack__(self, stream=None):
        raise BufferError("not needed")

    def __dlpack_device__(self):
        return (1, 0)  # kDLCPU


class DLPackOnDevice(OneElementHostTensor):
    def __dlpack_device__(self):
        return (2, 0)  # kDLCUDA


class ArrayInterfaceOnly:
    __array_interface__ = {"shape": (1,), "typestr": "<i8", "data": (4096, False), "version": 3}

    def __index__(self):
        return 4096


class Address:
    """An address object (ctypes-like): __index__ and nothing that makes it an array."""

    def __index__(self):
        return 2**40


@pytest.mark.parametrize("obj, error, phrase", [
    (OneElementHostTensor(), TypeError, "the OneElementHostTensor is an array in host memory"),
    (ArrayInterfaceOnly(), TypeError, "the ArrayInterfaceOnly is an array in host memory"),
    (DLPackOnDevice(), TypeError, "the DLPackOnDevice is in device memory but offers no "
                                  "__cuda_array_interface__; "
                                  r"pass kiln.asarray\(x\)"),
], ids=["cpu-tensor", "array-interface", "dlpack-cuda"])
def test_an_array_is_not_taken_as_an_address(copy, obj, error, phrase):
    with pytest.raises(error, match=r"argument 1 of copy \(a b64 parameter\): " + phrase):
        copy(0, obj, 0, block=1, grid=0)


def test_an_address_object_and_an_int_value_still_pass(copy):
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(Address(), Address(), 0, block=1, grid=0)
    with pytest.raises(ValueError, match="grid.x is 0"):  # an int parameter takes an array's value
        copy(0, 0, OneElementHostTensor(), block=1, grid=0)


# ---- A host pointer inside an interface ---------------------------------------------------------
# Where a kernel argument's __cuda_array_interface__ gives an address the driver knows nothing of
# (a NumPy array's data, or none at all), the launch is refused: the kernel would fault on it,
# and a fault ends the context. The driver is asked after the launch's shape is checked, so a bad
# shape is still the first error; without a driver nothing can tell.

class HostInterface:
    """An interface over a NumPy array's own host memory (or any address given)."""

    def __init__(self, array, address=None):
        self.array = array
        ptr = array.ctypes.data if address is None else address
        self.__cuda_array_interface__ = {"shape": array.shape, "typestr": array.dtype.str,
                                         "data": (ptr, False), "version": 3}


def test_a_host_pointer_in_an_interface_gives_way_to_a_bad_shape(copy):
    host = np.arange(16, dtype=np.float32)
    with pytest.raises(ValueError, match="grid.x is 0"):
        copy(HostInterface(host), HostInterface(host), 16, block=16, grid=0)


@pytest.mark.skipif(HAVE_GPU, reason="what a machine without a driver does")
def test_without_a_driver_a_host_pointer_cannot_be_told(copy):
    # Nothing can ask the driver, so the pointer passes, and the launch fails on its own.
    host = np.arange(16, dtype=np.float32)
    with pytest.raises(kiln.NoDeviceError):
        copy(HostInterface(host), HostInterface(host), 16, block=16, grid=1)


def reaches_pageable_memory():
    """Whether the GPU reads pageable host memory itself (HMM, ATS): then a host pointer is one
    a kernel can use, and kiln lets it through."""
    return bool(kiln.Device(0).get_attribute(drv.device_attribute.PAGEABLE_MEMORY_ACCESS))


UNREACHABLE = r"its __cuda_array_interface__ gives address 0x[0-9a-f]+, which the GPU cannot " \
              r"reach: the driver knows it as neither device memory nor page-locked host memory"


@pytest.mark.gpu
def test_a_host_pointer_in_an_interface_is_refused(copy):
    host = np.arange(16, dtype=np.float32)
    dst = kiln.zeros(16, np.float32)
    if reaches_pageable_memory():
        copy(HostInterface(host), dst, 16, block=16, grid=1)
        kiln.synchronize()
        np.testing.assert_array_equal(dst.get(), host)
        pytest.skip("this GPU reads pageable host memory: a host pointer is a good one here")
    with pytest.raises(TypeError, match=r"argument 0 of copy \(.*\): " + UNREACHABLE):
        copy(HostInterface(host), dst, 16, block=16, grid=1)
    with pytest.raises(TypeError, match=r"argument 1 of copy \(.*\): " + UNREACHABLE):
        copy(dst, HostInterface(host), 16, block=16, grid=1)
    # An address with no memory at all, refused the same way.
    with pytest.raises(TypeError, match=UNREACHABLE):
        copy(dst, HostInterface(host, address=0x10000), 16, block=16, grid=1)
    # Nothing ran: the context is whole, and the same call with device memory works.
    src = kiln.to_device(host)
    copy(src, dst, 16, block=16, grid=1)
    np.testing.assert_array_equal(dst.get(), host)


@pytest.mark.gpu
def test_page_locked_memory_and_device_memory_in_an_interface_pass(copy):
    # Page-locked memory is mapped for the device: a kernel writes into it through its address.
    pinned = kiln.pagelocked_zeros(16, np.float32)
    src = kiln.to_device(np.arange(16, dtype=np.float32) + 1)
    copy(src, HostInterface(pinned), 16, block=16, grid=1)
    kiln.synchronize()
    np.testing.assert_array_equal(pinned, np.arange(16, dtype=np.float32) + 1)
    # An empty array's address, 0, is never read.
    copy(HostInterface(np.zeros(0, np.float32), address=0), src, 0, block=16, grid=1)
    kiln.synchronize()


@pytest.mark.gpu
def test_past_eight_interfaces_a_host_pointer_is_refused_while_packing():
    # The first eight pointers are asked after the shape; any further one as it is packed.
    params = ", ".join(f"float *p{i}" for i in range(10))
    k = kiln.SourceModule(f'extern "C" __global__ void ten({params}) {{ *p0 = 1.0f; }}',
                          arch=ARCH).get_function("ten")
    dev = kiln.zeros(1, np.float32)
    host = np.zeros(1, np.float32)
    args = [HostInterface(dev.get(), address=dev.ptr)] * 9 + [HostInterface(host)]
    if reaches_pageable_memory():
        pytest.skip("this GPU reads pageable host memory: a host pointer is a good one here")
    with pytest.raises(TypeError, match=r"argument 9 of ten \(.*\): " + UNREACHABLE):
        k(*args, block=1, grid=0)  # refused before the shape is looked at
    args = [HostInterface(host)] + [HostInterface(dev.get(), address=dev.ptr)] * 9
    with pytest.raises(TypeError, match=r"argument 0 of ten \(.*\): " + UNREACHABLE):
        k(*args, block=1, grid=1)
    with pytest.raises(ValueError, match="grid.x is 0"):
        k(*args, block=1, grid=0)


# ---- __cuda_array_interface__ on a GPU ------------------------------------------------------------

class TorchV3:
    """A torch tensor offered through version 3 of the interface, naming the stream that wrote
    it (PyTorch's own interface is version 2, without "stream")."""

    def __init__(self, tensor, stream):
        self.tensor, self.stream = tensor, stream

    @property
    def __cuda_array_interface__(self):
        cai = dict(self.tensor.__cuda_array_interface__)
        cai.update(version=3, stream=self.stream)
        return cai


def slow_torch_producer(torch, n):
    """A tensor of zeros, then of sevens written on a side stream after a long sleep there."""
    src = torch.zeros(n, dtype=torch.float32, device="cuda")
    torch.cuda.synchronize()
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        torch.cuda._sleep(SLOW)
        src.fill_(7.0)
    return TorchV3(src, side.cuda_stream), side


@pytest.mark.gpu
def test_a_launch_waits_for_the_torch_stream_the_interface_names(copy):
    torch = pytest.importorskip("torch")
    n = 1 << 20
    producer, side = slow_torch_producer(torch, n)
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    dst = kiln.zeros(n, np.float32, stream=s)
    copy(producer, dst, n, block=256, grid=n // 256, stream=s)
    s.synchronize()
    got = dst.get()
    assert (got == 7).all(), f"the kernel read before the producer wrote: {got[:4]}"
    side.synchronize()


@pytest.mark.gpu
def test_a_launch_waits_for_the_cupy_stream_the_interface_names(copy, spin):
    cp = pytest.importorskip("cupy")
    n = 1 << 20
    x = cp.zeros(n, dtype=cp.float32)
    cp.cuda.Device().synchronize()
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    dst = kiln.zeros(n, np.float32, stream=s)
    with cp.cuda.Stream(non_blocking=True) as side:
        spin(np.int64(SLOW), block=1, stream=side.ptr)  # the producer's stream is busy...
        x.fill(7)                                       # ...and writes x last
        assert x.__cuda_array_interface__.get("stream") == side.ptr, "CuPy named no stream"
        copy(x, dst, n, block=256, grid=n // 256, stream=s)
    s.synchronize()
    got = dst.get()
    assert (got == 7).all(), f"the kernel read before the producer wrote: {got[:4]}"
    side.synchronize()


@pytest.mark.gpu
def test_asarray_of_a_torch_tensor_written_on_a_side_stream(copy):
    torch = pytest.importorskip("torch")
    n = 1 << 20
    producer, side = slow_torch_producer(torch, n)
    w = kiln.asarray(producer)  # waits for the side stream
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    dst = kiln.zeros(n, np.float32, stream=s)
    copy(w, dst, n, block=256, grid=n // 256, stream=s)
    s.synchronize()
    assert (dst.get() == 7).all()


@pytest.mark.gpu
def test_many_producer_streams_one_event(copy, spin):
    # Two producers on two streams in one launch, and again: each wait keeps its own record.
    n = 1 << 16
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    producers = [kiln.Stream(flags=kiln.STREAM_NON_BLOCKING) for _ in range(2)]
    for round_ in range(3):
        arrays = []
        for k, p in enumerate(producers):
            a = kiln.zeros(n, np.float32, stream=p)
            spin(np.int64(SLOW // 4 * (k + 1)), block=1, stream=p)
            a.copy_from(np.full(n, 10 * round_ + k, np.float32), stream=p)
            arrays.append(a)
        outs = [kiln.zeros(n, np.float32, stream=s) for _ in arrays]
        for a, out, p in zip(arrays, outs, producers):
            copy(Producer({**a.__cuda_array_interface__, "stream": p.handle}), out, n,
                 block=256, grid=n // 256, stream=s)
        s.synchronize()
        for k, out in enumerate(outs):
            assert (out.get() == 10 * round_ + k).all()


@pytest.mark.gpu
def test_dlpack_to_torch_waits_for_the_array_stream(copy, spin):
    torch = pytest.importorskip("torch")
    n = 1 << 20
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    src = kiln.to_device(np.full(n, 7, np.float32))
    dst = kiln.zeros(n, np.float32, stream=s)
    spin(np.int64(SLOW), block=1, stream=s)
    copy(src, dst, n, block=256, grid=n // 256, stream=s)
    # torch asks for stream 1, its default stream: that must wait for s, where dst is written.
    t = torch.from_dlpack(dst)
    assert (t.cpu() == 7).all()
    s.synchronize()


# ---- Kernel arguments from PyTorch: contiguous device tensors only -----------------------------

@pytest.mark.gpu
def test_a_strided_torch_tensor_is_refused_and_its_pointer_passes_on_purpose(copy):
    torch = pytest.importorskip("torch")
    base = torch.arange(32, dtype=torch.float32, device="cuda").reshape(4, 8)
    view = base[:, ::2]  # 16 elements, every other one of base
    assert not view.is_contiguous()
    torch.cuda.synchronize()
    dst = kiln.zeros(16, np.float32)
    with pytest.raises(ValueError, match=r"argument 0 of copy .*Tensor is not contiguous.*"
                                         r"x\.data_ptr\(\)"):
        copy(view, dst, 16, block=16, grid=1)
    with pytest.raises(ValueError, match=r"not contiguous \(a strided view\)"):
        copy(kiln.asarray(view), dst, 16, block=16, grid=1)
    assert (dst.get() == 0).all()  # refused before anything ran
    # A contiguous copy gives the elements the view shows.
    contiguous = view.contiguous()
    torch.cuda.synchronize()
    copy(contiguous, dst, 16, block=16, grid=1)
    np.testing.assert_array_equal(dst.get(), view.cpu().numpy().ravel())
    # The address on purpose: the kernel reads the memory from the view's first element on.
    copy(view.data_ptr(), dst, 16, block=16, grid=1)
    np.testing.assert_array_equal(dst.get(), base.cpu().numpy().ravel()[:16])
    copy(view.__cuda_array_interface__["data"][0], dst, 16, block=16, grid=1)
    np.testing.assert_array_equal(dst.get(), base.cpu().numpy().ravel()[:16])


@pytest.mark.gpu
def test_a_cpu_tensor_is_refused_where_a_device_pointer_is_expected(copy):
    torch = pytest.importorskip("torch")
    dst = kiln.zeros(4, np.float32)
    for host in (torch.tensor([5], dtype=torch.int64), torch.tensor([1.5]), torch.zeros(4)):
        with pytest.raises(TypeError, match=r"argument 0 of copy .*Tensor is an array in host "
                                            r"memory.*x\.cuda\(\)"):
            copy(host, dst, 1, block=1, grid=1)
    assert (dst.get() == 0).all()
    # A one-element tensor on the GPU is a pointer to its element; a CPU one as an int value.
    one = torch.tensor([7.0], device="cuda")
    torch.cuda.synchronize()
    copy(one, dst, torch.tensor(1), block=1, grid=1)
    np.testing.assert_array_equal(dst.get(), [7, 0, 0, 0])


@pytest.mark.gpu
def test_blocking_copies_follow_another_librarys_work_on_the_default_stream():
    # kiln skips its own wait before a blocking copy while it has queued nothing since the
    # default stream was seen done; a CuPy kernel queued meanwhile is one kiln does not count,
    # and the driver's copy must still come after it, both ways.
    cp = pytest.importorskip("cupy")
    slow_fill = cp.RawKernel(r'''
extern "C" __global__ void slow_fill(float *p, int n, float v, long long cycles)
{ long long t = clock64(); while (clock64() - t < cycles) {}
  for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = v; }''', "slow_fill")
    n = 1 << 20
    x = cp.zeros(n, dtype=cp.float32)
    h = np.zeros(n, np.float32)
    for _ in range(2):
        kiln.memcpy_dtoh(h, x.data.ptr)            # kiln's own work is now seen done
    slow_fill((1,), (256,), (x, np.int32(n), np.float32(7), np.int64(SLOW)))
    kiln.memcpy_dtoh(h, x.data.ptr)
    assert (h == 7).all(), f"the copy read before CuPy's kernel wrote: {h[:4]}"
    slow_fill((1,), (256,), (x, np.int32(n), np.float32(8), np.int64(SLOW)))
    kiln.memcpy_htod(x.data.ptr, np.ones(n, np.float32))
    cp.cuda.Device().synchronize()
    assert (x.get() == 1).all(), "CuPy's kernel wrote after the copy that followed it"
