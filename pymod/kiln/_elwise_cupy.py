"""CuPy's spelling of an elementwise kernel: `ElementwiseKernel(in_params, out_params,
operation, name)`, where the operation names each element by its parameter's name.

    add = ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x + y", "add")
    z = add(x, y)          # z allocated, shape and dtype from the declaration
    add(x, y, z)           # into z

A parameter is `type name` or `raw type name`. `type` is a NumPy dtype name (`float32`,
`int64`, `complex64`, `bool`...) or a one-letter placeholder (`T`) that takes the dtype of
the first argument declared with it and can be used as a type in the operation. A non-raw
parameter is one element of its array (`i` is the element's flat index); a raw one is the
array's pointer, indexed by the operation itself; `_ind.size()` is the element count.
Non-raw inputs may be scalars and broadcast against each other as in NumPy; outputs have the
broadcast shape.

It is generated, compiled and launched by kiln's own elementwise machinery (`_elwise_src`):
one kernel per combination of dtypes, scalars and layout, compiled once through the cache.
Where kiln differs from CuPy: an input array whose dtype is not the declared one is converted
when NumPy casts it safely and refused otherwise; an output array must have exactly the
declared dtype and the broadcast shape; raw arrays are plain pointers (no `.size()`).
"""
import re

import numpy as np

from . import _cgen, _elwise_src, _ops
from ._kiln import DeviceArray, SourceModule, current_device, empty

BLOCK = 256
_MAX_GRID = 2**31 - 1
_PARAM = re.compile(r"^(?:(raw)\s+)?([A-Za-z_]\w*)\s+([A-Za-z_]\w*)$")
_RESERVED = {"i", "n", "_ind"}
_SCALARS = (bool, int, float, complex, np.generic)


class _Param:
    __slots__ = ("name", "type", "dtype", "raw", "out")

    def __init__(self, text, out):
        m = _PARAM.match(text.strip())
        if not m:
            raise ValueError(f"cannot read the parameter {text.strip()!r}: write it as "
                             "'type name' or 'raw type name', e.g. 'float32 x' or 'raw T y'")
        self.raw, self.type, self.name, self.out = bool(m.group(1)), m.group(2), m.group(3), out
        self.dtype = None
        if len(self.type) > 1:  # one letter is a placeholder, as in CuPy
            try:
                dtype = np.dtype(self.type)
            except TypeError:
                dtype = None
            if dtype is None or dtype.name != self.type:
                raise ValueError(f"parameter {self.name!r}: {self.type!r} is not a NumPy dtype "
                                 "name (float32, int64, complex64, bool, ...) nor a one-letter "
                                 "type placeholder")
            self.dtype = dtype
        if self.name in _RESERVED:
            raise ValueError(f"parameter name {self.name!r} is reserved: the operation uses it "
                             "for the index, the count or the index object")


def _parse(params, out):
    if isinstance(params, str):
        items = [p for p in params.split(",") if p.strip()]
    else:
        items = list(params)
    return [_Param(p, out) for p in items]


def looks_like_params(text):
    """True when `text` reads as CuPy's parameter list ("float32 x, raw T y"); a PyCUDA
    operation ("z[i] = x[i]") never does."""
    if not isinstance(text, str):
        return False
    items = [p.strip() for p in text.split(",")]
    return all(_PARAM.match(p) for p in items if p)


def is_cupy_spelling(args, kwargs):
    """True when ElementwiseKernel's arguments are CuPy's (in_params, out_params, operation)
    rather than PyCUDA's (arguments, operation): by keyword, or by a second argument that is a
    parameter list where PyCUDA has the operation."""
    if "in_params" in kwargs or "out_params" in kwargs:
        return True
    return (len(args) >= 2 and looks_like_params(args[0]) and looks_like_params(args[1])
            and bool(args[1].strip()) and (len(args) >= 3 or "operation" in kwargs))


class CupyElementwiseKernel:
    """ElementwiseKernel(in_params, out_params, operation, name="kernel", reduce_dims=True,
    preamble="", no_return=False, return_tuple=False, loop_prep="", after_loop="",
    options=()): CuPy's elementwise kernel (see the module's docstring)."""

    def __init__(self, in_params, out_params, operation, name="kernel", reduce_dims=True,
                 preamble="", no_return=False, return_tuple=False, loop_prep="", after_loop="",
                 options=()):
        if not isinstance(operation, str):
            raise TypeError("operation must be a str of C statements")
        if not re.fullmatch(r"[A-Za-z_]\w*", name or ""):
            raise ValueError(f"kernel name {name!r} is not a C identifier")
        self.in_params = _parse(in_params, False)
        self.out_params = _parse(out_params, True)
        self.params = self.in_params + self.out_params
        names = [p.name for p in self.params]
        for k, nm in enumerate(names):
            if nm in names[:k]:
                raise ValueError(f"parameter {nm!r} is declared twice")
        self.nin, self.nout = len(self.in_params), len(self.out_params)
        self.operation, self.name = operation, name
        self.preamble, self.loop_prep, self.after_loop = preamble, loop_prep, after_loop
        self.options = list(options or [])
        self.no_return, self.return_tuple = no_return, return_tuple
        self.reduce_dims = reduce_dims
        self._functions = {}

    def __repr__(self):
        def listed(params):
            return ", ".join(("raw " if p.raw else "") + p.type + " " + p.name for p in params)
        return (f"<ElementwiseKernel {self.name}({listed(self.in_params)}) -> "
                f"({listed(self.out_params)})>")

    # ---- a call -----------------------------------------------------------------------------

    def __call__(self, *args, size=None, stream=None, block_size=None):
        if len(args) == self.nin:
            outs = [None] * self.nout
        elif len(args) == self.nin + self.nout:
            outs = list(args[self.nin:])
        else:
            raise TypeError(f"{self.name} takes {self.nin} inputs, or {self.nin} inputs and "
                            f"{self.nout} outputs ({len(args)} given)")
        ins = list(args[:self.nin])
        for p, a in zip(self.params, ins + outs):
            if a is None or isinstance(a, DeviceArray):
                continue
            if p.raw or p.out or not isinstance(a, _SCALARS):
                what = "" if p.raw or p.out else " or a scalar"
                raise TypeError(f"{self.name}: argument {p.name!r} must be a kiln array "
                                f"(DeviceArray / GPUArray){what}, not {type(a).__name__}; "
                                "kiln.to_device copies a host array, kiln.asarray wraps "
                                "another library's device array")
        types = self._resolve_types(ins, outs)
        shape = self._shape(ins, outs, size)
        current = current_device()
        for k, p in enumerate(self.out_params):
            dtype = types[p.type] if p.dtype is None else p.dtype
            if outs[k] is None:
                outs[k] = empty(shape, dtype)
            elif outs[k].dtype != dtype or outs[k].shape != shape:
                raise ValueError(f"{self.name}: output {p.name!r} is {outs[k].dtype} of shape "
                                 f"{outs[k].shape}; expected {dtype} of shape {shape}")
        values = ins + outs
        for p, a in zip(self.params, values):
            if isinstance(a, DeviceArray) and a.device != current:
                raise ValueError(f"{self.name}: argument {p.name!r} is on device {a.device}; "
                                 f"the launch is on device {current}")
        n = int(np.prod(shape, dtype=np.int64))
        if n:
            self._launch(values, types, shape, n, stream, block_size)
        if self.no_return:
            return None
        if self.nout == 1 and not self.return_tuple:
            return outs[0]
        return tuple(outs)

    def _resolve_types(self, ins, outs):
        """The dtype each placeholder stands for, from the first argument declared with it
        (outputs given first, as CuPy does); a placeholder bound twice must agree."""
        types = {}
        order = [(p, a) for p, a in zip(self.out_params, outs)] + list(zip(self.in_params, ins))
        # Arrays bind placeholders before scalars do: a scalar takes the arrays' type.
        order.sort(key=lambda pa: not isinstance(pa[1], DeviceArray))
        for p, a in order:
            if a is None:
                continue
            dtype = a.dtype if isinstance(a, (DeviceArray, np.generic)) else np.result_type(a)
            if p.dtype is not None:
                if not isinstance(a, DeviceArray):
                    continue  # a scalar goes to its declared type through the call's checks
                if p.out or p.raw:
                    if dtype != p.dtype:
                        raise TypeError(f"{self.name}: argument {p.name!r} is {dtype}; the "
                                        f"kernel declares {p.dtype}")
                elif not np.can_cast(dtype, p.dtype, "safe"):
                    raise TypeError(f"{self.name}: argument {p.name!r} is {dtype}, which does not "
                                    f"cast safely to the declared {p.dtype}")
                continue
            have = types.setdefault(p.type, dtype)
            if have != dtype:
                if isinstance(a, DeviceArray) or p.out:
                    raise TypeError(f"{self.name}: type {p.type} is {have} from an earlier "
                                    f"argument and {dtype} for {p.name!r}")
        for p in self.params:
            if p.dtype is None and p.type not in types:
                raise TypeError(f"{self.name}: the type of {p.name!r} ({p.type}) cannot be "
                                "worked out from the arguments; pass an array for it")
        return types

    def _shape(self, ins, outs, size):
        shapes = [a.shape for p, a in zip(self.params, ins + outs)
                  if isinstance(a, DeviceArray) and not p.raw]
        if size is not None:
            if shapes:
                raise ValueError(f"{self.name}: size= is only for calls with no non-raw "
                                 "array argument")
            return (int(size),)
        if not shapes:
            raise ValueError(f"{self.name}: no non-raw array argument gives the shape; pass "
                             "size=")
        try:
            shape = np.broadcast_shapes(*shapes)
        except ValueError:
            raise ValueError(f"{self.name}: shapes {', '.join(map(str, shapes))} do not "
                             "broadcast together") from None
        for p, a in zip(self.out_params, outs):
            if a is not None and a.shape != shape:
                raise ValueError(f"{self.name}: output {p.name!r} has shape {a.shape}; the "
                                 f"inputs broadcast to {shape}")
        return shape

    # ---- the kernel -------------------------------------------------------------------------

    def _launch(self, values, types, shape, n, stream, block_size):
        kinds = []    # per parameter: (dtype of the kernel's parameter, is an array)
        layout = []   # per non-raw array: strides in elements, over `shape`
        plain = True  # every non-raw array C-contiguous of the full shape
        for p, a in zip(self.params, values):
            if isinstance(a, DeviceArray):
                kinds.append((a.dtype, True))
                if not p.raw:
                    strides = _broadcast_strides(a, shape)
                    layout.append(strides)
                    plain = plain and a.shape == shape and a.flags.c_contiguous
            else:
                kinds.append((types[p.type] if p.dtype is None else p.dtype, False))
        ndim = 0 if plain else len(shape)
        # Arrays that share memory (an output that is also an input, say) would make the
        # contiguous variant's __restrict__ a lie.
        variant = ("strided" if ndim else "alias" if _ops.overlapping(values) else "contig")
        key = (tuple(kinds), tuple(sorted(types.items())), variant, ndim)
        f = self._functions.get(key)
        if f is None:
            f = self._functions[key] = self._compile(kinds, types, variant, ndim)
        block = int(block_size or BLOCK)
        args = values  # scalars are converted, or refused, by the typed call
        if plain:
            per_block = block * _elwise_src.UNROLL
            grid = max(1, min((n + per_block - 1) // per_block, _MAX_GRID))
            f(*args, n, block=(block, 1, 1), grid=(grid, 1), stream=stream)
            return
        lay_shape, lay_strides = _elwise_src.collapse(shape, layout)
        # The kernel was made for len(shape) dimensions; pad the collapsed layout back.
        pad = len(shape) - len(lay_shape)
        lay_shape = (1,) * pad + tuple(lay_shape)
        lay_strides = [(0,) * pad + tuple(s) for s in lay_strides]
        packed = np.concatenate([np.asarray(lay_shape, np.int64)]
                                + [np.asarray(s, np.int64) for s in lay_strides]).tobytes()
        for a in args:  # an address goes as an int: checked for freed memory here
            if isinstance(a, DeviceArray):
                a._check_memory()
        args = [a.ptr if isinstance(a, DeviceArray) else a for a in args]
        grid = max(1, min((n + block - 1) // block, _MAX_GRID))
        f(*args, n, packed, block=(block, 1, 1), grid=(grid, 1), stream=stream)

    def _compile(self, kinds, types, variant, ndim=0):
        arguments, binds = [], []
        for p, (dtype, is_array) in zip(self.params, kinds):
            want = types[p.type] if p.dtype is None else p.dtype
            ctype = _cgen.dtype_to_ctype(want)
            if not is_array:
                arguments.append(_cgen.ScalarArg(dtype, p.name))
            elif p.raw:
                arguments.append(_cgen.VectorArg(dtype, p.name))
            else:
                inner = "_kiln_" + p.name
                arguments.append(_cgen.VectorArg(dtype, inner))
                if p.out:
                    binds.append(f"{ctype} &{p.name} = {inner}[{inner}_i];")
                else:
                    binds.append(f"const {ctype} {p.name} = ({ctype}){inner}[{inner}_i];")
        typedefs = "".join(f"typedef {_cgen.dtype_to_ctype(d)} {t};\n"
                           for t, d in sorted(types.items()))
        index = ("struct _kiln_ind_t { unsigned long long _n;\n"
                 "  __device__ unsigned long long size() const { return _n; } };\n")
        preamble = typedefs + index + (self.preamble or "")
        operation = (" ".join(binds) + " const _kiln_ind_t _ind = {n}; (void)_ind; "
                     + self.operation)
        if ndim and any(p.raw and k[1] for p, k in zip(self.params, kinds)):
            arguments, operation = self._raw_outside_layout(arguments, operation)
        src = _elwise_src.source(arguments, operation, self.name, preamble, self.loop_prep,
                                 self.after_loop, variant=variant, ndim=ndim)
        module = SourceModule(src, options=self.options, headers=_cgen.headers_for(src))
        return module.get_function(self.name)

    def _raw_outside_layout(self, arguments, operation):
        """A raw array in a strided kernel goes as an integer address, so that the layout's
        strides are those of the non-raw arrays alone; the operation sees its pointer."""
        out, binds = [], []
        for p, a in zip(self.params, arguments):
            if p.raw and isinstance(a, _cgen.VectorArg):
                out.append(_cgen.ScalarArg(np.uint64, "_kiln_raw_" + p.name))
                ctype = _cgen.dtype_to_ctype(a.dtype)
                binds.append(f"{ctype} *{p.name} = ({ctype} *)_kiln_raw_{p.name};")
            else:
                out.append(a)
        return out, " ".join(binds) + " " + operation


def _broadcast_strides(a, shape):
    """The strides, in elements, with which array `a` walks `shape` (0 where it broadcasts)."""
    pad = len(shape) - a.ndim
    out = [0] * pad
    for d, (extent, stride) in enumerate(zip(a.shape, a.strides)):
        out.append(0 if extent == 1 and shape[pad + d] != 1 else stride // a.dtype.itemsize)
    return tuple(out)
