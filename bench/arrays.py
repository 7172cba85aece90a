#!/usr/bin/env python3
"""Arrays that compute: kiln beside PyTorch, CuPy and PyCUDA in one run, float32, arrays
already on the GPU.

    PYTHONPATH=pymod python3 bench/arrays.py [--quick] [--out DIR]     (make bench runs it)

Figures (µs per operation, median of repeats; the ways take turns within each repeat, a
different one first in each):

  elementwise      z = x*y into an existing z through each system's elementwise kernel
                   (PyTorch: mul(out=)), n = 10^3 and 10^7; back-to-back calls, one
                   synchronize at the end
  multiply         x * y allocating the result, n = 10^3
  sum              the sum of x as a host float, n = 10^3 and 10^7; every call waits for it
  first operator   a new process with the kernel already in kiln's disk cache (CuPy's and
                   PyCUDA's in theirs): from just before `x * y` to its finished result, ms

The floor column is what the hardware and driver allow, through bench/floor/floor.c (the
cheapest Python call into the driver): for z = x*y at 10^3, a one-block kernel launched
with cuLaunchKernel; at 10^7, cuMemcpyDtoDAsync moving the same 120 MB (the GPU's own copy);
for a sum of 10^3, a one-block sum kernel launched that also writes its float, then a flag,
into page-locked mapped memory, and the host spinning on the flag (no copy queued).

Every way is checked against NumPy before it is timed. PyCUDA is built from vendor/ by
bench/peers.py (the GPU machine reaches no registry) and works in the primary context.

Writes bench/results/<date>-<gpu>-arrays.json and the section of docs/performance.md between
its `arrays` markers (a --quick run writes under build/bench/ and leaves docs/ alone).
"""
import argparse
import atexit
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import children
import kiln
import kiln.driver
import kiln.gpuarray as gpuarray
from common import (ROOT, PyCuda, Ways, build_floor, child_environment, cpu_model,
                    driver_version, gpu_slug, package_version, save_results, source_commit,
                    stamp, summarize, update_performance_page)
from kiln.elementwise import ElementwiseKernel

FULL = {"calls": 2000, "big_calls": 100, "repeats": 7, "processes": 7}
QUICK = {"calls": 200, "big_calls": 10, "repeats": 3, "processes": 2}
SMALL, BIG = 10**3, 10**7

SYSTEMS = {"kiln": "kiln", "torch": "PyTorch", "cupy": "CuPy", "pycuda": "PyCUDA",
           "floor": "floor"}
FLOOR_SOURCE = r"""
extern "C" __global__ void mul(float *z, const float *x, const float *y, int n) {
  for (int i = threadIdx.x; i < n; i += blockDim.x) z[i] = x[i] * y[i];
}
extern "C" __global__ void sum(float *out, const float *x, float *mapped, int n) {
  __shared__ float warps[32];
  float v = 0;
  for (int i = threadIdx.x; i < n; i += blockDim.x) v += x[i];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
  if (threadIdx.x % 32 == 0) warps[threadIdx.x / 32] = v;
  __syncthreads();
  if (threadIdx.x < 32) {
    v = threadIdx.x < blockDim.x / 32 ? warps[threadIdx.x] : 0;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_down_sync(0xffffffffu, v, o);
    if (threadIdx.x == 0) {
      *out = v;
      if (mapped) {  /* into page-locked host memory too, then a flag */
        *mapped = v;
        __threadfence_system();
        *(volatile unsigned *)(mapped + 4) = 1u;
      }
    }
  }
}
"""


class Floor:
    """bench/floor/floor.c's kiln_floor with FLOOR_SOURCE's kernels loaded, or the reason
    it is not there."""

    def __init__(self):
        self.reason = None
        try:
            sys.path.insert(0, str(build_floor().parent))
            import kiln_floor
            cubin = kiln.SourceModule(FLOOR_SOURCE).cubin
            self.api = kiln_floor
            self.kernels = {name: kiln_floor.load(cubin, name) for name in ("mul", "sum")}
        except Exception as e:  # the floor missing is a finding, not the end of the run
            self.reason = f"{type(e).__name__}: {e}"
FIGURES = [("elementwise_us", str(SMALL), "z = x*y into z, n = 10^3, µs"),
           ("elementwise_us", str(BIG), "z = x*y into z, n = 10^7, µs"),
           ("multiply_us", str(SMALL), "x * y allocating, n = 10^3, µs"),
           ("sum_us", str(SMALL), "sum to a host float, n = 10^3, µs"),
           ("sum_us", str(BIG), "sum to a host float, n = 10^7, µs"),
           ("first_operator_ms", "", "first x * y in a new process, disk cache warm, ms")]


def inputs(n):
    rng = np.random.default_rng(n)
    return rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)


def expect(got, want, what, rtol=0):
    if rtol:
        ok = np.allclose(np.asarray(got, np.float64), want, rtol=rtol)
    else:
        ok = np.array_equal(np.asarray(got), want)
    if not ok:
        raise AssertionError(f"{what} computed a wrong result")


# ---- the ways --------------------------------------------------------------------------------

def elementwise_ways(n, pycuda, floor, problems):
    x, y = inputs(n)
    want = x * y
    ways = Ways(problems)

    def floor_way():
        if floor.reason:
            raise RuntimeError(floor.reason)
        api = floor.api
        if n > 10**4:  # the GPU's own copy moving the same bytes: 2 arrays read, 1 written
            src = kiln.to_device(np.concatenate([x, y[: n // 2]]))
            dst = kiln.empty(src.size, np.float32)
            api.copy(int(dst.ptr), int(src.ptr), dst.nbytes)
            expect(dst.get(), src.get(), "floor cuMemcpyDtoDAsync")
            ways.buffers += [src, dst]
            copy, sync, args = api.copy, api.synchronize, (int(dst.ptr), int(src.ptr), dst.nbytes)

            def loop(count):
                for _ in range(count):
                    copy(*args)
                sync()
            return loop
        a, b, c = kiln.to_device(x), kiln.to_device(y), kiln.empty(n, np.float32)
        ways.buffers += [a, b, c]
        api.select(floor.kernels["mul"])
        args = (int(c.ptr), int(a.ptr), int(b.ptr), n)
        api.launch(*args)
        expect(c.get(), want, "floor mul")
        launch, sync, select = api.launch, api.synchronize, api.select
        kernel = floor.kernels["mul"]

        def loop(count):
            select(kernel)
            for _ in range(count):
                launch(*args)
            sync()
        return loop

    def kiln_way():
        k = ElementwiseKernel("float *x, float *y, float *z", "z[i] = x[i] * y[i]", "mul")
        a, b, c = kiln.to_device(x), kiln.to_device(y), kiln.empty(n, np.float32)
        k(a, b, c)
        expect(c.get(), want, "kiln ElementwiseKernel")

        def loop(count):
            for _ in range(count):
                k(a, b, c)
            kiln.synchronize()
        return loop

    def torch_way():
        import torch
        a, b = torch.from_numpy(x).cuda(), torch.from_numpy(y).cuda()
        c = torch.empty_like(a)
        torch.mul(a, b, out=c)
        expect(c.cpu().numpy(), want, "torch mul(out=)")
        mul, sync = torch.mul, torch.cuda.synchronize

        def loop(count):
            for _ in range(count):
                mul(a, b, out=c)
            sync()
        return loop

    def cupy_way():
        import cupy as cp
        k = cp.ElementwiseKernel("float32 x, float32 y", "float32 z", "z = x * y", "mul")
        a, b, c = cp.asarray(x), cp.asarray(y), cp.empty(n, cp.float32)
        k(a, b, c)
        expect(c.get(), want, "CuPy ElementwiseKernel")
        sync = cp.cuda.runtime.deviceSynchronize

        def loop(count):
            for _ in range(count):
                k(a, b, c)
            sync()
        return loop

    def pycuda_way():
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        from pycuda import gpuarray as pg
        from pycuda.elementwise import ElementwiseKernel as PE
        k = PE("float *x, float *y, float *z", "z[i] = x[i] * y[i]", "mul")
        a, b, c = pg.to_gpu(x), pg.to_gpu(y), pg.empty(n, np.float32)
        k(a, b, c)
        expect(c.get(), want, "PyCUDA ElementwiseKernel")
        sync = pycuda.drv.Context.synchronize

        def loop(count):
            for _ in range(count):
                k(a, b, c)
            sync()
        return loop

    for name, setup in (("kiln", kiln_way), ("torch", torch_way), ("cupy", cupy_way),
                        ("pycuda", pycuda_way), ("floor", floor_way)):
        ways.add(name, setup)
    return ways


def multiply_ways(n, pycuda, problems):
    x, y = inputs(n)
    want = x * y
    ways = Ways(problems)

    def make(to_device, get, sync, what):
        def setup():
            a, b = to_device(x), to_device(y)
            expect(get(a * b), want, what)

            def loop(count):
                for _ in range(count):
                    a * b
                sync()
            return loop
        return setup

    def torch_way():
        import torch
        return make(lambda v: torch.from_numpy(v).cuda(), lambda t: t.cpu().numpy(),
                    torch.cuda.synchronize, "torch x * y")()

    def cupy_way():
        import cupy as cp
        return make(cp.asarray, cp.asnumpy, cp.cuda.runtime.deviceSynchronize, "CuPy x * y")()

    def pycuda_way():
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        from pycuda import gpuarray as pg
        return make(pg.to_gpu, lambda a: a.get(), pycuda.drv.Context.synchronize,
                    "PyCUDA x * y")()

    ways.add("kiln", make(gpuarray.to_gpu, lambda a: a.get(), kiln.synchronize, "kiln x * y"))
    ways.add("torch", torch_way)
    ways.add("cupy", cupy_way)
    ways.add("pycuda", pycuda_way)
    return ways


def sum_ways(n, pycuda, floor, problems):
    x, _ = inputs(n)
    want = float(x.astype(np.float64).sum())
    ways = Ways(problems)

    def floor_way():  # one block of 256 threads: the floor only for a small sum
        if floor.reason:
            raise RuntimeError(floor.reason)
        api, kernel = floor.api, floor.kernels["sum"]
        a, out = kiln.to_device(x), kiln.empty((), np.float32)
        # The value also written into page-locked mapped memory with a flag after it, which
        # the host spins on: no copy queued behind the kernel (kiln's reductions do the same).
        slot = kiln.driver.pagelocked_zeros(8, np.uint32,
                                            mem_flags=kiln.driver.host_alloc_flags.DEVICEMAP)
        ways.buffers += [a, out, slot]
        launch, wait, select = api.launch, api.wait_float, api.select
        args, at = (int(out.ptr), int(a.ptr), slot.ctypes.data, n), slot.ctypes.data

        def once():
            launch(*args)
            return wait(at)

        select(kernel)
        expect(once(), want, "floor sum", rtol=1e-5)

        def loop(count):
            select(kernel)
            for _ in range(count):
                once()
        return loop

    def make(once, what):
        def setup():
            expect(once(), want, what, rtol=1e-5)

            def loop(count):
                for _ in range(count):
                    once()
            return loop
        return setup

    def kiln_way():
        a = gpuarray.to_gpu(x)
        return make(lambda: float(gpuarray.sum(a).get()), "kiln gpuarray.sum")()

    def torch_way():
        import torch
        a = torch.from_numpy(x).cuda()
        return make(lambda: torch.sum(a).item(), "torch sum().item()")()

    def cupy_way():
        import cupy as cp
        a = cp.asarray(x)
        return make(lambda: float(a.sum()), "CuPy sum()")()

    def pycuda_way():
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        from pycuda import gpuarray as pg
        a = pg.to_gpu(x)
        return make(lambda: float(pg.sum(a).get()), "PyCUDA gpuarray.sum")()

    ways_of = (("kiln", kiln_way), ("torch", torch_way), ("cupy", cupy_way),
               ("pycuda", pycuda_way)) + ((("floor", floor_way),) if n <= 10**4 else ())
    for name, setup in ways_of:
        ways.add(name, setup)
    return ways


def first_operator(sizes, env, problems):
    """kiln's first x * y in fresh processes, its kernel already on disk: ms, per process."""
    runs = []
    cache = Path(tempfile.mkdtemp(prefix="kiln-arrays-cache-"))
    atexit.register(shutil.rmtree, cache, True)
    child_env = {**env, "KILN_CACHE_DIR": str(cache)}
    for i in range(sizes["processes"] + 1):
        done = subprocess.run(children.command("arrays", "first_operator"), env=child_env,
                              capture_output=True, text=True)
        if done.returncode != 0:
            problems["kiln:first_operator_ms"] = done.stderr.strip()[-400:]
            return []
        if i:  # the first process fills the cache
            runs.append(json.loads(done.stdout)["ms"])
    return runs


# ---- report ----------------------------------------------------------------------------------

def markdown(result):
    head = "| figure | " + " | ".join(SYSTEMS.values()) + " |"
    lines = [head, "| --- |" + " --- |" * len(SYSTEMS)]
    for figure, key, label in FIGURES:
        row = result["figures"].get(figure, {})
        row = row.get(key, {}) if key else row
        kiln_median = row.get("kiln", {}).get("median")
        cells = []
        for s in SYSTEMS:
            m = row.get(s, {}).get("median")
            if m is None:
                cells.append("—")
            elif s == "kiln" or not kiln_median:
                cells.append(f"{m:.3g}")
            elif s == "floor":
                cells.append(f"{m:.3g} (kiln {kiln_median / m:.2f}×)")
            else:
                cells.append(f"{m:.3g} ({m / kiln_median:.2f}×)")
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + ("\n\n(×: the peer's figure over kiln's in the same row; in the "
                               "floor column, kiln's over the floor's.)")


PAGE_BEGIN, PAGE_END = "<!-- arrays:begin -->", "<!-- arrays:end -->"


def performance_block(result, table):
    """The section of docs/performance.md between the arrays markers, markers included."""
    env = result["environment"]
    return (f"{PAGE_BEGIN}\n_Written by `bench/arrays.py` on {result['gpu']}, "
            f"{result['date']}, kiln {env['kiln_commit']}, PyTorch {env['torch']}, CuPy "
            f"{env['cupy']}, PyCUDA {env['pycuda'] or 'not built'}; medians; results in "
            f"`bench/results/{result['date']}-{result['slug']}-arrays.json`._\n\n{table}\n"
            f"{PAGE_END}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; build/bench/ only")
    parser.add_argument("--out", type=Path, help="also copy the results here")
    args = parser.parse_args()
    if kiln.Device.count() == 0:
        sys.exit("arrays.py: needs a CUDA device")
    started = time.perf_counter()
    sizes = QUICK if args.quick else FULL
    os.environ["PATH"] = f"{os.environ.get('CUDA_HOME', '/usr/local/cuda')}/bin:" \
                         f"{os.environ.get('PATH', '')}"  # PyCUDA runs nvcc
    scratch = Path(tempfile.mkdtemp(prefix="kiln-arrays-"))
    atexit.register(shutil.rmtree, scratch, True)
    env = child_environment()
    problems = {}
    pycuda = PyCuda(scratch)
    floor = Floor()
    figures = {"elementwise_us": {}, "multiply_us": {}, "sum_us": {}}
    for n in (SMALL, BIG):
        calls = sizes["calls"] if n == SMALL else sizes["big_calls"]
        figures["elementwise_us"][str(n)] = summarize(
            elementwise_ways(n, pycuda, floor, problems).measure(calls, sizes["repeats"]))
        figures["sum_us"][str(n)] = summarize(
            sum_ways(n, pycuda, floor, problems).measure(calls // 4, sizes["repeats"]))
    figures["multiply_us"][str(SMALL)] = summarize(
        multiply_ways(SMALL, pycuda, problems).measure(sizes["calls"], sizes["repeats"]))
    figures["first_operator_ms"] = summarize({"kiln": first_operator(sizes, env, problems)})

    gpu = kiln.Device(0).name()
    result = {
        **stamp(), "gpu": gpu, "slug": gpu_slug(gpu), "quick": args.quick,
        "environment": {"python": sys.version.split()[0], "numpy": np.__version__,
                        "driver": driver_version(), "kiln_commit": source_commit(),
                        "torch": package_version("torch", "torch"),
                        "cupy": package_version("cupy", "cupy"),
                        "pycuda": None if pycuda.reason else pycuda.version,
                        "cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0))},
        "parameters": sizes, "systems": SYSTEMS, "figures": figures, "problems": problems,
    }
    result["seconds"] = round(time.perf_counter() - started, 1)
    table = markdown(result)
    result["markdown"] = table
    save_results(result, "-arrays", smoke=args.quick, out=args.out)
    if not args.quick:
        update_performance_page(PAGE_BEGIN, PAGE_END, performance_block(result, table),
                                "## Arrays that compute\n\n")
        if args.out:
            shutil.copy(ROOT / "docs" / "performance.md", args.out / "performance.md")
    print(f"\n{gpu}, {result['date']}: medians, µs (ms for the first operator)\n{table}")
    for k, v in problems.items():
        print(f"problem: {k}: {v}")
    print(f"arrays.py: {result['seconds']} s")


if __name__ == "__main__":
    main()
