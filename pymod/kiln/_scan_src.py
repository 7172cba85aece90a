"""CUDA source of scans: PyCUDA's InclusiveScanKernel and ExclusiveScanKernel.

A scan of n elements runs over tiles of TILE elements (fewer for large elements: `shape`), one
block each:

1. `<prefix>_tiles`: each block folds its tile into one value (skipped when there is one tile);
2. those tile values are scanned inclusively, in place, by the same scheme (one tile of them
   in all but the largest arrays);
3. `<prefix>_inclusive` / `<prefix>_exclusive`: each block scans its tile again, starting from
   the fold of all tiles before it (the previous tile's scanned value).

Within a tile, the block reads it into shared memory with coalesced loads, each thread folds
ITEMS consecutive elements, the threads' values are scanned across the block (Hillis and
Steele, in shared memory: any type, any associative `scan_expr`, in order), and the tile goes
back out through shared memory. No neutral element is needed except for the first output of
an exclusive scan: a missing prefix is tracked, not padded.
"""
import numpy as np

from . import _cgen

BLOCK = 256
ITEMS = 8
TILE = BLOCK * ITEMS
# The static shared memory a block may have: the tile and one value per thread live there.
_SHARED = 48 << 10


def shape(dtype):
    """(block, items, tile) of a scan of dtype: BLOCK threads of ITEMS elements each, or, for
    elements so large that the tile and the threads' values would not fit in a block's 48 KiB
    of static shared memory (a struct of three doubles), fewer items a thread, then fewer
    threads. ValueError for elements too large even for 32 threads of one."""
    size = np.dtype(dtype).itemsize
    block, items = BLOCK, ITEMS
    while items > 1 and (block * items + block) * size > _SHARED:
        items -= 1
    while block > 32 and (block * items + block) * size > _SHARED:
        block //= 2
    if (block * items + block) * size > _SHARED:
        raise ValueError(f"a scan of {size}-byte elements needs {64 * size} bytes of shared "
                         f"memory for 32 threads, more than a block's {_SHARED}")
    return block, items, block * items


def source(dtype, scan_expr, neutral, prefix, preamble=""):
    BLOCK, ITEMS, TILE = shape(dtype)  # noqa: N806  (the names the source is written with)
    t = _cgen.dtype_to_ctype(dtype)
    head = _cgen.includes_for([dtype], " ".join([preamble, scan_expr, neutral or ""]))
    # An inclusive scan has no neutral to give; its module's exclusive kernel, never launched
    # then, starts from the element itself, which every type the scan can fold can be (a cast
    # of 0 is no value of a struct such as int2, nor T() of one without a default constructor).
    exclusive_start = (f"({t})({neutral})" if neutral is not None
                       else "x /* no neutral: exclusive scans need one */")
    return f"""{head}{preamble}
#define SCAN_EXPR(a, b) ({scan_expr})

/* Shared storage as bytes: a type with a constructor cannot be a __shared__ array. */
#define _KILN_SHARED(type, name, count) \\
  __shared__ __align__(16) unsigned char name##_raw[(count) * sizeof(type)]; \\
  type *name = reinterpret_cast<type *>(name##_raw)

/* The tile of block b into shared memory; returns how many of its elements exist. */
__device__ __forceinline__ unsigned _kiln_load({t} *tile, const {t} *in, unsigned long long n) {{
  unsigned long long start = (unsigned long long)blockIdx.x * {TILE};
  unsigned valid = n - start < {TILE} ? (unsigned)(n - start) : {TILE};
  for (unsigned j = threadIdx.x; j < valid; j += blockDim.x) tile[j] = in[start + j];
  __syncthreads();
  return valid;
}}

/* Folds this thread's ITEMS elements of the tile: *has is 0 when it has none. */
__device__ __forceinline__ {t} _kiln_fold_items(const {t} *tile, unsigned valid, int *has) {{
  unsigned first = threadIdx.x * {ITEMS};
  {t} acc = tile[first < valid ? first : 0];
  *has = first < valid;
  for (unsigned k = 1; k < {ITEMS}; k++)
    if (first + k < valid) acc = SCAN_EXPR(acc, tile[first + k]);
  return acc;
}}

/* Inclusive scan of one value per thread across the block; threads without a value (has 0)
 * come only after those with one. */
__device__ __forceinline__ {t} _kiln_block_scan({t} v, {t} *sm) {{
  sm[threadIdx.x] = v;
  __syncthreads();
  for (unsigned off = 1; off < blockDim.x; off <<= 1) {{
    {t} before = sm[threadIdx.x >= off ? threadIdx.x - off : 0];
    __syncthreads();
    if (threadIdx.x >= off) sm[threadIdx.x] = SCAN_EXPR(before, sm[threadIdx.x]);
    __syncthreads();
  }}
  return sm[threadIdx.x];
}}

__global__ void {prefix}_tiles(const {t} *in, {t} *sums, unsigned long n) {{
  _KILN_SHARED({t}, tile, {TILE});
  _KILN_SHARED({t}, sm, {BLOCK});
  unsigned valid = _kiln_load(tile, in, n);
  int has;
  {t} v = _kiln_fold_items(tile, valid, &has);
  v = _kiln_block_scan(v, sm);
  unsigned last = (valid - 1) / {ITEMS};
  if (threadIdx.x == last) sums[blockIdx.x] = v;
}}

/* Scans block b's tile; carry[b - 1] (when carry is given and b > 0) is the fold of every
 * element before the tile. */
template <bool EXCLUSIVE>
__device__ __forceinline__ void _kiln_scan_tile(const {t} *in, {t} *out, const {t} *carry,
                                                unsigned long long n) {{
  _KILN_SHARED({t}, tile, {TILE});
  _KILN_SHARED({t}, sm, {BLOCK});
  unsigned valid = _kiln_load(tile, in, n);
  int has;
  {t} mine = _kiln_fold_items(tile, valid, &has);
  {t} incl = _kiln_block_scan(mine, sm);
  /* The fold of everything before this thread's first element, if anything is before it. */
  bool has_carry = carry != 0 && blockIdx.x > 0;
  {t} before = has_carry ? carry[blockIdx.x - 1] : tile[0];
  bool has_before = has_carry;
  if (threadIdx.x > 0) {{
    {t} prev = sm[threadIdx.x - 1];
    before = has_carry ? SCAN_EXPR(before, prev) : prev;
    has_before = true;
  }}
  __syncthreads(); /* every thread has read sm before the tile is rewritten */
  (void)incl;
  unsigned first = threadIdx.x * {ITEMS};
  {t} acc = before;
  bool have = has_before;
  for (unsigned k = 0; k < {ITEMS} && first + k < valid; k++) {{
    {t} x = tile[first + k];
    if (EXCLUSIVE) tile[first + k] = have ? acc : {exclusive_start};
    acc = have ? SCAN_EXPR(acc, x) : x;
    have = true;
    if (!EXCLUSIVE) tile[first + k] = acc;
  }}
  __syncthreads();
  unsigned long long start = (unsigned long long)blockIdx.x * {TILE};
  for (unsigned j = threadIdx.x; j < valid; j += blockDim.x) out[start + j] = tile[j];
}}

__global__ void {prefix}_inclusive(const {t} *in, {t} *out, const {t} *carry,
                                              unsigned long n) {{
  _kiln_scan_tile<false>(in, out, carry, n);
}}

__global__ void {prefix}_exclusive(const {t} *in, {t} *out, const {t} *carry,
                                              unsigned long n) {{
  _kiln_scan_tile<true>(in, out, carry, n);
}}
"""

