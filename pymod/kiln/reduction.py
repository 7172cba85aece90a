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

Where kiln differs from PyCUDA: `range=` and `slice=` take negative steps, arrays that are not
contiguous are copied to contiguous ones first (on the call's stream), and the result may be
written into `out=`.
"""
import numpy as np

from . import _cgen, _reduce_src
from ._kiln import DeviceArray, ReductionBase
from .elementwise import compile_source

__all__ = ["ReductionKernel"]

_slice = slice


class ReductionKernel(ReductionBase):
    """ReductionKernel(dtype_out, neutral, reduce_expr, map_expr=None, arguments=None,
    name="reduce_kernel", keep=False, options=None, preamble="", allocator=None)

    Called with the arguments in order, and optionally `stream=`, `out=` (a device array of
    dtype_out to write the result into), `allocator=`, `range=` or `slice=`; returns the
    result as a 0-d array."""

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
        self._bind(self._function(False), self.dtype_out,
                   bytes(isinstance(a, _cgen.VectorArg) for a in self.arguments),
                   _reduce_src.BLOCK, _reduce_src.UNROLL, _reduce_src.BLOCKS_PER_SM)

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
                      slice=None):  # noqa: A002
        """Every call the C path does not take."""
        if len(args) != len(self.arguments):
            raise TypeError(f"{self.name} takes {len(self.arguments)} arguments "
                            f"({len(args)} given)")
        args = list(args)
        first = args[self._vector_index[0]]
        if not isinstance(first, DeviceArray):
            raise TypeError(f"{self.name}: the first array argument "
                            f"{self.arguments[self._vector_index[0]].name!r} must be a device "
                            f"array (its size is n), not {type(first).__name__}")
        n = first.size
        for k in self._vector_index:
            a = args[k]
            if isinstance(a, DeviceArray) and not a.flags.c_contiguous:
                from . import _ops
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
        if out is None:
            alloc = allocator or self.allocator
            out = (DeviceArray((), self.dtype_out, allocator=alloc) if alloc is not None
                   else _empty_result(self.dtype_out, stream))
        block = _reduce_src.launch_block(count)
        grid = max(1, min(-(-count // (block * _reduce_src.UNROLL)), self._max_grid()))
        scratch = self._scratch(stream) if grid > 1 else 0
        f = self._function(range is not None)
        f(out, scratch, 0, *args, *extra, block=(block, 1, 1), grid=(grid, 1), stream=stream)
        return out


def _empty_result(dtype, stream):
    from ._kiln import empty
    return empty((), dtype, stream=stream)

