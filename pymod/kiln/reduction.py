"""Reductions from C expressions: PyCUDA's `pycuda.reduction`.

    from kiln.reduction import ReductionKernel
    dot = ReductionKernel(np.float32, neutral="0", reduce_expr="a+b",
                          map_expr="x[i]*y[i]", arguments="float *x, float *y")
    result = dot(x_gpu, y_gpu)          # a 0-d array on the device
    float(result), result.get()

`map_expr` is evaluated for each `i` from 0 to n - 1 (n: the size of the first array
argument), `reduce_expr` folds two values `a` and `b`, and must be associative and commutative;
`neutral` is its neutral element. The kernel reduces in one launch (see `_reduce_src`), is
compiled through kiln's cache and launched by kiln's own call path.

Arrays contiguous alike (all in C order, or all in F order) are read as their memory lies, as
PyCUDA reads them. Where kiln differs from PyCUDA: `range=` and `slice=` take negative steps,
arrays that are not contiguous, or contiguous in different orders, are copied to C order first
(on the call's stream) where PyCUDA refuses or mixes them, and the result may be written into
`out=`.

PyCUDA's kernel getters are here too (get_sum_kernel, get_dot_kernel, get_minmax_kernel, their
subset forms, get_any_kernel, get_all_kernel, get_minmax_neutral): each gives the
ReductionKernel gpuarray's own reductions use, folding in and giving the dtype asked for. Their
min and max give NaN when the array has one (NumPy's answer; PyCUDA's fmin/fmax pass over it).
PyCUDA's two-launch reduction is here too, for programs that launch its stages themselves
(PyCBC's lower-latency reductions): get_reduction_module and get_reduction_kernel_and_types
build a stage, a kernel (out, arguments, seq_count, n) that writes one partial value per block,
and a ReductionKernel has PyCUDA's block_size, stage1_func, stage2_func, stage1_arg_types and
stage2_arg_types, its stages compiled when first asked for. A ReductionKernel's own call does
not use them: it reduces in one launch.
"""
import numpy as np

from . import _cgen, _reduce_src
from ._kiln import REDUCE_MAX_BLOCKS, DeviceArray, ReductionBase
from .elementwise import _contiguous_alike, _without_extra, compile_source
from .tools import context_dependent_memoize

__all__ = ["ReductionKernel", "get_reduction_module", "get_reduction_kernel_and_types",
           "get_sum_kernel", "get_any_kernel", "get_all_kernel",
           "get_subset_sum_kernel", "get_dot_kernel", "get_subset_dot_kernel",
           "get_minmax_neutral", "get_minmax_kernel", "get_subset_minmax_kernel"]

_slice = slice


class ReductionKernel(ReductionBase):
    """ReductionKernel(dtype_out, neutral, reduce_expr, map_expr=None, arguments=None,
    name="reduce_kernel", keep=False, options=None, preamble="", allocator=None)

    Called with the arguments in order, and optionally `stream=`, `out=` (a device array of
    dtype_out to write the result into), `allocator=`, `range=` or `slice=`, and PyCUDA's
    `kernel_wrapper=`; returns the result as a 0-d array."""

    def __init__(self, dtype_out, neutral, reduce_expr, map_expr=None, arguments=None,
                 name="reduce_kernel", keep=False, options=None, preamble="", allocator=None):
        self.dtype_out = np.dtype(dtype_out)
        self.neutral = str(neutral)
        self.reduce_expr = reduce_expr
        self.map_expr = "in[i]" if map_expr is None else map_expr
        if arguments is None:
            raise ValueError("a ReductionKernel needs arguments, e.g. 'const float *in'")
        self.arguments = _cgen.parse_arguments(arguments)
        self._vector_index = [k for k, a in enumerate(self.arguments)
                              if isinstance(a, _cgen.VectorArg)]
        if not self._vector_index:
            raise ValueError("a ReductionKernel needs at least one array argument")
        self.name = name
        self.options = list(options or [])
        self.preamble = preamble
        self.allocator = allocator
        self.keep = keep
        self._functions = {}
        # The general path's launch shape for dtype_out: its kernel's block, and the most
        # blocks whose partial values the scratch buffer holds.
        self._top_block = _reduce_src.block_for(self.dtype_out)
        self._most_blocks = _reduce_src.max_blocks_for(self.dtype_out, REDUCE_MAX_BLOCKS)
        f = self._function(False)  # compiled now, as PyCUDA's: errors at construction
        if allocator is None:  # (the C path makes its results in the pool)
            self._bind(f, self.dtype_out,
                       bytes(isinstance(a, _cgen.VectorArg) for a in self.arguments),
                       _reduce_src.BLOCK, _reduce_src.UNROLL, _reduce_src.BLOCKS_PER_SM)

    # PyCUDA's two stages, for programs that launch them themselves (its own call does not).
    block_size = 512

    def _stage(self, stage):
        key = ("stage", stage)
        made = self._functions.get(key)
        if made is None:
            declarators = ", ".join(a.declarator() for a in self.arguments)
            made = self._functions[key] = get_reduction_kernel_and_types(
                stage, _cgen.dtype_to_ctype(self.dtype_out), self.block_size, self.neutral,
                self.reduce_expr, self.map_expr if stage == 1 else None, declarators,
                f"{self.name}_stage{stage}", self.keep, self.options, self.preamble)
        return made

    @property
    def stage1_func(self):
        """PyCUDA's first stage, as its prepared_async_call: (grid, block, stream, out,
        arguments..., seq_count, n), one partial value a block into out."""
        return self._stage(1)[0].prepared_async_call

    @property
    def stage2_func(self):
        """PyCUDA's second stage: (grid, block, stream, out, partial values, arguments...,
        seq_count, n), folding the partial values."""
        return self._stage(2)[0].prepared_async_call

    @property
    def stage1_arg_types(self):
        return self._stage(1)[1]

    @property
    def stage2_arg_types(self):
        return self._stage(2)[1]

    def _function(self, use_range):
        f = self._functions.get(use_range)
        if f is None:
            src = _reduce_src.source(self.dtype_out, self.neutral, self.reduce_expr,
                                     self.map_expr, self.arguments, self.name, self.preamble,
                                     use_range=use_range)
            f = self._functions[use_range] = compile_source(src, self.options).get_function(
                self.name)
        return f

    def _call_general(self, *args, stream=None, out=None, allocator=None, range=None,  # noqa
                      slice=None, kernel_wrapper=None):  # noqa: A002
        """Every call the C path does not take."""
        args = list(_without_extra(self.name, self.arguments, args))
        first = args[self._vector_index[0]]
        if not isinstance(first, DeviceArray):
            raise TypeError(f"{self.name}: the first array argument "
                            f"{self.arguments[self._vector_index[0]].name!r} must be a device "
                            f"array (its size is n), not {type(first).__name__}")
        n = first.size
        # Arrays contiguous alike, all in C order or all in F order, go as their memory lies, as
        # PyCUDA's do (and elementwise kernels take them): map_expr's i walks that memory, and
        # index arithmetic of the program's own that assumes F order holds. Any other mix is
        # copied to C order, so that i is the same element of each.
        if not _contiguous_alike([args[k] for k in self._vector_index]):
            from . import _ops
            for k in self._vector_index:
                a = args[k]
                if isinstance(a, DeviceArray) and not a.flags.c_contiguous:
                    args[k] = _ops.ascontiguous(a, stream=stream)
        if range is not None and slice is not None:
            raise TypeError("may not specify both range and slice keyword arguments")
        if slice is not None:
            range = _slice(*slice.indices(n))
        if range is not None:
            start = 0 if range.start is None else range.start
            step = 1 if range.step is None else range.step
            if range.stop is None:
                raise ValueError("range= needs a stop")
            if step == 0:
                raise ValueError("range step must not be zero")
            count = max(0, -(-(range.stop - start) // step))
            extra = [start, step, count]
        else:
            count = n
            extra = [count]
        if out is not None:
            self._check_out(out)
        else:
            # PyCUDA's: the allocator given, else the first array's (kiln: the kernel's first)
            alloc = allocator or self.allocator or first._allocator
            out = (DeviceArray((), self.dtype_out, allocator=alloc) if alloc is not None
                   else _empty_result(self.dtype_out, stream))
        block = _reduce_src.launch_block(count, self._top_block)
        most = min(self._max_grid(), self._most_blocks)
        grid = max(1, min(-(-count // (block * _reduce_src.UNROLL)), most))
        scratch = self._scratch(stream) if grid > 1 else 0
        f = self._function(range is not None)
        if kernel_wrapper is None:
            f(out, scratch, 0, *args, *extra, block=(block, 1, 1), grid=(grid, 1),
              stream=stream)
        else:  # given the launch as PyCUDA gives its stages': one here, where it has two
            kernel_wrapper(f.prepared_async_call)((grid, 1), (block, 1, 1), stream, out,
                                                  scratch, 0, *args, *extra)
        return out

    def _check_out(self, out):
        """out= as the C path takes it: a C-contiguous device array of dtype_out with room for
        the result (a raw address or another object would be written through unchecked)."""
        if not (isinstance(out, DeviceArray) and out.dtype == self.dtype_out and out.size >= 1
                and out.flags.c_contiguous):
            what = (f"{type(out).__name__} of dtype {out.dtype} and shape {out.shape}"
                    if isinstance(out, DeviceArray) else type(out).__name__)
            raise (ValueError if isinstance(out, DeviceArray) else TypeError)(
                f"{self.name}: out must be a contiguous device array of dtype "
                f"{self.dtype_out} with room for the one result, not a {what}")


def _empty_result(dtype, stream):
    from ._kiln import empty
    return empty((), dtype, stream=stream)



# ---- PyCUDA's two-launch reduction, for programs that launch its stages --------------------

def get_reduction_module(out_type, block_size, neutral, reduce_expr, map_expr, arguments,
                         name="reduce_kernel", keep=False, options=None, preamble=""):
    """A module of one stage kernel, name(out_type *out, arguments, unsigned int seq_count,
    size_t n) (out_type and arguments are C text), launched with block_size threads a block
    and block_size * sizeof(out_type) bytes of shared memory: block b folds map_expr over
    seq_count * block_size elements from b * block_size * seq_count into out[b]."""
    src = _reduce_src.stage_source(out_type, block_size, neutral, reduce_expr, map_expr,
                                   arguments, name, preamble)
    return compile_source(src, options, keep)


def get_reduction_kernel_and_types(stage, out_type, block_size, neutral, reduce_expr,
                                   map_expr=None, arguments=None, name="reduce_kernel",
                                   keep=False, options=None, preamble=""):
    """(function, argument types) of stage 1 (map_expr over the arguments; "in[i]" when
    None) or stage 2 (the partial values, const out_type *pycuda_reduction_inp, put before the
    arguments and read by default), the function prepared as "P<types>IN", with the shared
    memory its launches need as the default when out_type's size is known."""
    if stage == 1:
        map_expr = "in[i]" if map_expr is None else map_expr
    elif stage == 2:
        map_expr = "pycuda_reduction_inp[i]" if map_expr is None else map_expr
        first = f"const {out_type} *pycuda_reduction_inp"
        arguments = f"{first}, {arguments}" if arguments else first
    else:
        raise ValueError(f"a reduction has stages 1 and 2, not {stage!r}")
    if not arguments:
        raise ValueError("a reduction stage needs arguments, e.g. 'const float *in'")
    func = get_reduction_module(out_type, block_size, neutral, reduce_expr, map_expr, arguments,
                                name, keep, options, preamble).get_function(name)
    arg_types = [_cgen.get_arg_type(a) for a in _cgen._split_args(arguments)]
    try:
        shared = int(block_size) * _cgen.ctype_to_dtype(out_type).itemsize
    except ValueError:
        shared = None
    func.prepare("P" + "".join(arg_types) + "IN", shared=shared)
    return func, arg_types


# ---- PyCUDA's kernel getters -----------------------------------------------------------------

def _exact(kind, dtype_in, dtype_out, subset=None, second=None):
    """The kernel gpuarray's reductions use (kiln._ops), folding in and giving dtype_out."""
    from . import _ops
    if dtype_in is None or dtype_out is None:
        raise ValueError(f"a {kind} kernel needs the dtypes of its input and result; "
                         "None was given for one")
    return _ops._reduction(kind, dtype_in, dtype_out, subset, second, exact=True)


@context_dependent_memoize
def get_sum_kernel(dtype_out, dtype_in):
    """The sum of an array of dtype_in as a 0-d array of dtype_out (None: dtype_in):
    get_sum_kernel(np.float32, np.float32)(a)."""
    return _exact("sum", dtype_in, dtype_in if dtype_out is None else dtype_out)


@context_dependent_memoize
def get_any_kernel(dtype_out, dtype_in):
    """Whether some element of an array of dtype_in is nonzero, as 1 or 0 of dtype_out (None:
    dtype_in); gpuarray.any asks for bool."""
    return _exact("any", dtype_in, dtype_in if dtype_out is None else dtype_out)


@context_dependent_memoize
def get_all_kernel(dtype_out, dtype_in):
    """Whether every element of an array of dtype_in is nonzero, as 1 or 0 of dtype_out."""
    return _exact("all", dtype_in, dtype_in if dtype_out is None else dtype_out)


@context_dependent_memoize
def get_subset_sum_kernel(dtype_out, dtype_subset, dtype_in):
    """The sum of in[lookup_tbl[i]]; called (lookup_tbl, in)."""
    return _exact("sum", dtype_in, dtype_in if dtype_out is None else dtype_out, dtype_subset)


@context_dependent_memoize
def get_dot_kernel(dtype_out, dtype_a=None, dtype_b=None):
    """The sum of a[i]*b[i]; called (a, b). dtype_a defaults to dtype_out, dtype_b to
    dtype_a."""
    dtype_a = dtype_out if dtype_a is None else dtype_a
    return _exact("dot", dtype_a, dtype_out, None, dtype_a if dtype_b is None else dtype_b)


@context_dependent_memoize
def get_subset_dot_kernel(dtype_out, dtype_subset, dtype_a=None, dtype_b=None):
    """The sum of a[lookup_tbl[i]]*b[lookup_tbl[i]]; called (lookup_tbl, a, b). dtype_out
    defaults to dtype_a, dtype_b to dtype_a, dtype_a to dtype_out."""
    if dtype_out is None:
        dtype_out = dtype_a
    if dtype_b is None:
        dtype_b = dtype_out if dtype_a is None else dtype_a
    if dtype_a is None:
        dtype_a = dtype_out
    return _exact("dot", dtype_a, dtype_out, dtype_subset, dtype_b)


def get_minmax_neutral(what, dtype):
    """PyCUDA's neutral element of a min or max reduction, as C: "MY_INFINITY" or
    "-MY_INFINITY" for floats (PyCUDA's kernels #define MY_INFINITY (1./0); code using this
    defines it too), the largest or smallest integer of dtype otherwise."""
    dtype = np.dtype(dtype)
    if what not in ("min", "max"):
        raise ValueError(f"what is 'min' or 'max', not {what!r}")
    if issubclass(dtype.type, np.inexact):
        return "MY_INFINITY" if what == "min" else "-MY_INFINITY"
    info = np.iinfo(dtype)
    return str(info.max if what == "min" else info.min)


def _check_minmax(what):
    if what not in ("min", "max"):
        raise ValueError(f"what is 'min' or 'max', not {what!r}")


@context_dependent_memoize
def get_minmax_kernel(what, dtype):
    """The smallest (what="min") or largest ("max") element of an array of dtype, as a 0-d
    array of dtype. A NaN is the result when there is one, as in NumPy and gpuarray.min/max
    (PyCUDA's fminf/fmaxf pass over NaNs)."""
    _check_minmax(what)
    return _exact(what, dtype, dtype)


@context_dependent_memoize
def get_subset_minmax_kernel(what, dtype, dtype_subset):
    """The same over in[lookup_tbl[i]]; called (lookup_tbl, in)."""
    _check_minmax(what)
    return _exact(what, dtype, dtype, dtype_subset)
