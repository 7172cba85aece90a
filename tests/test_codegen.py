"""Generated kernels without a GPU: argument lists, the C types of dtypes, and every kernel
kiln generates for array arithmetic, elementwise kernels, reductions and scans compiles
(NVRTC needs no device). What they compute is tested on the GPU (test_gpuarray.py)."""
import concurrent.futures
import inspect
import os
import pathlib
import re

import numpy as np
import pytest

from kiln import _cgen, _elwise_src, _ops, _reduce_src, _scan_src
from kiln import SourceModule
from kiln.elementwise import ElementwiseKernel
from kiln.reduction import ReductionKernel

from helpers import ARCH

DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def compile_(src):
    return SourceModule(src, arch=ARCH or "sm_90", headers=_cgen.headers_for(src))


# ---- argument lists --------------------------------------------------------------------------

@pytest.mark.parametrize("text, kind, dtype, name", [
    ("float *x", _cgen.VectorArg, np.float32, "x"),
    ("const float *__restrict__ x", _cgen.VectorArg, np.float32, "x"),
    ("unsigned int n", _cgen.ScalarArg, np.uint32, "n"),
    ("unsigned long long n", _cgen.ScalarArg, np.uint64, "n"),
    ("long *idx", _cgen.VectorArg, np.int64, "idx"),
    ("signed char c", _cgen.ScalarArg, np.int8, "c"),
    ("pycuda::complex<float> *z", _cgen.VectorArg, np.complex64, "z"),
    ("pycuda::complex< double > z", _cgen.ScalarArg, np.complex128, "z"),
    ("__half *h", _cgen.VectorArg, np.float16, "h"),
    ("double a[]", _cgen.VectorArg, np.float64, "a"),
    ("bool flag", _cgen.ScalarArg, np.bool_, "flag"),
    ("float4 v", _cgen.ScalarArg, _cgen.vec.float4, "v"),
    # the other word orders PyCUDA's registry knows
    ("long unsigned int n", _cgen.ScalarArg, np.uint64, "n"),
    ("short unsigned int s", _cgen.ScalarArg, np.uint16, "s"),
    ("signed long int *k", _cgen.VectorArg, np.int64, "k"),
    ("short signed int s", _cgen.ScalarArg, np.int16, "s"),
])
def test_parse_c_arg(text, kind, dtype, name):
    arg = _cgen.parse_c_arg(text)
    assert type(arg) is kind
    assert arg.dtype == np.dtype(dtype)
    assert arg.name == name


@pytest.mark.parametrize("text, phrase", [
    ("float", "cannot read the C declarator"),
    ("quaternion *q", "unknown C type 'quaternion'"),
    ("float **x", "pointers to pointers"),
])
def test_parse_c_arg_refuses(text, phrase):
    with pytest.raises(ValueError, match=phrase):
        _cgen.parse_c_arg(text)


def test_argument_lists_split_outside_templates_and_refuse_repeats():
    args = _cgen.parse_arguments("pycuda::complex<float> *z, float a, int n")
    assert [a.name for a in args] == ["z", "a", "n"]
    assert [a.struct_char for a in args] == ["P", "f", "i"]
    with pytest.raises(ValueError, match="repeat: x"):
        _cgen.parse_arguments("float *x, int x")
    with pytest.raises(TypeError, match="C declarator"):
        _cgen.parse_arguments([3])


def test_dtype_to_ctype_speaks_pycudas_names():
    assert _cgen.dtype_to_ctype(np.float32) == "float"
    assert _cgen.dtype_to_ctype(np.int64) == "long"
    assert _cgen.dtype_to_ctype(np.complex64) == "pycuda::complex<float>"
    assert _cgen.dtype_to_ctype(_cgen.vec.float3) == "float3"
    # longlong2 is long2's dtype: written with the name registered first, as PyCUDA's
    # registry writes it, and both names read as it.
    assert _cgen.dtype_to_ctype(_cgen.vec.longlong2) == "long2"
    assert _cgen.dtype_to_ctype(_cgen.vec.ulonglong1) == "ulong1"
    assert _cgen.ctype_to_dtype("longlong2") == _cgen.ctype_to_dtype("long2") == _cgen.vec.long2
    # with_fp_tex_hack: the names <pycuda-helpers.hpp> defines for floats, the rest as without.
    assert [_cgen.dtype_to_ctype(t, with_fp_tex_hack=True) for t in
            (np.float32, np.float64, np.complex64, np.complex128, np.int32)] == [
        "fp_tex_float", "fp_tex_double", "fp_tex_cfloat", "fp_tex_cdouble", "int"]
    with pytest.raises(ValueError, match="no C type"):
        _cgen.dtype_to_ctype(np.dtype("U4"))
    with pytest.raises(ValueError, match="big-endian"):
        _cgen.dtype_to_ctype(np.dtype(">f4"))


def test_vec_types_and_makers():
    v = _cgen.vec.make_float3(1, 2, 3)
    assert v.dtype == _cgen.vec.float3 and tuple(v.tolist()) == (1.0, 2.0, 3.0)
    # PyCUDA's: a 0-d array, its fields by position or by name
    assert isinstance(v, np.ndarray) and v.shape == () and v["y"] == 2
    assert _cgen.vec.make_int2(1, y=5).tolist() == (1, 5)
    assert _cgen.vec.make_uint4(x=1, y=2, z=3, w=4).tolist() == (1, 2, 3, 4)
    assert str(inspect.signature(_cgen.vec.make_float3)) == "(x, y, z)"
    for wrong in ((1, 2), (1, 2, 3, 4)):
        with pytest.raises(TypeError, match="make_float3 takes 3 values, x, y, z"):
            _cgen.vec.make_float3(*wrong)
    with pytest.raises(TypeError, match="takes 2 values"):
        _cgen.vec.make_float2(1, x=2)


# ---- elementwise sources ---------------------------------------------------------------------

@pytest.mark.parametrize("variant", ["contig", "alias", "range", "strided"])
def test_every_elementwise_variant_compiles(variant):
    args = _cgen.parse_arguments("float a, float *x, pycuda::complex<float> *y, __half *h")
    src = _elwise_src.source(args, "y[y_i] = a * x[x_i] + __half2float(h[h_i])", "lin",
                             variant=variant, ndim=3)
    assert compile_(src).get_function("lin")


@pytest.mark.parametrize("variant", ["contig", "alias", "range", "strided"])
def test_pycudas_spellings_in_an_operation_compile(variant):
    # i is n's type, as PyCUDA's size_t i and n are: min(i, n - 1) picks one overload; a local
    # an operation names x_i is its own (kiln's x_i is not a macro that would rewrite it);
    # PyCUDA's complex abs and arg are templates.
    args = _cgen.parse_arguments("int *d, int *x, int *y, int *z, pycuda::complex<double> *w, "
                                 "double *a")
    op = ("d[i] = min(i, n - 1); int x_i = x[i]; z[i] = x_i == y[i]; "
          "a[i] = pycuda::abs<double>(w[i]) + pycuda::arg<double>(w[i])")
    if variant in ("range", "strided"):   # no n there; strided arrays are indexed by x_i
        op = ("d[d_i] = (int)max(i, 0L); int x_i2 = x[x_i]; z[z_i] = x_i2 == y[y_i]; "
              "a[a_i] = pycuda::abs<double>(w[w_i])") if variant == "strided" else \
             op.replace("min(i, n - 1)", "max(i, 0L)")
    src = _elwise_src.source(args, op, "spell", variant=variant, ndim=2)
    assert compile_(src).get_function("spell")


def test_an_operations_own_x_i_is_not_rewritten():
    args = _cgen.parse_arguments("int *x, int *z")
    src = _elwise_src.source(args, "int x_i = x[i]; z[i] = x_i", "own")
    assert "#define x_i" not in src and "int x_i = x[i]" in src


def test_an_operation_that_moves_i_gets_pycudas_one_element_loop():
    args = _cgen.parse_arguments("unsigned int *x")
    for op in ("x[i] = 1; i += total_threads; if (i < n) x[i] = 2", "x[i++] = 0"):
        for variant in ("contig", "alias"):
            src = _elwise_src.source(args, op, "moves", variant=variant)
            assert "for (i = cta_start + tid; i < n; i += total_threads)" in src
            assert "_tile" not in src
            assert compile_(src).get_function("moves")
    assert "_tile" in _elwise_src.source(args, "x[i] = i == n || i <= n || i >= n", "stays")
    for text in ("i = 3", "i <<= 1", "--i", "for (int i = 0; i < 3; i++) x[i] = 0"):
        assert _elwise_src.moves_i(text), text
    for text in ("x[i] == i", "z[i] = x[i] <= y[i]", "a.i = 3", "p->i = 1", "k += i",
                 "z[i] = i != 0", "x_i = 2"):
        assert not _elwise_src.moves_i(text), text


def test_an_operation_that_assigns_a_parameter_takes_one_element_a_thread():
    # Chainer's kernels re-point their own parameters (x = &x[(i / m) * c]); PyCUDA's launch
    # shape gives each thread one element, with the parameters as passed.
    args = _cgen.parse_arguments("float *x, float *w, int c, float *y")
    for op in ("x = &x[(i / c) * c]; y[i] = x[0]", "c *= 2; y[i] = c", "w++; y[i] = *w",
               "--w; y[i] = w[1]", "x += c; y[i] = *x"):
        assert _elwise_src.per_thread(args, op) == 1, op
        src = _elwise_src.source(args, op, "repoint")
        assert "for (i = cta_start + tid; i < n; i += total_threads)" in src and "_tile" not in src
        assert compile_(src).get_function("repoint")
    for op in ("y[i] = x[i] * c", "*y = 1", "y[i] = c == 2", "y[i] = c <= 2 && c >= 1",
               "w[i] = x[i]++", "y_i = 2", "float xc = c; y[i] = xc", "y[i] = s.x"):
        assert _elwise_src.per_thread(args, op) == _elwise_src.UNROLL, op
    k = ElementwiseKernel("float *x, int c, float *y", "x = &x[(i / c) * c]; y[i] = x[0]",
                          "repoint")
    assert k._per_thread == 1
    assert ElementwiseKernel("float *x, float *y", "y[i] = x[i]")._per_thread == \
        _elwise_src.UNROLL


def test_an_operation_that_leaves_early_takes_one_element_a_thread():
    # `if (m[i] == 0) return;` leaves that element alone undone, as under PyCUDA's launch
    # shape: four elements a thread would leave the thread's other three undone too.
    args = _cgen.parse_arguments("float *x, int *m, float *y")
    for op in ("if (m[i] == 0) return; y[i] = x[i]", "while (1) { y[i] = x[i]; break; }",
               "if (m[i]) goto done; y[i] = x[i]; done: ;"):
        assert _elwise_src.leaves_early(op) and _elwise_src.per_thread(args, op) == 1, op
        src = _elwise_src.source(args, op, "early")
        assert "for (i = cta_start + tid; i < n; i += total_threads)" in src and "_tile" not in src
        assert compile_(src).get_function("early")
    for op in ("y[i] = x[i]", "y[i] = returned[i]", "y[i] = s.return_value", "y_break[i] = 0"):
        assert not _elwise_src.leaves_early(op), op


def test_a_parameter_named_like_an_arrays_index_keeps_its_name():
    # x_i is element i's index in array x, unless a parameter has that name: then the name is
    # the parameter's, as in PyCUDA, in every variant.
    args = _cgen.parse_arguments("float *x, int x_i, float *y")
    for variant in ("contig", "alias", "range", "strided"):
        src = _elwise_src.source(args, "y[y_i] = x[i] + x_i", "named", variant=variant, ndim=2)
        assert "x_i = i" not in src and "long long x_i" not in src, variant
        assert compile_(src).get_function("named")
    args = _cgen.parse_arguments("float *y, float *y_i")
    assert compile_(_elwise_src.source(args, "y_i[i] = y[i]", "named")).get_function("named")


def test_an_operators_kernel_is_made_without_compiling_a_pattern(monkeypatch):
    # A process's first x * y must stay under a millisecond (bench/arrays.py): compiling a
    # regular expression there costs a third of that, so every pattern the plans and the
    # generated sources use is compiled with its module.
    import re
    compiled = []
    real = re._compile
    monkeypatch.setattr(re, "_compile", lambda pattern, flags: (compiled.append(pattern),
                                                               real(pattern, flags))[1])
    f32, c64 = np.dtype(np.float32), np.dtype(np.complex64)
    for op, dx, x_arr, dy, y_arr in (("multiply", f32, True, f32, True),
                                     ("add", c64, True, float, False),
                                     ("less", np.dtype(np.int8), True, int, False)):
        kernel = _ops._make_binary_plan(op, dx, x_arr, dy, y_arr, None)[0]
        assert kernel._per_thread == _elwise_src.UNROLL
    assert _ops._reduction("sum", np.float32, np.float32) is not None
    assert compiled == []


def test_keep_writes_an_elementwise_kernels_files(capsys):
    # PyCUDA hands keep= to the compile of the kernel it generates: the folder is printed and
    # holds the generated source.
    op = f"y[i] = x[i] * {os.getpid()}.25f"
    k = ElementwiseKernel("float *x, float *y", op, "kept", keep=True)
    assert k._error is None
    out = capsys.readouterr().out
    folder = re.search(r"^\*\*\* compiler output in (\S+)$", out, re.M)
    assert folder, out
    assert op in (pathlib.Path(folder.group(1)) / "kernel.cu").read_text()
    ElementwiseKernel("float *x, float *y", op, "kept")
    assert "compiler output" not in capsys.readouterr().out


def test_bare_i_is_told_from_array_indices():
    assert _elwise_src.uses_bare_i("z[i] = x[i]")
    assert not _elwise_src.uses_bare_i("z[z_i] = x[x_i] + a.i")


@pytest.mark.parametrize("shape, strides, want", [
    ((4, 5, 6), [(30, 6, 1), (30, 6, 1)], ((120,), [(1,), (1,)])),
    ((4, 5, 6), [(60, 12, 2)], ((120,), [(2,)])),
    ((4, 1, 6), [(6, 6, 1)], ((24,), [(1,)])),
    ((4, 6), [(1, 4)], ((4, 6), [(1, 4)])),
    ((1, 1), [(0, 0)], ((1,), [(0,)])),
])
def test_collapse_merges_dimensions_walked_alike(shape, strides, want):
    assert _elwise_src.collapse(shape, strides) == want


def test_elementwise_kernel_checks_its_declaration():
    k = ElementwiseKernel("float a, float *x, float *z", "z[i] = a * x[i]", "scale")
    assert k.name == "scale" and [a.name for a in k.arguments] == ["a", "x", "z"]
    with pytest.raises(TypeError, match="takes 3 arguments"):
        k(1.0, 2)
    # More than it declares: PyCUDA pairs them with the parameters and leaves the rest out;
    # kiln does too, and says so (then "x" is refused here, before anything is launched).
    from kiln.elementwise import ArgumentWarning
    with pytest.warns(ArgumentWarning, match="takes 3 arguments; the 2 more given are left "
                                             "out, as PyCUDA leaves them"):
        with pytest.raises(TypeError, match="'x'"):
            k(1.0, "x", "z", 4, 5)
    with pytest.raises(TypeError, match="unexpected keyword arguments wrong"):
        ElementwiseKernel("float *x", "x[i] = 0", wrong=1)


def test_a_subclass_that_generates_its_own_kernels_gets_keywords_kiln_does_not_know():
    # PyCUDA keeps unknown keywords in gen_kwargs; broadcasting_pycuda's subclass reads its
    # broadcasting=True there in its own generate_stride_kernel_and_types.
    class Broadcasting(ElementwiseKernel):
        def generate_stride_kernel_and_types(self, use_range, call_args=None):
            return self.gen_kwargs["broadcasting"], self.gen_kwargs["operation"]

    k = Broadcasting("double *z, double *x", "z[i] = 2 * x[i]", "twice", broadcasting=True)
    assert k.generate_stride_kernel_and_types(False) == (True, "z[i] = 2 * x[i]")
    assert k.gen_kwargs["name"] == "twice" and k.gen_kwargs["options"] is None


def test_elementwise_kernel_works_with_its_module_name_rebound(monkeypatch):
    # A tool that records the kernels a program makes wraps the class under its module name;
    # the class must not look itself up there.
    import kiln.elementwise as elementwise

    made = []

    def recording(*args, **kwargs):
        made.append(ElementwiseKernel(*args, **kwargs))
        return made[-1]

    monkeypatch.setattr(elementwise, "ElementwiseKernel", recording)
    k = elementwise.ElementwiseKernel("float *x", "x[i] = 1", "ones")
    assert type(k) is ElementwiseKernel and k.name == "ones" and made == [k]
    cupy = elementwise.ElementwiseKernel("float32 x", "float32 y", "y = x", "copy")
    assert type(cupy).__name__ == "CupyElementwiseKernel"


def test_an_elementwise_kernel_that_does_not_build_raises_at_its_first_call(caplog):
    # PyCUDA builds the kernel at the first call: a program may define variants it never calls
    # (hebel defines double ones whose declarations do not read).
    import logging
    import kiln
    with caplog.at_level(logging.INFO, logger="kiln"):
        broken = ElementwiseKernel("float *x", "x[i] = nothing_called_this", "broken")
    assert "ElementwiseKernel broken does not build" in caplog.text
    unread = ElementwiseKernel("double *p float a, double *x", "x[i] = 0", "unread")
    repeated = ElementwiseKernel("float *b, float *b", "b[i] = 0", "repeated")
    scalars = ElementwiseKernel("float a", "a = 1", "scalars")
    for k, error, phrase in [(broken, kiln.CompileError, "undefined"),
                             (unread, ValueError, "unknown C type"),
                             (repeated, ValueError, "argument names repeat: b"),
                             (scalars, ValueError, "at least one vector argument")]:
        for _ in range(2):  # every call, each with a traceback of its own
            with pytest.raises(error, match=phrase) as info:
                k(1, 2)
            assert len(list(__import__("traceback").walk_tb(info.value.__traceback__))) < 6
        with pytest.raises(error, match=phrase):
            k.generate_stride_kernel_and_types(False)


# ---- reductions and scans --------------------------------------------------------------------

@pytest.mark.parametrize("dtype_out, neutral, reduce_expr, map_expr, arguments", [
    (np.float32, "0", "a+b", "x[i]", "const float *x"),
    (np.float64, "0", "a+b", "x[i]*y[i]", "float *x, double *y"),
    (np.complex64, "0", "a+b", "x[i]*conj(y[i])",
     "pycuda::complex<float> *x, pycuda::complex<float> *y"),
    (np.int64, "0", "a+b", "x[i]", "signed char *x"),
    (np.float16, "0", "a+b", "x[i]", "__half *x"),
    (np.uint32, "0", "a|b", "x[i] ? 1u << (i % 32) : 0u", "bool *x"),
])
def test_reductions_compile_with_and_without_range(dtype_out, neutral, reduce_expr, map_expr,
                                                   arguments):
    args = _cgen.parse_arguments(arguments)
    for use_range in (False, True):
        src = _reduce_src.source(dtype_out, neutral, reduce_expr, map_expr, args, "r",
                                 use_range=use_range)
        f = compile_(src).get_function("r")
        # out, scratch, mirror, the arguments, [start, step,] n
        assert len(f.signature) == len(args) + (6 if use_range else 4)


def test_a_reduction_names_out_type_and_i_has_ns_type():
    # PyCUDA's reduction kernel declares out_type, which reduce expressions cast to; its i is
    # a size_t, as n is: min(i + 1, n - 1) picks one overload.
    args = _cgen.parse_arguments("const float *x")
    for use_range in (False, True):
        src = _reduce_src.source(np.float32, "0", "(out_type)(a + 2 * b)",
                                 "x[min(i + 1, n - 1)]" if not use_range else "x[i]", args, "r",
                                 use_range=use_range)
        assert compile_(src).get_function("r")


def test_reduction_kernel_checks_its_declaration():
    k = ReductionKernel(np.float32, "0", "a+b", "x[i]*y[i]", "float *x, float *y", name="dot")
    assert k.dtype_out == np.float32 and k.name == "dot"
    with pytest.raises(ValueError, match="needs arguments"):
        ReductionKernel(np.float32, "0", "a+b")
    with pytest.raises(ValueError, match="at most 1024 bytes, not 2048"):
        ReductionKernel(np.dtype([("x", np.float64, (256,))]), "0", "a+b", "x[i]", "double *x")


def test_reductions_of_large_structs_and_names_a_program_may_use_compile():
    # PyNX folds a registered struct of eight floats and one of nine complex numbers (72 bytes),
    # and names an argument v; PyCUDA's two-stage reduction has no limit on the result's size.
    from kiln.tools import get_or_register_dtype
    from kiln.reduction import ReductionKernel
    # Fields named apart from test_pycuda_idioms.py's: a dtype keeps the first name it was
    # registered under, as PyCUDA's registry does, and the preamble below names this one.
    float8 = np.dtype([(c, np.float32) for c in "ABCDEFGH"])
    get_or_register_dtype("kiln_test_float8", float8)
    complex9 = np.dtype([("x", np.complex64, (9,))])
    get_or_register_dtype("kiln_test_complex9", complex9)
    preamble = """
    struct kiln_test_float8 { float a, b, c, d, e, f, g, h; };
    __device__ kiln_test_float8 add8(kiln_test_float8 p, kiln_test_float8 q) {
      return {p.a + q.a, p.b + q.b, p.c + q.c, p.d + q.d, p.e + q.e, p.f + q.f, p.g + q.g,
              p.h + q.h};
    }
    __device__ kiln_test_float8 of(float x) { return {x, x, x, x, x, x, x, x}; }
    struct kiln_test_complex9 { pycuda::complex<float> x[9]; };
    __device__ kiln_test_complex9 add9(kiln_test_complex9 p, kiln_test_complex9 q) {
      for (int k = 0; k < 9; k++) p.x[k] += q.x[k];
      return p;
    }
    __device__ kiln_test_complex9 zero9() { kiln_test_complex9 z; for (int k = 0; k < 9; k++)
      z.x[k] = 0; return z; }
    __device__ kiln_test_complex9 at9(pycuda::complex<float> *v, int i) { kiln_test_complex9 z;
      for (int k = 0; k < 9; k++) z.x[k] = v[i]; return z; }
    """
    for dtype, neutral, reduce_expr, map_expr, arguments in [
            (float8, "of(0)", "add8(a, b)", "of(v[i])", "float *v, int j"),
            (complex9, "zero9()", "add9(a, b)", "at9(v, i)", "pycuda::complex<float> *v")]:
        args = _cgen.parse_arguments(arguments)
        assert _reduce_src.block_for(dtype) * dtype.itemsize <= _reduce_src.FOLD_SHARED
        for use_range in (False, True):
            src = _reduce_src.source(dtype, neutral, reduce_expr, map_expr, args, "r",
                                     preamble=preamble, use_range=use_range)
            f = compile_(src).get_function("r")
            assert len(f.signature) == len(args) + (6 if use_range else 4)
    assert _reduce_src.block_for(np.float32) == 512 and _reduce_src.block_for(complex9) == 256
    assert _reduce_src.max_blocks_for(np.float32, 1024) == 1024
    assert _reduce_src.max_blocks_for(complex9, 1024) == 1024 * 16 // 72
    assert _reduce_src.launch_block(10, 128) == 128 and _reduce_src.launch_block(10) == 256


def test_float_h_names_in_expressions_compile_as_under_pycuda():
    # PyCUDA's generated sources include its complex header, which defines FLT_MAX and DBL_MAX:
    # programs write them bare as neutrals and in operations.
    args = _cgen.parse_arguments("float *x")
    src = _reduce_src.source(np.float32, "FLT_MAX", "fminf(a, b)", "x[i]", args, "r")
    assert compile_(src).get_function("r")
    src = _scan_src.source(np.float64, "fmin(a, b)", "DBL_MAX", "scan")
    assert compile_(src).get_function("scan_exclusive")
    src = _elwise_src.source(_cgen.parse_arguments("double *y"), "y[i] = DBL_EPSILON + FLT_MIN",
                             "eps")
    assert compile_(src).get_function("eps")
    m = SourceModule("#include <pycuda-complex.hpp>\n__global__ void k(float *x, double *y)"
                     "{ x[0] = FLT_MAX; y[0] = DBL_MAX; }\n", arch=ARCH or "sm_90")
    assert m.get_function("k").signature == ("ptr", "ptr")


@pytest.mark.parametrize("dtype, expr, neutral", [
    (np.float32, "a+b", "0"), (np.int64, "a+b", None), (np.complex128, "a*b", "1"),
    (np.float64, "(a > b) ? a : b", None),
])
def test_scans_compile(dtype, expr, neutral):
    m = compile_(_scan_src.source(dtype, expr, neutral, "scan"))
    assert len(m.kernels) == 3
    for name in ("scan_tiles", "scan_inclusive", "scan_exclusive"):
        assert m.get_function(name).name in m.kernels


@pytest.mark.parametrize("doubles", [3, 16, 48])
def test_scans_of_large_structs_fit_a_blocks_shared_memory(doubles):
    # A tile of 2048 structs of three doubles would take 55 KiB of static shared memory, more
    # than a block has (PyCUDA scans such structs): larger elements take fewer per thread,
    # then fewer threads.
    from kiln.tools import get_or_register_dtype
    dt = get_or_register_dtype(f"kiln_doubles{doubles}_t",
                               np.dtype([(f"v{k}", np.float64) for k in range(doubles)]))
    fields = " ".join(f"double v{k};" for k in range(doubles))
    adds = ", ".join(f"a.v{k} + b.v{k}" for k in range(doubles))
    pre = (f"struct kiln_doubles{doubles}_t {{ {fields} }};\n"
           f"__device__ kiln_doubles{doubles}_t add(kiln_doubles{doubles}_t a, "
           f"kiln_doubles{doubles}_t b) {{ return {{ {adds} }}; }}")
    block, items, tile = _scan_src.shape(dt)
    assert (block * items + block) * dt.itemsize <= 48 << 10 and tile == block * items
    assert (block, items) == {3: (256, 7), 16: (128, 1), 48: (64, 1)}[doubles]
    m = compile_(_scan_src.source(dt, "add(a, b)", None, "scan", pre))
    assert len(m.kernels) == 3
    with pytest.raises(ValueError, match="a scan of 8192-byte elements needs"):
        _scan_src.shape(np.dtype((np.float64, 1024)))


def test_an_inclusive_scan_of_a_struct_needs_no_neutral():
    # PyCUDA's inclusive scan never uses a neutral; kiln's module also holds the exclusive
    # kernel, whose start must still compile for a struct type given none.
    from kiln.gpuarray import vec
    from kiln.scan import InclusiveScanKernel
    pre = ("__device__ int2 seg_max(int2 a, int2 b) "
           "{ return (b.x != a.x) ? b : make_int2(a.x, max(a.y, b.y)); }")
    k = InclusiveScanKernel(vec.int2, "seg_max(a, b)", preamble=pre)
    assert k.neutral is None and k.dtype == vec.int2
    for dtype in (np.uint8, np.int64, np.uint16, np.float16, np.complex64):
        assert InclusiveScanKernel(dtype, "a+b").neutral is None
    # A struct with no default constructor, which converts from int, as before.
    from kiln.tools import get_or_register_dtype
    fixed = get_or_register_dtype("kiln_fixed_t", np.dtype([("v", np.int32)]))
    pre = ("struct kiln_fixed_t { int v; __device__ kiln_fixed_t(int x) : v(x) {} };\n"
           "__device__ kiln_fixed_t add(kiln_fixed_t a, kiln_fixed_t b) "
           "{ return kiln_fixed_t(a.v + b.v); }")
    assert InclusiveScanKernel(fixed, "add(a, b)", preamble=pre).dtype == fixed


# ---- array arithmetic ------------------------------------------------------------------------

class HostStandIn(np.ndarray):
    """Plans depend on dtypes alone; an ndarray subclass stands in for a device array."""


@pytest.fixture
def plans_on_host(monkeypatch):
    real = _ops._desc

    def desc(obj):
        if isinstance(obj, HostStandIn):
            return obj.dtype, True
        return real(obj)

    monkeypatch.setattr(_ops, "_desc", desc)
    monkeypatch.setattr(_ops, "_plans", {})


def array(dtype):
    return np.zeros(2, dtype).view(HostStandIn)


@pytest.fixture(scope="module", autouse=True)
def compiled_in_parallel():
    """Every plan these tests make, compiled first on every core (NVRTC runs without the GIL),
    so the tests find them in the disk cache: serially they take minutes."""
    real_desc, real_plans = _ops._desc, _ops._plans
    _ops._desc = lambda obj: (obj.dtype, True) if isinstance(obj, HostStandIn) else \
        real_desc(obj)
    _ops._plans = {}
    jobs = [(_ops.binary_plan, op, array(dt), other) for dt in DTYPES for op in _ops._BINARY
            for other in (array(dt), 3, 2.5, 1j, np.float64(2))]
    jobs += [(_ops.unary_plan, op, array(dt)) for dt in DTYPES for op in _ops._UNARY]

    def run(job):
        try:
            job[0](*job[1:])
        except TypeError:
            pass
    try:
        with concurrent.futures.ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            list(pool.map(run, jobs))
    finally:
        _ops._desc, _ops._plans = real_desc, real_plans


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_binary_operation_compiles_with_numpys_dtype_or_refuses(plans_on_host, dtype):
    for op, ufunc in _ops._BINARY.items():
        for other in (array(dtype), 3, 2.5, 1j, np.float64(2)):
            host = np.zeros(2, dtype) if isinstance(other, HostStandIn) else other
            try:
                with np.errstate(all="ignore"):
                    want = ufunc(np.zeros(2, dtype), host).dtype
            except TypeError:
                with pytest.raises(TypeError):
                    _ops.binary_plan(op, array(dtype), other)
                continue
            kernel, out, converter, fits = _ops.binary_plan(op, array(dtype), other)
            assert isinstance(kernel, ElementwiseKernel)
            assert out == want, (op, np.dtype(dtype), other)
            if not isinstance(other, HostStandIn):
                accepts_scalar(kernel.arguments[2].dtype, converter(other) if converter else other)


def accepts_scalar(param, value):
    """Whether the call path takes value for a scalar parameter of dtype param without losing
    it: a bool parameter only bools (its byte must be 0 or 1), an integer one no floats."""
    if param.kind == "b":
        assert isinstance(value, (bool, np.bool_)), (param, value)
    elif param.kind in "iu":
        assert isinstance(value, (int, np.integer)), (param, value)
    elif param.kind == "f":
        assert isinstance(value, (int, float, np.integer, np.floating)), (param, value)


@pytest.mark.parametrize("dtype", DTYPES)
def test_every_unary_operation_compiles_or_refuses(plans_on_host, dtype):
    for op in _ops._UNARY:
        try:
            kernel, out = _ops.unary_plan(op, array(dtype))
        except TypeError:
            continue
        assert out == _ops._UNARY[op].resolve_dtypes((np.dtype(dtype), None))[1]


def test_promotion_is_numpys(plans_on_host):
    cases = [("add", np.float32, 2.5, np.float32), ("add", np.int32, 2.5, np.float64),
             ("multiply", np.int8, 3, np.int8), ("true_divide", np.int16, 2, np.float64),
             ("add", np.float32, np.float64(1), np.float64), ("less", np.float32, 1, np.bool_),
             ("add", np.uint64, np.int64(1), np.float64)]
    for op, dtype, other, want in cases:
        assert _ops.binary_plan(op, array(dtype), other)[1] == np.dtype(want), (op, dtype, other)


def test_in_place_casting_follows_same_kind(plans_on_host):
    assert _ops.binary_plan("add", array(np.float32), 2.5, inplace=True)[1] == np.float32
    with pytest.raises(TypeError, match="same_kind"):
        _ops.binary_plan("add", array(np.int32), 2.5, inplace=True)


def test_refusals_match_numpy(plans_on_host):
    with pytest.raises(TypeError, match="boolean subtract"):
        _ops.binary_plan("subtract", array(np.bool_), array(np.bool_))
    with pytest.raises(TypeError):
        _ops.binary_plan("bitwise_and", array(np.float32), 1)
    with pytest.raises(TypeError):
        _ops.binary_plan("add", array(np.float32), "text")


@pytest.mark.parametrize("reduce_expr", ["a + b", "(a > b) ? a : b", "max(a, b)"])
def test_a_warp_shuffle_is_never_an_argument_of_reduce(reduce_expr):
    # REDUCE(a, b) may evaluate b twice or under a condition; a shuffle there would be taken
    # by only some lanes of the warp, which hangs the kernel on the GPU.
    src = _reduce_src.source(np.float32, "0", reduce_expr, "in[i]",
                             [_cgen.VectorArg(np.float32, "in")], "r")
    assert "__shfl_down_sync" in src
    assert "REDUCE(v, __shfl" not in src.replace(" ", "").replace("REDUCE(v,", "REDUCE(v, ")
    compile_(src)


def test_an_elementwise_kernel_whose_preamble_includes_pycudas_complex_header_compiles():
    # PyCUDA's demo_complex.py includes <pycuda-complex.hpp> in the preamble, beside the
    # complex header kiln's generated source includes itself: one complex type, no clash.
    from kiln.elementwise import ElementwiseKernel
    k = ElementwiseKernel(
        "pycuda::complex<float> *x, pycuda::complex<float> *y, pycuda::complex<float> *z",
        "z[i] = x[i] * y[i]", "complex_mul", preamble="#include <pycuda-complex.hpp>")
    assert k._function("contig").signature == ("ptr", "ptr", "ptr", "u64")


@pytest.mark.parametrize("x, y, out, store", [
    (np.float32, np.float32, np.float32, np.float32), (np.float32, None, np.float32, np.float32),
    (np.int32, np.float64, np.float64, np.int32), (np.float16, None, np.float16, np.float16),
    (np.complex64, np.float32, np.complex64, np.complex64)])
def test_pycudas_axpbyz_and_axpbz_kernels_compile(x, y, out, store):
    # GPUArray._axpbyz / _axpbz, which programs extending PyCUDA's GPUArray call: one kernel of
    # p*x + q*y (q a scalar when y is None), computed in out's dtype and stored as store's.
    dt = [None if d is None else np.dtype(d) for d in (x, y, out, store)]
    k = _ops._axpbyz_kernel(*dt)
    assert isinstance(k, ElementwiseKernel)
    assert [a.name for a in k.arguments] == ["z", "p", "x", "q"] + ([] if y is None else ["y"])
    assert k.arguments[0].dtype == np.dtype(store)
    k._function("contig")


def test_gpuarrays_get_common_dtype_is_numpys_promotion():
    from kiln.gpuarray import _get_common_dtype
    f32, i32 = np.zeros(2, np.float32), np.zeros(2, np.int32)
    assert _get_common_dtype(f32, 2.0) == np.float32  # a Python number is weak
    assert _get_common_dtype(f32, np.float64(2)) == np.float64
    assert _get_common_dtype(i32, f32) == np.float64
    assert _get_common_dtype(f32, 1j) == np.complex64


def test_a_preamble_that_closes_pycudas_extern_c_block_compiles():
    # voltools' preamble closes the extern "C" { } PyCUDA compiles a kernel in, to write C++,
    # and opens it again; kiln compiles such a source inside one too.
    closes = '}\ntemplate <class T> __device__ T twice(T x) { return 2 * x; }\nextern "C" {\n'
    k = ElementwiseKernel("float *x, float *y", "y[i] = twice(x[i])", "closes",
                          preamble=closes)
    assert k._error is None
    k = ElementwiseKernel("pycuda::complex<float> *x, pycuda::complex<float> *y",
                          "y[i] = twice(x[i])", "closes_c", preamble=closes)
    assert k._error is None
    assert SourceModule(closes + "__global__ void k(float *p) { p[0] = twice(p[0]); }\n",
                        arch=ARCH).get_function("k")
    with pytest.raises(Exception, match=r'kernel.cu\(2\): error: identifier "y" is undefined'):
        SourceModule(closes.replace("2 * x", "2 * y") + "__global__ void k(float *p) "
                     "{ p[0] = twice(p[0]); }\n", arch=ARCH)


def test_a_generated_complex_kernels_source_compiles_as_printed():
    # keep=True prints the source of a generated kernel, which names kiln's complex header; a
    # program that compiles that text itself gets the header as SourceModule's own compiles do.
    import kiln.compiler
    args = _cgen.parse_arguments("pycuda::complex<float> *x, pycuda::complex<float> *y")
    src = _elwise_src.source(args, "y[i] = x[i] * x[i]", "sq")
    assert _cgen.COMPLEX_HEADER_NAME in src
    assert kiln.compiler.compile(src, no_extern_c=True, arch=ARCH)[:4] == b"\x7fELF"
