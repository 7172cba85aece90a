"""kiln.DeviceArray as PyCUDA's GPUArray: the constructor, strides and flags, views, copies,
assignment, conversions and ownership.

Views need no device memory: a DeviceArray made by the constructor over gpudata=<an int> is a
layout and nothing else, so the CPU tests hold every view kiln makes against the view NumPy makes
of a host array of the same shape and dtype (shape, strides, flags, offset of element 0). Those
arrays point at an address no test reads or writes, so the CPU tests never copy or launch: they
run unchanged on the GPU machine. The tests marked gpu check values, against NumPy's."""
import gc
import itertools
import json
import operator
import weakref

import numpy as np
import pytest

import kiln
import kiln.gpuarray as gpuarray
from helpers import ARCH, HAVE_GPU, run_python

# An address no test reads or writes: arrays over it are layouts only.
FAKE = 1 << 40


def fake(shape, dtype=np.float32, order="C"):
    """A DeviceArray over FAKE and a host array of the same layout."""
    return (kiln.DeviceArray(shape, dtype, gpudata=FAKE, order=order),
            np.empty(shape, dtype, order=order))


def offset(h, h0):
    return h.__array_interface__["data"][0] - h0.__array_interface__["data"][0]


def assert_layout(d, h, d0, h0):
    """d, a view of d0, is laid out as h, the same view of h0."""
    assert d.shape == h.shape and d.dtype == h.dtype and d.ndim == h.ndim
    assert d.size == h.size and d.nbytes == h.nbytes and d.itemsize == h.itemsize
    assert d.mem_size == h.size
    assert d.flags.c_contiguous == h.flags.c_contiguous, (d.strides, h.strides)
    assert d.flags.f_contiguous == h.flags.f_contiguous, (d.strides, h.strides)
    assert d.flags.forc == (h.flags.c_contiguous or h.flags.f_contiguous)
    if h.size:  # NumPy's strides and offsets of an empty array are its own business
        assert d.strides == h.strides
        assert d.ptr - d0.ptr == offset(h, h0)


def outcome(f, *args):
    """f(*args), or the type and message of what it raised."""
    try:
        return f(*args)
    except Exception as e:
        return type(e), str(e)


# ---- the constructor -----------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(), 0, 5, (0, 3), (3, 4), (2, 1, 3), (2, 3, 4, 5), np.int64(7)])
@pytest.mark.parametrize("order", ["C", "F"])
@pytest.mark.parametrize("dtype", [np.int8, np.float32, np.complex128, "<f2", ">i4"])
def test_constructed_layout_is_numpys(shape, order, dtype):
    d, h = fake(shape, dtype, order)
    assert d.shape == h.shape and d.dtype == h.dtype
    assert d.flags.c_contiguous == h.flags.c_contiguous
    assert d.flags.f_contiguous == h.flags.f_contiguous
    if h.size:
        assert d.strides == h.strides
    assert d.ptr == FAKE and isinstance(d.device, int)
    assert d.base is None and d.allocator is kiln.pool_alloc and d._allocator is None


def test_every_argument_after_dtype_is_a_keyword():
    base = object()
    d = kiln.DeviceArray(shape=(2, 3), dtype=np.int16, allocator=None, base=base, gpudata=FAKE,
                         strides=(2, 4), order="C")
    assert d.strides == (2, 4) and d.flags.f_contiguous and d.base is base
    e = kiln.DeviceArray((2, 3), np.int16, None, base, FAKE, (2, 4), "F")  # PyCUDA's order
    assert e.strides == (2, 4) and e.base is base


def test_strides_describe_any_layout_over_gpudata():
    d = kiln.DeviceArray((3, 4), np.float64, gpudata=FAKE + 1024, strides=(-64, 0))
    assert d.strides == (-64, 0) and not d.flags.forc and d.ptr == FAKE + 1024
    h = np.lib.stride_tricks.as_strided(np.empty(1024), (3, 4), (-64, 0))
    assert d.flags.c_contiguous == h.flags.c_contiguous


def test_flags_assigned_beside_strides_as_pycudas_program_does():
    # gpustats gives an array Fortran order by assigning PyCUDA's F strides, then the flags on
    # its flags object. The object takes them; the array's own flags follow its strides.
    d = kiln.DeviceArray((3, 4), np.float32, gpudata=FAKE)
    d.strides = gpuarray._f_contiguous_strides(d.dtype.itemsize, d.shape)
    d.flags.f_contiguous = True
    d.flags.c_contiguous = False
    assert d.flags.f_contiguous and not d.flags.c_contiguous
    f = d.flags
    f.c_contiguous = 1  # that object's alone: no layout follows it
    assert f.c_contiguous and f.forc and not d.flags.c_contiguous
    assert gpuarray._c_contiguous_strides(4, (3, 4)) == (16, 4)
    assert gpuarray._as_strided is np.lib.stride_tricks.as_strided
    with pytest.raises(AttributeError):
        d.flags.forc = True
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del f.f_contiguous


def test_strides_may_be_assigned_within_the_memory_the_array_reaches():
    # PyCUDA keeps strides as a plain attribute; programs copy an F-ordered array's onto a new
    # one (v.strides = u.strides).
    d = kiln.DeviceArray((3, 4), np.float32, gpudata=FAKE)
    d.strides = (4, 12)
    assert d.strides == (4, 12) and d.flags.f_contiguous and not d.flags.c_contiguous
    d.strides = [16, 4]
    assert d.flags.c_contiguous
    d.strides = (0, 4)  # a broadcast over fewer bytes is inside
    assert d.strides == (0, 4) and not d.flags.forc
    for strides, error, phrase in [((4,), ValueError, "strides has 1 entries; the array has 2"),
                                   ((16, 8), ValueError, "outside the 0 to 16 the array's"),
                                   ((-16, 4), ValueError, "reach bytes -32 to 16"),
                                   ((16, 2), ValueError, "multiples of the itemsize, 4"),
                                   ("ab", TypeError, None)]:
        with pytest.raises(error, match=phrase):
            d.strides = strides
        assert d.strides == (0, 4)
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del d.strides
    if HAVE_GPU:  # memory of kiln's own: its allocation's size is the bound
        a = kiln.zeros((3, 4), np.float32)
        a.strides = (0, 4)
        a.strides = (16, 4)  # back again: the allocation holds it
        a.strides = (4, 12)
        assert a.flags.f_contiguous
        with pytest.raises(ValueError, match="outside the 0 to 48"):
            a.strides = (32, 4)


@pytest.mark.parametrize("start, index, shape", [
    ((2, 3), (), (3, 2)), ((2, 3), (), 6), ((2, 3), (), (-1, 1, 2)), ((4, 6), np.s_[:, ::2], (12,)),
    ((4, 6), np.s_[:, ::2], (2, 2, 3)), ((4, 6), np.s_[::2, :], (2, 2, 3)), ((0, 3), (), (3, 0)),
])
def test_shape_may_be_assigned_in_place_as_numpys(start, index, shape):
    d0, h0 = fake(start)
    d, h = d0[index], h0[index]
    d.shape = shape
    h.shape = shape
    assert_layout(d, h, d0, h0)


@pytest.mark.parametrize("start, index, shape, error, phrase", [
    ((4, 6), np.s_[:, :3], (12,), AttributeError, "Incompatible shape for in-place"),
    ((4, 6), (), (5, 5), ValueError, "size 24 into shape \\(5, 5\\)"),
    ((2, 3), (), "ab", TypeError, "'str' object cannot be interpreted as an integer"),
])
def test_shape_assignment_numpy_refuses_is_refused(start, index, shape, error, phrase):
    d0, h0 = fake(start)
    d = d0[index]
    before = (d.shape, d.strides)
    with pytest.raises(error, match=phrase):
        d.shape = shape
    assert (d.shape, d.strides) == before
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del d.shape


@pytest.mark.parametrize("start, index, dtype", [
    ((2, 4), (), np.int32), ((2, 4), (), np.float64), ((2, 4), (), np.int8),
    ((2, 4), (), np.complex128), ((4, 6), np.s_[::2, :], np.int16), ((3,), np.s_[::-1], np.uint32),
    ((0, 4), (), np.float64), ((2, 4), (), None),  # None is float64, as NumPy's setter takes it
])
def test_dtype_may_be_assigned_in_place_as_numpys(start, index, dtype):
    d0, h0 = fake(start)
    d, h = d0[index], h0[index]
    d.dtype = dtype
    h.dtype = dtype
    assert_layout(d, h, d0, h0)


@pytest.mark.parametrize("start, index, dtype, error, phrase", [
    ((4, 6), np.s_[:, ::2], np.int16, ValueError, "the last axis must be contiguous"),
    ((), ..., np.float64, ValueError, "0d array is only supported if the itemsize is unchanged"),
    ((3,), (), np.complex128, ValueError, "must be a divisor of the total size"),
    ((3,), (), "nonsense", TypeError, "data type 'nonsense' not understood"),
    ((4,), (), np.dtype((np.int16, 2)), ValueError, "cannot be the subarray type"),
    ((4,), (), object, TypeError, "cannot live on the GPU"),
])
def test_dtype_assignment_numpy_refuses_is_refused(start, index, dtype, error, phrase):
    d0, h0 = fake(start)
    d, h = d0[index], h0[index]
    if dtype != np.dtype((np.int16, 2)):  # NumPy takes that one where the itemsize is kept
        with pytest.raises(error):
            h.dtype = dtype
    before = (d.dtype, d.shape, d.strides)
    with pytest.raises(error, match=phrase):
        d.dtype = dtype
    assert (d.dtype, d.shape, d.strides) == before
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del d.dtype


def test_gpudata_may_be_assigned_as_pycudas_plain_attribute():
    # Programs swap two arrays' buffers (a.gpudata, b.gpudata = b.gpudata, a.gpudata) or put
    # memory of their own under an array; its layout stays as it was.
    d, _ = fake((2, 3))
    d.gpudata = FAKE + 4096
    assert d.ptr == FAKE + 4096 and d.gpudata == FAKE + 4096
    assert (d.shape, d.strides) == ((2, 3), (12, 4))

    class Address:
        def __int__(self):
            return FAKE + 8192

    owner = Address()
    d.gpudata = owner
    assert d.gpudata is owner and d.ptr == FAKE + 8192
    for value, error, phrase in [(None, ValueError, "gpudata is None, but the array has 6"),
                                 (0, ValueError, "gpudata is address 0"),
                                 ("x", TypeError, "gpudata must be a device address"),
                                 (-1, ValueError, "which is no address")]:
        with pytest.raises(error, match=phrase):
            d.gpudata = value
        assert d.gpudata is owner and d.ptr == FAKE + 8192
    with pytest.raises(AttributeError, match="cannot be deleted"):
        del d.gpudata
    with pytest.raises(AttributeError, match="its shape's, 6, so size cannot be assigned 12"):
        d.size = 12  # memory whose size kiln does not know: the shape stays
    d.size = 6  # the size it has
    assert d.size == 6
    e = kiln.DeviceArray((0, 3), np.float32)
    e.gpudata = None  # an empty array has no memory
    assert e.gpudata is None and e.ptr == 0


REALLOC_CHILD = r"""
import json
import numpy as np
import kiln
import kiln.driver as drv
import kiln.gpuarray as gpuarray

def set_realloc(x_gpu, data):  # scikit-cuda's misc.set_realloc, as written
    if x_gpu.shape != data.shape or x_gpu.size != data.size or \
            x_gpu.strides != data.strides or x_gpu.dtype != data.dtype:
        x_gpu.gpudata.free()
        x_gpu.gpudata = drv.mem_alloc(data.dtype.itemsize * data.size)
        x_gpu.shape = data.shape
        x_gpu.size = data.size
        x_gpu.strides = data.strides
        x_gpu.dtype = data.dtype
    x_gpu.set(data)

def attempt(f):
    try:
        f()
        return None
    except Exception as e:
        return [type(e).__name__, str(e)]

out = {}
x = gpuarray.to_gpu(np.arange(5, dtype=np.float32))
for name, data in [("wider", np.arange(20.0).reshape(10, 2)),
                   ("fewer", np.arange(3.0)),
                   ("same", np.arange(3.0, 6.0)),
                   ("column", np.arange(7, dtype=np.float64).reshape(7, 1))]:
    set_realloc(x, data)
    got = x.get()
    out[name] = [list(x.shape), x.size, list(x.strides), str(x.dtype), x.nbytes,
                 got.tolist() == data.tolist(), str(got.dtype)]
# Narrower items: the new shape at the old item size is past the new memory, refused.
out["narrower"] = attempt(lambda: set_realloc(x, np.arange(5, dtype=np.int16)))
a = gpuarray.to_gpu(np.arange(6, dtype=np.float32))
out["small_memory"] = attempt(lambda: setattr(a, "gpudata", drv.mem_alloc(16)))
out["kept"] = [list(a.shape), a.get().tolist()]  # memory still in use: its layout stays
a.gpudata.free()
a.gpudata = drv.mem_alloc(10)  # after free(): the elements the new memory holds
out["after_free"] = [list(a.shape), a.nbytes]
b = gpuarray.to_gpu(np.arange(6, dtype=np.float32))
out["past_memory"] = attempt(lambda: setattr(b, "shape", (7,)))
out["within_memory"] = attempt(lambda: setattr(b, "shape", (2, 2)))
out["within"] = [list(b.shape), b.get().tolist()]
out["size_other"] = attempt(lambda: setattr(b, "size", 3))
out["strides_past"] = attempt(lambda: setattr(b, "strides", (16, 8)))
b.shape = (3,)
b.strides = (8,)  # every other float32: the float64 layout, within the 24 bytes
b.dtype = np.float64  # NumPy refuses (the last axis is not contiguous); PyCUDA takes it
out["retyped"] = [list(b.shape), list(b.strides), str(b.dtype), b.nbytes]
c = gpuarray.to_gpu(np.arange(4, dtype=np.float32)).reshape(4, 1)
out["retype_past"] = attempt(lambda: setattr(c, "dtype", np.float64))
v = gpuarray.to_gpu(np.arange(6, dtype=np.float32))[1:]
out["view_resize"] = attempt(lambda: setattr(v, "shape", (4,)))
print(json.dumps(out))
"""


def test_scikit_cudas_set_realloc_puts_new_memory_and_layout_under_an_array(fake_driver):
    # PyCUDA's layout attributes are plain: set_realloc frees an array's memory, gives it an
    # allocation of the new data's bytes, then assigns shape, size, strides and dtype one at a
    # time. kiln takes each where the layout stays inside the allocation the array holds.
    # Copies through the fake driver move real bytes (its device memory is host memory).
    r = run_python(REALLOC_CHILD, env={"KILN_CUDA_PATH": str(fake_driver)})
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout.splitlines()[-1])
    assert out["wider"] == [[10, 2], 20, [16, 8], "float64", 160, True, "float64"]
    assert out["fewer"] == [[3], 3, [8], "float64", 24, True, "float64"]
    assert out["same"] == [[3], 3, [8], "float64", 24, True, "float64"]
    assert out["column"] == [[7, 1], 7, [8, 8], "float64", 56, True, "float64"]
    assert out["narrower"] == [
        "ValueError", "cannot reshape array of size 1 into shape (5,): 5 items of float64 are "
        "40 bytes, past the 10 the allocation under the array holds from its first element"]
    assert out["small_memory"][0] == "ValueError"
    assert "outside the 16 bytes of the allocation" in out["small_memory"][1]
    assert out["kept"] == [[6], [0, 1, 2, 3, 4, 5]]
    assert out["after_free"] == [[2], 8]
    assert out["past_memory"][0] == "ValueError"
    assert "cannot reshape array of size 6 into shape (7,)" in out["past_memory"][1]
    assert out["within_memory"] is None and out["within"] == [[2, 2], [[0, 1], [2, 3]]]
    assert out["size_other"] == [
        "AttributeError", "a DeviceArray's number of elements is its shape's, 4, so size cannot "
        "be assigned 3: assign shape first (where the array's allocation holds the new shape), "
        "or make a new array, GPUArray(shape, dtype, gpudata=memory), gpuarray.empty(shape, "
        "dtype) or gpuarray.to_gpu(data)"]
    assert out["strides_past"][0] == "ValueError"
    assert out["retyped"] == [[3], [8], "float64", 24]
    assert out["retype_past"][0] == "ValueError"
    assert "divisor of the total size" in out["retype_past"][1]
    assert out["view_resize"][0] == "ValueError"  # a view holds no allocation of its own


@pytest.mark.gpu
def test_an_array_given_new_memory_and_layout_computes_on_the_gpu():
    import kiln.driver as drv
    x = gpuarray.to_gpu(np.arange(5, dtype=np.float32))
    for data in [np.arange(20.0).reshape(10, 2), np.arange(3.0), np.arange(7.0).reshape(7, 1)]:
        x.gpudata.free()
        x.gpudata = drv.mem_alloc(data.nbytes)
        x.shape, x.size, x.strides, x.dtype = data.shape, data.size, data.strides, data.dtype
        x.set(data)
        np.testing.assert_array_equal((x * 2 + 1).get(), data * 2 + 1)
        assert float(gpuarray.sum(x).get()) == data.sum()


@pytest.mark.parametrize("dtype, value, error", [
    (np.int8, 1000, OverflowError), (np.uint8, -1, OverflowError),
    (np.int64, 2**70, OverflowError), (np.int16, np.int64(40000), OverflowError),
    (np.int32, 1 + 2j, TypeError),
])
def test_fill_refuses_what_numpys_fill_refuses_before_the_device(dtype, value, error):
    # NumPy's fill and PyCUDA's (struct.pack of the value) refuse a value out of an integer
    # dtype's range; kiln did not wrap it around either.
    d, h = fake(3, dtype)
    with pytest.raises(error):
        h.fill(value)
    with pytest.raises(error):
        d.fill(value)
    with pytest.raises(error):
        d[1:] = value


def test_nbytes_a_program_sets_is_given_back_and_moves_nothing():
    # PyCUDA's nbytes is a plain attribute; reikna's Array sets the bytes its buffer spans.
    class Spanning(gpuarray.GPUArray):
        def __init__(self, shape, dtype, nbytes):
            gpuarray.GPUArray.__init__(self, shape, dtype, gpudata=FAKE)
            self.nbytes = nbytes

    d = Spanning((2, 3), np.float32, 64)
    assert d.nbytes == 64 and d.__dict__["nbytes"] == 64
    assert d.size == 6 and d.__cuda_array_interface__["shape"] == (2, 3)
    assert d[:1].nbytes == 12  # a view is its own array
    for value, error, phrase in [(-1, ValueError, "nbytes must be a non-negative int, not -1"),
                                 ("ab", TypeError, "'str' object cannot be interpreted"),
                                 (1.5, TypeError, "'float' object cannot be interpreted")]:
        with pytest.raises(error, match=phrase):
            d.nbytes = value
        assert d.nbytes == 64
    d.nbytes = None  # reikna's Array(thr, shape, dtype), its nbytes left at None
    assert d.nbytes is None and d.size == 6
    del d.nbytes
    assert d.nbytes == 24
    del d.nbytes  # nothing set: still size * itemsize
    assert d.nbytes == 24


def test_mem_size_a_program_sets_is_given_back_and_moves_nothing():
    # PyCUDA's mem_size is a plain attribute, which tgv_pycuda sets on a view it makes.
    d = gpuarray.GPUArray((2, 3), np.float32, gpudata=FAKE)
    assert d.mem_size == 6
    d.mem_size = 4
    assert d.mem_size == 4 and d.size == 6 and d.nbytes == 24
    with pytest.raises(ValueError, match="mem_size must be a non-negative int"):
        d.mem_size = -1
    del d.mem_size
    assert d.mem_size == 6


def test_itemsize_a_program_sets_is_given_back():
    # PyCUDA's itemsize is a plain attribute, and FiPy's GPUArray subclass sets it in __init__.
    class Sized(gpuarray.GPUArray):
        def __init__(self, shape, dtype):
            gpuarray.GPUArray.__init__(self, shape, dtype, gpudata=FAKE)
            self.itemsize = np.dtype(dtype).itemsize

    d = Sized((2, 3), np.float32)
    assert d.itemsize == 4 and d.nbytes == 24
    d.itemsize = 8
    assert d.itemsize == 8 and d.nbytes == 24 and d.dtype.itemsize == 4  # moves nothing
    with pytest.raises(ValueError, match="itemsize must be a non-negative int, not -4"):
        d.itemsize = -4
    del d.itemsize
    assert d.itemsize == 4


@pytest.mark.parametrize("kwargs, error, phrase", [
    (dict(shape=(2, 3), dtype=np.float32, order="A"), ValueError, "order must be 'C' or 'F'"),
    (dict(shape=(2, 3), dtype=np.float32, order=1), ValueError, "order must be 'C' or 'F'"),
    (dict(shape=(2, 3), dtype=np.float32, gpudata=FAKE, strides=(4,)), ValueError,
     "strides has 1 entries; the shape has 2"),
    (dict(shape=(2, 3), dtype=np.float32, gpudata=FAKE, strides=(12, 6)), ValueError,
     "multiples of the itemsize, 4"),
    (dict(shape=(2, -3), dtype=np.float32, gpudata=FAKE), ValueError, "negative dimension -3"),
    (dict(shape=(2, 3), dtype=object, gpudata=FAKE), TypeError, "Python objects"),
    (dict(shape=(1,) * 33, dtype=np.float32, gpudata=FAKE), ValueError, "at most 32"),
    (dict(shape="2", dtype=np.float32, gpudata=FAKE), TypeError, "cannot be interpreted as an"),
    (dict(shape=(3, 4), dtype=np.float32, strides=(32, 4)), ValueError,
     r"from byte 0 to byte 80, outside the 48 bytes of a new array"),
    (dict(shape=(3,), dtype=np.float32, strides=(-4,)), ValueError,
     "outside the 12 bytes of a new array"),
    (dict(shape=(3,), dtype=np.float32, allocator=5), TypeError, "allocator must be callable"),
    (dict(shape=(3,), dtype=np.float32, gpudata="0x10"), TypeError,
     "gpudata must be a device address.*not str"),
    (dict(shape=(3,), dtype=np.float32, gpudata=1.5), TypeError, "not float"),
    (dict(shape=(3,), dtype=np.float32, gpudata=True), TypeError, "not bool"),
    (dict(shape=(3,), dtype=np.float32, gpudata=np.array([FAKE])), TypeError,
     "not numpy.ndarray"),
    (dict(shape=(3,), dtype=np.float32, gpudata=-8), ValueError, "is -8, which is no address"),
    (dict(shape=(3,), dtype=np.float32, gpudata=2**64), ValueError, "which is no address"),
    (dict(shape=(3,), dtype=np.float32, gpudata=0), ValueError, "address 0, but the array has 3"),
    (dict(shape=(3,), dtype=np.float32, gpudata=16, strides=(-32,)), ValueError,
     "past the ends of the address space"),
    (dict(shape=(3,), dtype=np.float32, gpudata=2**64 - 8), ValueError,
     "past the ends of the address space"),
    (dict(shape=(2**40, 2**40), dtype=np.float32, gpudata=FAKE), ValueError, "too large"),
])
def test_bad_constructor_arguments_say_what_was_wrong(kwargs, error, phrase):
    with pytest.raises(error, match=phrase):
        kiln.DeviceArray(**kwargs)


def test_a_device_array_is_no_gpudata():
    d, _ = fake(4)
    with pytest.raises(TypeError, match="not kiln.DeviceArray"):
        kiln.DeviceArray(4, np.float32, gpudata=d)


def test_an_empty_array_needs_no_memory():
    calls = []
    d = kiln.DeviceArray((0, 3), np.float32, allocator=calls.append)
    assert calls == [] and d.gpudata is None and d.ptr == 0 and d.size == 0
    assert kiln.DeviceArray(0, np.int8, gpudata=0).ptr == 0


class Memory:
    """What a PyCUDA allocator returns: an object int() turns into the address."""

    def __init__(self, nbytes):
        self.nbytes = nbytes

    def __int__(self):
        return FAKE


def test_an_allocator_gives_the_memory_and_the_gpudata():
    asked = []

    def allocator(nbytes):
        asked.append(nbytes)
        return Memory(nbytes)

    d = kiln.DeviceArray((3, 4), np.float32, allocator=allocator)
    assert asked == [48] and isinstance(d.gpudata, Memory) and d.ptr == FAKE
    assert d.allocator is allocator and d[1:].allocator is allocator
    # The array holds what the allocator gave while it or a view of it lives.
    mem = weakref.ref(d.gpudata)
    v = d[1:, ::2]
    del d
    gc.collect()
    assert mem() is not None
    del v
    gc.collect()
    assert mem() is None


def test_what_an_allocator_returns_must_be_an_address():
    with pytest.raises(TypeError, match="what allocator returned must be a device address"):
        kiln.DeviceArray(3, np.float32, allocator=lambda n: "memory")

    def failing(nbytes):
        raise MemoryError(f"no {nbytes} bytes")

    with pytest.raises(MemoryError, match="no 12 bytes"):
        kiln.DeviceArray(3, np.float32, allocator=failing)


def test_base_is_kept_alive_and_a_cycle_through_it_is_collected():
    class Holder:
        pass

    holder = Holder()
    d = kiln.DeviceArray(3, np.float32, gpudata=FAKE, base=holder)
    assert d.base is holder
    holder.array = d  # a cycle: holder -> d -> holder
    gone = weakref.ref(holder)
    del holder, d
    gc.collect()
    assert gone() is None


def test_a_program_may_set_attributes_on_an_array_and_replace_the_types_methods():
    # PyCUDA's GPUArray is a plain Python class: programs note things on arrays, keep weak
    # references to them, and libraries built on it replace its methods (chainer's copy and
    # operators).
    d = kiln.DeviceArray(3, np.float32, gpudata=FAKE)
    d.name = "weights"
    assert d.name == "weights" and d.__dict__ == {"name": "weights"}
    with pytest.raises(AttributeError, match="size cannot be assigned"):
        d.size = 2  # the layout stays the array's own
    assert not hasattr(d[1:], "name")  # a view is a new object, as NumPy's
    d.me = d  # a cycle through the attributes is collected
    gone = weakref.ref(d)
    cache = weakref.WeakValueDictionary()
    cache["weights"] = d
    assert cache["weights"] is d
    del d
    gc.collect()
    assert gone() is None
    old = kiln.DeviceArray.copy
    try:
        kiln.DeviceArray.copy = lambda self: ("copied", self.shape)
        assert kiln.DeviceArray(2, np.float32, gpudata=FAKE).copy() == ("copied", (2,))
    finally:
        kiln.DeviceArray.copy = old
    assert kiln.DeviceArray.copy is old


def test_an_array_made_without_an_allocator_gives_kilns_pool_alloc():
    # PyCUDA's arrays always have an allocator (drv.mem_alloc by default), which programs call
    # for memory like the array's (nabu's replace_array_memory); an array given it back is a
    # pool array, as one given none.
    d = kiln.DeviceArray((3,), np.float32, gpudata=FAKE)
    assert d.allocator is kiln.pool_alloc and d._allocator is None
    again = kiln.DeviceArray((3,), np.float32, gpudata=FAKE, allocator=d.allocator)
    assert again._allocator is None
    with pytest.raises(ValueError, match="pool_alloc.. needs a positive number of bytes, not 0"):
        kiln.pool_alloc(0)


@pytest.mark.gpu
def test_pool_alloc_gives_memory_an_array_can_take():
    a = gpuarray.arange(4, dtype=np.float32)
    mem = a.allocator(a.nbytes)
    assert isinstance(mem, kiln.DeviceAllocation) and int(mem) != 0
    a.gpudata = mem
    a.fill(3)
    np.testing.assert_array_equal(a.get(), [3, 3, 3, 3])
    b = kiln.DeviceArray((4,), np.float32, allocator=a.allocator)
    b.fill(1)
    assert b._allocator is None and (b + a).get().tolist() == [4, 4, 4, 4]


def test_empty_like_takes_the_arrays_allocator():
    # PyCUDA's empty_like (and zeros_like, ones_like) allocate with other_ary.allocator: a
    # library's pool, whose allocations carry what it set on them (chainer's device).
    import kiln.gpuarray as gpuarray
    asked = []

    def allocator(nbytes):
        asked.append(nbytes)
        return FAKE

    a = kiln.DeviceArray((3, 4), np.float32, allocator=allocator, order="F")
    b = gpuarray.empty_like(a)
    assert b.allocator is allocator and asked == [48, 48] and b.flags.f_contiguous
    assert gpuarray.empty_like(a, np.float64).allocator is allocator and asked[-1] == 96


@pytest.mark.skipif(HAVE_GPU, reason="checks what is refused before the launch, on a machine "
                    "without a GPU (test_pycuda_idioms.py computes it on a GPU)")
def test_pycudas_in_place_methods_convert_to_the_arrays_dtype():
    # PyCUDA's __imul__, __itruediv__ and __ipow__ call these with out the array itself: an
    # int32 array times a float32 one is computed, then converted, not refused as same_kind
    # casting would. Without a GPU the call gets as far as the launch.
    import kiln.gpuarray as gpuarray
    i = gpuarray.GPUArray((4,), np.int32, gpudata=FAKE)
    f = gpuarray.GPUArray((4,), np.float32, gpudata=FAKE + 64)
    for call in (lambda: i._elwise_multiply(f, i), lambda: i._div(f, i),
                 lambda: i._pow(0.5, False), lambda: i._axpbyz(0.5, f, 1, i)):
        with pytest.raises(kiln.NoDeviceError):
            call()
    with pytest.raises(TypeError, match="Cannot cast"):  # NumPy's rule for the operator
        i *= f


@pytest.mark.skipif(HAVE_GPU, reason="checks what happens before the launch, on a machine "
                    "without a GPU (test_pycuda_idioms.py computes it on a GPU)")
def test_results_are_made_by_new_like_me_before_the_launch():
    # PyCUDA's operators make their result with self._new_like_me(dtype): a subclass's own, or
    # an array's allocator. Without a GPU the call gets as far as the launch.
    made = []

    class Own(gpuarray.GPUArray):
        def _new_like_me(self, dtype=None, order="C"):
            made.append(np.dtype(dtype))
            return gpuarray.GPUArray(self.shape, dtype, gpudata=FAKE + 4096)

    a = Own((4,), np.float32, gpudata=FAKE)
    for call in (lambda: a + a, lambda: a * 2.5, lambda: 2 - a, lambda: -a, lambda: a < 1,
                 lambda: a.astype(np.int16)):
        with pytest.raises(kiln.NoDeviceError):
            call()
    assert made == [np.float32] * 4 + [np.bool_, np.int16]

    class Wrong(gpuarray.GPUArray):
        def _new_like_me(self, dtype=None, order="C"):
            return np.empty(4)

    with pytest.raises(TypeError, match=r"Wrong._new_like_me\(float32\) gave"):
        Wrong((4,), np.float32, gpudata=FAKE) + 1


def test_the_result_is_made_like_the_operand_of_the_results_shape():
    # PyCUDA takes the operand that is not broadcast (a 0-d one defers to the other); a
    # subclass whose __init__ takes other arguments and says nothing of how its results are
    # made gets plain ones, where PyCUDA's _new_like_me fails.
    from kiln import _ops

    def allocator(nbytes):
        return FAKE + 8192

    class Own(gpuarray.GPUArray):
        def _new_like_me(self, dtype=None, order="C"):
            return Own(self.shape, dtype, allocator=allocator)

    plain0d = gpuarray.GPUArray((), np.float32, allocator=allocator)
    own = Own((3, 4), np.float32, gpudata=FAKE)
    got = _ops._result((plain0d, own), (3, 4), np.float64, None)
    assert type(got) is Own and got.dtype == np.float64 and got.shape == (3, 4)
    got = _ops._result((own[:1], own), (3, 4), np.float32, None)  # the first of the shape
    assert type(got) is Own
    got = _ops._result((gpuarray.GPUArray((1, 4), np.float32, allocator=allocator),
                        Own((3, 1), np.float32, gpudata=FAKE)), (3, 4),
                       np.float32, None)  # none of the shape: plain, the first's allocator
    assert type(got) is gpuarray.GPUArray and got.allocator is allocator

    class Threaded(kiln.DeviceArray):
        def __init__(self, thread, shape, dtype):
            self.thread = thread
            kiln.DeviceArray.__init__(self, shape, dtype, allocator=allocator)

    t = Threaded("thr", (4,), np.int32)
    got = _ops._result(t, (4,), np.float32, None)
    assert type(got) is gpuarray.GPUArray and got.allocator is allocator
    assert got.shape == (4,) and got.dtype == np.float32


def test_overlap_follows_the_layout_not_an_nbytes_a_program_set():
    from kiln import _ops
    a = kiln.DeviceArray(8, np.float32, gpudata=FAKE)
    b = kiln.DeviceArray(8, np.float32, gpudata=FAKE + 16)
    assert _ops.overlapping([a, b])
    a.nbytes = 8
    assert _ops.overlapping([a, b])
    assert not _ops.overlapping([a[::2], kiln.DeviceArray(2, np.float32, gpudata=FAKE + 28)])
    assert _ops.overlapping([a[::2], kiln.DeviceArray(2, np.float32, gpudata=FAKE + 24)])
    assert _ops.overlapping([a, a]) and not _ops.overlapping([a, a], same_ok=True)


def test_a_0d_host_array_of_numbers_is_taken_as_its_scalar_and_no_other():
    if HAVE_GPU:
        x = np.arange(4, dtype=np.float32)
        d = gpuarray.to_gpu(x)
    else:
        d = kiln.DeviceArray(4, np.float32, gpudata=FAKE)
    for s in (np.array(2.5), np.array(3, np.int8), np.array(True)):
        if HAVE_GPU:
            np.testing.assert_array_equal((d + s).get(), x + s)
            np.testing.assert_array_equal((s * d).get(), s * x)
            continue
        with pytest.raises(kiln.NoDeviceError):  # taken: the call gets as far as the launch
            d + s
        with pytest.raises(kiln.NoDeviceError):
            s * d
    box = np.empty((), object)
    box[()] = box  # an object array holding itself: refused, never unwrapped
    for o in (box, np.array(1.5, object), np.array("ab")):
        with pytest.raises(TypeError):
            d + o
        with pytest.raises(TypeError):
            o - d


def test_module_functions_and_methods_take_pycudas_positional_order():
    import inspect
    assert list(inspect.signature(gpuarray.multi_take_put).parameters) == [
        "arrays", "dest_indices", "src_indices", "dest_shape", "out", "stream", "src_offsets"]
    d, h = fake((3, 4))
    assert gpuarray.reshape(d, 4, 3).shape == (4, 3) == gpuarray.reshape(d, (4, 3)).shape
    assert gpuarray.reshape(d, 12, order="C").shape == (12,)
    if not HAVE_GPU:  # PyCUDA's conj(out=None): an array given first is out, not a stream
        out = kiln.DeviceArray((3, 4), np.float32, gpudata=FAKE + 4096)
        with pytest.raises(kiln.NoDeviceError):
            d.conj(out)


def test_gpuarray_has_pythons_old_names_of_division():
    import kiln.gpuarray as gpuarray
    assert gpuarray.GPUArray.__div__ is gpuarray.GPUArray.__truediv__
    assert gpuarray.GPUArray.__rdiv__ is gpuarray.GPUArray.__rtruediv__
    assert gpuarray.GPUArray.__idiv__ is gpuarray.GPUArray.__itruediv__


class Mine(kiln.DeviceArray):
    """A subclass, PyCUDA-style: __init__ takes the constructor's arguments."""

    def __init__(self, *args, tag=None, **kwargs):
        super().__init__(*args, **kwargs)
        self.tag = tag

    def __new__(cls, *args, tag=None, **kwargs):
        return super().__new__(cls, *args, **kwargs)


def test_the_type_can_be_subclassed():
    m = Mine((2, 3), np.float32, gpudata=FAKE, tag="t")
    assert isinstance(m, kiln.DeviceArray) and type(m) is Mine and m.tag == "t"
    assert m.shape == (2, 3) and m.strides == (12, 4)
    v = m[1]  # views are plain DeviceArrays, as PyCUDA's are GPUArrays
    assert type(v) is kiln.DeviceArray and v.base is m and v.ptr == FAKE + 12
    assert type(m.T) is kiln.DeviceArray and m.T.strides == (4, 12)
    gone = weakref.ref(m)
    del m, v
    gc.collect()
    assert gone() is None


class ThreadArray(kiln.DeviceArray):
    """A subclass whose constructor is its own, as a library's over PyCUDA (reikna's Array(thr,
    shape, dtype, ...)): the array is made when its __init__ calls GPUArray.__init__."""

    def __init__(self, thread, shape, dtype, offset=0):
        self.thread = thread
        kiln.DeviceArray.__init__(self, shape, dtype, gpudata=FAKE + offset)


def test_a_subclass_with_a_constructor_of_its_own_is_made_by_its_init():
    a = ThreadArray("thr", (4, 2), np.float32, offset=64)
    assert type(a) is ThreadArray and a.thread == "thr"
    assert (a.shape, a.dtype, a.ptr, a.strides) == ((4, 2), np.float32, FAKE + 64, (8, 4))
    kiln.DeviceArray.__init__(a, (9,), np.float64, gpudata=FAKE)  # made: a second call is a no-op
    assert a.shape == (4, 2)
    with pytest.raises(ValueError, match="negative dimension -1"):
        ThreadArray("thr", (-1,), np.float32)

    class Forgetful(kiln.DeviceArray):  # never calls the base: an empty array, no memory
        def __init__(self, *args):
            pass

    f = Forgetful(1, 2, 3)
    assert (f.shape, f.size, f.ptr) == ((0,), 0, 0)

    class Careful(kiln.DeviceArray):  # catches a failure and goes on: empty again
        def __init__(self, gpudata):
            try:
                kiln.DeviceArray.__init__(self, (4,), np.float32, gpudata=gpudata)
            except ValueError:
                pass

    c = Careful(0)
    assert (c.shape, c.size, c.ptr) == ((0,), 0, 0)
    assert Careful(FAKE).shape == (4,)


# ---- attributes and flags ------------------------------------------------------------------

def test_flags_read_as_numpys_and_pycudas():
    d, h = fake((3, 4))
    f = d.flags
    assert f.c_contiguous and not f.f_contiguous and f.forc
    assert f["C_CONTIGUOUS"] and f["C"] and not f["F_CONTIGUOUS"] and f["FORC"]
    assert "C_CONTIGUOUS : True" in repr(f) and "F_CONTIGUOUS : False" in repr(f)
    with pytest.raises(KeyError, match="WRITEABLE"):
        f["WRITEABLE"]
    assert not d[:, ::2].flags.forc and d.T.flags.f_contiguous


def test_arrays_are_not_hashable_and_numpy_defers_to_them():
    d, h = fake(3)
    with pytest.raises(TypeError, match="unhashable"):
        hash(d)
    assert kiln.DeviceArray.__array_ufunc__ is None
    assert kiln.DeviceArray.__array_priority__ > 0
    with pytest.raises(TypeError):
        np.add(h, d)
    with pytest.raises(TypeError, match=r"\.get\(\)"):
        np.asarray(d)  # no silent copy to the host


def test_gpudata_is_pycudas():
    d, _ = fake((4, 5))
    assert d.gpudata == FAKE
    assert d[1].gpudata == FAKE + 20 and type(d[1].gpudata) is int  # a view with an offset
    assert d.T.gpudata is d.gpudata and d[0].gpudata is d.gpudata  # one that starts there
    assert d.reshape(20).gpudata is d.gpudata


# ---- views ---------------------------------------------------------------------------------

KEYS = [
    0, -1, 3, np.int64(2), np.array(1), slice(None), slice(1, 3), slice(None, None, 2),
    slice(None, None, -1), slice(-2, None, -3), slice(5, 1, -2), slice(2, 2), slice(10, 20),
    (0, 0), (1, -1, 2), (slice(None), 1), (Ellipsis, 1), (1, Ellipsis), (None,),
    (None, Ellipsis, None), (slice(1, None, 2), None, slice(None, None, -2), 0), Ellipsis, (),
    (np.int64(2), np.int8(-1)), (0, slice(None), None, 1), (Ellipsis, None),
    (slice(None, None, -1), slice(None, None, -1), slice(None, None, -1)),
    (slice(None), slice(1, 1)), (-4, -5, -6), (3, 4, 5),
]


@pytest.mark.parametrize("key", KEYS, ids=repr)
@pytest.mark.parametrize("dtype", [np.uint8, np.float32, np.complex128])
def test_indexing_lays_out_views_as_numpy(key, dtype):
    d, h = fake((4, 5, 6), dtype)
    v = d[key]
    hv = h[int(key)] if isinstance(key, np.ndarray) else h[key]  # NumPy copies for 0-d arrays
    assert isinstance(v, kiln.DeviceArray)  # a 0-d view where NumPy gives a scalar
    hv = np.asarray(hv) if np.isscalar(hv) or isinstance(hv, np.generic) else hv
    if hv.ndim == 0:  # NumPy's scalar has no offset to compare: work it out
        assert v.shape == () and v.ptr - d.ptr == sum(
            (k % n) * s for k, n, s in zip(key, h.shape, h.strides))
        return
    assert_layout(v, hv, d, h)
    assert v.base is d


def test_views_of_views_keep_numpys_layout_and_lean_on_the_owner():
    d, h = fake((6, 7, 8), np.float64, "F")
    steps = [lambda a: a[::2], lambda a: a[:, ::-1], lambda a: a.T, lambda a: a[1:],
             lambda a: a[..., None], lambda a: a.swapaxes(0, -1), lambda a: a[:, 1]]
    v, hv = d, h
    for step in steps:
        v, hv = step(v), step(hv)
        assert_layout(v, hv, d, h)
        assert v.base is d


@pytest.mark.parametrize("key, phrase", [
    ((0, 0, 0, 0), "too many indices for array: array is 3-dimensional, but 4 were indexed"),
    (4, "index 4 is out of bounds for axis 0 with size 4"),
    ((0, -6), "index -6 is out of bounds for axis 1 with size 5"),
    ((Ellipsis, 0, Ellipsis), r"only have a single ellipsis"),
    ([0, 1], "gpuarray.take"),
    (np.array([0, 1]), "gpuarray.take"),
    (np.array([True, False, True, True]), "boolean-mask"),
    (True, "boolean-mask"),
    (np.bool_(False), "boolean-mask"),
    ((0, [1]), "gpuarray.take"),
    (1.5, "not float"),
    ("x", "not str"),
    (2**70, "cannot fit"),
])
def test_bad_indices_say_what_was_wrong(key, phrase):
    d, _ = fake((4, 5, 6))
    with pytest.raises(IndexError, match=phrase):
        d[key]
    with pytest.raises(IndexError, match="gpuarray.take"):
        d[d]


def test_a_zero_step_and_a_0d_array():
    d, _ = fake(4)
    with pytest.raises(ValueError, match="slice step cannot be zero"):
        d[::0]
    assert d[1::2**62].shape == (1,) and d[1::2**62].ptr == d.ptr + 4  # no overflow
    z = kiln.DeviceArray((), np.float32, gpudata=FAKE)
    assert z[()].shape == () and z[...].shape == () and z[None].shape == (1,)
    with pytest.raises(IndexError, match="array is 0-dimensional, but 1 were indexed"):
        z[0]
    with pytest.raises(TypeError, match="unsized"):
        len(z)
    with pytest.raises(TypeError, match="0-d"):
        iter(z)


def test_len_and_iteration_go_over_the_first_axis():
    d, h = fake((3, 4), np.int16)
    assert len(d) == 3
    rows = list(d)
    assert [r.ptr - d.ptr for r in rows] == [0, 8, 16] and all(r.shape == (4,) for r in rows)
    assert [r.ptr - d.ptr for r in d[::-1]] == [16, 8, 0]


def shapes_of(size, ndims=(1, 2, 3)):
    """Every shape of size with up to three axes, and some with axes of length 1 and -1."""
    out = {(size,), (-1,), (1, size), (size, 1, 1)}
    for n in ndims:
        for dims in itertools.product([d for d in range(1, size + 1) if size % d == 0], repeat=n):
            if np.prod(dims) == size:
                out.add(dims)
                out.add(dims[:-1] + (-1,))
    return sorted(out, key=lambda s: (len(s), s))


VIEWS = [(), (slice(None, None, 2),), (slice(None), slice(None, None, 2)),
         (slice(None, None, -1),), (Ellipsis, slice(1, 3)), (1,), (slice(None), 0),
         (slice(None), None, slice(None, None, -2)), (slice(1, 3), slice(0, 4, 3))]


def in_order(h, order):
    return h.flags.c_contiguous if order == "C" else h.flags.f_contiguous


@pytest.mark.parametrize("view", VIEWS, ids=repr)
@pytest.mark.parametrize("base_order", ["C", "F"])
def test_reshape_without_a_copy_is_numpys(view, base_order):
    d, h = fake((4, 6, 4), np.float32, base_order)
    for order in "CF":
        for transposed in (False, True):
            v, hv = (d[view].T, h[view].T) if transposed else (d[view], h[view])
            for shape in shapes_of(hv.size):
                r = hv.reshape(shape, order=order)
                if not np.shares_memory(r, h):
                    continue  # NumPy copies: a kernel's work, checked on the GPU
                if r.shape == hv.shape and not in_order(hv, order) and \
                        in_order(hv, "F" if order == "C" else "C"):
                    continue  # copied into the order asked, as PyCUDA's: on the GPU too
                assert_layout(v.reshape(shape, order=order), r, d, h)
                assert_layout(v.reshape(*shape, order=order), r, d, h)
            r = hv.ravel(order)
            if np.shares_memory(r, h):
                assert_layout(v.ravel(order), r, d, h)


def test_reshape_of_an_empty_array_and_errors():
    d, h = fake((4, 0, 3))
    for shape in [(0,), (3, 0), (0, 12, 5), (2, 0, 7)]:
        assert_layout(d.reshape(shape), h.reshape(shape), d, h)
    d, h = fake((2, 3))
    for shape in [(4,), (4, -1), (0, -1), (7, 0)]:
        with pytest.raises(ValueError, match=r"cannot reshape array of size 6 into shape"):
            h.reshape(shape)
        with pytest.raises(ValueError, match=r"cannot reshape array of size 6 into shape"):
            d.reshape(shape)
    assert outcome(d.reshape, (-1, -1)) == outcome(h.reshape, (-1, -1))
    assert d.reshape(-2, 3).shape == h.reshape(-2, 3).shape  # NumPy takes any negative
    with pytest.raises(ValueError, match="order must be 'C' or 'F', not 'K'"):
        d.reshape(6, order="K")
    with pytest.raises(TypeError, match="takes the new shape"):
        d.reshape()
    with pytest.raises(TypeError):
        d.reshape(6, shape=6)
    assert d.reshape((3, 2)).base is d and d.reshape(2, 3).base is d


@pytest.mark.parametrize("to", [np.uint8, np.int16, np.float32, np.float64, np.complex128,
                                "V3", None])
@pytest.mark.parametrize("view", VIEWS + [(0, 0)], ids=repr)
def test_view_as_another_dtype_is_numpys(to, view):
    d, h = fake((4, 6, 4), np.float32)
    for v, hv in ((d[view], h[view]), (d[view].T, h[view].T)):
        got = outcome(v.view, to)
        want = outcome(hv.view, to) if to is not None else hv.view()  # PyCUDA's None: the same
        if isinstance(want, tuple):
            assert got == want
        else:
            assert_layout(got, want, d, h)


@pytest.mark.parametrize("axis", [None, 0, -1, (0, 3), 2, 5, (0, 0)], ids=repr)
def test_squeeze_is_numpys(axis):
    d, h = fake((1, 3, 1, 1, 2))
    got, want = outcome(d.squeeze, axis), outcome(h.squeeze, axis)
    if isinstance(want, tuple):
        assert got[0] is want[0] or issubclass(got[0], want[0]), (got, want)
        assert got[1] == want[1]
    else:
        assert_layout(got, want, d, h)
        assert_layout(d.squeeze(axis=axis), want, d, h)


@pytest.mark.parametrize("axes", [(), (None,), ((2, 0, 1),), (2, 0, 1), ([-1, 0, 1],),
                                  (1, 0, 2), (0, 0, 1), ((0, 1),), (0, 1, 3), (0.5, 1, 2)],
                         ids=repr)
def test_transpose_is_numpys(axes):
    d, h = fake((2, 3, 4), np.float64)
    got, want = outcome(d.transpose, *axes), outcome(h.transpose, *axes)
    if isinstance(want, tuple):
        assert got[0] is want[0] or issubclass(got[0], want[0]), (got, want)
        if got[0] is not TypeError:
            assert got[1] == want[1]
    else:
        assert_layout(got, want, d, h)


def test_transpose_takes_axes_as_a_keyword():
    d, h = fake((2, 3, 4), np.float64)
    assert_layout(d.transpose(axes=(1, 0, 2)), h.transpose((1, 0, 2)), d, h)
    assert_layout(d.transpose(axes=None), h.transpose(None), d, h)
    assert_layout(d[:, 1:3].transpose(axes=[2, 0, 1]), h[:, 1:3].transpose([2, 0, 1]), d, h)
    with pytest.raises(TypeError, match="not both"):
        d.transpose(1, 0, 2, axes=(1, 0, 2))
    with pytest.raises(TypeError, match="axis"):
        d.transpose(axis=(1, 0, 2))
    v, w = fake((5,), np.float64)
    assert_layout(v.transpose(axes=0), w.transpose(0), v, w)
    z = kiln.DeviceArray((), np.float32, gpudata=FAKE)
    with pytest.raises(ValueError, match="axes don't match array"):
        z.transpose(axes=0)


def test_reshape_in_its_own_order_or_of_either_order_is_a_view():
    d, h = fake((4, 6), np.float32)
    assert_layout(d.reshape(4, 6, order="C"), h.reshape(4, 6, order="C"), d, h)
    assert_layout(d.reshape(2, 2, 6, order="C"), h.reshape(2, 2, 6, order="C"), d, h)
    e, g = fake((4, 6), np.float32, "F")
    assert_layout(e.reshape(4, 6, order="F"), g.reshape(4, 6, order="F"), e, g)
    v, w = fake((1, 6), np.float32)  # both C- and F-contiguous: a view in either order
    assert_layout(v.reshape(1, 6, order="F"), w.reshape(1, 6, order="F"), v, w)


def test_T_and_swapaxes():
    d, h = fake((2, 3, 4), np.int32, "F")
    assert_layout(d.T, h.T, d, h)
    for a, b in [(0, 2), (-1, 0), (1, 1)]:
        assert_layout(d.swapaxes(a, b), h.swapaxes(a, b), d, h)
    with pytest.raises(np.exceptions.AxisError, match="axis 3 is out of bounds"):
        d.swapaxes(0, 3)
    z = kiln.DeviceArray((), np.float32, gpudata=FAKE)
    assert z.T.shape == ()


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, ">c8", ">c16"])
def test_the_parts_of_complex_arrays_as_views_for_kilns_kernels(dtype):
    d, h = fake((3, 4), dtype)
    for v, hv in [(d, h), (d[:, ::-2], h[:, ::-2]), (d.T, h.T)]:
        re, im = v._parts()
        assert_layout(re, hv.real, d, h)
        assert_layout(im, hv.imag, d, h)
        assert im.base is d
    with pytest.raises(TypeError, match="for complex arrays"):
        fake(3)[0]._parts()


def test_real_of_a_real_array_is_itself():
    d, _ = fake(3, np.float64)
    assert d.real is d


# ---- conversions that fail before anything is copied ---------------------------------------

def test_conversions_need_one_element():
    d, _ = fake((2, 2))
    with pytest.raises(ValueError, match="more than one element is ambiguous"):
        bool(d)
    with pytest.raises(ValueError, match="empty array is ambiguous"):
        bool(kiln.DeviceArray(0, np.float32, gpudata=0))
    for convert in (float, int, complex):
        with pytest.raises(TypeError, match="only 0-dimensional arrays can be converted"):
            convert(d)
    for bad in (kiln.DeviceArray((), np.float32, gpudata=FAKE),
                kiln.DeviceArray((1,), np.int32, gpudata=FAKE),
                kiln.DeviceArray((), np.bool_, gpudata=FAKE)):
        with pytest.raises(TypeError, match="only integer scalar arrays"):
            operator.index(bad)


# ---- copies and assignment: what is refused before the device is touched -------------------

def test_get_and_set_refuse_host_arrays_that_do_not_fit():
    d, _ = fake((2, 3))
    with pytest.raises(TypeError, match="ary has dtype dtype\\('float64'\\)"):  # PyCUDA's
        d.get(np.empty(6))
    with pytest.raises(ValueError, match=r"shape \(5,\), 5 elements; the DeviceArray has shape "
                                         r"\(2, 3\), 6 elements"):
        d.get(np.empty(5, np.float32))
    with pytest.raises(ValueError, match="out is not C-contiguous"):
        d.get(out=np.empty(12, np.float32)[::2])
    with pytest.raises(ValueError, match="with the array's shape"):
        d.get(np.empty((3, 2), np.float32, order="F"))
    ro = np.empty(6, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match="ary is read-only"):
        d.get(ro)
    with pytest.raises(TypeError, match="ary must be a numpy array, not list"):
        d.get([0] * 6)
    with pytest.raises(TypeError, match="not both"):
        d.get(np.empty(6, np.float32), out=np.empty(6, np.float32))
    with pytest.raises(TypeError, match="stream must be None"):
        d.get(stream="5")
    with pytest.raises(TypeError, match="ary must be a numpy array, not list"):
        d.set([1, 2, 3, 4, 5, 6])
    with pytest.raises(ValueError, match="ary has dtype"):
        d.set(np.zeros(6, np.int32))
    with pytest.raises(ValueError, match="5 elements"):
        d.set_async(np.zeros(5, np.float32))
    with pytest.raises(TypeError, match="copy_to\\(\\) needs"):
        d.copy_to(None)
    with pytest.raises(ValueError, match="the source holds 4 elements"):
        d.copy_from(fake(4)[0])


def test_assignment_refuses_before_the_device():
    d, _ = fake((2, 4))
    with pytest.raises(ValueError, match="cannot delete array elements"):
        del d[0]
    with pytest.raises(ValueError, match=r"could not broadcast input array from shape \(3,\) "
                                         r"into shape \(2, 4\)"):
        d[...] = np.zeros(3)
    with pytest.raises(ValueError, match=r"from shape \(2, 3\) into shape \(4,\)"):
        d[1] = fake((2, 3))[0]
    with pytest.raises(IndexError, match="gpuarray.take"):
        d[[0, 1]] = 1
    with pytest.raises(ValueError, match="could not convert string"):
        d[0] = "abc"
    d[1:1] = 5  # nothing to fill
    d[:, 4:] = fake((2, 0))[0]


# ---- kernels and other libraries -----------------------------------------------------------

SRC = r"""
extern "C" __global__ void scale(float *x, float s, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= s; }
"""


@pytest.fixture(scope="module")
def scale():
    return kiln.SourceModule(SRC, arch=ARCH).get_function("scale")


def test_a_strided_array_is_refused_as_a_kernel_argument(scale):
    d, _ = fake((4, 6))
    with pytest.raises(ValueError, match=r"argument 0 of scale .*not contiguous.*a\.ptr"):
        scale(d[:, ::2], 2.0, 12, block=(12, 1, 1), grid=(0, 1))
    # C- and Fortran-contiguous arrays pass (grid 0 stops the launch before the device).
    for ok in (d, d.T, d[1:3], Mine(4, np.float32, gpudata=FAKE)):
        with pytest.raises(ValueError, match="grid.x is 0"):
            scale(ok, 2.0, 4, block=(4, 1, 1), grid=(0, 1))
    with pytest.raises(ValueError, match="not contiguous"):
        scale(Mine((4, 6), np.float32, gpudata=FAKE)[:, ::2], 2.0, 4, block=4, grid=0)
    with pytest.raises(ValueError, match="grid.x is 0"):  # the address on purpose
        scale(d[:, ::2].ptr, 2.0, 4, block=4, grid=0)


def test_the_cuda_array_interface_always_has_strides():
    d, _ = fake((3, 4), np.int16)
    cai = d.__cuda_array_interface__
    assert cai["strides"] == (8, 2) and cai["data"] == (FAKE, False) and cai["shape"] == (3, 4)
    t = d[:, ::-2].__cuda_array_interface__
    assert t["strides"] == (8, -4) and t["data"] == (FAKE + 6, False)
    assert d[1:1].__cuda_array_interface__["data"] == (0, False)


class Producer:
    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def test_asarray_wraps_a_strided_interface_as_a_view():
    cai = {"shape": (4, 3), "typestr": "<f4", "data": (FAKE, False), "strides": (4, 16),
           "version": 3}
    w = kiln.asarray(Producer(cai))  # no "stream": nothing to wait for
    assert w.strides == (4, 16) and w.flags.f_contiguous and not w.flags.c_contiguous
    assert w.ptr == FAKE and w.base.__cuda_array_interface__ is cai
    again = dict(w[::-1].__cuda_array_interface__)
    del again["stream"]
    back = kiln.asarray(Producer(again))
    assert back.strides == (-4, 16) and back.ptr == FAKE + 12


class OnlyDLPack:
    def __init__(self, a):
        self.a = a

    def __dlpack__(self, stream=None):
        return self.a.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.a.__dlpack_device__()


def test_dlpack_carries_strides_both_ways():
    d, _ = fake((4, 6), np.float64)
    for v in (d, d[:, ::2], d.T, d[::-1, 1::3], d[:, None]):
        w = kiln.asarray(OnlyDLPack(v))
        assert w.strides == v.strides and w.shape == v.shape and w.ptr == v.ptr
        assert w.flags.c_contiguous == v.flags.c_contiguous
    odd = kiln.DeviceArray((3, 3), np.float32, gpudata=FAKE)[:, :2].view(np.float64)
    assert odd.strides == (12, 8)
    with pytest.raises(BufferError, match="stride 12 of axis 0 is no multiple"):
        odd.__dlpack__()


# ---- values: on the GPU --------------------------------------------------------------------

def sample(shape, dtype=np.float32):
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape) * 3 - 7
    if np.dtype(dtype).kind == "c":
        x = x + 1j * (x + 0.5)
    return x.astype(dtype)


@pytest.mark.gpu
@pytest.mark.parametrize("key", KEYS, ids=repr)
def test_get_of_every_view_is_numpys(key):
    host = sample((4, 5, 6))
    a = kiln.to_device(host)
    for v, hv in [(a, host), (a.T, host.T), (a[::-1, ::2], host[::-1, ::2])]:
        try:
            want = np.asarray(hv[key])
        except IndexError:
            with pytest.raises(IndexError):
                v[key]
            continue
        got = v[key].get()
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


@pytest.mark.gpu
def test_gpudata_assigned_moves_the_array_onto_other_memory():
    a, b = kiln.to_device(sample((4, 5))), kiln.to_device(sample((4, 5)) * 2)
    a.gpudata, b.gpudata = b.gpudata, a.gpudata  # a double buffer's swap
    np.testing.assert_array_equal(a.get(), sample((4, 5)) * 2)
    np.testing.assert_array_equal((a + b).get(), sample((4, 5)) * 3)
    small = kiln.mem_alloc(4 * 19)
    with pytest.raises(ValueError, match="outside the 76 bytes of the allocation"):
        a.gpudata = small
    big = kiln.mem_alloc(4 * 20)
    a.gpudata = big
    a.set(sample((4, 5)) + 1)
    back = np.empty((4, 5), np.float32)
    kiln.memcpy_dtoh(back, big)
    np.testing.assert_array_equal(back, sample((4, 5)) + 1)
    # A reduction's result read from its host mirror: not once other memory is under it.
    s, t = a.sum(), kiln.to_device(np.float32(-3.5).reshape(()))
    s.gpudata = t.gpudata
    assert float(s.get()) == -3.5


@pytest.mark.gpu
def test_fortran_arrays_copy_as_they_are():
    host = np.asfortranarray(sample((3, 5), np.float64))
    a = kiln.to_device(host)
    assert a.flags.f_contiguous and not a.flags.c_contiguous and a.strides == host.strides
    got = a.get()
    assert got.flags.f_contiguous
    np.testing.assert_array_equal(got, host)
    c = np.empty((3, 5))  # into C order: through a contiguous temporary
    a.get(c)
    np.testing.assert_array_equal(c, host)
    e = kiln.empty((3, 5), np.float64, order="F")
    assert e.strides == np.empty((3, 5), order="F").strides
    e.set(np.ascontiguousarray(host))
    np.testing.assert_array_equal(e.get(), host)
    z = kiln.zeros((2, 3), np.int8, order="F")
    np.testing.assert_array_equal(z.get(), np.zeros((2, 3), np.int8))


@pytest.mark.gpu
def test_get_into_an_array_of_another_shape_and_pagelocked():
    host = sample((4, 6))
    a = kiln.to_device(host)
    flat = np.empty(24, np.float32)
    got = a.get(flat)  # PyCUDA's: ary, filled in C order, returned in a's shape
    assert got.shape == (4, 6) and got.base is flat and a.get(np.empty((4, 6), np.float32)).base is None
    np.testing.assert_array_equal(flat, host.ravel())
    np.testing.assert_array_equal(got, host)
    other = np.empty((2, 12), np.float32)
    a[:, ::-1].get(ary=other)  # a strided view: C order, through a temporary
    np.testing.assert_array_equal(other, host[:, ::-1].reshape(2, 12))
    p = a.get(pagelocked=True)
    np.testing.assert_array_equal(p, host)
    s = kiln.Stream()
    q = kiln.pagelocked_empty((4, 6), np.float32)
    assert a.get_async(s, q) is q
    r = a.T.get(pagelocked=True, async_=True, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(q, host)
    np.testing.assert_array_equal(r, host.T)


@pytest.mark.gpu
def test_set_from_any_host_layout_into_any_view():
    host = sample((4, 6))
    a = kiln.zeros((4, 6), np.float32)
    a.set(host)
    np.testing.assert_array_equal(a.get(), host)
    a.set(host[::-1].copy()[::-1] + 1)  # reversed: made contiguous on the host
    np.testing.assert_array_equal(a.get(), host + 1)
    a.set(np.asfortranarray(host * 2))  # made C-contiguous on the host
    np.testing.assert_array_equal(a.get(), host * 2)
    a.set((host * 3).ravel())  # another shape: C order
    np.testing.assert_array_equal(a.get(), host * 3)
    want = host * 3
    a[:, ::2].set(np.full((4, 3), 9, np.float32))  # a strided view: through a temporary
    want[:, ::2] = 9
    np.testing.assert_array_equal(a.get(), want)
    s = kiln.Stream()
    a.T.set_async(np.ascontiguousarray(host.T), stream=s)
    s.synchronize()
    np.testing.assert_array_equal(a.get(), host)


@pytest.mark.gpu
def test_copy_is_contiguous_and_its_own():
    host = sample((5, 4), np.complex64)
    a = kiln.to_device(host)
    for v, hv in [(a, host), (a[::2, ::-1], host[::2, ::-1]), (a.T, host.T)]:
        c = v.copy()
        assert c.flags.forc and c.gpudata is not a.gpudata and c.ptr != a.ptr
        np.testing.assert_array_equal(c.get(), hv)
    c = a.copy()
    a[...] = 0
    np.testing.assert_array_equal(c.get(), host)


@pytest.mark.gpu
def test_assignment_matches_numpy():
    host = sample((4, 6))
    a = kiln.to_device(host)
    want = host.copy()
    cases = [
        ((slice(None), 1), 5.0),                        # a scalar: kiln._ops.fill
        ((1,), np.float32(-2)),
        ((slice(None, None, 2), slice(None, None, 3)), 7),
        ((slice(1, 3),), np.arange(6, dtype=np.float32)),    # broadcast from the host
        ((Ellipsis, 0), [1, 2, 3, 4]),                  # a list
        ((2, slice(None, None, -1)), np.arange(6, dtype=np.int64)),  # converted
        ((3,), kiln.to_device(np.full(6, 8, np.float32))),  # contiguous: one device copy
        ((slice(None), slice(0, 1)), kiln.to_device(np.array([[4.5]], np.float32))),
        ((slice(None),), kiln.to_device(np.arange(6, dtype=np.float64))),  # converted
    ]
    for key, value in cases:
        a[key] = value
        want[key] = value.get() if isinstance(value, kiln.DeviceArray) else value
        np.testing.assert_array_equal(a.get(), want)
    # Overlapping source and destination read the source as it was, as NumPy does.
    a[1:] = a[:-1]
    want[1:] = want[:-1].copy()
    np.testing.assert_array_equal(a.get(), want)
    a[:, ::-1] = a
    want[:, ::-1] = want.copy()
    np.testing.assert_array_equal(a.get(), want)
    a[...] = a  # the same elements: nothing to do
    np.testing.assert_array_equal(a.get(), want)


@pytest.mark.gpu
def test_reshape_that_needs_a_copy_gives_numpys_values():
    host = sample((4, 6, 2))
    a = kiln.to_device(host)
    for v, hv in [(a.T, host.T), (a[:, ::2], host[:, ::2]), (a[::-1, 1:], host[::-1, 1:])]:
        for shape in [(-1,), (2, -1), (hv.size // 2, 2)]:
            for order in "CF":
                r = v.reshape(shape, order=order)
                np.testing.assert_array_equal(r.get(), hv.reshape(shape, order=order))
        np.testing.assert_array_equal(v.ravel().get(), hv.ravel())


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.complex64, np.complex128])
def test_real_and_imag_of_complex_arrays_are_pycudas_contiguous_copies(dtype):
    import kiln.driver as drv
    host = sample((3, 4), dtype)
    d = kiln.to_device(host)
    for v, hv in [(d, host), (d[:, ::-2], host[:, ::-2]), (d.T, host.T)]:
        for part, hp in ((v.real, hv.real), (v.imag, hv.imag)):
            assert part.dtype == hp.dtype and part.shape == hp.shape
            np.testing.assert_array_equal(part.get(), hp)
            # in the array's order, the memory under it the parts alone, as a PyCUDA program
            # reads it through gpudata
            fortran = v.flags.f_contiguous and not v.flags.c_contiguous
            assert part.flags.f_contiguous if fortran else part.flags.c_contiguous
            raw = np.empty(part.size, part.dtype)
            drv.memcpy_dtoh(raw, part.gpudata)
            np.testing.assert_array_equal(raw, hp.ravel(order="F" if fortran else "C"))
    # a copy: writing to it leaves the array alone
    d.real.fill(0)
    np.testing.assert_array_equal(d.get(), host)
    with pytest.raises(ValueError, match="big-endian"):
        kiln.to_device(host.astype(">c16")).real


@pytest.mark.gpu
def test_real_and_imag_assigned_write_into_the_parts():
    host = sample((3, 4), np.complex128)
    a = kiln.to_device(host)
    a.imag = 0  # NumPy's way of writing the parts
    np.testing.assert_array_equal(a.get(), host.real + 0j)
    a[:, ::2].real = kiln.to_device(np.arange(3.0)[:, None])  # broadcast into a strided view
    want = host.real + 0j
    want[:, ::2].real = np.arange(3.0)[:, None]
    np.testing.assert_array_equal(a.get(), want)
    r = kiln.to_device(sample((2, 3)))
    r.real = 5
    np.testing.assert_array_equal(r.get(), np.full((2, 3), 5, np.float32))
    with pytest.raises(TypeError, match="does not have imaginary part to set"):
        r.imag = 1
    with pytest.raises(AttributeError, match="cannot delete"):
        del a.real
    z = r.imag
    assert z.dtype == np.float32 and z.shape == (2, 3)
    np.testing.assert_array_equal(z.get(), np.zeros((2, 3), np.float32))
    f = kiln.to_device(np.asfortranarray(sample((2, 3))))
    assert f.imag.flags.f_contiguous and not f.imag.flags.c_contiguous  # zeros like it


@pytest.mark.gpu
def test_view_as_another_dtype_reads_the_same_bytes():
    host = sample((3, 4))
    a = kiln.to_device(host)
    np.testing.assert_array_equal(a.view(np.uint8).get(), host.view(np.uint8))
    np.testing.assert_array_equal(a.view(np.complex64).get(), host.view(np.complex64))
    np.testing.assert_array_equal(a[::2].view(np.int32).get(), host[::2].view(np.int32))


@pytest.mark.gpu
def test_repr_and_str_are_numpys_under_the_class_name():
    a = kiln.to_device(np.array([1.0, 2.0], np.float32))
    assert repr(a) == "DeviceArray([1., 2.], dtype=float32)"
    assert str(a) == "[1. 2.]"
    host = sample((3, 4))
    m = kiln.to_device(host)
    assert repr(m) == repr(host).replace("array(", "DeviceArray(").replace(
        "\n      ", "\n" + " " * len("DeviceArray("))
    assert str(m[:, ::2]) == str(host[:, ::2])
    big = kiln.zeros(10**6, np.float64)
    assert "..." in repr(big) and len(repr(big)) < 200  # NumPy's summary
    assert repr(Mine(2, np.float32)).startswith("Mine(")


@pytest.mark.gpu
def test_conversions_of_one_element_as_numpy():
    assert float(kiln.to_device(np.float64(2.5))) == 2.5
    assert int(kiln.to_device(np.int32(-7))) == -7
    assert complex(kiln.to_device(np.complex64(1 + 2j))) == 1 + 2j
    assert bool(kiln.to_device(np.array(0.0))) is False
    assert bool(kiln.to_device(np.array([3], np.int8))) is True
    assert operator.index(kiln.to_device(np.uint16(3))) == 3
    assert [10, 20, 30][kiln.to_device(np.int64(1))] == 20
    one = np.array([4.0])
    assert outcome(float, kiln.to_device(one)) == outcome(float, one)  # as this NumPy does
    host = sample((3, 2))
    a = kiln.to_device(host)
    assert [r.get().tolist() for r in a] == host.tolist() == a.tolist()


@pytest.mark.gpu
def test_ownership_goes_through_the_allocation():
    host = sample((4, 4))
    a = kiln.to_device(host)
    mem = a.gpudata
    assert isinstance(mem, kiln.DeviceAllocation) and int(mem) == a.ptr and mem.size == 64
    assert a[1].gpudata == a.ptr + 16 and a.reshape(16).gpudata is mem
    view = a[2:]
    del a
    gc.collect()
    np.testing.assert_array_equal(view.get(), host[2:])  # the view keeps the memory
    back = np.empty(16, np.float32)
    kiln.memcpy_dtoh(back, mem)  # and so does the allocation
    np.testing.assert_array_equal(back, host.ravel())
    # PyCUDA's constructor: pool memory, kiln.mem_alloc, or memory of the caller's.
    b = kiln.DeviceArray((2, 3), np.int32)
    b.set(np.arange(6, dtype=np.int32).reshape(2, 3))
    np.testing.assert_array_equal(b.get(), np.arange(6).reshape(2, 3))
    c = kiln.DeviceArray(6, np.int32, allocator=kiln.mem_alloc)
    assert isinstance(c.gpudata, kiln.DeviceAllocation) and c.gpudata.size == 24
    c.set(np.arange(6, dtype=np.int32))
    w = kiln.DeviceArray((3,), np.int32, gpudata=c.gpudata, strides=(8,))
    np.testing.assert_array_equal(w.get(), [0, 2, 4])
    with pytest.raises(ValueError, match="outside the 24 bytes of the allocation"):
        kiln.DeviceArray((4,), np.int32, gpudata=c.gpudata, strides=(8,))
    r = kiln.DeviceArray((3,), np.int32, gpudata=int(c.gpudata) + 20, strides=(-8,), base=c)
    np.testing.assert_array_equal(r.get(), [5, 3, 1])


@pytest.mark.gpu
def test_to_device_of_a_strided_host_array():
    host = sample((6, 8))[::2, ::-3]
    a = kiln.to_device(host)
    assert a.flags.c_contiguous
    np.testing.assert_array_equal(a.get(), host)


@pytest.mark.gpu
def test_a_fortran_array_and_a_subclass_go_to_a_kernel(scale):
    a = kiln.to_device(np.asfortranarray(sample((4, 8))))
    scale(a, 2.0, 32, block=(32, 1, 1))
    np.testing.assert_array_equal(a.get(), sample((4, 8)) * 2)
    m = Mine(8, np.float32)
    m.set(np.ones(8, np.float32))
    scale(m, 3.0, 8, block=(8, 1, 1))
    np.testing.assert_array_equal(m.get(), np.full(8, 3, np.float32))


@pytest.mark.gpu
def test_strided_views_with_torch_and_cupy():
    host = sample((4, 6))
    a = kiln.to_device(host)
    torch = pytest.importorskip("torch")
    t = torch.from_dlpack(a[:, ::2])
    assert t.stride() == (6, 2) and t.data_ptr() == a.ptr
    assert np.array_equal(t.cpu().numpy(), host[:, ::2])
    x = torch.arange(24, dtype=torch.float32, device="cuda").reshape(4, 6)[::2, 1::2]
    w = kiln.asarray(x)
    assert w.strides == (48, 8) and w.ptr == x.data_ptr()
    np.testing.assert_array_equal(w.get(), x.cpu().numpy())
    cp = pytest.importorskip("cupy")
    c = cp.asarray(a.T)  # through the interface's strides
    assert c.strides == (4, 24) and c.data.ptr == a.ptr
    np.testing.assert_array_equal(c.get(), host.T)


def test_pycudas_new_like_me_and_launch_shape():
    # PyCUDA's GPUArray._new_like_me: this array's type, allocator and (same dtype) strides;
    # _grid and _block: one thread an element, 256 a block. An allocator of fake addresses
    # lets them be checked without a device.
    class Sub(kiln.DeviceArray):
        pass

    def allocator(nbytes):
        return FAKE

    a = Sub((3, 4), np.float32, allocator=allocator, order="F")
    b = a._new_like_me()
    assert type(b) is Sub and b.allocator is allocator
    assert b.strides == a.strides == (4, 12) and b.flags.f_contiguous
    c = a._new_like_me(np.float64)
    assert type(c) is Sub and c.dtype == np.float64 and c.strides == (32, 8)
    assert a._new_like_me(order="F", dtype="f8").strides == (8, 24)
    # A view that is contiguous in no order gives a contiguous array of its shape.
    v = kiln.DeviceArray((6, 4), np.float32, allocator=allocator)[::2]
    w = v._new_like_me()
    assert w.shape == (3, 4) and w.flags.c_contiguous and type(w) is kiln.DeviceArray
    with pytest.raises(TypeError):
        a._new_like_me(dtype="no such dtype")
    for n, blocks in ((0, 1), (1, 1), (256, 1), (257, 2), (10**6, 3907)):
        x = kiln.DeviceArray(n, np.uint8, allocator=allocator)
        assert (x._grid, x._block) == ((blocks, 1), (256, 1, 1)) == gpuarray.splay(n)


SUBCLASS_FORMULAS = r'''
import numpy as np, kiln, kiln.gpuarray as gpuarray
calls = []
class Own(gpuarray.GPUArray):
    # GPAW's GPUArray gives its own _axpbyz, _axpbz and _elwise_multiply, which PyCUDA's
    # operators call (-a and a / 4 its _axpbz too).
    def _axpbyz(self, selffac, other, otherfac, out, add_timer=None, stream=None):
        calls.append(("axpbyz", selffac, otherfac))
        return gpuarray.GPUArray._axpbyz(self, selffac, other, otherfac, out)
    def _axpbz(self, selffac, other, out, stream=None):
        calls.append(("axpbz", selffac, other))
        return gpuarray.GPUArray._axpbz(self, selffac, other, out)
    def _elwise_multiply(self, other, out, stream=None):
        calls.append(("multiply",))
        return gpuarray.GPUArray._elwise_multiply(self, other, out)
    def __getitem__(self, index):  # GPAW's views are of its class
        v = gpuarray.GPUArray.__getitem__(self, index)
        return Own(v.shape, v.dtype, gpudata=v.gpudata, strides=v.strides, base=self)
    def fill(self, value, stream=None):
        calls.append(("fill", value))
        return gpuarray.GPUArray.fill(self, value)
h = np.arange(4, dtype=np.float32)
a = Own(h.shape, h.dtype)
a.set(h)
b = gpuarray.to_gpu(h + 1)
for expr, want, call in [("a + b", h + h + 1, ("axpbyz", 1, 1)),
                         ("a - b", h - h - 1, ("axpbyz", 1, -1)),
                         ("a * b", h * (h + 1), ("multiply",)),
                         ("a + 2", h + 2, ("axpbz", 1, 2)), ("a - 2", h - 2, ("axpbz", 1, -2)),
                         ("3 - a", 3 - h, ("axpbz", -1, 3)), ("2 * a", 2 * h, ("axpbz", 2, 0)),
                         ("a / 4", h / 4, ("axpbz", 0.25, 0)), ("-a", -h, ("axpbz", -1, 0)),
                         ("b + b", 2 * h + 2, None)]:
    before = len(calls)
    r = eval(expr)
    assert calls[before:] == ([call] if call else []), (expr, calls[before:])
    assert type(r) is (Own if call else gpuarray.GPUArray), (expr, type(r))
    if CHECK:
        np.testing.assert_allclose(r.get(), want)
c = gpuarray.to_gpu(h)  # kiln's own array in place first: its plan serves the subclass too
c += b
c *= 2
a += b
a *= 2
assert calls[-2:] == [("axpbyz", 1, 1), ("axpbz", 2, 0)], calls[-2:]
if CHECK:
    np.testing.assert_allclose(a.get(), (2 * h + 1) * 2)
a[1] = 7.0  # PyCUDA's __setitem__ of a scalar: self[index].fill(value)
a[2:] = np.float32(5)
assert calls[-2:] == [("fill", 7.0), ("fill", 5)], calls[-2:]
b[0] = 9  # a plain array's own setitem
assert calls[-1] == ("fill", 5)
if CHECK:
    np.testing.assert_allclose(a.get(), [2, 7, 5, 5])
    assert b.get()[0] == 9
print("ok")
'''


def test_a_subclasss_own_axpbyz_axpbz_and_multiply_are_what_its_operators_call(fake_driver):
    r = run_python("CHECK = False\n" + SUBCLASS_FORMULAS,
                   env={"KILN_CUDA_PATH": str(fake_driver)})
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stdout + r.stderr
