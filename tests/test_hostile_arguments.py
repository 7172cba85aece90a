"""Arguments that fight back: host arrays of Python objects, objects whose __index__ frees the
memory kiln is about to use, lists that empty themselves while read, arrays whose memory was
freed, and layouts that reach past the address space. Each is an exception, never a crash nor
a copy or launch over memory that is gone.

Most of these need kiln to believe it has a GPU, so they run in a child Python on the fake
driver (conftest.py's fake_driver), whose device memory is host memory: a copy over freed
memory there would crash the child, as it would corrupt a real GPU's. Each case prints one line
of JSON: the exception's type and message, or None, and the launches the driver saw."""
import gc
import json

import numpy as np
import pytest

import kiln
import kiln.driver as drv
from helpers import run_python

FAKE = 1 << 40  # an address no test reads or writes

CHILD = r'''
import ctypes, gc, json, os
import numpy as np
import kiln, kiln.driver as drv, kiln.gpuarray as ga, kiln.cumath as cm
from kiln.elementwise import ElementwiseKernel

fake = ctypes.CDLL(os.environ["KILN_CUDA_PATH"])
out = {}

def case(name, f):
    before = fake.fakecuda_launches()
    try:
        f()
        error = None
    except Exception as e:
        error = [type(e).__name__, str(e)]
    out[name] = [error, fake.fakecuda_launches() - before]

# The device address's __index__ frees the host buffer: taken after the address, it is empty.
H = np.ones(1 << 20, np.float32)
D = drv.mem_alloc(H.nbytes)
class Frees:
    def __init__(self, host):
        self.host = host
    def __index__(self):
        self.host.resize(0, refcheck=False)
        return int(D)
case("dtoh_index_frees", lambda: drv.memcpy_dtoh(H, Frees(H)))
G = np.ones(1 << 20, np.float32)
case("htod_index_frees", lambda: drv.memcpy_htod(Frees(G), G))
out["sizes_after"] = [H.size, G.size]

# A 2D copy's destination field frees its source: both sides' fields are read before either
# buffer is taken, so the copy sees the emptied source.
S = np.ones(1 << 16, np.uint8)
class Late:
    def __index__(self):
        S.resize(0, refcheck=False)
        return 0
m = drv.Memcpy2D()
m.set_src_host(S)
m.set_dst_device(D)
m.width_in_bytes = m.src_pitch = m.dst_pitch = 1 << 16
m.height = 1
m.dst_y = Late()
case("memcpy2d_field_frees", m)

# An array whose memory was freed: every launch and copy is refused, views and kiln's own
# strided kernels included.
a = ga.to_gpu(np.arange(8, dtype=np.float32))
view = a[1:]
a.gpudata.free()
k = ElementwiseKernel("float *x", "x[i] = 1")
for name, f in [("get", a.get), ("set", lambda: a.set(np.ones(8, np.float32))),
                ("fill", lambda: a.fill(1)), ("iadd", lambda: a.__iadd__(1)),
                ("mul", lambda: a * 2), ("strided_mul", lambda: a[::2] * 2),
                ("sin", lambda: cm.sin(a)), ("sum", lambda: ga.sum(a)), ("copy", a.copy),
                ("old_view", view.get), ("elementwise", lambda: k(a)),
                ("kernel_call", lambda: kiln.SourceModule(
                    "__global__ void f(float *x) {}").get_function("f")(a, block=(1, 1, 1)))]:
    case("freed_" + name, f)
# Memory freed while a copy uses it is freed when the copy ends: the address's __index__ runs
# inside the copy, as another thread's free() would.
M = drv.mem_alloc(1 << 20)
drv.memset_d8(M, 7, 1 << 20)
class FreesFirst:
    def __index__(self):
        address = int(M)
        M.free()
        return address
got = np.zeros(1 << 20, np.uint8)
case("free_inside_copy", lambda: drv.memcpy_dtoh(got, FreesFirst()))
out["copied_then_freed"] = [int(got.min()), int(got.max()), repr(M)]

# Threads: one copies an array, another replaces its memory (the old allocation's last
# reference let go) or frees it, again and again.
import threading
host = np.empty(1 << 22, np.uint8)
failures = []
for round_ in range(40):
    arr = ga.empty(1 << 22, np.uint8)
    def reader():
        try:
            arr.get(ary=host)
        except ValueError:
            pass  # the memory was seen freed: refused
        except Exception as e:
            failures.append(repr(e))
    t = threading.Thread(target=reader)
    t.start()
    if round_ % 2:
        arr.gpudata = drv.mem_alloc(1 << 22)
    else:
        arr.gpudata.free()
    t.join()
out["threads"] = failures
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def hostile(fake_driver):
    r = run_python(CHILD, env={"KILN_CUDA_PATH": str(fake_driver)}, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def test_an_address_whose_index_frees_the_host_buffer_copies_nothing_freed(hostile):
    assert hostile["dtoh_index_frees"] == [None, 0]
    assert hostile["htod_index_frees"] == [None, 0]
    assert hostile["sizes_after"] == [0, 0]  # the buffers were emptied before they were taken


def test_memory_freed_while_a_copy_uses_it_goes_when_the_copy_ends(hostile):
    assert hostile["free_inside_copy"] == [None, 0]
    low, high, after = hostile["copied_then_freed"]
    assert (low, high) == (7, 7) and "freed" in after
    assert hostile["threads"] == []


def test_a_2d_copy_reads_every_field_before_taking_a_buffer(hostile):
    error, _ = hostile["memcpy2d_field_frees"]
    assert error[0] == "ValueError" and "which has 0" in error[1], error


@pytest.mark.parametrize("name", ["get", "set", "fill", "iadd", "mul", "strided_mul", "sin",
                                  "sum", "copy", "old_view", "elementwise", "kernel_call"])
def test_an_array_whose_memory_was_freed_is_never_launched_on_nor_copied(hostile, name):
    error, launched = hostile["freed_" + name]
    assert launched == 0
    assert error and error[0] == "ValueError" and "memory was freed" in error[1], error


@pytest.mark.parametrize("make", [
    lambda: np.empty(2, object), lambda: np.zeros(2, [("a", np.int32), ("o", object)]),
    lambda: memoryview(np.empty(2, object)),
])
def test_host_memory_of_python_objects_is_refused_before_any_copy(make):
    # Device bytes read as object pointers crash the interpreter when the array is used.
    with pytest.raises(TypeError, match="holds Python objects"):
        drv.memcpy_dtoh(make(), FAKE)
    with pytest.raises(TypeError, match="holds Python objects"):
        drv.memcpy_htod(FAKE, make())


def test_kiln_allocates_no_host_memory_for_python_objects():
    for dtype in (object, [("a", np.int32), ("o", object)]):
        for allocate in (drv.pagelocked_empty, drv.pagelocked_zeros, drv.managed_empty):
            with pytest.raises(TypeError, match="holds Python objects"):
                allocate(3, dtype)
    with pytest.raises(TypeError, match="holds Python objects"):
        drv.from_device(FAKE, (2,), object)
    with pytest.raises(TypeError, match="holds Python objects"):
        drv.pagelocked_empty_like(np.zeros(3, object))


def emptying_list():
    """A shape list whose items empty it as they are read (each item's __index__)."""
    items = []

    class Clears:
        def __index__(self):
            items.clear()
            gc.collect()
            return 1

    items.extend(Clears() for _ in range(4))
    return items


def test_a_shape_list_that_empties_itself_is_read_as_it_was():
    a = kiln.DeviceArray(emptying_list(), np.float32, gpudata=FAKE)
    assert a.shape == (1, 1, 1, 1)
    a.shape = emptying_list()
    assert a.reshape(emptying_list()).shape == (1, 1, 1, 1)


def test_shapes_too_large_to_lay_out_are_refused_even_without_elements():
    # NumPy refuses them too: the strides would wrap around.
    for shape in [(0, 2**63 - 1), (0, 2**62), (2**61, 0, 8)]:
        with pytest.raises(ValueError, match="too large"):
            kiln.DeviceArray(shape, np.float64, gpudata=FAKE)
    assert kiln.DeviceArray((0, 2**59), np.float64, gpudata=FAKE).size == 0


def test_a_wrapped_array_whose_strides_pass_the_address_space_is_refused():
    class Foreign:
        def __init__(self, strides, data=FAKE):
            self.__cuda_array_interface__ = {"shape": (4,), "typestr": "<f4", "version": 3,
                                             "data": (data, False), "strides": strides}

    with pytest.raises(ValueError, match="reach further than any address can"):
        kiln.asarray(Foreign((2**62,)))
    with pytest.raises(ValueError, match="past the ends of the address space"):
        kiln.asarray(Foreign((-8,), data=8))
    assert kiln.asarray(Foreign((-4,), data=FAKE)).strides == (-4,)  # a reversed view
