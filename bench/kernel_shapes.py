#!/usr/bin/env python3
"""The sweep behind the shapes of kiln's generated kernels: which launch shape and loop an
elementwise kernel and a sum should have on this GPU, measured beside PyTorch and CuPy.

    PYTHONPATH=pymod python3 bench/kernel_shapes.py [--quick] [--out FILE]

Elementwise: z[i] = x[i] * y[i] over float32, n = 10^3 and 10^7, written twenty ways (one
element per thread at several block sizes, 64-bit indices, grid-stride loops over a few grid
sizes, four elements per thread with and without __restrict__, float4 loads, float4 loads
with Hopper's 256-byte L2 prefetch, and Hopper's bulk copies through shared memory). Sum: float32,
n = 10^3, 10^5 and 10^7, to a host float, written three ways (two launches; one launch whose
last block adds the partial sums; atomics). Each way is checked against NumPy before it is
timed. Figures: µs per call for back-to-back calls with one synchronize (the elementwise rows)
and µs per call that ends with the value on the host (the sum rows); median of repeats.
"""
import argparse
import json
import statistics
import sys
import time

import numpy as np

import kiln
from common import source_commit, stamp

SM_COUNT = 0

ELEMENTWISE = {
    # name: (source body, block, grid(n, block) -> int, per-thread elements)
    "one/256": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  unsigned i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] * y[i];
}""", 256, lambda n, b: (n + b - 1) // b),
    "one/128": (None, 128, lambda n, b: (n + b - 1) // b),
    "one/512": (None, 512, lambda n, b: (n + b - 1) // b),
    "one/1024": (None, 1024, lambda n, b: (n + b - 1) // b),
    "one64/256": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned long long n) {
  unsigned long long i = (unsigned long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) z[i] = x[i] * y[i];
}""", 256, lambda n, b: (n + b - 1) // b),
    "stride/sm*4": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  for (unsigned i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
    z[i] = x[i] * y[i];
}""", 256, lambda n, b: min((n + b - 1) // b, SM_COUNT * 4)),
    "stride/sm*8": (None, 256, lambda n, b: min((n + b - 1) // b, SM_COUNT * 8)),
    "stride/sm*16": (None, 256, lambda n, b: min((n + b - 1) // b, SM_COUNT * 16)),
    "stride/sm*32": (None, 256, lambda n, b: min((n + b - 1) // b, SM_COUNT * 32)),
    "four/256": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  unsigned base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    unsigned i = base + k * blockDim.x;
    if (i < n) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 4 * b - 1) // (4 * b)),
    "four-restrict/256": ("""
extern "C" __global__ void k(float *__restrict__ z, const float *__restrict__ x,
                             const float *__restrict__ y, unsigned n) {
  unsigned base = blockIdx.x * blockDim.x * 4 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 4; k++) {
    unsigned i = base + k * blockDim.x;
    if (i < n) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 4 * b - 1) // (4 * b)),
    "two-restrict/256": ("""
extern "C" __global__ void k(float *__restrict__ z, const float *__restrict__ x,
                             const float *__restrict__ y, unsigned n) {
  unsigned base = blockIdx.x * blockDim.x * 2 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 2; k++) {
    unsigned i = base + k * blockDim.x;
    if (i < n) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 2 * b - 1) // (2 * b)),
    "eight-restrict/256": ("""
extern "C" __global__ void k(float *__restrict__ z, const float *__restrict__ x,
                             const float *__restrict__ y, unsigned n) {
  unsigned base = blockIdx.x * blockDim.x * 8 + threadIdx.x;
#pragma unroll
  for (int k = 0; k < 8; k++) {
    unsigned i = base + k * blockDim.x;
    if (i < n) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 8 * b - 1) // (8 * b)),
    "eight-restrict/128": (None, 128, lambda n, b: (n + 8 * b - 1) // (8 * b)),
    "eight-restrict/512": (None, 512, lambda n, b: (n + 8 * b - 1) // (8 * b)),
    "four-restrict64/256": ("""
extern "C" __global__ void k(float *__restrict__ z, const float *__restrict__ x,
                             const float *__restrict__ y, unsigned long long n) {
  const unsigned long long tile = 4ull * blockDim.x;
  for (unsigned long long base = blockIdx.x * tile + threadIdx.x; base < n;
       base += gridDim.x * tile) {
#pragma unroll
    for (unsigned k = 0; k < 4; k++) {
      unsigned long long i = base + k * blockDim.x;
      if (i < n) z[i] = x[i] * y[i];
    }
  }
}""", 256, lambda n, b: (n + 4 * b - 1) // (4 * b)),
    "float4x2/256": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  unsigned j = (blockIdx.x * blockDim.x * 2 + threadIdx.x) * 4;
#pragma unroll
  for (int k = 0; k < 2; k++, j += blockDim.x * 4) {
    if (j + 3 < n) {
      float4 a = *(const float4 *)(x + j), b = *(const float4 *)(y + j);
      *(float4 *)(z + j) = make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);
    } else {
      for (unsigned i = j; i < n; i++) z[i] = x[i] * y[i];
    }
  }
}""", 256, lambda n, b: (n + 8 * b - 1) // (8 * b)),
    "float4/256": ("""
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    float4 a = *(const float4 *)(x + i), b = *(const float4 *)(y + i);
    *(float4 *)(z + i) = make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);
  } else {
    for (; i < n; i++) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 4 * b - 1) // (4 * b)),
    # float4 loads asking the L2 cache to fetch 256 bytes around each (Hopper's prefetch size).
    "float4-L2-256B/256": ("""
__device__ __forceinline__ float4 load_256b(const float *p) {
  float4 a;
  asm volatile("ld.global.nc.L1::no_allocate.L2::256B.v4.f32 {%0, %1, %2, %3}, [%4];"
               : "=f"(a.x), "=f"(a.y), "=f"(a.z), "=f"(a.w) : "l"(p));
  return a;
}
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  unsigned i = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
  if (i + 3 < n) {
    float4 a = load_256b(x + i), b = load_256b(y + i);
    *(float4 *)(z + i) = make_float4(a.x * b.x, a.y * b.y, a.z * b.z, a.w * b.w);
  } else {
    for (; i < n; i++) z[i] = x[i] * y[i];
  }
}""", 256, lambda n, b: (n + 4 * b - 1) // (4 * b)),
    # Hopper's bulk copies (the TMA unit): one thread copies a block's 16 KB tile of x and of y
    # into shared memory, the block multiplies there, one thread copies the tile out. Right for
    # n a multiple of 4 (a bulk copy moves multiples of 16 bytes), which the sizes here are.
    "bulk-copy-16KB/256": ("""
#define TILE 4096
extern "C" __global__ void k(float *z, const float *x, const float *y, unsigned n) {
  __shared__ __align__(128) float sx[TILE], sy[TILE];
  __shared__ __align__(8) unsigned long long bar;
  unsigned start = blockIdx.x * TILE, count = min(n - start, (unsigned)TILE), bytes = count * 4;
  unsigned b = (unsigned)__cvta_generic_to_shared(&bar);
  if (threadIdx.x == 0) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" ::"r"(b));
    asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    unsigned long long state;
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 %0, [%1], %2;"
                 : "=l"(state) : "r"(b), "r"(2 * bytes) : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 ::"r"((unsigned)__cvta_generic_to_shared(sx)), "l"(x + start), "r"(bytes), "r"(b)
                 : "memory");
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes"
                 " [%0], [%1], %2, [%3];"
                 ::"r"((unsigned)__cvta_generic_to_shared(sy)), "l"(y + start), "r"(bytes), "r"(b)
                 : "memory");
  }
  unsigned done = 0;
  while (!done)
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], 0;"
                 " selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(b) : "memory");
  for (unsigned i = threadIdx.x; i < count / 4; i += blockDim.x) {
    float4 a = ((float4 *)sx)[i], c = ((float4 *)sy)[i];
    ((float4 *)sx)[i] = make_float4(a.x * c.x, a.y * c.y, a.z * c.z, a.w * c.w);
  }
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  __syncthreads();
  if (threadIdx.x == 0) {
    asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;"
                 ::"l"(z + start), "r"((unsigned)__cvta_generic_to_shared(sx)), "r"(bytes)
                 : "memory");
    asm volatile("cp.async.bulk.commit_group;" ::: "memory");
    asm volatile("cp.async.bulk.wait_group.read 0;" ::: "memory");
  }
}""", 256, lambda n, b: (n + 4095) // 4096),
}

REDUCE_SOURCE = r"""
__device__ __forceinline__ float block_sum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  v = threadIdx.x < (blockDim.x >> 5) ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  return v;
}

__device__ __forceinline__ float thread_sum(const float *x, unsigned n) {
  float acc = 0.0f;
  unsigned stride = gridDim.x * blockDim.x;
  unsigned t = blockIdx.x * blockDim.x + threadIdx.x;
  unsigned n4 = ((size_t)x & 15) == 0 ? n / 4 : 0;
  for (unsigned j = t; j < n4; j += stride) {
    float4 v = ((const float4 *)x)[j];
    acc += (v.x + v.y) + (v.z + v.w);
  }
  for (unsigned i = n4 * 4 + t; i < n; i += stride) acc += x[i];
  return acc;
}

extern "C" __global__ void stage1(float *partial, const float *x, unsigned n) {
  float v = block_sum(thread_sum(x, n));
  if (threadIdx.x == 0) partial[blockIdx.x] = v;
}

extern "C" __global__ void last_block(float *out, float *partial, unsigned *count,
                                      const float *x, unsigned n) {
  __shared__ bool last;
  float v = block_sum(thread_sum(x, n));
  if (threadIdx.x == 0) {
    partial[blockIdx.x] = v;
    __threadfence();
    last = atomicInc(count, gridDim.x - 1) == gridDim.x - 1; /* wraps back to 0 */
  }
  __syncthreads();
  if (last) {
    float s = 0.0f;
    for (unsigned i = threadIdx.x; i < gridDim.x; i += blockDim.x) s += ((volatile float *)partial)[i];
    s = block_sum(s);
    if (threadIdx.x == 0) *out = s;
  }
}

extern "C" __global__ void atomic_sum(float *out, const float *x, unsigned n) {
  float v = block_sum(thread_sum(x, n));
  if (threadIdx.x == 0) atomicAdd(out, v);
}
"""


def per_call_us(fn, calls, repeats, sync):
    """Median over repeats of (time of `calls` back-to-back calls, then sync) / calls."""
    out = []
    for _ in range(repeats):
        sync()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        sync()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def each_call_us(fn, calls, repeats):
    """Median over repeats of the mean time of a call that returns its result to the host."""
    out = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        out.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(out)


def elementwise_rows(sizes, calls, repeats, peers):
    rows = {}
    rng = np.random.default_rng(1)
    modules = {}
    source = None
    for name, (src, block, grid) in ELEMENTWISE.items():
        source = src or source
        modules[name] = (kiln.SourceModule(source).get_function("k"), block, grid)
    for n in sizes:
        xh = rng.standard_normal(n).astype(np.float32)
        yh = rng.standard_normal(n).astype(np.float32)
        want = xh * yh
        x, y, z = kiln.to_device(xh), kiln.to_device(yh), kiln.empty(n, np.float32)
        row = {}
        for name, (f, block, grid) in modules.items():
            g = grid(n, block)
            z.copy_from(np.full(n, np.nan, np.float32))
            f(z, x, y, n, block=(block, 1, 1), grid=(g, 1))
            if not np.array_equal(z.get(), want):
                row[name] = "wrong"
                continue
            row[name] = per_call_us(lambda: f(z, x, y, n, block=(block, 1, 1), grid=(g, 1)),
                                    calls if n < 10**6 else 50, repeats, kiln.synchronize)
        for name, (make, check) in peers.items():
            fn = make(xh, yh)
            if fn is None:
                continue
            call, sync, result = fn
            call()
            sync()
            if not np.array_equal(result(), want):
                row[name] = "wrong"
                continue
            row[name] = per_call_us(call, calls if n < 10**6 else 50, repeats, sync)
        rows[str(n)] = row
    return rows


def sum_rows(sizes, calls, repeats, peers):
    mod = kiln.SourceModule(REDUCE_SOURCE)
    stage1, last, atomic = (mod.get_function(k) for k in ("stage1", "last_block", "atomic_sum"))
    rows = {}
    rng = np.random.default_rng(2)
    block = 512
    count = kiln.zeros(1, np.uint32)
    for n in sizes:
        xh = rng.standard_normal(n).astype(np.float32)
        want = float(xh.astype(np.float64).sum())
        tol = 1e-4 * max(1.0, float(np.abs(xh).astype(np.float64).sum()))
        x = kiln.to_device(xh)
        row = {}
        for mult in (1, 2, 4, 8):
            grid = max(1, min(SM_COUNT * mult, (n + block - 1) // block))
            partial = kiln.empty(grid, np.float32)
            out = kiln.empty((), np.float32)
            pinned = kiln.pagelocked_empty((), np.float32)

            def two_stage():
                if grid == 1:
                    stage1(out, x, n, block=(block, 1, 1), grid=(1, 1))
                else:
                    stage1(partial, x, n, block=(block, 1, 1), grid=(grid, 1))
                    stage1(out, partial, grid, block=(1024, 1, 1), grid=(1, 1))
                return float(out.get())

            def last_block():
                last(out, partial, count, x, n, block=(block, 1, 1), grid=(grid, 1))
                return float(out.get())

            def last_block_pinned():
                last(out, partial, count, x, n, block=(block, 1, 1), grid=(grid, 1))
                out.get(out=pinned)
                return float(pinned)

            def atomic_sum():
                out.copy_from(np.zeros((), np.float32))
                atomic(out, x, n, block=(block, 1, 1), grid=(grid, 1))
                return float(out.get())

            for name, fn in (("two-launch", two_stage), ("last-block", last_block),
                             ("last-block+pinned", last_block_pinned), ("atomic", atomic_sum)):
                key = f"{name}/sm*{mult}"
                if abs(fn() - want) > tol:
                    row[key] = "wrong"
                    continue
                row[key] = each_call_us(fn, calls, repeats)
        for name, make in peers.items():
            fn = make(xh)
            if fn is None:
                continue
            if abs(fn() - want) > tol:
                row[name] = "wrong"
                continue
            row[name] = each_call_us(fn, calls, repeats)
        rows[str(n)] = row
    return rows


LATENCY_SOURCE = r"""
extern "C" __global__ void one(float *out, float v) { if (threadIdx.x == 0) *out = v; }
"""


def latency_rows(calls, repeats):
    """What a result on the host costs: a launch and a synchronize; a launch and get() of one
    float (pageable, and into page-locked memory); microseconds each."""
    one = kiln.SourceModule(LATENCY_SOURCE).get_function("one")
    out = kiln.empty((), np.float32)
    pinned = kiln.pagelocked_empty((), np.float32)

    def sync_only():
        one(out, 2.0, block=(32, 1, 1), grid=(1, 1))
        kiln.synchronize()

    def get_pageable():
        one(out, 2.0, block=(32, 1, 1), grid=(1, 1))
        return float(out.get())

    def get_pinned():
        one(out, 2.0, block=(32, 1, 1), grid=(1, 1))
        out.get(pinned)
        return float(pinned)

    assert get_pageable() == 2.0 and get_pinned() == 2.0
    return {name: each_call_us(fn, calls, repeats) for name, fn in
             (("launch+synchronize", sync_only), ("launch+get", get_pageable),
              ("launch+get(pinned)", get_pinned))}


def torch_peers():
    try:
        import torch
    except ImportError:
        return {}, {}
    sync = torch.cuda.synchronize

    def mul(xh, yh):
        x, y = torch.from_numpy(xh).cuda(), torch.from_numpy(yh).cuda()
        z = torch.empty_like(x)
        return (lambda: torch.mul(x, y, out=z)), sync, (lambda: z.cpu().numpy())

    def total(xh):
        x = torch.from_numpy(xh).cuda()
        return lambda: torch.sum(x).item()

    return {"torch mul(out=)": (mul, None)}, {"torch sum().item()": total}


def cupy_peers():
    try:
        import cupy
    except ImportError:
        return {}, {}
    k = cupy.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y", "mul")

    def mul(xh, yh):
        x, y = cupy.asarray(xh), cupy.asarray(yh)
        z = cupy.empty_like(x)
        sync = cupy.cuda.Device().synchronize
        return (lambda: k(x, y, z)), sync, (lambda: cupy.asnumpy(z))

    def total(xh):
        x = cupy.asarray(xh)
        return lambda: float(x.sum())

    return {"cupy ElementwiseKernel": (mul, None)}, {"cupy sum()": total}


def main(argv=None):
    global SM_COUNT
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--out")
    args = parser.parse_args(argv)
    import torch  # noqa: F401  (the multiprocessor count, without a kiln API for it)
    SM_COUNT = torch.cuda.get_device_properties(0).multi_processor_count
    repeats = 3 if args.quick else 9
    calls = 200 if args.quick else 2000
    t_el, t_sum = torch_peers()
    c_el, c_sum = cupy_peers()
    el = elementwise_rows((1000, 10**7), calls, repeats, {**t_el, **c_el})
    su = sum_rows((1000, 10**5, 10**7), calls // 4, repeats, {**t_sum, **c_sum})
    lat = {"1": latency_rows(calls // 4, repeats)}
    result = {**stamp(), "gpu": kiln.Device(0).name(), "commit": source_commit(),
              "sm_count": SM_COUNT, "elementwise_us": el,
              "sum_to_host_us": su, "latency_us": lat}
    if args.out:
        with open(args.out, "w") as f:
            json.dump(result, f, indent=1)
    for title, rows in (("z = x * y, float32, µs per call", el),
                        ("sum to a host float, float32, µs per call", su),
                        ("a value on the host, µs per call", lat)):
        print(f"\n{title}")
        for n, row in rows.items():
            best = min((v for v in row.values() if isinstance(v, float)), default=None)
            print(f"  n = {n}")
            for name, v in sorted(row.items(), key=lambda kv: (isinstance(kv[1], str), kv[1])):
                mark = " *" if v == best else ""
                print(f"    {name:28s} {v if isinstance(v, str) else f'{v:8.2f}'}{mark}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
