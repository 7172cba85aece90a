"""CUDA source of reduction kernels: PyCUDA's `ReductionKernel(dtype_out, neutral,
reduce_expr, map_expr, arguments)` in one launch.

Each thread folds `map_expr` over its elements (four a block apart per step, into four
accumulators, so their loads are in flight together), the block folds its threads' values, and
writes one partial value; the last block to finish, told by an atomic counter, folds the
partial values and writes the result. The counter wraps back to 0 by itself (atomicInc), so a
scratch buffer is ready for the next launch on its stream without a memset. One launch instead
of PyCUDA's two: on an H200 a float32 sum of 10^7 to a host float took 20 µs this way against
25 µs with two launches (bench/kernel_shapes.py).

`a` and `b` name the two values `reduce_expr` combines; `i` and the arguments' names (and
`x_i`) are what `map_expr` reads, as in PyCUDA.
"""
import numpy as np

from . import _cgen

BLOCK = 512
UNROLL = 4
# Blocks a launch uses: this many per multiprocessor (a sweep on an H200 found 2 best for a
# float32 sum of 10^7), and at most as many as the scratch buffer has room for
# (kiln._kiln.REDUCE_MAX_BLOCKS). The buffer holds the counter in its first 16 bytes, then
# one partial value of up to 16 bytes per block (fewer blocks for larger values).
BLOCKS_PER_SM = 2
# The smallest block a launch is cut down to when the input is small (reduce.c's
# KPY_REDUCE_MIN_BLOCK; see launch_block).
MIN_BLOCK = 256
# Where the flag of a result's host mirror sits in its slot (mirror.h's KPY_MIRROR_FLAG).
MIRROR_FLAG = 16


# A result of more than 16 bytes (a struct of eight floats, say) is folded by the general path
# alone, through shared memory: its block is cut so that the block's values fit in 32 KiB of
# static shared memory, and its launches use as many blocks as the scratch buffer holds
# partial values of its size. The largest result is the one a block of 32 threads can fold.
FOLD_SHARED = 32 << 10
MAX_RESULT = FOLD_SHARED // 32


def block_for(dtype_out):
    """The most threads a block of the kernel for dtype_out has."""
    block, size = BLOCK, np.dtype(dtype_out).itemsize
    while block > 32 and block * size > FOLD_SHARED:
        block //= 2
    return block


def max_blocks_for(dtype_out, max_blocks):
    """The most blocks a launch for dtype_out uses, of the max_blocks partial values of 16
    bytes the scratch buffer holds (kiln._kiln.REDUCE_MAX_BLOCKS)."""
    return max(1, max_blocks * 16 // max(16, np.dtype(dtype_out).itemsize))


def launch_block(count, block=BLOCK):
    """The block for a launch over count elements: the kernel's block, halved down to MIN_BLOCK
    (or the kernel's, if smaller) while one block of half the threads still covers the input
    (a smaller block folds sooner)."""
    while block // 2 >= min(MIN_BLOCK, block) and count <= (block // 2) * UNROLL:
        block //= 2
    return block


def _shuffles(dtype):
    """True when warp shuffles can move values of dtype (the arithmetic types)."""
    dtype = np.dtype(dtype)
    return dtype.kind in "iuf" and dtype.itemsize in (4, 8) or dtype == np.float16


def source(dtype_out, neutral, reduce_expr, map_expr, arguments, name, preamble="",
           use_range=False):
    """The kernel (out, scratch, mirror, arguments..., n), or with use_range
    (out, scratch, mirror, arguments..., start, step, n) folding map_expr at i = start + k * step
    for k from 0 to n - 1. mirror: 0, or the host slot the result is also written to, then a
    flag (kiln's C call path gives a new result one)."""
    if np.dtype(dtype_out).itemsize > MAX_RESULT:
        raise ValueError(f"a reduction's result is at most {MAX_RESULT} bytes, not "
                         f"{np.dtype(dtype_out).itemsize} ({dtype_out})")
    out_t = _cgen.dtype_to_ctype(dtype_out)
    block = block_for(dtype_out)
    vectors = [a for a in arguments if isinstance(a, _cgen.VectorArg)]
    dtypes = [dtype_out] + [a.dtype for a in arguments]
    head = _cgen.includes_for(dtypes, " ".join([preamble, map_expr, reduce_expr, neutral]))
    defines = "".join(f"#define {v.name}_i i\n" for v in vectors)
    params = []
    for a in arguments:
        if isinstance(a, _cgen.VectorArg):
            params.append(f"{_cgen.dtype_to_ctype(a.dtype)} *__restrict__ {a.name}")
        else:
            params.append(a.declarator())
    index = ["long start", "long step"] if use_range else []
    params = ", ".join([f"{out_t} *__restrict__ _out", "unsigned char *_scratch",
                        "unsigned char *_mirror"] + params + index + ["unsigned long n"])
    at = "start + (long)_k2 * step" if use_range else "_k2"
    fold = f"""  __syncthreads(); /* the caller may fold twice */
  sm[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {{
    if (threadIdx.x < s) sm[threadIdx.x] = REDUCE(sm[threadIdx.x], sm[threadIdx.x + s]);
    __syncthreads();
  }}
  return sm[0];"""
    if _shuffles(dtype_out):
        # Each warp folds its 32 values by shuffles, then warp 0 folds the warps' values:
        # three barriers for the block, where a tree through shared memory takes one a level.
        fold = f"""  if (blockDim.x % 32 == 0) {{
    /* The shuffle in a variable of its own: REDUCE may name b twice or under a condition
     * (max's a > b ? a : b), and every lane must take part in every shuffle. */
    for (int o = 16; o > 0; o >>= 1) {{
      const {out_t} w = __shfl_down_sync(0xffffffffu, v, o);
      v = REDUCE(v, w);
    }}
    const unsigned warps = blockDim.x / 32;
    __syncthreads(); /* the caller may fold twice */
    if (threadIdx.x % 32 == 0) sm[threadIdx.x / 32] = v;
    __syncthreads();
    if (threadIdx.x < 32) {{
      v = sm[threadIdx.x < warps ? threadIdx.x : 0];
      /* warps is a power of two: lane 0 folds lanes 0 .. warps - 1 alone. */
      for (unsigned o = warps / 2; o > 0; o >>= 1) {{
        const {out_t} w = __shfl_down_sync(0xffffffffu, v, o);
        v = REDUCE(v, w);
      }}
      if (threadIdx.x == 0) sm[0] = v;
    }}
    __syncthreads();
    return sm[0];
  }}
{fold}"""
    # out_type names the result's type, as in PyCUDA's kernel: "(out_type)(a + b)".
    return f"""{head}{preamble}
typedef {out_t} out_type;
{defines}#define REDUCE(a, b) ({reduce_expr})
#define READ_AND_MAP(i) ({map_expr})

/* The block's fold of one value per thread; every thread gets the result. */
__device__ __forceinline__ {out_t} _kiln_block_fold({out_t} v) {{
  __shared__ __align__(16) unsigned char _raw[{block} * sizeof({out_t})];
  {out_t} *sm = reinterpret_cast<{out_t} *>(_raw);
{fold}
}}

/* The result, and its host mirror when given: the value, then (once the value is there for the
 * host to see) the flag the host waits for. */
__device__ __forceinline__ void _kiln_finish({out_t} *_out, unsigned char *_mirror, {out_t} v) {{
  *_out = v;
  if (_mirror) {{
    *reinterpret_cast<{out_t} *>(_mirror) = v;
    __threadfence_system();
    *reinterpret_cast<volatile unsigned *>(_mirror + {MIRROR_FLAG}) = 1u;
  }}
}}

__global__ void {name}({params})
{{
  const {out_t} _neutral = ({out_t})({neutral});
  {out_t} _acc[{UNROLL}];
#pragma unroll
  for (unsigned _k = 0; _k < {UNROLL}; _k++) _acc[_k] = _neutral;
  const unsigned long long _tile = {UNROLL}ull * blockDim.x;
  for (unsigned long long _base = blockIdx.x * _tile + threadIdx.x; _base < n;
       _base += gridDim.x * _tile) {{
#pragma unroll
    for (unsigned _k = 0; _k < {UNROLL}; _k++) {{
      unsigned long long _k2 = _base + _k * blockDim.x;
      if (_k2 < n) {{
        const {"long" if use_range else "size_t"} i = {at}; /* n's type, as PyCUDA declares i */
        _acc[_k] = REDUCE(_acc[_k], READ_AND_MAP(i));
      }}
    }}
  }}
  /* Names of the kernel's own start with _: an argument may be called v or j. */
  {out_t} _v = REDUCE(REDUCE(_acc[0], _acc[1]), REDUCE(_acc[2], _acc[3]));
  _v = _kiln_block_fold(_v);
  if (gridDim.x == 1) {{
    if (threadIdx.x == 0) _kiln_finish(_out, _mirror, _v);
    return;
  }}
  unsigned *_count = reinterpret_cast<unsigned *>(_scratch);
  {out_t} *_partial = reinterpret_cast<{out_t} *>(_scratch + 16);
  __shared__ bool _last;
  if (threadIdx.x == 0) {{
    _partial[blockIdx.x] = _v;
    __threadfence();
    _last = atomicInc(_count, gridDim.x - 1) == gridDim.x - 1; /* back to 0 after the last */
  }}
  __syncthreads();
  if (!_last) return;
  /* Plain loads see the other blocks' partial values: they were fenced before the counter
   * moved, and this block has not read these addresses before, so no stale line is cached. */
  __threadfence();
  _v = _neutral;
  for (unsigned _j = threadIdx.x; _j < gridDim.x; _j += blockDim.x) _v = REDUCE(_v, _partial[_j]);
  _v = _kiln_block_fold(_v);
  if (threadIdx.x == 0) _kiln_finish(_out, _mirror, _v);
}}
"""


def stage_source(out_type, block_size, neutral, reduce_expr, map_expr, arguments, name,
                 preamble=""):
    """One stage of PyCUDA's two-launch reduction, for programs that launch the stages
    themselves (pycuda.reduction.get_reduction_module): the kernel
    name(out_type *out, arguments, unsigned int seq_count, size_t n), launched with
    block_size threads a block and block_size * sizeof(out_type) bytes of dynamic shared
    memory; block b folds map_expr over the seq_count * block_size elements from
    b * block_size * seq_count (thread t takes every block_size-th from the t-th) and writes
    its value to out[b]. out_type and arguments are C text; i is a size_t."""
    return f"""#include <pycuda-complex.hpp>
#define BLOCK_SIZE {int(block_size)}
#define READ_AND_MAP(i) ({map_expr})
#define REDUCE(a, b) ({reduce_expr})
{preamble}
typedef {out_type} out_type;

extern "C" __global__ void {name}(out_type *out, {arguments}, unsigned int seq_count, size_t n)
{{
  /* Raw bytes, so no constructor of out_type runs on shared memory (which may not have one). */
  extern __shared__ __align__(16) unsigned char _kiln_stage_shared[];
  out_type *_fold = reinterpret_cast<out_type *>(_kiln_stage_shared);
  const unsigned int _t = threadIdx.x;
  out_type _acc = {neutral};
  size_t i = (size_t)blockIdx.x * BLOCK_SIZE * seq_count + _t;
  for (unsigned int _s = 0; _s < seq_count && i < n; ++_s, i += BLOCK_SIZE)
    _acc = REDUCE(_acc, READ_AND_MAP(i));
  _fold[_t] = _acc;
  __syncthreads();
  /* Halve the live values each step, the upper part folded onto the lower (any block size). */
  for (unsigned int _live = BLOCK_SIZE; _live > 1;) {{
    const unsigned int _half = (_live + 1) / 2;
    if (_t < _live - _half) _fold[_t] = REDUCE(_fold[_t], _fold[_t + _half]);
    __syncthreads();
    _live = _half;
  }}
  if (_t == 0) out[blockIdx.x] = _fold[0];
}}
"""
