"""Argument conversion and launch-shape errors: each is raised before the GPU is touched, so
these run everywhere (the arguments are wrong, so nothing launches on a GPU either)."""
import numpy as np
import pytest

import kiln
import kiln.driver as drv
from helpers import ARCH

SRC = """
struct S { char c; double d; int i; };
__global__ void many(int i, unsigned u, char c, unsigned char uc, short s, long long l,
                     float f, double d, float *p, int4 v, S st) {}
extern "C" __global__ void untyped(int i, float *p) {}
"""


@pytest.fixture(scope="module")
def many():
    return kiln.SourceModule(SRC, arch=ARCH).get_function("many")


@pytest.fixture(scope="module")
def untyped():
    return kiln.SourceModule(SRC, arch=ARCH).get_function("untyped")


def good_args():
    return [1, 2, 3, 4, 5, 6, 1.5, 2.5, 0, b"\0" * 16, b"\0" * 24]


def call_with(f, index, value, **kw):
    args = good_args()
    args[index] = value
    kw.setdefault("block", (1, 1, 1))
    kw.setdefault("grid", (0, 1))  # a zero grid: a correct argument list still stops here
    return f(*args, **kw)


def test_good_arguments_reach_the_launch_checks(many):
    with pytest.raises(ValueError, match="grid.x is 0"):
        call_with(many, 0, 1)


@pytest.mark.parametrize("index, value, error, phrase", [
    (0, 2**31, ValueError, r"argument 0 of .* \(a i32 parameter\): 2147483648 does not fit"),
    (0, -2**31 - 1, ValueError, "does not fit a signed 32-bit int"),
    (1, -1, ValueError, "does not fit an unsigned 32-bit int"),
    (1, 2**32, ValueError, "does not fit an unsigned 32-bit int"),
    (2, 128, ValueError, "does not fit a signed 8-bit int"),
    (3, 256, ValueError, "does not fit an unsigned 8-bit int"),
    (4, 40000, ValueError, "does not fit a signed 16-bit int"),
    (5, 2**63, ValueError, "does not fit a signed 64-bit int"),
    (5, 2**200, ValueError, "does not fit"),
    (0, 1.5, TypeError, r"argument 0 .* expected an int, got float"),
    (0, "3", TypeError, "expected an int, got str"),
    (0, np.float32(1), TypeError, "expected an int, got numpy.float32"),
    (0, np.int64(2**40), ValueError, "does not fit a signed 32-bit int"),
    (1, np.int8(-1), ValueError, "does not fit an unsigned 32-bit int"),
    (6, 1e39, ValueError, "does not fit a 32-bit float"),
    (6, "x", TypeError, "expected a real number, got str"),
    (6, None, TypeError, "expected a real number, got NoneType"),
    (8, np.zeros(4, np.float32), TypeError, "wrap it in kiln.In, kiln.Out or kiln.InOut"),
    (8, 1.0, TypeError, "expected a device pointer"),
    (8, -1, ValueError, "does not fit an unsigned 64-bit value"),
    (8, [1, 2], TypeError, "expected a device pointer"),
    (9, b"\0" * 15, ValueError, "got 15 bytes; the parameter is a struct of 16 bytes"),
    (9, 5, TypeError, "expected"),
    (10, np.zeros(2, np.int64), ValueError, "got 16 bytes; the parameter is a struct of 24"),
    (2, kiln.In(np.zeros(1, np.int8)), TypeError, "expected an int"),
])
def test_bad_argument_names_index_and_expectation(many, index, value, error, phrase):
    with pytest.raises(error, match=phrase):
        call_with(many, index, value)


@pytest.mark.parametrize("index, value", [
    (0, -2**31), (0, 2**31 - 1), (1, 2**32 - 1), (2, -128), (3, 255), (5, -2**63),
    (0, True), (0, np.int16(-5)), (1, np.uint32(7)), (6, 3), (6, np.float64(1.25)),
    (0, np.uint32(2**32 - 1)), (1, np.int32(-1)), (5, np.uint64(2**64 - 1)),  # their bits
    (7, np.float32(2.5)), (6, float("inf")), (6, float("nan")),
    (8, 0), (8, 2**64 - 1), (8, np.uint64(123)),
    (9, np.array([1, 2, 3, 4], np.int32)), (9, bytearray(16)), (9, memoryview(b"\1" * 16)),
    (10, np.zeros((), dtype=np.dtype([("c", "i1"), ("d", "f8"), ("i", "i4")], align=True))[()]),
])
def test_edge_values_are_accepted(many, index, value):
    with pytest.raises(ValueError, match="grid.x is 0"):
        call_with(many, index, value)


def test_sign_unknown_parameters_take_either_range(untyped):
    for value in (-2**31, 2**32 - 1):
        with pytest.raises(ValueError, match="grid.x is 0"):
            untyped(value, 0, block=1, grid=0)
    with pytest.raises(ValueError, match="does not fit a 32-bit int"):
        untyped(2**32, 0, block=1, grid=0)


def test_an_integer_parameter_of_ptx_refuses_a_numpy_float(untyped):
    # extern "C" in PTX: .u32 says int, so a float's bits are never passed for it
    with pytest.raises(TypeError, match=r"argument 0 of untyped \(a b32 parameter\): expected "
                                        r"an int, got numpy.float32"):
        untyped(np.float32(1.5), 0, block=1, grid=0)


COMPLEX_SRC = """
#include <pycuda-complex.hpp>
__global__ void cplx(pycuda::complex<float> *z, pycuda::complex<float> a,
                     const pycuda::complex<double> b) {}
"""


def test_a_complex_parameter_takes_any_number_as_a_complex():
    f = kiln.SourceModule(COMPLEX_SRC, arch=ARCH).get_function("cplx")
    for a in (0.5, 2, 1 + 2j, np.float32(0.5), np.float64(2), np.int32(3), np.complex64(1j),
              np.complex128(1 + 1j), np.array(2.5), True):
        with pytest.raises(ValueError, match="grid.x is 0"):
            f(0, a, a, block=1, grid=0)
    with pytest.raises(ValueError, match="argument 1 .* does not fit a 32-bit float"):
        f(0, 1e300, 0, block=1, grid=0)
    with pytest.raises(ValueError, match="argument 1 .* does not fit a 32-bit float"):
        f(0, complex(0, 1e300), 0, block=1, grid=0)  # the imaginary part too
    with pytest.raises(TypeError, match="argument 1 .* got str"):
        f(0, "1", 0, block=1, grid=0)
    with pytest.raises(ValueError, match="argument 2 .* got 8 bytes; the parameter is a struct "
                                         "of 16 bytes"):
        f(0, 0, b"\0" * 8, block=1, grid=0)


def test_in_out_arrays_are_checked_at_the_call(many):
    a = np.zeros((4, 4), np.float32)
    with pytest.raises(ValueError, match=r"argument 8 .* In is not contiguous"):
        call_with(many, 8, kiln.In(a[:, 1]))
    ro = np.zeros(4, np.float32)
    ro.flags.writeable = False
    with pytest.raises(ValueError, match=r"argument 8 .* Out is read-only"):
        call_with(many, 8, kiln.Out(ro))
    with pytest.raises(ValueError, match="InOut is read-only"):
        call_with(many, 8, kiln.InOut(ro))
    with pytest.raises(ValueError, match="grid.x is 0"):
        call_with(many, 8, kiln.In(ro))  # reading a read-only array is fine


def test_an_array_of_one_element_is_its_scalar(many):
    # As PyCUDA's packing reads one, which packs an array's bytes: a reduction's result brought
    # to the host, 0-d; np.float32(x) of a one-element array x, an array still.
    for index, value in ((0, np.array(7, np.int16)), (6, np.array(1.5)), (7, np.array(2)),
                         (1, np.array(True)), (6, np.float32(np.array([1.5]))),
                         (0, np.array([[7]], np.int32))):
        with pytest.raises(ValueError, match="grid.x is 0"):
            call_with(many, index, value)
    with pytest.raises(ValueError, match=r"argument 0 .* 1099511627776 does not fit a signed"):
        call_with(many, 0, np.array(2**40))
    with pytest.raises(TypeError, match=r"argument 0 .* expected an int, got numpy.float64"):
        call_with(many, 0, np.array(1.5))
    with pytest.raises(TypeError, match=r"argument 6 .* expected a real number, got numpy.str_"):
        call_with(many, 6, np.array("x"))
    with pytest.raises(TypeError, match=r"argument 6 .* expected a real number, got numpy.ndarray"):
        call_with(many, 6, np.array([1.5, 2.5]))  # two: not a number
    with pytest.raises(ValueError, match=r"argument 6 .* does not fit a 32-bit float"):
        call_with(many, 6, np.array([1e300]))  # converted as a scalar is, and checked
    with pytest.raises(TypeError, match=r"argument 8 .* a numpy array lives in host memory"):
        call_with(many, 8, np.array(0x10000))


class Holder:
    """Another library's array as PyCUDA sees it: an object whose gpudata is the address."""

    def __init__(self, gpudata):
        self.gpudata = gpudata


def test_an_object_with_gpudata_passes_it_as_the_pointer_as_in_pycuda(many):
    for gpudata in (0x10000, np.uintp(0x10000), np.int64(0x10000)):
        with pytest.raises(ValueError, match="grid.x is 0"):
            call_with(many, 8, Holder(gpudata))


class Raising:
    @property
    def gpudata(self):
        raise RuntimeError("no address yet")


@pytest.mark.parametrize("value, error, phrase", [
    (Holder("0x10000"), TypeError, r"argument 8 of .*its gpudata is a str, where a device "
                                   r"pointer \(an int or a kiln.mem_alloc allocation\)"),
    (Holder(1.5), TypeError, "its gpudata is a float"),
    (Holder(Holder(0x10000)), TypeError, "its gpudata is a Holder"),
    (Holder(-1), ValueError, "its gpudata is no address"),
    (Holder(2**64), ValueError, "its gpudata is no address"),
    (Raising(), RuntimeError, "no address yet"),  # raised as it was
])
def test_a_gpudata_that_is_no_address_is_refused(many, value, error, phrase):
    with pytest.raises(error, match=phrase):
        call_with(many, 8, value)


def test_in_out_take_numpy_arrays_only():
    with pytest.raises(TypeError, match=r"In\(\) takes a numpy array, not list"):
        kiln.In([1, 2, 3])
    with pytest.raises(TypeError, match="takes a numpy array"):
        kiln.Out(b"abc")
    assert kiln.InOut(np.zeros(3)).array.shape == (3,)


def test_inout_is_an_in_and_an_out_as_pycuda_documents_it():
    x = np.zeros(3)
    assert isinstance(kiln.InOut(x), kiln.In) and isinstance(kiln.InOut(x), kiln.Out)
    assert issubclass(kiln.InOut, (kiln.In, kiln.Out))
    assert not isinstance(kiln.In(x), kiln.Out) and not isinstance(kiln.Out(x), kiln.In)

    class Staged(kiln.In):  # a program's own subclass, as of PyCUDA's Python classes
        pass

    staged = Staged(x)
    assert isinstance(staged, kiln.In) and staged.array is x and "Staged" in repr(staged)
    with pytest.raises(TypeError, match="cannot create"):
        type(kiln.In(x)).__mro__[-2](x)  # the base holding the layout makes no objects
    with pytest.raises(TypeError, match="immutable"):
        kiln.In.array = None


def test_a_programs_subclasses_of_in_and_out_are_made_as_pycudas(many):
    # PyCUDA's are Python classes: a subclass's __init__ takes what it likes and gives the
    # array through ArgumentHandler.__init__(self, array) or by setting self.array.
    class Zeros(kiln.In):
        def __init__(self, n):
            super().__init__(np.zeros(n, np.float32))

    class Tagged(kiln.Out):
        def __init__(self, array, tag):
            self.array, self.tag = array, tag

    class Forgetful(kiln.In):
        def __init__(self, n):
            pass

    assert Zeros(5).array.shape == (5,) and Tagged(np.ones(2), "t").tag == "t"
    with pytest.raises(TypeError, match=r"takes a numpy array, not list"):
        Tagged([1, 2], "t")
    forgot = Forgetful(3)
    assert "no array yet" in repr(forgot)
    with pytest.raises(AttributeError, match="has no array yet"):
        forgot.array
    with pytest.raises(ValueError, match="holds no array: its __init__ did not give one"):
        call_with(many, 8, forgot)
    # A class with both In and Out among its bases copies both ways, as PyCUDA's would (In
    # brings pre_call, Out post_call): a read-only array is refused as for InOut.
    ro = np.zeros(3, np.float32)
    ro.flags.writeable = False

    class Both(kiln.In, kiln.Out):
        pass

    with pytest.raises(ValueError, match="the array in InOut is read-only"):
        call_with(many, 8, Both(ro))

    class Hooked(kiln.In):
        def pre_call(self, stream):
            pass

    with pytest.raises(TypeError, match="has a pre_call of its own, which kiln does not call"):
        Hooked(ro)


def test_in_takes_a_numpy_scalar_as_its_value_and_out_refuses_one():
    # PyCUDA's In copies any buffer with nbytes: programs pass drv.In(np.int32(n)).
    a = kiln.In(np.int32(7)).array
    assert (a.shape, a.dtype, int(a)) == ((), np.int32, 7)
    for kind in (kiln.Out, kiln.InOut):
        with pytest.raises(TypeError, match="a NumPy scalar cannot be written back"):
            kind(np.float32(1))


def test_argument_count(many):
    with pytest.raises(TypeError, match=r"takes 11 arguments \(2 given\)"):
        many(1, 2, block=1)


@pytest.mark.parametrize("kw, error, phrase", [
    ({}, TypeError, "needs block="),
    ({"block": (1, 1, 1), "grid": (0, 1)}, ValueError, "grid.x is 0"),
    ({"block": (0, 1, 1)}, ValueError, "block.x is 0"),
    ({"block": (1024, 2, 1)}, ValueError, "2048 threads; no CUDA device allows more than 1024"),
    ({"block": (1, 1, 1, 1)}, ValueError, "block must be an int or a tuple of 1 to 3 ints"),
    ({"block": -1}, ValueError, "block must be"),
    ({"block": 1.0}, ValueError, "block must be"),
    ({"block": 1, "grid": "x"}, ValueError, "grid must be"),
    ({"block": 1, "shared": -1}, ValueError, "shared must be a number of bytes"),
    ({"block": 1, "stream": "s"}, TypeError, "stream must be None, an int"),
    ({"block": 1, "blocks": 1}, TypeError, "unexpected keyword argument 'blocks'"),
])
def test_launch_shape_errors(many, kw, error, phrase):
    with pytest.raises(error, match=phrase):
        many(*good_args(), **kw)


@pytest.mark.parametrize("kw", [{"block": (1, 1, 1), "grid": (0, 1)}, {"block": (0, 1, 1)},
                                {"block": (1024, 2, 1)}])
def test_a_launch_shape_the_driver_would_refuse_is_what_pycuda_programs_catch(many, kw):
    # Refused before the driver sees it, as the driver would: a ValueError, and the LogicError
    # PyCUDA raises for CUDA_ERROR_INVALID_VALUE (a LaunchError too: the registers' refusal).
    with pytest.raises(kiln.LaunchConfigError) as refused:
        many(*good_args(), **kw)
    for cls in (ValueError, kiln.LogicError, kiln.LaunchError, kiln.CudaError):
        assert isinstance(refused.value, cls)
    assert (refused.value.code, refused.value.name) == (1, "CUDA_ERROR_INVALID_VALUE")
    assert refused.value.kernel is None and refused.value.launch is None
    # A refusal that is not the driver's stays a plain ValueError.
    with pytest.raises(ValueError) as plain:
        many(*good_args(), block=-1)
    assert type(plain.value) is ValueError


@pytest.mark.parametrize("shared", [np.int64(64), np.uint32(64), np.array(64), True])
def test_shared_bytes_take_any_integer_as_block_and_grid_do(untyped, shared):
    with pytest.raises(ValueError, match="grid.x is 0"):
        untyped(1, 0, block=(32, 1, 1), grid=(0, 1), shared=shared)
    untyped.prepare("iP")
    with pytest.raises(ValueError, match="grid.x is 0"):
        untyped.prepared_call((0, 1), (32, 1, 1), 1, 0, shared_size=shared)
    for bad in (np.float32(64), -1, 2**32):
        with pytest.raises(ValueError, match="shared must be a number of bytes"):
            untyped(1, 0, block=(32, 1, 1), grid=(1, 1), shared=bad)
        with pytest.raises(ValueError, match="shared_size must be a number of bytes"):
            untyped.prepared_call((1, 1), (32, 1, 1), 1, 0, shared_size=bad)


# ---- Strings and sequences read while Python code runs --------------------------------------------

@pytest.mark.parametrize("types, phrase", [
    ("ii\0P", "the argument types holds a NUL character"),
    (b"ii\0P", "the argument types hold a NUL byte"),
    (["i", "i\0P"], "an argument type holds a NUL character"),
])
def test_prepare_refuses_a_nul_in_the_types(untyped, types, phrase):
    with pytest.raises(ValueError, match=phrase):
        untyped.prepare(types)


def test_prepare_takes_a_dtype_like_object_as_a_pointer_as_pycudas(untyped):
    # PyCUDA's prepare reads a NumPy scalar type, a dtype or a format; anything else is a
    # pointer, even an object NumPy would ask for .dtype (whose code could change the list).
    asked = []

    class DtypeLike:
        @property
        def dtype(self):
            asked.append(1)
            return np.dtype(np.int32)

    types = ["i", DtypeLike()]
    assert untyped.prepare(types) is untyped
    assert untyped.arg_format == "iP" and not asked and len(types) == 2
    with pytest.raises(ValueError, match="grid.x is 0"):
        untyped.prepared_call((0, 1), (1, 1, 1), 1, 0)


class ShrinkingInt(np.int64):
    """A NumPy integer whose __index__ empties the launch-shape list it sits in."""

    def __index__(self):
        self.owner.clear()
        return int(self)


def test_launch_shape_lists_are_copied_before_reading(untyped):
    grid = [ShrinkingInt(0), 1, 1]
    grid[0].owner = grid
    with pytest.raises(ValueError, match="grid.x is 0"):
        untyped(1, 0, block=(1, 1, 1), grid=grid)
    block = [ShrinkingInt(2), 3]
    block[0].owner = block
    with pytest.raises(ValueError, match="grid.x is 0"):
        untyped(1, 0, block=block, grid=(0, 1))


@pytest.mark.gpu
def test_an_allocation_freed_by_another_argument_is_not_launched_on(untyped):
    alloc = kiln.mem_alloc(64)

    class Freeing:
        """An int argument whose __index__ frees the allocation passed after it."""

        def __index__(self):
            alloc.free()
            return 1

    with pytest.raises(ValueError, match=r"argument 1 of untyped .*the allocation was freed"):
        untyped(Freeing(), alloc, block=1, grid=1)


@pytest.mark.gpu
def test_a_copy_whose_source_frees_its_destination_is_refused():
    dest, src = kiln.mem_alloc(64), kiln.mem_alloc(64)

    class FreeingAddress:
        """The source's address, whose __index__ frees the destination first."""

        def __index__(self):
            dest.free()
            return int(src)

    with pytest.raises(ValueError, match="the destination allocation was freed"):
        drv.memcpy_dtod(dest, FreeingAddress(), 64)
