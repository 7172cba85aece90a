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
import numpy as np

from . import _cgen, _elwise_cupy, _elwise_src
from ._kiln import DeviceArray, ElementwiseBase, SourceModule, current_device

__all__ = ["ElementwiseKernel", "get_elwise_kernel", "get_elwise_module",
           "get_elwise_range_module", "get_elwise_kernel_and_types", "VectorArg",
           "ScalarArg"]

VectorArg = _cgen.VectorArg
ScalarArg = _cgen.ScalarArg

BLOCK = 256
_MAX_GRID = 2**31 - 1


def compile_source(src, options=None, keep=False):
    """A SourceModule of generated source, with the headers it names (keep: PyCUDA's, the
    source and what NVRTC made written to a folder it prints)."""
    headers = _cgen.headers_for(src)
    if keep:
        return SourceModule(src, options=list(options or []), keep=True, headers=headers)
    return SourceModule(src, options=list(options or []), headers=headers)


def contiguous_grid(n):
    """The grid for n elements of the "contig" variant: four elements a thread."""
    per_block = BLOCK * _elwise_src.UNROLL
    return max(1, min((n + per_block - 1) // per_block, _MAX_GRID))


def _is_array(obj):
    return isinstance(obj, DeviceArray)


def _layout_bytes(shape, strides_list):
    """The `_kiln_layout` struct of a strided launch, as bytes."""
    parts = [np.asarray(shape, dtype=np.int64)]
    parts += [np.asarray(s, dtype=np.int64) for s in strides_list]
    return np.concatenate(parts).tobytes()


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
        if cls is ElementwiseKernel and _elwise_cupy.is_cupy_spelling(args, kwargs):
            return _elwise_cupy.CupyElementwiseKernel(*args, **kwargs)
        return super().__new__(cls)

    def __init__(self, arguments, operation, name="kernel", keep=False, options=None,
                 preamble="", loop_prep="", after_loop="", **kwargs):
        # _same_ok: kiln's own operations read each element before writing it and touch no
        # other, so arguments that are the very same array keep the __restrict__ kernel.
        self._same_ok = bool(kwargs.pop("_same_ok", False))
        unknown = set(kwargs) - {"return_type"}
        if unknown:
            raise TypeError(f"ElementwiseKernel got unexpected keyword arguments "
                            f"{', '.join(sorted(unknown))}")
        if not isinstance(operation, str):
            raise TypeError("operation must be a str of C statements")
        self.arguments = _cgen.parse_arguments(arguments)
        if not any(isinstance(a, VectorArg) for a in self.arguments):
            raise ValueError("ElementwiseKernel can only be used with functions that have at "
                             "least one vector argument")
        self.operation = operation
        self.name = name
        self.preamble = preamble
        self.loop_prep = loop_prep
        self.after_loop = after_loop
        self.options = list(options or [])
        self.keep = keep
        self.gen_kwargs = dict(arguments=arguments, operation=operation, name=name, keep=keep,
                               options=options, preamble=preamble, loop_prep=loop_prep,
                               after_loop=after_loop)
        self._vector_index = [k for k, a in enumerate(self.arguments)
                              if isinstance(a, VectorArg)]
        self._bare_i = _elwise_src.uses_bare_i(operation, loop_prep, after_loop)
        self._functions = {}
        self._modules = {}
        # Compiled now, as PyCUDA does, so errors show at once; the common call is then taken
        # by ElementwiseBase in C.
        self._bind(self._function("contig"),
                   bytes(isinstance(a, VectorArg) for a in self.arguments), BLOCK,
                   _elwise_src.UNROLL, self._same_ok)

    # ---- kernels ----------------------------------------------------------------------------

    def _function(self, variant, ndim=0):
        key = (variant, ndim)
        f = self._functions.get(key)
        if f is None:
            src = _elwise_src.source(self.arguments, self.operation, self.name, self.preamble,
                                     self.loop_prep, self.after_loop, variant=variant,
                                     ndim=ndim)
            module = compile_source(src, self.options)
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
        if len(args) != len(self.arguments):
            raise TypeError(f"{self.name} takes {len(self.arguments)} arguments "
                            f"({len(args)} given)")
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
            if _overlap(arrays, self._same_ok):
                f = self._function("alias")
                self._bind_alias(f)
            else:
                f = self._function("contig")
            f(*args, n, block=(BLOCK, 1, 1), grid=(contiguous_grid(n), 1), stream=stream)
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


def _layout_of(arrays):
    """None when the arrays are contiguous alike (C order, or all F order); else the
    collapsed (shape, strides in elements) of a strided launch."""
    real = [a for a in arrays if _is_array(a)]
    if all(a.flags.c_contiguous for a in real) or all(a.flags.f_contiguous for a in real):
        return None
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


def _overlap(arrays, same_ok=False):
    """True when two of the arrays share memory (then __restrict__ would be a lie), not
    counting arrays that are the very same memory when same_ok."""
    spans = sorted({(a.ptr, a.ptr + a.nbytes) for a in arrays if _is_array(a) and a.nbytes}
                   if same_ok else
                   [(a.ptr, a.ptr + a.nbytes) for a in arrays if _is_array(a) and a.nbytes])
    return any(spans[k + 1][0] < spans[k][1] for k in builtins_range(len(spans) - 1))


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
