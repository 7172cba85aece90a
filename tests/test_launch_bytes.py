"""What a kernel call hands the driver, byte for byte, checked on any machine: kiln opens a CUDA
driver that does no GPU work (bench/fakecuda/fakecuda.c, built by conftest.py's fake_driver; bench/cpu.py times
launches with it) and that copies each launch's parameters and shape as it is given them.

Every way an argument is packed goes through it: the one-pass path of Python ints and floats,
the rest (NumPy scalars, bool, __index__, allocations, device arrays, structs) in any mix with
them, the range of every integer class, kernels of 64 and of 300 parameters (past what is
packed on the stack), the launch shape read again or remembered, prepared_call; and every
refusal, which must come before anything is launched. The driver is opened once per process,
so all cases run in one new Python and each test reads its own case's outcome."""
import json
import struct

import numpy as np
import pytest

from helpers import run_python

# struct codes of the parameters of the kernel ints: i8, u8, ..., u64, then the pointer
INT_CODES = ["b", "B", "h", "H", "i", "I", "q", "Q", "Q"]

CHILD = r'''
import ctypes, json, os, sys
import numpy as np
import kiln

fake = ctypes.CDLL(os.environ["KILN_CUDA_PATH"])
SRC = r"""
__global__ void ints(signed char a, unsigned char b, short c, unsigned short d, int e,
                     unsigned f, long long g, unsigned long long h, int *p) {}
__global__ void reals(float x, double y, int *p) {}
struct S { int a; float b; double c; };
__global__ void agg(int i, S s, float x) {}
struct Zf { float re, im; };
struct Zd { double re, im; };
extern "C" __global__ void cplx(Zf a, Zd b, int *p) {}
extern "C" __global__ void args64(int *p, %s) {}
extern "C" __global__ void wide(%s) {}
""" % (", ".join(f"int x{i}" for i in range(1, 64)), ", ".join(f"int w{i}" for i in range(300)))
m = kiln.SourceModule(SRC)
SIZES = {"ints": [1, 1, 2, 2, 4, 4, 8, 8, 8], "reals": [4, 8, 8], "agg": [4, 16, 4],
         "args64": [8] + [4] * 63, "wide": [4] * 300, "cplx": [8, 16, 8]}
functions = {name: m.get_function(name) for name in SIZES}
out = {}
alloc = kiln.mem_alloc(64)
freed = kiln.mem_alloc(64)
freed.free()
try:  # a second free: PyCUDA's LogicError
    freed.free()
    out["second_free"] = None
except Exception as e:
    out["second_free"] = [type(e).__name__, isinstance(e, kiln.LogicError), str(e)]
array = kiln.to_device(np.arange(4, dtype=np.float32))
out["pointers"] = [int(alloc), int(array.ptr)]

class Index:
    def __init__(self, v):
        self.v = v
    def __index__(self):
        return self.v

def case(name, kernel, *args, call=None, **kw):
    sizes = SIZES[kernel]
    fake.fakecuda_record(len(sizes), (ctypes.c_uint * len(sizes))(*sizes))
    before = fake.fakecuda_launches()
    try:
        (call or functions[kernel])(*args, **kw)
        error = None
    except Exception as e:
        error = f"{type(e).__name__}: {e}"
    launched = fake.fakecuda_launches() - before
    got = (ctypes.c_ubyte * sum(sizes))()
    shape = (ctypes.c_uint * 7)()
    fake.fakecuda_recorded(got, shape)
    out[name] = {"error": error, "launched": launched,
                 "bytes": bytes(got).hex() if launched else None,
                 "shape": list(shape) if launched else None}

b = (32, 1, 1)
A = alloc
case("int_edges_low", "ints", -128, 0, -32768, 0, -2**31, 0, -2**63, 0, 0, block=b)
case("int_edges_high", "ints", 127, 255, 32767, 65535, 2**31 - 1, 2**32 - 1, 2**63 - 1,
     2**64 - 1, 2**64 - 1, block=b)
case("int_small", "ints", -1, 1, -2, 2, -3, 3, -4, 4, 5, block=b)
case("int_mixed", "ints", np.int8(-5), True, Index(-7), np.uint16(9), np.int32(-11), 12,
     np.int64(-13), Index(2**64 - 2), A, block=b)
case("int_array_pointer", "ints", 1, 2, 3, 4, 5, 6, 7, 8, array, block=b)
# A NumPy integer of the parameter's width and the other sign: its bits (a np.uint32 seed for
# an int), as PyCUDA packs a NumPy scalar by its own type.
case("int_numpy_other_sign", "ints", np.uint8(255), np.int8(-1), np.uint16(65535),
     np.int16(-2), np.uint32(2**32 - 1), np.int32(-5), np.uint64(2**64 - 1), np.int64(-1), A,
     block=b)
case("reals", "reals", 1.5, 2.25, A, block=b)
case("reals_from_ints", "reals", 3, -4, 7, block=b)
case("reals_numpy", "reals", np.float32(0.5), np.float64(-0.125), A, block=b)
case("agg", "agg", -9, np.array((1, 2.5, -3.0), dtype=[("a", "<i4"), ("b", "<f4"),
                                                       ("c", "<f8")])[()], 0.75, block=b)
case("args64", "args64", A, *range(1, 64), block=b, grid=(1, 1))
case("wide", "wide", *range(-150, 150), block=b)
case("prepared", "ints", (4, 5), (8, 2, 2), 1, 2, 3, 4, 5, 6, 7, 8, A,
     call=functions["ints"].prepare("bBhHiIqQP").prepared_call)
# Types of the other signedness (neon's magic numbers, 'I' for an int): PyCUDA's struct.pack
# passes the bits; values in both types' ranges, and NumPy's, go as they are.
swapped = m.get_function("ints").prepare("BbHhIiQqP")
case("prepared_bits", "ints", 1, 1, 255, -1, 65535, -1, 2863311531, -1, 2**64 - 1, -1, A,
     call=swapped.prepared_call)
case("prepared_bits_async", "ints", 1, 1, 7, -7, np.uint16(40000), np.int16(-2), 5,
     np.int32(-5), np.uint64(2**63), np.int64(-2**63), A,
     call=lambda *a: swapped.prepared_async_call(a[0], a[1], None, *a[2:]))
case("prepared_bits_dtypes", "ints", 1, 1, 0, 0, 0, 0, 2**32 - 1, 0, 0, 0, A,
     call=m.get_function("ints").prepare([np.uint8, np.int8, np.uint16, np.int16, np.uint32,
                                          np.int32, np.uint64, np.int64, np.intp]).prepared_call)
# Complex struct parameters prepared 'F' and 'D' (pycuda::complex in an extern "C" kernel,
# whose parameters are known only by size): a number is packed as that complex, as PyCUDA's
# struct.pack packs it; without prepare such a parameter takes bytes alone.
cplx_fd = m.get_function("cplx").prepare("FDP")
case("prepared_complex", "cplx", 1, 1, 1 + 2j, 3, A, call=cplx_fd.prepared_call)
case("prepared_complex_numpy", "cplx", 1, 1, np.complex128(0.5 - 1j), np.float32(-2.0), A,
     call=lambda *a: cplx_fd.prepared_async_call(a[0], a[1], None, *a[2:]))
case("prepared_complex_dtypes", "cplx", 1, 1, 2.5, np.complex128(1 + 1j), A,
     call=m.get_function("cplx").prepare([np.complex64, np.complex128, np.intp]).prepared_call)
case("bad_complex_unprepared", "cplx", 1 + 2j, 3, A, block=b)
# What complex() takes: a 0-d array (a reduction's .get()) and NumPy's bool, as struct.pack.
case("prepared_complex_0d", "cplx", 1, 1, np.array(2.0), np.True_, A, call=cplx_fd.prepared_call)
class Again(float):  # a number whose conversion prepares the function again, mid-call
    def __complex__(self):
        cplx_again.prepare("8s16sP")
        return complex(float(self))
cplx_again = m.get_function("cplx")
cplx_again.prepare("FDP")
case("prepared_complex_reprepared", "cplx", 1, 1, Again(4.0), 5.0, A,
     call=cplx_again.prepared_call)
case("bad_prepared_bits_high", "ints", 1, 1, 256, 0, 0, 0, 0, 0, 0, 0, A,
     call=swapped.prepared_call)
case("bad_prepared_bits_low", "ints", 1, 1, 0, 0, 0, 0, 0, -2**31 - 1, 0, 0, A,
     call=swapped.prepared_call)
# Launch shapes: the same tuple again (remembered), others, a list, NumPy ints, the first again.
shapes = {"tuple": ((64, 2, 1), (3, 4)), "int": (128, 5), "list": ([16, 2], [7, 1, 2]),
          "numpy": ((np.int32(8), np.uint8(4)), (np.int64(9),))}
for label, (block, grid) in [*shapes.items(), ("tuple_again", shapes["tuple"])]:
    case(f"shape_{label}", "reals", 1.0, 2.0, 3, block=block, grid=grid, shared=16 if label == "int" else 0)
# Refusals: nothing may be launched.
case("bad_i8_high", "ints", 128, 0, 0, 0, 0, 0, 0, 0, A, block=b)
case("bad_u8_negative", "ints", 0, -1, 0, 0, 0, 0, 0, 0, A, block=b)
case("bad_i32_high", "ints", 0, 0, 0, 0, 2**31, 0, 0, 0, A, block=b)
case("bad_u32_high", "ints", 0, 0, 0, 0, 0, 2**32, 0, 0, A, block=b)
case("bad_u64_high", "ints", 0, 0, 0, 0, 0, 0, 0, 2**64, A, block=b)
case("bad_i64_low", "ints", 0, 0, 0, 0, 0, 0, -2**63 - 1, 0, A, block=b)
case("bad_ptr_negative", "ints", 0, 0, 0, 0, 0, 0, 0, 0, -1, block=b)
case("bad_float_for_int", "ints", 0, 0, 0, 0, 1.5, 0, 0, 0, A, block=b)
case("bad_str_for_int", "ints", 0, 0, 0, 0, 0, 0, 0, "7", A, block=b)
case("bad_float_for_ptr", "ints", 0, 0, 0, 0, 0, 0, 0, 0, 1.0, block=b)
case("bad_f32_overflow", "reals", 1e39, 0.0, A, block=b)
case("bad_str_for_real", "reals", 1.0, "2", A, block=b)
case("bad_freed", "ints", 0, 0, 0, 0, 0, 0, 0, 0, freed, block=b)
case("bad_numpy_other_width", "ints", 0, 0, 0, 0, 0, np.int8(-1), 0, 0, A, block=b)
case("bad_numpy_negative_ptr", "ints", 0, 0, 0, 0, 0, 0, 0, 0, np.int64(-1), block=b)
case("bad_after_code", "ints", 0, 0, 0, 0, 2**31, 0, 0, Index(1), A, block=b)
case("bad_count", "ints", 1, 2, 3, block=b)
case("bad_block_zero", "reals", 1.0, 2.0, A, block=(0, 1, 1))
case("bad_block_threads", "reals", 1.0, 2.0, A, block=(32, 32, 2))
case("bad_block_tuple", "reals", 1.0, 2.0, A, block=())
case("bad_grid", "reals", 1.0, 2.0, A, block=b, grid=(1, 2**31))
case("bad_no_block", "reals", 1.0, 2.0, A)
case("bad_keyword", "reals", 1.0, 2.0, A, block=b, blocks=b)
case("after_refusals", "reals", 1.0, 2.0, A, block=b)
print(json.dumps(out))
'''


@pytest.fixture(scope="module")
def launches(fake_driver):
    """Every case's outcome: error (None or 'Type: message'), launched (how many launches the
    driver saw), bytes (hex, the parameters one after another) and shape (grid, block,
    shared)."""
    r = run_python(CHILD, env={"KILN_CUDA_PATH": str(fake_driver)}, timeout=300)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.splitlines()[-1])


def packed(codes, *values):
    return b"".join(struct.pack("<" + c, v) for c, v in zip(codes, values)).hex()


def launched_with(launches, name, expected_hex):
    got = launches[name]
    assert got["error"] is None, got["error"]
    assert got["launched"] == 1
    assert got["bytes"] == expected_hex, f"{name}: {got['bytes']} != {expected_hex}"


def test_ints_at_the_edges_of_every_class(launches):
    launched_with(launches, "int_edges_low",
                  packed(INT_CODES, -128, 0, -32768, 0, -2**31, 0, -2**63, 0, 0))
    launched_with(launches, "int_edges_high",
                  packed(INT_CODES, 127, 255, 32767, 65535, 2**31 - 1, 2**32 - 1, 2**63 - 1,
                         2**64 - 1, 2**64 - 1))
    launched_with(launches, "int_small", packed(INT_CODES, -1, 1, -2, 2, -3, 3, -4, 4, 5))


def test_numpy_bool_index_and_allocation_among_plain_ints(launches):
    alloc, array = launches["pointers"]
    launched_with(launches, "int_mixed",
                  packed(INT_CODES, -5, 1, -7, 9, -11, 12, -13, 2**64 - 2, alloc))
    launched_with(launches, "int_array_pointer", packed(INT_CODES, 1, 2, 3, 4, 5, 6, 7, 8, array))
    launched_with(launches, "int_numpy_other_sign",
                  packed(INT_CODES, -1, 255, -1, 2**16 - 2, -1, 2**32 - 5, -1, 2**64 - 1, alloc))


def test_reals_from_floats_ints_and_numpy(launches):
    alloc, _ = launches["pointers"]
    launched_with(launches, "reals", packed("fdQ", 1.5, 2.25, alloc))
    launched_with(launches, "reals_from_ints", packed("fdQ", 3.0, -4.0, 7))
    launched_with(launches, "reals_numpy", packed("fdQ", 0.5, -0.125, alloc))


def test_struct_between_scalars(launches):
    launched_with(launches, "agg", packed("i", -9) + struct.pack("<ifd", 1, 2.5, -3.0).hex()
                  + packed("f", 0.75))


def test_64_and_300_parameters(launches):
    alloc, _ = launches["pointers"]
    launched_with(launches, "args64", packed("Q" + "i" * 63, alloc, *range(1, 64)))
    launched_with(launches, "wide", packed("i" * 300, *range(-150, 150)))


def test_prepared_call_packs_as_the_call_does(launches):
    alloc, _ = launches["pointers"]
    launched_with(launches, "prepared", packed(INT_CODES, 1, 2, 3, 4, 5, 6, 7, 8, alloc))
    assert launches["prepared"]["shape"] == [4, 5, 1, 8, 2, 2, 0]


def test_prepared_types_of_the_other_signedness_pass_the_bits_as_pycudas_pack(launches):
    alloc, _ = launches["pointers"]
    launched_with(launches, "prepared_bits",
                  packed(INT_CODES, -1, 255, -1, 65535, 2863311531 - 2**32, 2**32 - 1, -1,
                         2**64 - 1, alloc))
    launched_with(launches, "prepared_bits_async",
                  packed(INT_CODES, 7, 2**8 - 7, 40000 - 2**16, 2**16 - 2, 5, 2**32 - 5,
                         -2**63, 2**63, alloc))
    launched_with(launches, "prepared_bits_dtypes",
                  packed(INT_CODES, 0, 0, 0, 0, -1, 0, 0, 0, alloc))
    # out of the type's range too: refused, as struct.pack refuses it, before any launch
    for name, index in (("bad_prepared_bits_high", 0), ("bad_prepared_bits_low", 5)):
        assert launches[name]["launched"] == 0
        assert launches[name]["error"].startswith(f"ValueError: argument {index} of ints")


def test_prepared_complex_types_pack_numbers_as_pycudas_pack(launches):
    alloc, _ = launches["pointers"]
    want = lambda f, d: (np.complex64(f).tobytes() + np.complex128(d).tobytes()
                         + struct.pack("<Q", alloc)).hex()
    assert launches["prepared_complex"]["bytes"] == want(1 + 2j, 3)
    assert launches["prepared_complex_numpy"]["bytes"] == want(0.5 - 1j, -2.0)
    assert launches["prepared_complex_dtypes"]["bytes"] == want(2.5, 1 + 1j)
    assert launches["prepared_complex_0d"]["bytes"] == want(2.0, 1)
    # The marks read before the conversion ran: no crash, and the call packs as prepared then.
    assert launches["prepared_complex_reprepared"]["bytes"] == want(4.0, 5.0)
    refused = launches["bad_complex_unprepared"]
    assert refused["launched"] == 0 and "a struct parameter" in refused["error"]


def test_a_second_free_of_an_allocation_is_a_logic_error_as_pycudas(launches):
    name, is_logic, message = launches["second_free"]
    assert is_logic, name
    assert "freed already" in message


def test_launch_shapes_read_again_and_remembered(launches):
    alloc, _ = launches["pointers"]
    want = {"tuple": [3, 4, 1, 64, 2, 1, 0], "int": [5, 1, 1, 128, 1, 1, 16],
            "list": [7, 1, 2, 16, 2, 1, 0], "numpy": [9, 1, 1, 8, 4, 1, 0],
            "tuple_again": [3, 4, 1, 64, 2, 1, 0]}
    for label, shape in want.items():
        launched_with(launches, f"shape_{label}", packed("fdQ", 1.0, 2.0, 3))
        assert launches[f"shape_{label}"]["shape"] == shape, label


@pytest.mark.parametrize("name, error", [
    ("bad_i8_high", "ValueError: argument 0 of ints(signed char, unsigned char"),
    ("bad_u8_negative", "ValueError: argument 1 of ints"),
    ("bad_i32_high", "ValueError: argument 4 of ints"),
    ("bad_u32_high", "ValueError: argument 5 of ints"),
    ("bad_u64_high", "ValueError: argument 7 of ints"),
    ("bad_i64_low", "ValueError: argument 6 of ints"),
    ("bad_ptr_negative", "ValueError: argument 8 of ints"),
    ("bad_float_for_int", "TypeError: argument 4 of ints"),
    ("bad_str_for_int", "TypeError: argument 7 of ints"),
    ("bad_float_for_ptr", "TypeError: argument 8 of ints"),
    ("bad_f32_overflow", "ValueError: argument 0 of reals"),
    ("bad_str_for_real", "TypeError: argument 1 of reals"),
    ("bad_freed", "the allocation was freed"),
    ("bad_numpy_other_width", "ValueError: argument 5 of ints"),
    ("bad_numpy_negative_ptr", "ValueError: argument 8 of ints"),
    ("bad_after_code", "ValueError: argument 4 of ints"),
    ("bad_count", "TypeError: ints(signed char"),
    ("bad_block_zero", "block.x is 0"),
    ("bad_block_threads", "has 2048 threads"),
    ("bad_block_tuple", "ValueError: block must be an int or a tuple of 1 to 3 ints"),
    ("bad_grid", "grid.y is 2147483648"),
    ("bad_no_block", "needs block=(x, y, z)"),
    ("bad_keyword", "unexpected keyword argument 'blocks'"),
])
def test_refusals_launch_nothing(launches, name, error):
    got = launches[name]
    assert got["launched"] == 0, f"{name} launched"
    assert got["error"] and error in got["error"], got["error"]


def test_a_launch_after_the_refusals_is_whole(launches):
    alloc, _ = launches["pointers"]
    launched_with(launches, "after_refusals", packed("fdQ", 1.0, 2.0, alloc))
    assert launches["after_refusals"]["shape"] == [1, 1, 1, 32, 1, 1, 0]
