#!/usr/bin/env python3
"""Launch overhead and the seed round trip: kiln side by side with C, the floor, CuPy, cuda.core.

Run from the repository root on a machine with a GPU, once the extension is built (make ext):

    PYTHONPATH=pymod python3 bench/launch.py [--quick] [--out DIR]

It builds bench/c/baseline.c and bench/floor/floor.c into build/bench/, compiles the seed kernel
multiply_them with kiln, and measures in one run:

  launch overhead   multiply_them on 256 floats, grid 1, block 256: a loop of async launches,
                    then the caller's own synchronize, divided by the number of launches
  seed round trip   400 floats a and b in, the launch, 400 floats out, per round trip

by every way there is to do it: raw C (bench/c/baseline.c, run as a subprocess), the floor (the
cheapest Python call that launches, bench/floor/floor.c), kiln, CuPy and cuda.core. Every way
is checked to compute a*b exactly before it is timed. Repeats of the ways measured in this
process are interleaved, so that a drift in clocks or load hits all of them alike; each figure
is the median over repeats.

The JSON, with every raw repeat, goes to bench/results/<date>-<gpu>-launch.json; a --quick run writes
to build/bench/results/ instead, so that smoke figures never land among the real ones. A table
with the targets comes last.
"""

import argparse
import platform
import sys
from pathlib import Path

try:
    import numpy as np
    import kiln
except ImportError as e:
    sys.exit(f"launch.py: {e}; build the extension (make ext) and run with PYTHONPATH=pymod "
             "from the repository root")

from common import (BUILD, ROUND_TRIP_N, Ways, build_c_parts, cpu_model, driver_version,
                    package_version, round_trip_ways, run_baseline, save_results,
                    source_commit, stamp, summarize)
from kernels import SEED_KERNEL as KERNEL
from kernels import SEED_SOURCE as SOURCE
from kernels import expect_products, import_cuda_core

LAUNCH_N = 256  # elements and threads per launch; the floor and baseline.c hard-code it too

FULL = {"launches": 20000, "round_trips": 2000, "repeats": 7}
QUICK = {"launches": 2000, "round_trips": 200, "repeats": 3}

LABELS = {
    "c": "C cuLaunchKernel",
    "floor": "floor (METH_FASTCALL, 4 ints)",
    "kiln_int_pointers": "kiln f(), int pointers",
    "kiln_mem_alloc": "kiln f(), mem_alloc objects",
    "cupy_rawkernel": "CuPy RawKernel call",
    "cuda_core_launch": "cuda.core launch()",
    "c_kept": "C, buffers kept",
    "c_alloc": "C, cuMemAlloc/cuMemFree per call",
    "kiln_in_out": "kiln f(Out, In, In, n)",
    "cupy_asarray_get": "CuPy asarray x2, launch, .get()",
}
# Without these there is nothing to compare kiln with; the run fails when one is missing.
REQUIRED = {"c", "floor", "kiln_int_pointers", "kiln_mem_alloc", "c_kept", "c_alloc",
            "kiln_in_out"}

# (key, label, numerator, denominator, target): one figure over another, kiln's over a peer's
# but for the floor's over C's; lower is better. A target is the most the ratio may be.
RATIOS = [
    ("kiln_launch_vs_floor", "kiln launch / floor", "kiln_int_pointers", "floor", 1.10),
    ("kiln_mem_alloc_launch_vs_floor", "kiln launch, mem_alloc objects / floor",
     "kiln_mem_alloc", "floor", None),
    ("kiln_launch_vs_c", "kiln launch / C", "kiln_int_pointers", "c", None),
    ("floor_vs_c", "floor / C", "floor", "c", None),
    ("kiln_launch_vs_cupy", "kiln launch / CuPy RawKernel", "kiln_int_pointers",
     "cupy_rawkernel", None),
    ("kiln_launch_vs_cuda_core", "kiln launch / cuda.core launch", "kiln_int_pointers",
     "cuda_core_launch", None),
    ("kiln_round_trip_vs_c_kept", "kiln round trip / C, buffers kept", "kiln_in_out", "c_kept",
     1.00),
    ("kiln_round_trip_vs_c_alloc", "kiln round trip / C, cuMemAlloc per call", "kiln_in_out",
     "c_alloc", None),
    ("kiln_round_trip_vs_cupy", "kiln round trip / CuPy", "kiln_in_out", "cupy_asarray_get",
     None),
]


# ---- Measuring --------------------------------------------------------------------------------

def launch_ways(f, cubin, problems):
    """Every way to launch multiply_them on LAUNCH_N floats, checked."""
    rng = np.random.default_rng(1)
    a = rng.random(LAUNCH_N, dtype=np.float32)
    b = rng.random(LAUNCH_N, dtype=np.float32)
    zeros = np.zeros(LAUNCH_N, np.float32)
    # One set of buffers for every way but CuPy's, which takes its own arrays.
    dest, da, db = (kiln.mem_alloc(LAUNCH_N * 4) for _ in range(3))
    kiln.memcpy_htod(da, a)
    kiln.memcpy_htod(db, b)
    c_ptr, a_ptr, b_ptr = int(dest), int(da), int(db)
    n = LAUNCH_N
    # Bound once, so that no loop builds a tuple per call.
    block, grid = (LAUNCH_N, 1, 1), (1, 1)

    def checked(loop, what):
        kiln.memcpy_htod(dest, zeros)
        loop(1)
        got = np.empty(LAUNCH_N, np.float32)
        kiln.memcpy_dtoh(got, dest)
        expect_products(got, a, b, what)
        return loop

    def floor():
        import kiln_floor
        kiln_floor.load(cubin, KERNEL)
        launch, sync = kiln_floor.launch, kiln_floor.synchronize

        def loop(count):
            for _ in range(count):
                launch(c_ptr, a_ptr, b_ptr, n)
            sync()
        return checked(loop, "the floor")

    def kiln_int_pointers():
        def loop(count):
            for _ in range(count):
                f(c_ptr, a_ptr, b_ptr, n, block=block, grid=grid)
            kiln.synchronize()
        return checked(loop, "kiln with int pointers")

    def kiln_mem_alloc():
        def loop(count):
            for _ in range(count):
                f(dest, da, db, n, block=block, grid=grid)
            kiln.synchronize()
        return checked(loop, "kiln with mem_alloc objects")

    def cupy_rawkernel():
        import cupy as cp
        kernel = cp.RawKernel(SOURCE, KERNEL)
        gdest, ga, gb = cp.zeros(LAUNCH_N, cp.float32), cp.asarray(a), cp.asarray(b)
        n32 = np.int32(LAUNCH_N)  # CuPy takes scalars as typed NumPy scalars
        cp_grid, cp_block = (1,), (LAUNCH_N,)
        sync = cp.cuda.runtime.deviceSynchronize

        def loop(count):
            for _ in range(count):
                kernel(cp_grid, cp_block, (gdest, ga, gb, n32))
            sync()
        loop(1)
        expect_products(gdest.get(), a, b, "CuPy RawKernel")
        return loop

    def cuda_core_launch():
        core = import_cuda_core()
        device = core.Device(0)
        device.set_current()
        kernel = core.ObjectCode.from_cubin(cubin).get_kernel(KERNEL)
        config = core.LaunchConfig(grid=1, block=LAUNCH_N)
        stream = device.default_stream
        launch = core.launch
        n32 = np.int32(LAUNCH_N)  # cuda.core takes a Python int as a pointer

        def loop(count):
            for _ in range(count):
                launch(stream, config, kernel, c_ptr, a_ptr, b_ptr, n32)
            device.sync()
        return checked(loop, "cuda.core launch")

    ways = Ways(problems)
    ways.buffers += [dest, da, db]
    ways.add("floor", floor)
    ways.add("kiln_int_pointers", kiln_int_pointers)
    ways.add("kiln_mem_alloc", kiln_mem_alloc)
    ways.add("cupy_rawkernel", cupy_rawkernel)
    ways.add("cuda_core_launch", cuda_core_launch)
    return ways


# ---- Reporting --------------------------------------------------------------------------------

def ratios(medians):
    out = {}
    for key, label, num, den, target in RATIOS:
        value = medians[num] / medians[den] if num in medians and den in medians else None
        out[key] = {"label": label, "value": value, "numerator": num, "denominator": den,
                    "target": target,
                    "pass": None if value is None or target is None else value <= target}
    return out


def print_table(result):
    sizes = result["parameters"]
    sections = [
        (f"launch overhead, µs per launch (median of {sizes['repeats']} x "
         f"{sizes['launches']})", result["launch_us"], ["c", "floor", "kiln_int_pointers",
                                                      "kiln_mem_alloc", "cupy_rawkernel",
                                                      "cuda_core_launch"]),
        (f"seed round trip, µs per round trip (median of {sizes['repeats']} x "
         f"{sizes['round_trips']})", result["round_trip_us"], ["c_kept", "c_alloc",
                                                               "kiln_in_out",
                                                               "cupy_asarray_get"]),
    ]
    print(f"\n{result['gpu']}, driver {result['environment']['driver'] or 'unknown'}, "
          f"Python {result['environment']['python']}, {result['date']}"
          + (" (quick run: smoke figures only)" if result["quick"] else ""))
    for title, figures, names in sections:
        print(title)
        for name in names:
            if name in figures:
                shown = f"{figures[name]['median']:12.2f}"
            else:
                shown = "not measured".rjust(12)
            print(f"  {LABELS[name]:<36}{shown}")
    print("ratios (lower is better)")
    for r in result["ratios"].values():
        if r["value"] is None:
            print(f"  {r['label']:<42}      n/a")
            continue
        verdict = ""
        if r["target"] is not None:
            verdict = f"  target <= {r['target']:.2f}  {'PASS' if r['pass'] else 'MISS'}"
        print(f"  {r['label']:<42}{r['value']:9.3f}{verdict}")
    for name, reason in result["problems"].items():
        print(f"  not measured: {name}: {reason.splitlines()[0][:160]}")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="few launches and repeats: a smoke run, written to build/bench/")
    parser.add_argument("--out", type=Path, help="also write the JSON into this folder")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL

    baseline = build_c_parts()
    sys.path.insert(0, str(BUILD))  # kiln_floor

    module = kiln.SourceModule(SOURCE)
    f = module.get_function(KERNEL)
    if not module.cubin:
        sys.exit("launch.py: kiln produced no CUBIN; the C baseline and the floor need one")
    cubin_path = BUILD / f"{KERNEL}.cubin"
    cubin_path.write_bytes(module.cubin)

    problems = {}
    c_launch, c_round_trip = run_baseline(baseline, cubin_path, sizes, problems)
    launches = launch_ways(f, module.cubin, problems)
    launch_us = {**c_launch, **launches.measure(sizes["launches"], sizes["repeats"])}
    round_trip_us = {**c_round_trip,
                     **round_trip_ways(f, problems).measure(sizes["round_trips"],
                                                            sizes["repeats"])}

    gpu = kiln.Device(0).name()
    launch_us, round_trip_us = summarize(launch_us), summarize(round_trip_us)
    medians = {name: s["median"] for name, s in {**launch_us, **round_trip_us}.items()}
    result = {
        **stamp(),
        "gpu": gpu,
        "quick": args.quick,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "driver": driver_version(),
            "cupy": package_version("cupy", "cupy"),
            "cuda_core": package_version("cuda.core", "cuda-core"),
            "kiln_commit": source_commit(),
            "kiln_arch": module.arch,
            "cpu": cpu_model(),
            "platform": platform.platform(),
        },
        "parameters": {"launch_elements": LAUNCH_N, "launches": sizes["launches"],
                       "round_trip_elements": ROUND_TRIP_N,
                       "round_trips": sizes["round_trips"], "repeats": sizes["repeats"]},
        "launch_us": launch_us,
        "round_trip_us": round_trip_us,
        "ratios": ratios(medians),
        "problems": problems,
    }

    save_results(result, "-launch", smoke=args.quick, out=args.out)

    print_table(result)
    missing = sorted(REQUIRED & problems.keys())
    if missing:
        sys.exit(f"launch.py: not measured: {', '.join(missing)}")


if __name__ == "__main__":
    main()
