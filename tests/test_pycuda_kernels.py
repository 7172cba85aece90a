"""PyCUDA's kernel getters and module builders (kiln.elementwise's get_*_kernel,
get_elwise_module, get_elwise_kernel_and_types; kiln.reduction's get_*_kernel): without a GPU,
that each kernel compiles with PyCUDA's parameters in PyCUDA's order and is prepared for them;
on a GPU, each launched the way PyCUDA's gpuarray launches it (prepared_call or
prepared_async_call with a grid and block the caller picks) against NumPy.

The parameter lists below are PyCUDA 2026.1's (pycuda/elementwise.py), written out in C:
kiln::complex<T> is pycuda::complex<T> under another name, and a kernel's declaration prints the
type as PyCUDA names it."""
import numpy as np
import pytest

import kiln
import kiln.compiler
import kiln.driver
import kiln.gpuarray
import kiln.tools
from kiln import elementwise as ew
from kiln import reduction as red
from kiln.elementwise import ScalarArg, VectorArg

F32, F64, I32, C64 = (np.dtype(t) for t in (np.float32, np.float64, np.int32, np.complex64))
DTYPES = [F32, F64, I32, C64]
SIZES = [0, 1, 257, 10**5 + 3]
UL = "unsigned long"  # n, ScalarArg(np.uintp, "n")


def ctype(dtype):
    return ew._cgen.dtype_to_ctype(dtype)


def params(func):
    """The C types of a Function's parameters, from its declaration ("k(float *, int)")."""
    inside = func.declaration[func.declaration.index("(") + 1:-1]
    depth, parts, start = 0, [], 0
    for i, ch in enumerate(inside):
        depth += ch == "<"
        depth -= ch == ">"
        if ch == "," and depth == 0:
            parts.append(inside[start:i].strip())
            start = i + 1
    parts.append(inside[start:].strip())
    return parts


# ---- the getters' parameter lists, without a GPU --------------------------------------------

def _getter_cases():
    """(id, make the function, its kernel name, PyCUDA's parameters in C, prepare format)."""
    cases = []
    for d in DTYPES:
        t, p = ctype(d), ctype(d) + " *"
        c = d.char
        real = d.kind in "fi"
        cases += [
            (f"copy-{d}", lambda d=d: ew.get_copy_kernel(d, d), "copy", [p, p, UL], "PPL"),
            (f"fill-{d}", lambda d=d: ew.get_fill_kernel(d), "fill", [t, p, UL], f"{c}PL"),
            (f"reverse-{d}", lambda d=d: ew.get_reverse_kernel(d), "reverse", [p, p, UL],
             "PPL"),
            (f"arange-{d}", lambda d=d: ew.get_arange_kernel(d), "arange", [p, t, t, UL],
             f"P{c}{c}L"),
            (f"axpbyz-{d}", lambda d=d: ew.get_axpbyz_kernel(d, d, d), "axpbyz",
             [t, p, t, p, p, UL], f"{c}P{c}PPL"),
            (f"axpbyz-xscalar-{d}", lambda d=d: ew.get_axpbyz_kernel(d, d, d, True, False),
             "axpbyz", [t, p, t, p, p, UL], f"{c}P{c}PPL"),
            (f"axpbz-{d}", lambda d=d: ew.get_axpbz_kernel(d, d), "axpb", [t, p, t, p, UL],
             f"{c}P{c}PL"),
            (f"binary_op-{d}", lambda d=d: ew.get_binary_op_kernel(d, d, d, "+"), "multiply",
             [p, p, p, UL], "PPPL"),
            (f"binary_op-yscalar-{d}",
             lambda d=d: ew.get_binary_op_kernel(d, d, d, "*", False, True), "multiply",
             [p, p, p, UL], "PPPL"),
            (f"rdivide-{d}", lambda d=d: ew.get_rdivide_elwise_kernel(d, d), "divide_r",
             [p, t, p, UL], f"P{c}PL"),
            (f"pow-aa-{d}", lambda d=d: ew.get_pow_array_kernel(d, d, d, True, True),
             "pow_method", [p, p, p, UL], "PPPL"),
            (f"pow-as-{d}", lambda d=d: ew.get_pow_array_kernel(d, d, d, True, False),
             "pow_method", [p, t, p, UL], f"P{c}PL"),
            (f"pow-sa-{d}", lambda d=d: ew.get_pow_array_kernel(d, d, d, False, True),
             "pow_method", [t, p, p, UL], f"{c}PPL"),
            (f"if_positive-{d}", lambda d=d: ew.get_if_positive_kernel(F32, d), "if_positive",
             ["float *", p, p, p, UL], "PPPPL"),
            (f"where-{d}", lambda d=d: ew.get_where_kernel(I32, d), "if_positive",
             ["int *", p, p, p, UL], "PPPPL"),
            (f"scalar_op-{d}", lambda d=d: ew.get_scalar_op_kernel(d, d, d, "*"),
             "scalarop_kernel", [p, t, p, UL], f"P{c}PL"),
            (f"logical_not-{d}", lambda d=d: ew.get_logical_not_kernel(d, np.bool_),
             "logical_not", [p, "bool *", UL], "PPL"),
            (f"linear_combination-{d}",
             lambda d=d: ew.get_linear_combination_kernel(((False, d, d), (False, d, d)), d)[0],
             "linear_combination", [t, p, t, p, p, UL], f"{c}P{c}PPL"),
            # kiln's take, take_put: the sources as pointers after the destinations, where
            # PyCUDA's read them through texture references.
            (f"take-{d}", lambda d=d: ew.get_take_kernel(d, I32, 2)[0], "take",
             ["int *", p, p, p, p, "long"], "PPPPPl"),
            (f"take_put-{d}", lambda d=d: ew.get_take_put_kernel(d, I32, True, 2)[0],
             "take_put", ["int *", "int *", p, p, p, p, "int", "int", "long"], "PPPPPPiil"),
            (f"take_put-nooffsets-{d}", lambda d=d: ew.get_take_put_kernel(d, I32, False)[0],
             "take_put", ["int *", "int *", p, p, "long"], "PPPPl"),
            (f"put-{d}", lambda d=d: ew.get_put_kernel(d, I32, 2), "put",
             ["int *", p, p, p, p, "long"], "PPPPPl"),
        ]
        if real:
            cases += [
                (f"minmax-{d}", lambda d=d: ew.get_binary_minmax_kernel("max", d, d, d, False),
                 {F32: "fmaxf_kernel", F64: "fmax_kernel", I32: "max_kernel"}[d],
                 [p, p, p, UL], "PPPL"),
                (f"minmax-scalar-{d}",
                 lambda d=d: ew.get_binary_minmax_kernel("min", d, d, d, True),
                 {F32: "fminf_kernel", F64: "fmin_kernel", I32: "min_kernel"}[d],
                 [p, t, p, UL], f"P{c}PL"),
            ]
        if d.kind == "f":
            cases += [
                (f"unary-{d}", lambda d=d: ew.get_unary_func_kernel("sin", d), "sin_kernel",
                 [p, p, UL], "PPL"),
                (f"binary_func-{d}", lambda d=d: ew.get_binary_func_kernel("atan2", d, d, d),
                 "atan2_kernel", [p, p, p, UL], "PPPL"),
                (f"binary_func_scalar-{d}",
                 lambda d=d: ew.get_binary_func_scalar_kernel("atan2", d, d, d), "atan2_kernel",
                 [p, t, p, UL], f"P{c}PL"),
            ]
    r = "float *"
    c = ctype(C64) + " *"
    cases += [
        ("real-complex64", lambda: ew.get_real_kernel(C64, F32), "real", [c, r, UL], "PPL"),
        ("imag-complex64", lambda: ew.get_imag_kernel(C64, F32), "imag", [c, r, UL], "PPL"),
        ("conj-complex64", lambda: ew.get_conj_kernel(C64, C64), "conj", [c, c, UL], "PPL"),
        ("unary-abs-complex64", lambda: ew.get_unary_func_kernel("abs", C64, F32),
         "abs_kernel", [c, r, UL], "PPL"),
        ("fmod", ew.get_fmod_kernel, "fmod_kernel", [r, r, r, UL], "PPPL"),
        ("modf", ew.get_modf_kernel, "modf_kernel", [r, r, r, UL], "PPPL"),
        ("frexp", ew.get_frexp_kernel, "frexp_kernel", [r, r, r, UL], "PPPL"),
        ("ldexp", ew.get_ldexp_kernel, "ldexp_kernel", [r, r, r, UL], "PPPL"),
        ("axpbyz-real-into-complex", lambda: ew.get_axpbyz_kernel(F32, C64, C64), "axpbyz",
         ["float", r, ctype(C64), c, c, UL], "fPFPPL"),
        ("binary_op-mixed", lambda: ew.get_binary_op_kernel(F64, I32, F64, "-"), "multiply",
         ["double *", "int *", "double *", UL], "PPPL"),
        ("pow-int-base-float-exp", lambda: ew.get_pow_array_kernel(I32, F32, F32, True, False),
         "pow_method", ["int *", "float", r, UL], "PfPL"),
        ("copy-widening", lambda: ew.get_copy_kernel(np.complex128, C64), "copy",
         [ctype(np.complex128) + " *", c, UL], "PPL"),
        ("copy-narrowing", lambda: ew.get_copy_kernel(C64, np.complex128), "copy",
         [c, ctype(np.complex128) + " *", UL], "PPL"),
    ]
    return cases


CASES = _getter_cases()


@pytest.mark.parametrize("make, name, want, fmt", [c[1:] for c in CASES],
                         ids=[c[0] for c in CASES])
def test_a_getter_compiles_with_pycudas_parameters(make, name, want, fmt):
    func = make()
    assert isinstance(func, kiln.Function)
    assert func.declaration.split("(")[0] == name
    assert params(func) == want
    assert func.arg_format == fmt  # prepared, as PyCUDA's getters leave it


def test_getters_are_memoized_and_registered_for_clearing():
    f = ew.get_fill_kernel(np.float32)
    assert ew.get_fill_kernel(np.float32) is f
    assert any(g is ew.get_fill_kernel.__wrapped__
               for g in kiln.tools.context_dependent_memoized_functions)
    kiln.tools.clear_context_caches()
    assert ew.get_fill_kernel.__wrapped__._pycuda_ctx_dep_memoize_dic == {}
    assert ew.get_fill_kernel(np.float32).declaration == f.declaration


def test_take_kernels_have_no_texture_references():
    assert ew.get_take_kernel(F32, I32)[1] == []
    assert ew.get_take_put_kernel(F32, I32, False)[1] == []
    func, texrefs = ew.get_linear_combination_kernel(((False, F32, F32),), F32)
    assert texrefs == [] and params(func) == ["float", "float *", "float *", UL]


def test_a_gpu_scalar_summand_is_refused_naming_what_to_do_instead():
    with pytest.raises(NotImplementedError, match="texture references were removed by CUDA 12"
                       ) as e:
        ew.get_linear_combination_kernel(((False, F32, F32), (True, F32, F32)), F32)
    assert "summand 1" in str(e.value) and "loop_prep" in str(e.value)


def test_pow_needs_an_array():
    with pytest.raises(ValueError, match="must be arrays"):
        ew.get_pow_array_kernel(F32, F32, F32, False, False)


def test_minmax_names_pycudas_functions_and_compiles_for_integers():
    def name(*args):
        return ew.get_binary_minmax_kernel(*args).declaration.split("(")[0]

    assert name("max", F32, F32, F32, False) == "fmaxf_kernel"
    assert name("min", F64, F64, F64, True) == "fmin_kernel"
    assert name("max", I32, F32, F32, False) == "fmaxf_kernel"
    assert name("max", F64, F32, F64, False) == "fmax_kernel"
    # PyCUDA's names "maxf" for integers, which CUDA lacks; kiln's takes CUDA's max.
    assert name("max", I32, I32, I32, False) == "max_kernel"
    assert name("min", I32, np.int64, np.int64, False) == "min_kernel"


# ---- get_elwise_module and kin, without a GPU -----------------------------------------------

def scalar_mult_args(dtype):
    """The parameter list PyCUDA's examples/from-wiki/gpu_scalar_mult.py builds for its
    linear combination without textures, two summands whose scalars are on the GPU."""
    args = []
    for i in range(2):
        args.append(VectorArg(dtype, f"global_a{i}"))
        args.append(VectorArg(dtype, f"x{i}"))
    args.append(VectorArg(dtype, "z"))
    args.append(ScalarArg(np.uintp, "n"))
    return args


def scalar_mult_kernel(dtype):
    args = scalar_mult_args(dtype)
    t = ew._cgen.dtype_to_ctype(dtype)
    mod = ew.get_elwise_module(args, "z[i] = a0*x0[i] + a1*x1[i]", "linear_combination",
                               loop_prep=f"{t} a0 = *global_a0;\n{t} a1 = *global_a1")
    func = mod.get_function("linear_combination")
    func.prepare("".join(arg.struct_char for arg in args))
    return func


def test_get_elwise_module_takes_the_callers_n_as_written():
    func = scalar_mult_kernel(np.float32)
    assert params(func) == ["float *"] * 5 + [UL]
    assert func.arg_format == "PPPPPL"


def test_get_elwise_module_adds_no_parameter():
    with pytest.raises(kiln.CompileError, match='"n" is undefined'):
        ew.get_elwise_module([VectorArg(np.float32, "x")], "x[i] = 0", "no_n")
    with pytest.raises(TypeError, match="unexpected keyword"):
        ew.get_elwise_module([VectorArg(np.float32, "x")], "x[i] = 0", "k", bogus=1)


def test_get_elwise_module_takes_a_string_of_declarators():
    mod = ew.get_elwise_module("float *x, pycuda::complex<double> *z, float a, int n",
                               "x[i] *= a; z[i] = z[i] * (double)a", "scale")
    assert params(mod.get_function("scale")) == ["float *", ctype(np.complex128) + " *",
                                                 "float", "int"]


def test_get_elwise_module_defines_pycudas_names():
    mod = ew.get_elwise_module("unsigned long *x, unsigned long n",
                               "x[i] = tid + cta_start + total_threads", "names",
                               preamble="#define KILN_TEST_ONE 1",
                               loop_prep="unsigned long one = KILN_TEST_ONE",
                               after_loop="if (i < one) x[0] = 0")
    assert params(mod.get_function("names")) == ["unsigned long *", UL]


def test_get_elwise_range_module_takes_start_stop_step():
    args = [VectorArg(np.float64, "x"), ScalarArg(np.intp, "start"),
            ScalarArg(np.intp, "stop"), ScalarArg(np.intp, "step")]
    mod = ew.get_elwise_range_module(args, "x[i] = i", "ranged")
    assert params(mod.get_function("ranged")) == ["double *", "long", "long", "long"]


def test_get_elwise_kernel_and_types_gives_pycudas_triple():
    given = [VectorArg(np.float32, "x"), ScalarArg(np.float32, "a")]
    mod, func, arguments = ew.get_elwise_kernel_and_types(given, "x[i] *= a", "scale2")
    assert mod.get_function("scale2").declaration == func.declaration
    assert params(func) == ["float *", "float", UL]
    assert func.arg_format == "PfL"
    assert arguments == given + [ScalarArg(np.uintp, "n")]
    assert len(given) == 2  # the caller's list is left as it was
    mod, func, arguments = ew.get_elwise_kernel_and_types("float *x, float a", "x[i] *= a",
                                                          "scale3", use_range=True)
    assert [a.name for a in arguments] == ["x", "a", "start", "stop", "step"]
    assert params(func) == ["float *", "float", "long", "long", "long"]
    assert func.arg_format == "Pflll"
    assert ew.get_elwise_kernel("float *x", "x[i] = n", "fill_n").arg_format == "PL"
    with pytest.raises(ValueError, match="argument names repeat: n"):
        ew.get_elwise_kernel_and_types("float *x, unsigned long n", "x[i] = 0", "twice")


def test_an_elementwise_kernel_gives_its_module_too():
    k = ew.ElementwiseKernel("float *x, float a", "x[i] *= a", "scale4")
    mod, func, arguments = k.generate_stride_kernel_and_types(False)
    assert mod.get_function("scale4").declaration == func.declaration
    assert [a.name for a in arguments] == ["x", "a", "n"]
    mod, func, arguments = k.generate_stride_kernel_and_types(True)
    assert params(func)[-3:] == ["long", "long", "long"]


# ---- the reduction getters, without a GPU ----------------------------------------------------

@pytest.mark.parametrize("make, dtype_out, names, dtypes", [
    (lambda: red.get_sum_kernel(F32, F32), F32, ["x"], [F32]),
    (lambda: red.get_sum_kernel(None, I32), I32, ["x"], [I32]),
    (lambda: red.get_sum_kernel(np.float16, np.float16), np.float16, ["x"], [np.float16]),
    (lambda: red.get_sum_kernel(C64, C64), C64, ["x"], [C64]),
    (lambda: red.get_subset_sum_kernel(F64, I32, F32), F64, ["subset", "x"], [I32, F32]),
    (lambda: red.get_dot_kernel(F64, F32, F32), F64, ["x", "y"], [F32, F32]),
    (lambda: red.get_dot_kernel(C64), C64, ["x", "y"], [C64, C64]),
    (lambda: red.get_subset_dot_kernel(None, I32, F32), F32, ["subset", "x", "y"],
     [I32, F32, F32]),
    (lambda: red.get_subset_dot_kernel(F64, np.int64, None, F32), F64, ["subset", "x", "y"],
     [np.int64, F64, F32]),
    (lambda: red.get_minmax_kernel("max", F32), F32, ["x"], [F32]),
    (lambda: red.get_minmax_kernel("min", I32), I32, ["x"], [I32]),
    (lambda: red.get_subset_minmax_kernel("min", F64, I32), F64, ["subset", "x"], [I32, F64]),
    (lambda: red.get_any_kernel(np.bool_, F32), np.bool_, ["x"], [F32]),
    (lambda: red.get_all_kernel(I32, C64), I32, ["x"], [C64]),
    # dtype_out None: the input's, a complex result folded by the truth of its parts.
    (lambda: red.get_any_kernel(None, C64), C64, ["x"], [C64]),
    (lambda: red.get_all_kernel(None, np.complex128), np.complex128, ["x"], [np.complex128]),
])
def test_a_reduction_getter_gives_a_reduction_kernel(make, dtype_out, names, dtypes):
    k = make()
    assert isinstance(k, red.ReductionKernel)
    assert k.dtype_out == dtype_out
    assert [a.name for a in k.arguments] == names
    assert [a.dtype for a in k.arguments] == [np.dtype(d) for d in dtypes]
    assert all(isinstance(a, VectorArg) for a in k.arguments)
    assert make() is k


def test_reduction_getters_share_gpuarrays_kernels():
    from kiln import _ops
    assert red.get_sum_kernel(F32, F32) is _ops._reduction("sum", F32, F32)
    assert red.get_minmax_kernel("max", F64) is _ops._reduction("max", F64, F64)


def test_reduction_getters_refuse_what_they_cannot_make():
    with pytest.raises(ValueError, match="'min' or 'max'"):
        red.get_minmax_kernel("median", F32)
    with pytest.raises(ValueError, match="'min' or 'max'"):
        red.get_minmax_neutral("mean", F32)
    with pytest.raises(ValueError, match="None was given"):
        red.get_subset_dot_kernel(None, I32)


def test_minmax_neutral_is_pycudas():
    assert red.get_minmax_neutral("min", F32) == "MY_INFINITY"
    assert red.get_minmax_neutral("max", F64) == "-MY_INFINITY"
    assert red.get_minmax_neutral("min", np.int8) == "127"
    assert red.get_minmax_neutral("max", I32) == "-2147483648"


def test_the_two_stage_reduction_builders_give_pycudas_stages():
    # PyCUDA's two-launch reduction, whose stages programs launch themselves: stage 2 takes the
    # partial values first, and both take seq_count (unsigned int) and n (size_t) last.
    f, types = red.get_reduction_kernel_and_types(1, "float", 256, "0", "a+b", "x[i]*y[i]",
                                                   "const float *x, const float *y", name="s1")
    assert types == ["P", "P"] and f.arg_format == "PPPIN"
    assert f.signature == ("b64", "b64", "b64", "b32", "b64")  # extern "C", as PyCUDA's
    f, types = red.get_reduction_kernel_and_types(2, "pycuda::complex<double>", 512, "0", "a+b",
                                                   arguments="int m", name="s2")
    assert types == ["P", "i"] and f.arg_format == "PPiIN"
    with pytest.raises(ValueError, match="stages 1 and 2"):
        red.get_reduction_kernel_and_types(3, "float", 256, "0", "a+b", None, "float *in")


def test_a_reduction_kernel_has_pycudas_stage_attributes():
    k = red.ReductionKernel(np.float64, "0", "a+b", "x[i]*y[i]", "const double *x, double *y",
                            name="kiln_stage_dot")
    assert k.block_size == 512
    assert (k.stage1_arg_types, k.stage2_arg_types) == (["P", "P"], ["P", "P", "P"])
    assert callable(k.stage1_func) and callable(k.stage2_func)


# ---- CudaModule ------------------------------------------------------------------------------

def test_cuda_module_is_the_base_of_the_modules():
    mod = kiln.compiler.SourceModule("__global__ void k(int *p) { *p = 1; }")
    assert isinstance(mod, kiln.compiler.CudaModule)
    assert isinstance(kiln.compiler.DynamicModule(), kiln.compiler.CudaModule)
    assert issubclass(kiln.compiler.DynamicSourceModule, kiln.compiler.CudaModule)
    assert not isinstance(object(), kiln.compiler.CudaModule)


class CubinModule(kiln.compiler.CudaModule):
    """A program's own module over a CUBIN it compiled, with PyCUDA's helpers (a library's
    BinModule)."""

    def __init__(self, cubin, arch=None):
        self._check_arch(arch)
        self.module = kiln.driver.module_from_buffer(cubin)
        self._bind_module()


def test_a_cuda_module_of_a_programs_own_has_pycudas_helpers():
    class Inner:
        def get_global(self, name):
            return ("global", name)

        def get_texref(self, name):
            return ("texref", name)

        def get_function(self, name):
            return ("function", name)

    class Own(kiln.compiler.CudaModule):
        def __init__(self):
            self.module = Inner()
            self._bind_module()

    own = Own()
    assert own.get_global("g") == ("global", "g") and own.get_texref("t") == ("texref", "t")
    assert own.get_function("k") == ("function", "k") and not hasattr(own, "get_surfref")
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no device or no arch: nothing to say
        own._check_arch(None)
        own._check_arch("compute_nonsense")


@pytest.mark.gpu
def test_a_cuda_module_of_a_programs_own_launches():
    import warnings
    major, minor = kiln.Context.get_device().compute_capability()
    arch = f"sm_{major}{minor}"
    src = '__device__ int scale = 3;\n__global__ void k(int *p) { p[threadIdx.x] *= scale; }'
    mod = CubinModule(kiln.compiler.compile(src, arch=arch), arch=arch)
    ptr, size = mod.get_global("scale")
    assert size == 4
    kiln.driver.memcpy_htod(ptr, np.int32(5))
    x = kiln.gpuarray.to_gpu(np.arange(32, dtype=np.int32))
    mod.get_function("k")(x, block=(32, 1, 1), grid=(1, 1))
    np.testing.assert_array_equal(x.get(), 5 * np.arange(32))
    with pytest.warns(UserWarning, match="higher than selected GPU"):
        CubinModule(kiln.compiler.compile(src, arch=arch), arch=f"sm_{major + 1}0")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        CubinModule(kiln.compiler.compile(src, arch=arch), arch=arch)


# ---- on a GPU: each kernel launched the PyCUDA way, against NumPy ----------------------------

BLOCK = (256, 1, 1)
SENTINEL = 77


def shape_for(n):
    """The caller's launch shape: one thread an element (a grid of one for n = 0)."""
    return (max(1, (n + 255) // 256), 1), BLOCK


def host(dtype, n, rng, low=-50, high=50, positive=False):
    """n values of dtype; positive: away from zero (bases of powers, divisors)."""
    dtype = np.dtype(dtype)
    if dtype.kind in "iu":
        v = rng.integers(1 if positive else low, high, n)
    elif dtype.kind == "c":
        v = rng.standard_normal(n) + 1j * rng.standard_normal(n)
    else:
        v = rng.standard_normal(n) * 4
    if positive and dtype.kind == "f":
        v = np.abs(v) + 0.5
    if positive and dtype.kind == "c":
        v = v + 8  # away from zero, the imaginary part kept
    return np.asarray(v).astype(dtype)


def dev(x):
    """x on the device with one element more (a zero), so that no array is empty at n = 0."""
    x = np.asarray(x)
    return kiln.to_device(np.concatenate([x, np.zeros(1, x.dtype)]))


def out_array(dtype, n):
    """A device array of n elements and one more holding SENTINEL, which the kernel must not
    write (n = 0 gets just that one)."""
    return kiln.to_device(np.full(n + 1, SENTINEL, dtype=dtype))


def result(out, n):
    got = out.get()
    assert got[n] == SENTINEL, "the kernel wrote past n"
    return got[:n]


def close(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype.kind in "fc":
        tol = 1e-5 if want.dtype in (F32, C64) else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    else:
        np.testing.assert_array_equal(got, want)


@pytest.fixture(scope="module")
def rng():
    return np.random.default_rng(11)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_copy_fill_reverse_arange(rng, dtype, n):
    x = host(dtype, n, rng)
    grid, block = shape_for(n)
    xd = dev(x)
    z = out_array(dtype, n)
    ew.get_copy_kernel(dtype, dtype).prepared_call(grid, block, z.gpudata, xd.gpudata, n)
    close(result(z, n), x)
    z = out_array(dtype, n)
    value = dtype.type(3)
    ew.get_fill_kernel(dtype).prepared_call(grid, block, value, z.gpudata, n)
    close(result(z, n), np.full(n, value, dtype))
    z = out_array(dtype, n)
    ew.get_reverse_kernel(dtype).prepared_call(grid, block, xd.gpudata, z.gpudata, n)
    close(result(z, n), x[::-1])
    z = out_array(dtype, n)
    start, step = dtype.type(2), dtype.type(3)
    stream = kiln.Stream()
    ew.get_arange_kernel(dtype).prepared_async_call(grid, block, stream, z.gpudata, start, step,
                                                    n)
    stream.synchronize()
    close(result(z, n), (start + np.arange(n) * step).astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_copy_converts(rng, n):
    x = host(C64, n, rng)
    grid, block = shape_for(n)
    z = out_array(np.complex128, n)
    ew.get_copy_kernel(np.complex128, C64).prepared_call(grid, block, z.gpudata,
                                                         dev(x).gpudata, n)
    close(result(z, n), x.astype(np.complex128))
    y = host(F64, n, rng)
    z = out_array(F32, n)
    ew.get_copy_kernel(F32, F64).prepared_call(grid, block, z.gpudata, dev(y).gpudata,
                                               n)
    close(result(z, n), y.astype(F32))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_axpbyz_axpbz_linear_combination(rng, dtype, n):
    x, y = host(dtype, n, rng), host(dtype, n, rng)
    xd, yd = dev(x), dev(y)
    a, b = dtype.type(2), dtype.type(-3)
    grid, block = shape_for(n)
    z = out_array(dtype, n)
    ew.get_axpbyz_kernel(dtype, dtype, dtype).prepared_call(
        grid, block, a, xd.gpudata, b, yd.gpudata, z.gpudata, n)
    close(result(z, n), a * x + b * y)
    if n:
        z = out_array(dtype, n)
        ew.get_axpbyz_kernel(dtype, dtype, dtype, True, False).prepared_call(
            grid, block, a, xd.gpudata, b, yd.gpudata, z.gpudata, n)
        close(result(z, n), a * x[0] + b * y)
    z = out_array(dtype, n)
    ew.get_axpbz_kernel(dtype, dtype).prepared_call(grid, block, a, xd.gpudata, b, z.gpudata, n)
    close(result(z, n), a * x + b)
    z = out_array(dtype, n)
    func, texrefs = ew.get_linear_combination_kernel(((False, dtype, dtype),
                                                      (False, dtype, dtype)), dtype)
    func.prepared_call(grid, block, a, xd.gpudata, b, yd.gpudata, z.gpudata, n)
    close(result(z, n), a * x + b * y)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 257, 10**5 + 3])
def test_axpbyz_with_a_real_operand_into_complex(rng, n):
    x, y = host(F32, n, rng), host(C64, n, rng)
    grid, block = shape_for(n)
    z = out_array(C64, n)
    ew.get_axpbyz_kernel(F32, C64, C64).prepared_call(
        grid, block, np.float32(2), dev(x).gpudata, np.complex64(1 - 1j),
        dev(y).gpudata, z.gpudata, n)
    close(result(z, n), (2 * x + (1 - 1j) * y).astype(C64))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("op", ["+", "-", "*", "/"])
def test_binary_op_scalar_op_rdivide(rng, dtype, n, op):
    x = host(dtype, n, rng, positive=True)
    y = host(dtype, n, rng, positive=True)
    xd, yd = dev(x), dev(y)
    grid, block = shape_for(n)

    def apply(u, v):
        if op == "/" and dtype.kind == "i":
            return (np.trunc(u / v)).astype(dtype)  # C's division of integers
        return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op](
            u, v).astype(dtype)

    z = out_array(dtype, n)
    ew.get_binary_op_kernel(dtype, dtype, dtype, op).prepared_call(
        grid, block, xd.gpudata, yd.gpudata, z.gpudata, n)
    close(result(z, n), apply(x, y))
    if n:
        z = out_array(dtype, n)
        ew.get_binary_op_kernel(dtype, dtype, dtype, op, False, True).prepared_call(
            grid, block, xd.gpudata, yd.gpudata, z.gpudata, n)
        close(result(z, n), apply(x, y[0]))
    a = dtype.type(3)
    z = out_array(dtype, n)
    ew.get_scalar_op_kernel(dtype, dtype, dtype, op).prepared_call(
        grid, block, xd.gpudata, a, z.gpudata, n)
    close(result(z, n), apply(x, a))
    if op == "/":
        z = out_array(dtype, n)
        ew.get_rdivide_elwise_kernel(dtype, dtype).prepared_call(
            grid, block, xd.gpudata, a, z.gpudata, n)
        close(result(z, n), apply(a, x))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=str)
def test_binary_minmax(rng, dtype, n):
    x, y = host(dtype, n, rng), host(dtype, n, rng)
    xd, yd = dev(x), dev(y)
    grid, block = shape_for(n)
    for which, fn in (("max", np.maximum), ("min", np.minimum)):
        z = out_array(dtype, n)
        ew.get_binary_minmax_kernel(which, dtype, dtype, dtype, False).prepared_call(
            grid, block, xd.gpudata, yd.gpudata, z.gpudata, n)
        close(result(z, n), fn(x, y))
        z = out_array(dtype, n)
        ew.get_binary_minmax_kernel(which, dtype, dtype, dtype, True).prepared_call(
            grid, block, xd.gpudata, dtype.type(1), z.gpudata, n)
        close(result(z, n), fn(x, dtype.type(1)))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [F32, F64], ids=str)
def test_unary_and_binary_funcs(rng, dtype, n):
    x, y = host(dtype, n, rng), host(dtype, n, rng)
    xd, yd = dev(x), dev(y)
    grid, block = shape_for(n)
    z = out_array(dtype, n)
    ew.get_unary_func_kernel("sin", dtype).prepared_call(grid, block, xd.gpudata, z.gpudata, n)
    close(result(z, n), np.sin(x))
    z = out_array(dtype, n)
    ew.get_binary_func_kernel("atan2", dtype, dtype, dtype).prepared_call(
        grid, block, xd.gpudata, yd.gpudata, z.gpudata, n)
    close(result(z, n), np.arctan2(x, y))
    z = out_array(dtype, n)
    ew.get_binary_func_scalar_kernel("atan2", dtype, dtype, dtype).prepared_call(
        grid, block, xd.gpudata, dtype.type(0.5), z.gpudata, n)
    close(result(z, n), np.arctan2(x, dtype.type(0.5)))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_complex_parts(rng, n):
    x = host(C64, n, rng)
    xd = dev(x)
    grid, block = shape_for(n)
    for make, want, dtype in ((ew.get_real_kernel(C64, F32), x.real, F32),
                              (ew.get_imag_kernel(C64, F32), x.imag, F32),
                              (ew.get_conj_kernel(C64, C64), np.conj(x), C64),
                              (ew.get_unary_func_kernel("abs", C64, F32), np.abs(x), F32),
                              (ew.get_unary_func_kernel("exp", C64), np.exp(x), C64)):
        z = out_array(dtype, n)
        make.prepared_call(grid, block, xd.gpudata, z.gpudata, n)
        close(result(z, n), want.astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [F32, F64, C64], ids=str)
def test_pow_array(rng, dtype, n):
    x, y = host(dtype, n, rng, positive=True), host(dtype, n, rng, positive=True) / 2
    y = y.astype(dtype)
    xd, yd = dev(x), dev(y)
    grid, block = shape_for(n)
    tol = 1e-4 if dtype in (F32, C64) else 1e-12
    for is_base, is_exp in ((True, True), (True, False), (False, True)):
        xa = xd.gpudata if is_base else dtype.type(1.5)
        ya = yd.gpudata if is_exp else dtype.type(2.5)
        want = ((x if is_base else dtype.type(1.5)) ** (y if is_exp else dtype.type(2.5)))
        z = out_array(dtype, n)
        ew.get_pow_array_kernel(dtype, dtype, dtype, is_base, is_exp).prepared_call(
            grid, block, xa, ya, z.gpudata, n)
        got = result(z, n)
        assert got.dtype == dtype
        np.testing.assert_allclose(got, np.broadcast_to(want, (n,)), rtol=tol)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_fmod_modf_frexp_ldexp(rng, n):
    x, m = host(F32, n, rng), host(F32, n, rng, positive=True)
    xd, md = dev(x), dev(m)
    grid, block = shape_for(n)
    z = out_array(F32, n)
    ew.get_fmod_kernel().prepared_call(grid, block, xd.gpudata, md.gpudata, z.gpudata, n)
    close(result(z, n), np.fmod(x, m))
    ip, fp = out_array(F32, n), out_array(F32, n)
    ew.get_modf_kernel().prepared_call(grid, block, xd.gpudata, ip.gpudata, fp.gpudata, n)
    want_f, want_i = np.modf(x)
    close(result(ip, n), want_i)
    close(result(fp, n), want_f)
    sig, ex = out_array(F32, n), out_array(F32, n)
    ew.get_frexp_kernel().prepared_call(grid, block, xd.gpudata, sig.gpudata, ex.gpudata, n)
    want_s, want_e = np.frexp(x)
    close(result(sig, n), want_s)
    close(result(ex, n), want_e.astype(F32))
    e = np.round(host(F32, n, rng) / 10).astype(F32)
    z = out_array(F32, n)
    ew.get_ldexp_kernel().prepared_call(grid, block, xd.gpudata, dev(e).gpudata,
                                        z.gpudata, n)
    close(result(z, n), np.ldexp(x, e.astype(np.int32)))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_if_positive_where_logical_not(rng, dtype, n):
    crit = host(F32, n, rng)
    crit[::3] = 0
    icrit = (crit > 0.5).astype(np.int32) - (crit < -2).astype(np.int32)
    then_, else_ = host(dtype, n, rng), host(dtype, n, rng)
    then_[::4] = 0
    td, ed = dev(then_), dev(else_)
    grid, block = shape_for(n)
    z = out_array(dtype, n)
    ew.get_if_positive_kernel(F32, dtype).prepared_call(
        grid, block, dev(crit).gpudata, td.gpudata, ed.gpudata, z.gpudata, n)
    close(result(z, n), np.where(crit > 0, then_, else_))
    z = out_array(dtype, n)
    ew.get_where_kernel(I32, dtype).prepared_call(
        grid, block, dev(icrit).gpudata, td.gpudata, ed.gpudata, z.gpudata, n)
    close(result(z, n), np.where(icrit != 0, then_, else_))
    z = out_array(np.bool_, n)
    ew.get_logical_not_kernel(dtype, np.bool_).prepared_call(grid, block, td.gpudata,
                                                             z.gpudata, n)
    got = z.get()
    assert got[n] == np.bool_(SENTINEL)
    close(got[:n], np.logical_not(then_))


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_take_put_take_put(rng, dtype, n):
    m = 1000
    src0, src1 = host(dtype, m, rng), host(dtype, m, rng)
    s0, s1 = dev(src0), dev(src1)
    idx = rng.integers(0, m, n).astype(np.int32)
    idxd = dev(idx)
    grid, block = shape_for(n)
    d0, d1 = out_array(dtype, n), out_array(dtype, n)
    func, texrefs = ew.get_take_kernel(dtype, I32, vec_count=2)
    assert texrefs == []
    func.prepared_call(grid, block, idxd.gpudata, d0.gpudata, d1.gpudata, s0.gpudata,
                       s1.gpudata, n)
    close(result(d0, n), src0[idx])
    close(result(d1, n), src1[idx])

    # put: a permutation of n places in a destination of n + 1 (the last keeps SENTINEL)
    perm = rng.permutation(n).astype(np.int32)
    vals = host(dtype, n, rng)
    d0 = out_array(dtype, n)
    ew.get_put_kernel(dtype, I32).prepared_call(grid, block, dev(perm).gpudata,
                                                d0.gpudata, dev(vals).gpudata, n)
    want = np.empty(n, dtype)
    want[perm] = vals
    close(result(d0, n), want)

    # take_put with offsets: dest_k[perm[i]] = src_k[idx[i] + offset_k]
    small = rng.integers(0, m - 10, n).astype(np.int32)
    d0, d1 = out_array(dtype, n), out_array(dtype, n)
    func, texrefs = ew.get_take_put_kernel(dtype, I32, True, vec_count=2)
    assert texrefs == []
    stream = kiln.Stream()
    func.prepared_async_call(grid, block, stream, dev(perm).gpudata,
                             dev(small).gpudata, d0.gpudata, d1.gpudata, s0.gpudata,
                             s1.gpudata, np.int32(3), np.int32(7), n)
    stream.synchronize()
    want0, want1 = np.empty(n, dtype), np.empty(n, dtype)
    want0[perm], want1[perm] = src0[small + 3], src1[small + 7]
    close(result(d0, n), want0)
    close(result(d1, n), want1)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES[1:])
@pytest.mark.parametrize("dtype", [F32, F64, C64], ids=str)
def test_gpu_scalar_mult_without_textures(rng, dtype, n):
    """PyCUDA's examples/from-wiki/gpu_scalar_mult.py, main_no_tex: the scalars a and b on the
    GPU, read through pointers in loop_prep; the caller's own n."""
    func = scalar_mult_kernel(dtype)
    a = kiln.gpuarray.to_gpu(np.array(5, dtype=dtype))
    b = kiln.gpuarray.to_gpu(np.array(7, dtype=dtype))
    x, y = host(dtype, n, rng), host(dtype, n, rng)
    xd, yd = kiln.gpuarray.to_gpu(x), kiln.gpuarray.to_gpu(y)
    z = out_array(dtype, n)
    grid, block = shape_for(n)
    func.prepared_call(grid, block, a.gpudata, xd.gpudata, b.gpudata, yd.gpudata, z.gpudata,
                       xd.mem_size)
    close(result(z, n), (5 * x + 7 * y).astype(dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("grid, block", [((1, 1), (1, 1, 1)), ((3, 1), (37, 1, 1)),
                                         ((1000, 1), (1024, 1, 1)), ((7, 1), (32, 1, 1)),
                                         ((5000, 1), (64, 1, 1))])
def test_get_elwise_module_is_right_for_any_launch_shape(rng, grid, block):
    n = 10**5 + 3
    x = host(F32, n, rng)
    xd = dev(x)
    z = out_array(F32, n)
    mod = ew.get_elwise_module("float *z, float *x, float a, unsigned long n",
                               "z[i] = a * x[i]", "scaled")
    mod.get_function("scaled").prepared_call(grid, block, z.gpudata, xd.gpudata,
                                             np.float32(3), n)
    close(result(z, n), 3 * x)
    # The same launch shapes for a getter's kernel and an ElementwiseKernel's own.
    z = out_array(F32, n)
    ew.get_copy_kernel(F32, F32).prepared_call(grid, block, z.gpudata, xd.gpudata, n)
    close(result(z, n), x)
    k = ew.ElementwiseKernel("float *z, float *x", "z[i] = x[i] + 1", "plus_one")
    _, func, _ = k.generate_stride_kernel_and_types(False)
    z = out_array(F32, n)
    func.prepared_call(grid, block, z.gpudata, xd.gpudata, n)
    close(result(z, n), x + 1)


@pytest.mark.gpu
@pytest.mark.parametrize("start, stop, step", [(0, 1000, 1), (5, 900, 7), (999, -1, -3),
                                               (10, 10, 1)])
def test_get_elwise_range_module_runs_the_range(start, stop, step):
    n = 1000
    args = [VectorArg(np.int32, "x"), ScalarArg(np.intp, "start"),
            ScalarArg(np.intp, "stop"), ScalarArg(np.intp, "step")]
    mod = ew.get_elwise_range_module(args, "x[i] = (int)i + 1", "mark")
    x = kiln.to_device(np.zeros(n, np.int32))
    mod.get_function("mark").prepared_call((2, 1), (64, 1, 1), x.gpudata, start, stop, step)
    want = np.zeros(n, np.int32)
    r = np.arange(start, stop, step)
    want[r] = r + 1
    close(x.get(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("n", SIZES)
def test_get_elwise_kernel_prepared_call(rng, n):
    func = ew.get_elwise_kernel("double *x, double a", "x[i] = a * x[i] + (double)n",
                                "scale_plus_n")
    x = host(F64, n, rng)
    xd = kiln.to_device(np.concatenate([x, [SENTINEL]]))
    grid, block = shape_for(n)
    func.prepared_call(grid, block, xd.gpudata, 2.0, n)
    close(result(xd, n), 2 * x + n)


# ---- on a GPU: the reduction getters against NumPy -------------------------------------------

RSIZES = [1, 257, 10**5 + 3]


def reduced(k, *args):
    r = k(*args)
    assert isinstance(r, kiln.DeviceArray) and r.shape == () and r.dtype == k.dtype_out
    return r.get()


@pytest.mark.gpu
@pytest.mark.parametrize("n", RSIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_sum_dot_subset(rng, dtype, n):
    x, y = host(dtype, n, rng), host(dtype, n, rng)
    xd, yd = kiln.to_device(x), kiln.to_device(y)
    subset = rng.integers(0, n, max(1, n // 3)).astype(np.int32)
    sd = kiln.to_device(subset)
    tol = {F32: 1e-4, C64: 1e-4}.get(dtype, 1e-10)

    def check(got, want):
        assert np.asarray(got).dtype == dtype
        if dtype.kind == "i":
            assert got == want
        else:
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.sqrt(n))

    check(reduced(red.get_sum_kernel(dtype, dtype), xd), x.sum(dtype=dtype))
    check(reduced(red.get_sum_kernel(None, dtype), xd), x.sum(dtype=dtype))
    check(reduced(red.get_dot_kernel(dtype, dtype, dtype), xd, yd), np.dot(x, y))
    check(reduced(red.get_subset_sum_kernel(dtype, I32, dtype), sd, xd),
          x[subset].sum(dtype=dtype))
    check(reduced(red.get_subset_dot_kernel(dtype, I32, dtype, dtype), sd, xd, yd),
          np.dot(x[subset], y[subset]))


@pytest.mark.gpu
@pytest.mark.parametrize("n", RSIZES)
def test_sum_into_another_dtype(rng, n):
    x = host(F32, n, rng)
    got = reduced(red.get_sum_kernel(F64, F32), kiln.to_device(x))
    np.testing.assert_allclose(got, x.astype(F64).sum(), rtol=1e-10, atol=1e-9)
    h = (host(F32, n, rng) / 8).astype(np.float16)
    got = reduced(red.get_sum_kernel(np.float16, np.float16), kiln.to_device(h))
    np.testing.assert_allclose(float(got), h.astype(F64).sum(), rtol=2e-2, atol=0.5)


@pytest.mark.gpu
@pytest.mark.parametrize("n", RSIZES)
@pytest.mark.parametrize("dtype", [F32, F64, I32], ids=str)
def test_minmax_and_subset_minmax(rng, dtype, n):
    x = host(dtype, n, rng)
    xd = kiln.to_device(x)
    subset = rng.integers(0, n, max(1, n // 3)).astype(np.int64)
    sd = kiln.to_device(subset)
    assert reduced(red.get_minmax_kernel("max", dtype), xd) == x.max()
    assert reduced(red.get_minmax_kernel("min", dtype), xd) == x.min()
    assert reduced(red.get_subset_minmax_kernel("max", dtype, np.int64), sd, xd) == \
        x[subset].max()
    assert reduced(red.get_subset_minmax_kernel("min", dtype, np.int64), sd, xd) == \
        x[subset].min()


@pytest.mark.gpu
@pytest.mark.parametrize("n", RSIZES)
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_any_all(rng, dtype, n):
    for x in (np.zeros(n, dtype), np.ones(n, dtype), host(dtype, n, rng)):
        if n > 1:
            x[n // 2] = 0
        xd = kiln.to_device(x)
        assert reduced(red.get_any_kernel(np.bool_, dtype), xd) == np.any(x)
        assert reduced(red.get_all_kernel(np.bool_, dtype), xd) == np.all(x)
        assert reduced(red.get_any_kernel(I32, dtype), xd) == int(np.any(x))
        assert reduced(red.get_all_kernel(I32, dtype), xd) == int(np.all(x))
        assert reduced(red.get_any_kernel(None, dtype), xd) == np.any(x)  # x's dtype
        assert reduced(red.get_all_kernel(None, dtype), xd) == np.all(x)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1, 513, 4 * 512 * 1024 + 7])
def test_reduction_stages_launched_by_the_program_as_pycbc_does(rng, n):
    """PyCBC's LowerLatencyReductionKernel launches stage1_func and stage2_func itself, with
    its own block counts and seq_count, until one block is left: a sum of squares of complex
    values and a max-with-location over a registered struct agree with NumPy."""
    def launch(kernel, *arrays):
        shared = kernel.block_size * kernel.dtype_out.itemsize
        size, f, inputs = arrays[0].size, kernel.stage1_func, [a.gpudata for a in arrays]
        extra = []
        while True:
            per_block = 4 * kernel.block_size
            blocks = min((size + per_block - 1) // per_block, 1024)
            seq = max(4, (size + blocks * kernel.block_size - 1) // (blocks * kernel.block_size))
            out = kiln.gpuarray.empty((blocks,) if blocks > 1 else (), kernel.dtype_out)
            f((blocks, 1), (kernel.block_size, 1, 1), None, out.gpudata, *extra, *inputs, seq,
              size, shared_size=shared)
            if blocks == 1:
                return out
            f, size, extra = kernel.stage2_func, blocks, [out.gpudata]

    z = (rng.standard_normal(n) + 1j * rng.standard_normal(n)).astype(np.complex64)
    norm = red.ReductionKernel(np.float32, "0", "a+b", "norm(x[i])",
                               "pycuda::complex<float> *x", name="kiln_stage_norm")
    got = launch(norm, kiln.gpuarray.to_gpu(z)).get()
    np.testing.assert_allclose(float(got), float((np.abs(z.astype(np.complex128)) ** 2).sum()),
                               rtol=1e-4)

    pair = np.dtype([("v", np.float32), ("loc", np.int32)])
    kiln.tools.get_or_register_dtype("kiln_stage_maxloc", pair)
    maxloc = red.ReductionKernel(
        pair, "kiln_maxloc_start()", "kiln_maxloc_red(a, b)", "kiln_maxloc_map(x[i], i)",
        "float *x", name="kiln_maxloc_kernel", preamble="""
        struct kiln_stage_maxloc { float v; int loc; };
        __device__ kiln_stage_maxloc kiln_maxloc_start() { return {-1e30f, -1}; }
        __device__ kiln_stage_maxloc kiln_maxloc_red(kiln_stage_maxloc a, kiln_stage_maxloc b) {
          return a.v > b.v || (a.v == b.v && a.loc < b.loc) ? a : b; }
        __device__ kiln_stage_maxloc kiln_maxloc_map(float v, size_t i) {
          return {v, (int)i}; }""")
    x = rng.standard_normal(n).astype(np.float32)
    got = launch(maxloc, kiln.gpuarray.to_gpu(x)).get()
    assert (float(got["v"]), int(got["loc"])) == (float(x.max()), int(x.argmax()))
