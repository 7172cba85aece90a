"""CUDA source of elementwise kernels: PyCUDA's `ElementwiseKernel(arguments, operation)`
with its meaning of `i` and `n`, and the layouts kiln launches it in.

One operation becomes up to four kernels, each generated when first needed:

- "contig": every array contiguous and laid out alike. Each thread takes four elements a
  block apart per step of a grid-stride loop, through `__restrict__` pointers, so the loads
  of the four are in flight together (on an H200, z = x*y over 10^7 floats: 32 µs against 38
  for one element per thread; bench/kernel_shapes.py).
- "alias": the same without `__restrict__`, for calls where two array arguments overlap.
  Either is PyCUDA's own grid-stride loop, one element a thread per step, for an operation
  that moves `i` itself (PyCUDA's MD5 generator writes four elements `total_threads` apart
  and steps `i` past them): the four-element step would set `i` back and write again. So is
  an operation that assigns one of its parameters (Chainer's `x = &x[(i / m) * c]`), which
  PyCUDA's launch shape gives each thread once, as passed: such a kernel is launched one
  element a thread (`per_thread`).
- "range": PyCUDA's range=/slice= form, with `start`, `stop` and `step` in place of `n`.
- "strided": arrays of any strides, for operations that index them with `name_i` (the index
  of element i in array `name`) rather than `i`; their shape and strides arrive in one struct.

`i` is the element's flat index and `n` the element count, as in PyCUDA; `x_i` is defined for
every array argument `x`.

`module_source` is apart from these: the kernel of PyCUDA's get_elwise_module, whose caller
writes the whole parameter list (its own `n`, or `start`, `stop`, `step`) and picks the launch
shape.
"""
import re

from . import _cgen

_BARE_I = re.compile(r"(?<![\w.])i(?!\w)")
# `i` assigned (not compared) or stepped: `i = `, `i += `, `i <<= `, `i++`, `--i`.
_MOVES_I = re.compile(r"(?<![\w.>])i\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)"
                      r"|(?:\+\+|--)\s*i(?!\w)")
# Any name assigned or stepped, `x = `, `a *= `, `p++`, `--p`; one pattern for every parameter
# list, compiled with the module, as a first operator in a process has no time to compile one.
# (Two patterns, each searched on its own, so that one's match cannot hide the other's: `a-- x`.)
_ASSIGNED = (re.compile(r"(?<![\w.>*])([A-Za-z_]\w*)\s*(?:(?:[-+*/%&|^]|<<|>>)?=(?!=)|\+\+|--)"),
             re.compile(r"(?:\+\+|--)\s*([A-Za-z_]\w*)"))
# A statement that leaves the element's code early: under the four-element step it would
# leave the thread's other elements undone too.
_LEAVES = re.compile(r"(?<![\w.])(?:return|break|goto)(?!\w)")
UNROLL = 4


def uses_bare_i(*texts):
    """True when the code names `i` itself (not only `x_i`): it assumes contiguous arrays."""
    return any(_BARE_I.search(t or "") for t in texts)


def moves_i(*texts):
    """True when the code assigns or steps `i` (a local of its own by that name included)."""
    return any(_MOVES_I.search(t or "") for t in texts)


def assigns_parameter(arguments, *texts):
    """True when the code assigns or steps one of the parameters (`x = &x[k]`, `a *= 2`,
    `p++`), not what they point to (`x[i] = `, `*p = `)."""
    names = {a.name for a in arguments}
    return any(m[1] in names for t in texts if t for p in _ASSIGNED for m in p.finditer(t))


def leaves_early(*texts):
    """True when the code has a `return`, `break` or `goto` (`if (m[i] == 0) return;`)."""
    return any(_LEAVES.search(t or "") for t in texts)


def per_thread(arguments, operation):
    """The elements a thread of the "contig" and "alias" kernels takes, for the launch shape:
    one where the operation assigns a parameter, so each element sees the parameters as
    passed (as each thread does under PyCUDA's shape), or may leave early, so a `return`
    leaves its own element alone undone (as under PyCUDA's shape for all but the largest
    arrays); otherwise UNROLL."""
    return 1 if assigns_parameter(arguments, operation) or leaves_early(operation) else UNROLL


def _declarators(arguments, restrict):
    out = []
    for a in arguments:
        if isinstance(a, _cgen.VectorArg):
            q = " __restrict__" if restrict else ""
            out.append(f"{_cgen.dtype_to_ctype(a.dtype)} *{q} {a.name}")
        else:
            out.append(a.declarator())
    return out


def _head(arguments, preamble, texts):
    dtypes = [a.dtype for a in arguments]
    return _cgen.includes_for(dtypes, " ".join([preamble] + list(texts))) + preamble + "\n"


def _body(operation):
    # An operation is one or several statements, with or without a last semicolon.
    return "{ " + operation + "; }"


def _index_names(arguments):
    """`x_i` for each array argument `x`, or None where a parameter has that name (the
    parameter keeps it, as in PyCUDA)."""
    taken = {a.name for a in arguments}
    return [None if f"{a.name}_i" in taken else f"{a.name}_i" for a in arguments
            if isinstance(a, _cgen.VectorArg)]


def _indexed(arguments, index_type, operation):
    """The operation with `x_i` equal to `i` for every array `x`: constants of a block around
    it, which a local of the operation's own by that name shadows (a macro would rewrite it)."""
    names = [n for n in _index_names(arguments) if n]
    if not names:
        return _body(operation)
    return ("{ const " + index_type + " " + ", ".join(f"{n} = i" for n in names) + "; "
            + " ".join(f"(void){n};" for n in names) + " " + _body(operation) + " }")


def source(arguments, operation, name, preamble="", loop_prep="", after_loop="", *,
           variant="contig", ndim=0):
    """The source of one variant of the kernel `name` (see the module's docstring)."""
    vectors = [a for a in arguments if isinstance(a, _cgen.VectorArg)]
    head = _head(arguments, preamble, (operation, loop_prep, after_loop))
    # size_t as PyCUDA declares them, the same type as n: min(i, n - 1) picks one overload.
    common = ("  size_t tid = threadIdx.x, total_threads = (size_t)gridDim.x * blockDim.x,\n"
              "         cta_start = (size_t)blockDim.x * blockIdx.x;\n"
              "  (void)tid; (void)total_threads; (void)cta_start;\n")
    if variant in ("contig", "alias"):
        params = ", ".join(_declarators(arguments, variant == "contig") + ["unsigned long n"])
        body = _indexed(arguments, "size_t", operation)
        if (moves_i(operation) or assigns_parameter(arguments, operation)
                or leaves_early(operation)):
            # PyCUDA's own loop (see the module's docstring)
            loop = f"""  for (i = cta_start + tid; i < n; i += total_threads)
    {body}
"""
        else:
            loop = f"""  const size_t _tile = (size_t){UNROLL} * blockDim.x;
  for (size_t _base = (size_t)blockIdx.x * _tile + threadIdx.x; _base < n;
       _base += (size_t)gridDim.x * _tile) {{
#pragma unroll
    for (unsigned _k = 0; _k < {UNROLL}; _k++) {{
      i = _base + _k * blockDim.x;
      if (i < n) {body}
    }}
  }}
"""
        return f"""{head}
__global__ void {name}({params})
{{
{common}  size_t i;
  {loop_prep};
{loop}  {after_loop};
}}
"""
    if variant == "range":
        params = ", ".join(_declarators(arguments, False) + ["long start", "long stop",
                                                             "long step"])
        body = _indexed(arguments, "long", operation)
        return f"""{head}
__global__ void {name}({params})
{{
{common}  long i;
  {loop_prep};
  if (step < 0) {{
    for (i = start + (long)(cta_start + tid) * step; i > stop; i += (long)total_threads * step)
      {body}
  }} else {{
    for (i = start + (long)(cta_start + tid) * step; i < stop; i += (long)total_threads * step)
      {body}
  }}
  {after_loop};
}}
"""
    if variant == "strided":
        if ndim < 1:
            raise ValueError("a strided kernel needs ndim >= 1")
        nv = len(vectors)
        layout = (f"struct _kiln_layout {{ long long shape[{ndim}]; "
                  f"long long stride[{nv}][{ndim}]; }};\n")
        params = ", ".join(_declarators(arguments, False)
                           + ["unsigned long n", "_kiln_layout _layout"])
        # The offsets by their x_i names, or names of kiln's own where a parameter has one.
        index = [n or f"_kiln_index_{k}" for k, n in enumerate(_index_names(arguments))]
        offsets = "".join(f"    long long {n} = 0;\n" for n in index)
        steps = "".join(f"      {n} += _c * _layout.stride[{k}][_d];\n"
                        for k, n in enumerate(index))
        return f"""{head}{layout}
__global__ void {name}({params})
{{
{common}  size_t i;
  {loop_prep};
  for (i = cta_start + tid; i < n; i += total_threads) {{
{offsets}    size_t _r = i;
#pragma unroll
    for (int _d = {ndim - 1}; _d >= 0; _d--) {{
      long long _c = (long long)(_r % (unsigned long long)_layout.shape[_d]);
      _r /= (unsigned long long)_layout.shape[_d];
{steps}    }}
    {_body(operation)}
  }}
  {after_loop};
}}
"""
    raise ValueError(f"unknown variant {variant!r}")


def module_source(arguments, operation, name, preamble="", loop_prep="", after_loop="",
                  use_range=False):
    """The kernel of PyCUDA's get_elwise_module (use_range: get_elwise_range_module).

    Unlike `source`, `arguments` are the whole parameter list, written as declared: the
    caller declares `n` itself (or `start`, `stop` and `step`), and nothing is added. The
    caller also picks the launch shape, so the loop is a plain grid-stride loop, one element
    per thread per step: `i` starts at `cta_start + tid` and steps by `total_threads`, which
    code that also reads those names (shared memory by `tid`, say) may rely on."""
    head = _head(arguments, preamble, (operation, loop_prep, after_loop))
    params = ", ".join(a.declarator() for a in arguments)
    common = ("  size_t tid = threadIdx.x;\n"
              "  size_t total_threads = (size_t)gridDim.x * blockDim.x;\n"
              "  size_t cta_start = (size_t)blockDim.x * blockIdx.x;\n"
              "  (void)tid; (void)total_threads; (void)cta_start;\n")
    if not use_range:
        loop = f"""  size_t i;
  {loop_prep};
  for (i = cta_start + tid; i < n; i += total_threads)
    {_body(operation)}
"""
    else:
        loop = f"""  long i;
  {loop_prep};
  if (step < 0) {{
    for (i = start + (long)(cta_start + tid) * step; i > stop; i += (long)total_threads * step)
      {_body(operation)}
  }} else {{
    for (i = start + (long)(cta_start + tid) * step; i < stop; i += (long)total_threads * step)
      {_body(operation)}
  }}
"""
    return f"""{head}
__global__ void {name}({params})
{{
{common}{loop}  {after_loop};
}}
"""


def collapse(shape, strides_list):
    """Merges the dimensions every array walks as one, and drops those of one element.

    `strides_list` holds each array's strides in elements. Gives (shape, strides_list) with
    the fewest dimensions that visit the same elements in the same (C) order."""
    dims = [(n, [s[d] for s in strides_list]) for d, n in enumerate(shape) if n != 1]
    if not dims:
        return (1,), [(0,) for _ in strides_list]
    out = [dims[0]]
    for n, st in dims[1:]:
        pn, pst = out[-1]
        if all(ps == s * n for ps, s in zip(pst, st)):
            out[-1] = (pn * n, st)
        else:
            out.append((n, st))
    shape = tuple(n for n, _ in out)
    strides = [tuple(st[k] for _, st in out) for k in range(len(strides_list))]
    return shape, strides
