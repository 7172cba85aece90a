"""Elementwise kernels from a C expression: PyCUDA's `pycuda.elementwise`.

    from kiln.elementwise import ElementwiseKernel
    lin_comb = ElementwiseKernel("float a, float *x, float b, float *y, float *z",
                                 "z[i] = a*x[i] + b*y[i]", "linear_combination")
    lin_comb(5, x_gpu, 6, y_gpu, z_gpu)

The operation runs once for every `i` from 0 to `n` - 1, where `n` is the size of the first
array argument; `x_i` is element i's index in array `x` (the same as `i` for contiguous
arrays). The kernel is generated once, compiled through kiln's cache (so a new process finds
it on disk) and launched by kiln's own call path, which works out the launch shape.

CuPy's spelling is taken too: `ElementwiseKernel("float32 x, float32 y", "float32 z",
"z = x * y", "mul")`, called `mul(x, y)` (allocating z) or `mul(x, y, z)`; see
kiln._elwise_cupy for its meaning and where it differs from CuPy.

Where kiln differs from PyCUDA: arguments are checked against the declaration (an int where
a float goes is converted, a float where an int goes is refused, before anything is
launched); arrays that are not contiguous work when the operation indexes them with `x_i`,
and are refused, saying so, when it uses `i`; `range=`/`slice=` take negative steps too.
"""
import warnings

import numpy as np

from . import _cgen, _elwise_cupy, _elwise_src, _log, _ops
from ._kiln import CompileError, DeviceArray, ElementwiseBase, SourceModule, current_device
from .tools import context_dependent_memoize

__all__ = ["ElementwiseKernel", "get_elwise_kernel", "get_elwise_module",
           "get_elwise_range_module", "get_elwise_kernel_and_types", "VectorArg",
           "ScalarArg",
           # PyCUDA's kernel getters (below)
           "get_take_kernel", "get_take_put_kernel", "get_put_kernel", "get_copy_kernel",
           "get_linear_combination_kernel", "get_axpbyz_kernel", "get_axpbz_kernel",
           "get_binary_op_kernel", "get_rdivide_elwise_kernel", "get_binary_func_kernel",
           "get_binary_func_scalar_kernel", "get_binary_minmax_kernel", "get_fill_kernel",
           "get_reverse_kernel", "get_real_kernel", "get_imag_kernel", "get_conj_kernel",
           "get_arange_kernel", "get_pow_array_kernel", "get_fmod_kernel", "get_modf_kernel",
           "get_frexp_kernel", "get_ldexp_kernel", "get_unary_func_kernel",
           "get_if_positive_kernel", "get_where_kernel", "get_scalar_op_kernel",
           "get_logical_not_kernel"]

VectorArg = _cgen.VectorArg
ScalarArg = _cgen.ScalarArg

BLOCK = 256
_MAX_GRID = 2**31 - 1


def compile_source(src, options=None, keep=False):
    """A SourceModule of generated source, with the headers it names (keep: PyCUDA's, the
    source and what NVRTC made written to a folder it prints)."""
    return SourceModule(src, options=list(options or []), keep=bool(keep),
                        headers=_cgen.headers_for(src))


def contiguous_grid(n, per_thread=_elwise_src.UNROLL):
    """The grid for n elements of the "contig" variant, per_thread elements a thread."""
    per_block = BLOCK * per_thread
    return max(1, min((n + per_block - 1) // per_block, _MAX_GRID))


def _is_array(obj):
    return isinstance(obj, DeviceArray)


def _layout_bytes(shape, strides_list):
    """The `_kiln_layout` struct of a strided launch, as bytes."""
    parts = [np.asarray(shape, dtype=np.int64)]
    parts += [np.asarray(s, dtype=np.int64) for s in strides_list]
    return np.concatenate(parts).tobytes()


class ArgumentWarning(UserWarning):
    """A generated kernel was given more arguments than it declares: the extra ones are left
    out, as PyCUDA's ElementwiseKernel and ReductionKernel leave them (they pair arguments
    with parameters and stop at the shorter)."""


def _without_extra(name, arguments, args):
    """args, with what goes past the kernel's parameter list left out and warned of; fewer
    arguments than parameters are a TypeError, as under PyCUDA (whose packing fails)."""
    if len(args) < len(arguments):
        raise TypeError(f"{name} takes {len(arguments)} arguments ({len(args)} given)")
    if len(args) > len(arguments):
        extra = len(args) - len(arguments)
        takes = f"{len(arguments)} argument{'' if len(arguments) == 1 else 's'}"
        warnings.warn(f"{name} takes {takes}; the {extra} more given "
                      f"{'is' if extra == 1 else 'are'} left out, as PyCUDA leaves them",
                      ArgumentWarning, stacklevel=3)
        args = args[:len(arguments)]
    return args


class ElementwiseKernel(ElementwiseBase):
    """ElementwiseKernel(arguments, operation, name="kernel", keep=False, options=None,
    preamble="", loop_prep="", after_loop="")

    `arguments`: C declarators, as one string ("float *x, float a") or a list of strings or
    VectorArg/ScalarArg. `operation`: C statements run for each element `i`. Called with the
    arguments in order, and optionally `range=slice(start, stop, step)` or `slice=slice(...)`
    (which counts from the end of the first array for negative values) and `stream=`.
    """

    def __new__(cls, *args, **kwargs):
        # CuPy's spelling, ElementwiseKernel(in_params, out_params, operation, name), makes
        # its own kind of kernel (kiln._elwise_cupy); Python then skips this __init__.
        # __class__, not the module's name for it, which a program or tool may rebind to a
        # wrapper of its own.
        if cls is __class__ and _elwise_cupy.is_cupy_spelling(args, kwargs):
            return _elwise_cupy.CupyElementwiseKernel(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, arguments, operation, name="kernel", keep=False, options=None,
                 preamble="", loop_prep="", after_loop="", **kwargs):
        # _same_ok: kiln's own operations read each element before writing it and touch no
        # other, so arguments that are the very same array keep the __restrict__ kernel.
        self._same_ok = bool(kwargs.pop("_same_ok", False))
        unknown = set(kwargs) - {"return_type"}
        # PyCUDA keeps keywords it does not know in gen_kwargs, for a subclass's own
        # generate_stride_kernel_and_types to read (broadcasting_pycuda's broadcasting=True);
        # kiln's generation reads none of them, so without such a subclass they are refused.
        own = type(self).generate_stride_kernel_and_types is not \
            __class__.generate_stride_kernel_and_types
        if unknown and not own:
            raise TypeError(f"ElementwiseKernel got unexpected keyword arguments "
                            f"{', '.join(sorted(unknown))}")
        if not isinstance(operation, str):
            raise TypeError("operation must be a str of C statements")
        self.operation = operation
        self.name = name
        self.preamble = preamble
        self.loop_prep = loop_prep
        self.after_loop = after_loop
        self.options = list(options or [])
        self.keep = keep
        self.gen_kwargs = dict(kwargs)
        self.gen_kwargs.pop("return_type", None)
        self.gen_kwargs.update(arguments=arguments, operation=operation, name=name, keep=keep,
                               options=options, preamble=preamble, loop_prep=loop_prep,
                               after_loop=after_loop)
        self._functions = {}
        self._modules = {}
        self._error = None
        self.arguments = []
        try:
            self._build(arguments)
        except (ValueError, CompileError) as e:
            # PyCUDA builds an ElementwiseKernel at its first call, so a program may define one
            # it never calls (a variant for a dtype it does not use) that would not compile:
            # the error is kept and raised by the first call, as PyCUDA's is.
            self._error = e.with_traceback(None)  # not the frames of this __init__
            _log.logger.info("ElementwiseKernel %s does not build; its first call raises: %s",
                             name, str(e).splitlines()[0] if str(e) else type(e).__name__)

    def _build(self, arguments):
        """Reads the declaration and compiles the kernel now (a cache hit after the first
        time), so the common call is then taken by ElementwiseBase in C."""
        self.arguments = _cgen.parse_arguments(arguments)
        if not any(isinstance(a, VectorArg) for a in self.arguments):
            raise ValueError("ElementwiseKernel can only be used with functions that have at "
                             "least one vector argument")
        self._vector_index = [k for k, a in enumerate(self.arguments)
                              if isinstance(a, VectorArg)]
        self._bare_i = _elwise_src.uses_bare_i(self.operation, self.loop_prep, self.after_loop)
        self._per_thread = _elwise_src.per_thread(self.arguments, self.operation)
        self._bind(self._function("contig"),
                   bytes(isinstance(a, VectorArg) for a in self.arguments), BLOCK,
                   self._per_thread, self._same_ok)

    def _raise_error(self):
        """The error that kept the kernel from building, raised afresh (no traceback of the
        calls before)."""
        raise self._error.with_traceback(None)

    # ---- kernels ----------------------------------------------------------------------------

    def _function(self, variant, ndim=0):
        key = (variant, ndim)
        f = self._functions.get(key)
        if f is None:
            if self._error is not None:
                self._raise_error()
            src = _elwise_src.source(self.arguments, self.operation, self.name, self.preamble,
                                     self.loop_prep, self.after_loop, variant=variant,
                                     ndim=ndim)
            module = compile_source(src, self.options, self.keep)
            f = self._functions[key] = module.get_function(self.name)
            self._modules[key] = module
        return f

    def generate_stride_kernel_and_types(self, use_range):
        """PyCUDA's (module, function, arguments) of the kernel, with or without range: the
        kernel kiln launches for contiguous arrays (four elements a thread a block apart, for
        any launch shape) or for range=."""
        variant = "range" if use_range else "contig"
        f = self._function(variant)
        extra = ([ScalarArg(np.intp, "start"), ScalarArg(np.intp, "stop"),
                  ScalarArg(np.intp, "step")] if use_range else [ScalarArg(np.uintp, "n")])
        return self._modules[(variant, 0)], f, self.arguments + extra

    # ---- calls ------------------------------------------------------------------------------

    def _call_general(self, *args, range=None, slice=None, stream=None):  # noqa: A002
        """Every call the C path does not take: range=/slice=, strided arrays, raw pointers,
        overlapping arrays (the first time), wrong argument counts."""
        if self._error is not None:
            self._raise_error()
        args = _without_extra(self.name, self.arguments, args)
        first = args[self._vector_index[0]]
        n = _size_of(first, self.name, self.arguments[self._vector_index[0]].name)
        if range is not None and slice is not None:
            raise TypeError("may not specify both range and slice keyword arguments")
        if slice is not None:
            range = _builtin_slice(*slice.indices(n))
        if range is not None:
            return self._call_range(args, range, stream)
        if n == 0:
            return None
        arrays = [args[k] for k in self._vector_index]
        layout = _layout_of(arrays)
        if layout is None:  # contiguous alike
            if _ops.overlapping(arrays, self._same_ok):
                f = self._function("alias")
                self._bind_alias(f)
            else:
                f = self._function("contig")
            f(*args, n, block=(BLOCK, 1, 1), grid=(contiguous_grid(n, self._per_thread), 1),
              stream=stream)
            return None
        if self._bare_i:
            names = [self.arguments[k].name for k, a in zip(self._vector_index, arrays)
                     if _is_array(a) and not a.flags.c_contiguous]
            raise ValueError(f"{self.name}: argument {names[0]!r} is not contiguous and the "
                             "operation indexes with i, which assumes contiguous arrays; "
                             f"index it as {names[0]}[{names[0]}_i], or pass a contiguous "
                             "copy")
        shape, strides = layout
        f = self._function("strided", len(shape))
        grid = max(1, min((n + BLOCK - 1) // BLOCK, _MAX_GRID))
        # A strided array goes as its address: the layout struct tells the kernel its strides
        # (a kernel call refuses a strided array passed as a plain pointer).
        current = current_device()
        for k in self._vector_index:
            a = args[k]
            if _is_array(a) and a.device != current:
                raise ValueError(f"{self.name}: argument {self.arguments[k].name!r} is on "
                                 f"device {a.device}; the launch is on device {current}")
            if _is_array(a):
                a._check_memory()
        args = [a.ptr if _is_array(a) else a for a in args]
        f(*args, n, _layout_bytes(shape, strides), block=(BLOCK, 1, 1), grid=(grid, 1),
          stream=stream)
        return None

    def _call_range(self, args, r, stream):
        start, stop, step = r.start or 0, r.stop, 1 if r.step is None else r.step
        if stop is None:
            raise ValueError("range= needs a stop")
        if step == 0:
            raise ValueError("range step must not be zero")
        for k in self._vector_index:
            a = args[k]
            if _is_array(a) and not (a.flags.c_contiguous or a.size == 0):
                raise ValueError(f"{self.name}: range= and slice= need contiguous arrays; "
                                 f"argument {self.arguments[k].name!r} is not")
        count = max(0, -(-(stop - start) // step))
        if count == 0:
            return None
        grid = max(1, min((count + BLOCK - 1) // BLOCK, _MAX_GRID))
        self._function("range")(*args, start, stop, step, block=(BLOCK, 1, 1), grid=(grid, 1),
                                stream=stream)
        return None


_builtin_slice = slice


def _size_of(obj, kernel, name):
    size = getattr(obj, "size", None)
    if isinstance(size, (int, np.integer)):
        return int(size)
    raise TypeError(f"{kernel}: the first array argument {name!r} must be an array "
                    f"(kiln.DeviceArray / GPUArray), not {type(obj).__name__}: its size is n")


def _contiguous_alike(arrays):
    """Whether the arrays among arrays are all in C order or all in F order: a flat index
    walks each one's memory over the same elements, as PyCUDA's kernels read them."""
    real = [a for a in arrays if _is_array(a)]
    return all(a.flags.c_contiguous for a in real) or all(a.flags.f_contiguous for a in real)


def _layout_of(arrays):
    """None when the arrays are contiguous alike (C order, or all F order); else the
    collapsed (shape, strides in elements) of a strided launch."""
    if _contiguous_alike(arrays):
        return None
    real = [a for a in arrays if _is_array(a)]
    shape = real[0].shape
    for a in real:
        if a.shape != shape:
            raise ValueError(f"arrays of shapes {shape} and {a.shape} in one elementwise "
                             "launch: non-contiguous arrays must have the same shape")
    strides = []
    for a in arrays:
        if _is_array(a):
            strides.append(tuple(s // a.dtype.itemsize for s in a.strides))
        else:  # a raw pointer walks as a contiguous array of the shape
            strides.append(tuple(int(np.prod(shape[d + 1:])) for d in builtins_range(len(shape))))
    return _elwise_src.collapse(shape, strides)


builtins_range = range


# ---- PyCUDA's module-level helpers -----------------------------------------------------------

def _module(arguments, operation, name, keep, options, preamble, loop_prep, after_loop,
            use_range):
    src = _elwise_src.module_source(_cgen.parse_arguments(arguments), operation, name,
                                    preamble, loop_prep, after_loop, use_range=use_range)
    return compile_source(src, options, keep)


def get_elwise_module(arguments, operation, name="kernel", keep=False, options=None,
                      preamble="", loop_prep="", after_loop=""):
    """A SourceModule whose kernel `name` has `arguments` as its whole parameter list, as
    written, and runs `operation` for each `i` below `n` (PyCUDA's): the caller declares `n`
    itself, e.g. ScalarArg(np.uintp, "n") last, and launches with any grid and block.
    `arguments`: VectorArg/ScalarArg objects or C declarators, as a list or one string.
    `tid`, `total_threads` and `cta_start` are defined as in PyCUDA; `loop_prep` runs before
    the loop, `after_loop` after it."""
    return _module(arguments, operation, name, keep, options, preamble, loop_prep, after_loop,
                   False)


def get_elwise_range_module(arguments, operation, name="kernel", keep=False, options=None,
                            preamble="", loop_prep="", after_loop=""):
    """The same, running `i` from `start` while below `stop` (above it for a negative `step`)
    in steps of `step`: the caller declares `start`, `stop` and `step` (PyCUDA's
    ScalarArg(np.intp, ...)) among `arguments`."""
    return _module(arguments, operation, name, keep, options, preamble, loop_prep, after_loop,
                   True)


def get_elwise_kernel_and_types(arguments, operation, name="kernel", keep=False, options=None,
                                use_range=False, **kwargs):
    """PyCUDA's (module, function, arguments): the kernel of get_elwise_module (with
    use_range, get_elwise_range_module) over `arguments` followed by `n` (or `start`, `stop`,
    `step`), the function prepared for them, and that whole parameter list. kwargs:
    preamble, loop_prep, after_loop. A list given as `arguments` is left as it was (PyCUDA's
    appends to it)."""
    extra = ([ScalarArg(np.intp, "start"), ScalarArg(np.intp, "stop"),
              ScalarArg(np.intp, "step")] if use_range else [ScalarArg(np.uintp, "n")])
    arguments = _cgen.parse_arguments(arguments) + extra
    build = get_elwise_range_module if use_range else get_elwise_module
    mod = build(arguments, operation, name, keep, options, **kwargs)
    func = mod.get_function(name)
    func.prepare("".join(a.struct_char for a in arguments))
    return mod, func, arguments


def get_elwise_kernel(arguments, operation, name="kernel", keep=False, options=None, **kwargs):
    """The prepared Function of get_elwise_kernel_and_types: its last parameter is `n`."""
    return get_elwise_kernel_and_types(arguments, operation, name, keep, options,
                                       **kwargs)[1]


# ---- PyCUDA's kernel getters -----------------------------------------------------------------
#
# What pycuda.gpuarray launches, each a prepared Function with PyCUDA's parameters in PyCUDA's
# order (the last one `n`), to be launched as func.prepared_async_call(grid, block, stream,
# ...); memoized per device and arguments. Only the texture references differ: CUDA 12 removed
# them, so get_take_kernel and get_take_put_kernel read the source arrays through pointer
# parameters (placed after the destinations) and return an empty list of texture references.

_ctype = _cgen.dtype_to_ctype


def _dtypes(*dtypes):
    return [None if d is None else np.dtype(d) for d in dtypes]


def _real_of(dtype):
    return np.finfo(dtype).dtype


def _prepared(arguments, operation, name):
    """The prepared kernel of get_elwise_kernel: arguments, then n."""
    return get_elwise_kernel_and_types(arguments, operation, name)[1]


def _dests_and_srcs(dtype, k):
    """The take and put kernels' arrays: dest0, ..., then src0, ..., for j in k."""
    return ([VectorArg(dtype, f"dest{j}") for j in k]
            + [VectorArg(dtype, f"src{j}") for j in k])


@context_dependent_memoize
def get_take_kernel(dtype, idx_dtype, vec_count=1):
    """(func, []): dest_k[i] = src_k[idx[i]] for k < vec_count. Parameters (idx, dest0, ...,
    src0, ..., n); PyCUDA's has no src parameters, reading them through texture references
    (tex_src0, ...) which CUDA 12 removed."""
    dtype, idx_dtype = _dtypes(dtype, idx_dtype)
    k = range(vec_count)
    args = [VectorArg(idx_dtype, "idx")] + _dests_and_srcs(dtype, k) + [ScalarArg(np.intp, "n")]
    body = f"{_ctype(idx_dtype)} src_idx = idx[i];\n" + "\n".join(
        f"dest{j}[i] = src{j}[src_idx];" for j in k)
    return _prepared_module(args, body, "take"), []


@context_dependent_memoize
def get_take_put_kernel(dtype, idx_dtype, with_offsets, vec_count=1):
    """(func, []): dest_k[gmem_dest_idx[i]] = src_k[gmem_src_idx[i] (+ offset_k)]. Parameters
    (gmem_dest_idx, gmem_src_idx, dest0, ..., src0, ..., [offset0, ...,] n); PyCUDA's has no
    src parameters, reading them through texture references, which CUDA 12 removed."""
    dtype, idx_dtype = _dtypes(dtype, idx_dtype)
    k = range(vec_count)
    args = ([VectorArg(idx_dtype, "gmem_dest_idx"), VectorArg(idx_dtype, "gmem_src_idx")]
            + _dests_and_srcs(dtype, k)
            + [ScalarArg(idx_dtype, f"offset{j}") for j in k if with_offsets]
            + [ScalarArg(np.intp, "n")])
    it = _ctype(idx_dtype)
    body = f"{it} src_idx = gmem_src_idx[i];\n{it} dest_idx = gmem_dest_idx[i];\n" + "\n".join(
        f"dest{j}[dest_idx] = src{j}[src_idx{f' + offset{j}' if with_offsets else ''}];"
        for j in k)
    return _prepared_module(args, body, "take_put"), []


@context_dependent_memoize
def get_put_kernel(dtype, idx_dtype, vec_count=1):
    """dest_k[gmem_dest_idx[i]] = src_k[i]: parameters (gmem_dest_idx, dest0, ..., src0, ...,
    n)."""
    dtype, idx_dtype = _dtypes(dtype, idx_dtype)
    k = range(vec_count)
    args = ([VectorArg(idx_dtype, "gmem_dest_idx")] + _dests_and_srcs(dtype, k)
            + [ScalarArg(np.intp, "n")])
    body = f"{_ctype(idx_dtype)} dest_idx = gmem_dest_idx[i];\n" + "\n".join(
        f"dest{j}[dest_idx] = src{j}[i];" for j in k)
    return _prepared_module(args, body, "put")


def _prepared_module(args, body, name):
    """The prepared kernel of get_elwise_module over args, which end with n themselves."""
    func = get_elwise_module(args, body, name).get_function(name)
    func.prepare("".join(a.struct_char for a in args))
    return func


@context_dependent_memoize
def get_copy_kernel(dtype_dest, dtype_src):
    """dest[i] = src[i]: (dest, src, n)."""
    return _prepared(f"{_ctype(dtype_dest)} *dest, {_ctype(dtype_src)} *src",
                     "dest[i] = src[i]", "copy")


@context_dependent_memoize
def get_linear_combination_kernel(summand_descriptors, dtype_z):
    """(func, []): z[i] = a0*x0[i] + a1*x1[i] + ... for summand_descriptors of
    (is_gpu_scalar, scalar_dtype, vector_dtype): parameters (a0, x0, a1, x1, ..., z, n).
    A summand whose is_gpu_scalar is true read its scalar through a texture reference in
    PyCUDA, which CUDA 12 removed: it raises NotImplementedError."""
    args, summands = [], []
    for j, (is_gpu_scalar, scalar_dtype, vector_dtype) in enumerate(summand_descriptors):
        if is_gpu_scalar:
            raise NotImplementedError(
                f"get_linear_combination_kernel: summand {j} has is_gpu_scalar=True, which "
                "PyCUDA reads through a texture reference, and texture references were "
                "removed by CUDA 12. Pass the scalar as a value (is_gpu_scalar=False), or "
                "read it through a pointer in loop_prep: get_elwise_module with "
                f"VectorArg(dtype, 'global_a{j}') and loop_prep 'T a{j} = *global_a{j}', as "
                "PyCUDA's examples/from-wiki/gpu_scalar_mult.py does without textures")
        args += [ScalarArg(scalar_dtype, f"a{j}"), VectorArg(vector_dtype, f"x{j}")]
        summands.append(f"a{j}*x{j}[i]")
    args += [VectorArg(dtype_z, "z"), ScalarArg(np.uintp, "n")]
    return _prepared_module(args, "z[i] = " + " + ".join(summands), "linear_combination"), []


def _cast_types(dtype_x, dtype_y, dtype_z):
    """The C types x and y are cast to in z = f(x, y): z's, but a real operand of a complex
    z is cast to z's real type (complex arithmetic takes real scalars)."""
    out_t = _ctype(dtype_z)
    real_t = _ctype(_real_of(dtype_z)) if dtype_z.kind == "c" else out_t
    return (real_t if dtype_z.kind == "c" and dtype_x.kind != "c" else out_t,
            real_t if dtype_z.kind == "c" and dtype_y.kind != "c" else out_t)


@context_dependent_memoize
def get_axpbyz_kernel(dtype_x, dtype_y, dtype_z, x_is_scalar=False, y_is_scalar=False):
    """z[i] = a*x[i] + b*y[i]: (a, x, b, y, z, n), a and b of x's and y's dtypes; an x or y
    that is_scalar is read at [0]."""
    dtype_x, dtype_y, dtype_z = _dtypes(dtype_x, dtype_y, dtype_z)
    x_t, y_t = _cast_types(dtype_x, dtype_y, dtype_z)
    x = "x[0]" if x_is_scalar else "x[i]"
    y = "y[0]" if y_is_scalar else "y[i]"
    return _prepared(f"{_ctype(dtype_x)} a, {_ctype(dtype_x)} *x, {_ctype(dtype_y)} b, "
                     f"{_ctype(dtype_y)} *y, {_ctype(dtype_z)} *z",
                     f"z[i] = ({x_t}) a*(({x_t}) {x}) + (({y_t}) b)*(({y_t}) {y})", "axpbyz")


@context_dependent_memoize
def get_axpbz_kernel(dtype_x, dtype_z):
    """z[i] = a*x[i] + b: (a, x, b, z, n), a and b of z's dtype."""
    return _prepared(f"{_ctype(dtype_z)} a, {_ctype(dtype_x)} *x, {_ctype(dtype_z)} b, "
                     f"{_ctype(dtype_z)} *z", "z[i] = a * x[i] + b", "axpb")


@context_dependent_memoize
def get_binary_op_kernel(dtype_x, dtype_y, dtype_z, operator, x_is_scalar=False,
                         y_is_scalar=False):
    """z[i] = x[i] <operator> y[i] (operator: C's, e.g. "+" or "<"): (x, y, z, n); an x or
    y that is_scalar is read at [0]."""
    dtype_x, dtype_y, dtype_z = _dtypes(dtype_x, dtype_y, dtype_z)
    x_t, y_t = _cast_types(dtype_x, dtype_y, dtype_z)
    x = "x[0]" if x_is_scalar else "x[i]"
    y = "y[0]" if y_is_scalar else "y[i]"
    return _prepared(f"{_ctype(dtype_x)} *x, {_ctype(dtype_y)} *y, {_ctype(dtype_z)} *z",
                     f"z[i] = ({_ctype(dtype_z)}) ({x_t}) {x} {operator} ({y_t}) {y}",
                     "multiply")


@context_dependent_memoize
def get_rdivide_elwise_kernel(dtype_x, dtype_z):
    """z[i] = y / x[i]: (x, y, z, n), y of z's dtype."""
    return _prepared(f"{_ctype(dtype_x)} *x, {_ctype(dtype_z)} y, {_ctype(dtype_z)} *z",
                     "z[i] = y / x[i]", "divide_r")


def _binary_func(func, dtype_x, dtype_y, dtype_z, use_scalar, cast=None):
    y = "y" if use_scalar else "y[i]"
    c = f"({cast})" if cast else ""
    return _prepared(f"{_ctype(dtype_x)} *x, {_ctype(dtype_y)} {'' if use_scalar else '*'}y, "
                     f"{_ctype(dtype_z)} *z", f"z[i] = {func}({c}x[i], {c}{y})",
                     f"{func}_kernel")


@context_dependent_memoize
def get_binary_func_kernel(func, dtype_x, dtype_y, dtype_z):
    """z[i] = func(x[i], y[i]), func a C function's name ("fmaxf", "atan2"): (x, y, z, n)."""
    return _binary_func(func, dtype_x, dtype_y, dtype_z, False)


@context_dependent_memoize
def get_binary_func_scalar_kernel(func, dtype_x, dtype_y, dtype_z):
    """z[i] = func(x[i], y): (x, y, z, n), y a value."""
    return _binary_func(func, dtype_x, dtype_y, dtype_z, True)


@context_dependent_memoize
def get_binary_minmax_kernel(func, dtype_x, dtype_y, dtype_z, use_scalar):
    """z = the larger (func "max") or smaller ("min") of x and y, by C's fmax/fmaxf/fmin/fminf
    when a dtype is a float (NaN loses to a number), fmax/fmin when x or y is float64; by
    CUDA's integer max/min otherwise (PyCUDA names "maxf" there, which CUDA lacks). (x, y, z,
    n), y a value when use_scalar. x and y of different dtypes are cast to the function's
    type first, where NVRTC, having no std::fmax templates, finds two overloads."""
    dtype_x, dtype_y, dtype_z = _dtypes(dtype_x, dtype_y, dtype_z)
    cast = None
    if any(d.kind == "f" for d in (dtype_x, dtype_y, dtype_z)):
        wide = np.float64 in (dtype_x, dtype_y)
        func = "f" + func + ("" if wide else "f")
        if dtype_x != dtype_y:
            cast = "double" if wide else "float"
    elif dtype_x != dtype_y:
        cast = _ctype(np.result_type(dtype_x, dtype_y))
    return _binary_func(func, dtype_x, dtype_y, dtype_z, use_scalar, cast)


@context_dependent_memoize
def get_fill_kernel(dtype):
    """z[i] = a: (a, z, n)."""
    t = _ctype(dtype)
    return _prepared(f"{t} a, {t} *z", "z[i] = a", "fill")


@context_dependent_memoize
def get_reverse_kernel(dtype):
    """z[i] = y[n-1-i]: (y, z, n)."""
    t = _ctype(dtype)
    return _prepared(f"{t} *y, {t} *z", "z[i] = y[n-1-i]", "reverse")


@context_dependent_memoize
def get_real_kernel(dtype, real_dtype):
    """z[i] = real(y[i]) of a complex y: (y, z, n)."""
    return _prepared(f"{_ctype(dtype)} *y, {_ctype(real_dtype)} *z", "z[i] = real(y[i])",
                     "real")


@context_dependent_memoize
def get_imag_kernel(dtype, real_dtype):
    """z[i] = imag(y[i]) of a complex y: (y, z, n)."""
    return _prepared(f"{_ctype(dtype)} *y, {_ctype(real_dtype)} *z", "z[i] = imag(y[i])",
                     "imag")


@context_dependent_memoize
def get_conj_kernel(dtype, conj_dtype):
    """z[i] = conj(y[i]) of a complex y: (y, z, n)."""
    return _prepared(f"{_ctype(dtype)} *y, {_ctype(conj_dtype)} *z",
                     "z[i] = pycuda::conj(y[i])", "conj")


@context_dependent_memoize
def get_arange_kernel(dtype):
    """z[i] = start + i*step: (z, start, step, n)."""
    t = _ctype(dtype)
    return _prepared(f"{t} *z, {t} start, {t} step", "z[i] = start + i*step", "arange")


@context_dependent_memoize
def get_pow_array_kernel(dtype_x, dtype_y, dtype_z, is_base_array, is_exp_array):
    """z[i] = x ** y by C's powf (a float32 z) or pow, with x[i] or the value x, y[i] or the
    value y: (x, y, z, n). Integer operands are raised in double, as nvcc's pow of two
    integers does."""
    dtype_x, dtype_y, dtype_z = _dtypes(dtype_x, dtype_y, dtype_z)
    if not (is_base_array or is_exp_array):
        raise ValueError("get_pow_array_kernel: the base, the exponent or both must be arrays "
                         "(is_base_array or is_exp_array)")
    func = "powf" if dtype_z == np.float32 else "pow"
    x = "x[i]" if is_base_array else "x"
    y = "y[i]" if is_exp_array else "y"
    if func == "pow" and dtype_x.kind in "biu" and dtype_y.kind in "biu":
        x, y = f"(double){x}", f"(double){y}"  # NVRTC has no pow(int, int)
    return _prepared(f"{_ctype(dtype_x)} {'*' if is_base_array else ''}x, "
                     f"{_ctype(dtype_y)} {'*' if is_exp_array else ''}y, {_ctype(dtype_z)} *z",
                     f"z[i] = {func}({x},{y})", "pow_method")


@context_dependent_memoize
def get_fmod_kernel():
    """z[i] = fmod(arg[i], mod[i]) of float32 arrays: (arg, mod, z, n)."""
    return _prepared("float *arg, float *mod, float *z", "z[i] = fmod(arg[i], mod[i])",
                     "fmod_kernel")


@context_dependent_memoize
def get_modf_kernel():
    """fracpart[i] = modf(x[i], &intpart[i]) of float32 arrays: (x, intpart, fracpart, n)."""
    return _prepared("float *x, float *intpart, float *fracpart",
                     "fracpart[i] = modf(x[i], &intpart[i])", "modf_kernel")


@context_dependent_memoize
def get_frexp_kernel():
    """significand[i], exponent[i] = frexp(x[i]) of float32 arrays (the exponent as a
    float): (x, significand, exponent, n)."""
    return _prepared("float *x, float *significand, float *exponent",
                     "int expt = 0; significand[i] = frexp(x[i], &expt); exponent[i] = expt",
                     "frexp_kernel")


@context_dependent_memoize
def get_ldexp_kernel():
    """z[i] = ldexp(sig[i], int(expt[i])) of float32 arrays: (sig, expt, z, n)."""
    return _prepared("float *sig, float *expt, float *z", "z[i] = ldexp(sig[i], int(expt[i]))",
                     "ldexp_kernel")


@context_dependent_memoize
def get_unary_func_kernel(func_name, in_dtype, out_dtype=None):
    """z[i] = func_name(y[i]), func_name a C function's name ("sin", "expf", "fabs"):
    (y, z, n)."""
    if out_dtype is None:
        out_dtype = in_dtype
    return _prepared(f"{_ctype(in_dtype)} *y, {_ctype(out_dtype)} *z",
                     f"z[i] = {func_name}(y[i])", f"{func_name}_kernel")


@context_dependent_memoize
def get_if_positive_kernel(crit_dtype, dtype):
    """result[i] = crit[i] > 0 ? then_[i] : else_[i]: (crit, then_, else_, result, n)."""
    return _prepared([VectorArg(crit_dtype, "crit"), VectorArg(dtype, "then_"),
                      VectorArg(dtype, "else_"), VectorArg(dtype, "result")],
                     "result[i] = crit[i] > 0 ? then_[i] : else_[i]", "if_positive")


@context_dependent_memoize
def get_where_kernel(crit_dtype, dtype):
    """result[i] = crit[i] != 0 ? then_[i] : else_[i]: (crit, then_, else_, result, n); the
    kernel is named "if_positive", as PyCUDA's is."""
    return _prepared([VectorArg(crit_dtype, "crit"), VectorArg(dtype, "then_"),
                      VectorArg(dtype, "else_"), VectorArg(dtype, "result")],
                     "result[i] = crit[i] != 0 ? then_[i] : else_[i]", "if_positive")


@context_dependent_memoize
def get_scalar_op_kernel(dtype_x, dtype_a, dtype_y, operator):
    """y[i] = x[i] <operator> a: (x, a, y, n)."""
    return _prepared(f"{_ctype(dtype_x)} *x, {_ctype(dtype_a)} a, {_ctype(dtype_y)} *y",
                     f"y[i] = x[i] {operator} a", "scalarop_kernel")


@context_dependent_memoize
def get_logical_not_kernel(dtype_x, dtype_out):
    """out[i] = (x[i] == 0): (x, out, n)."""
    return _prepared([VectorArg(dtype_x, "x"), VectorArg(dtype_out, "out")],
                     "out[i] = (x[i] == 0)", "logical_not")
