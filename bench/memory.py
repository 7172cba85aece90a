#!/usr/bin/env python3
"""Device memory: what a DeviceArray costs to make and free, and how fast it moves data from
page-locked memory, beside the driver called from C in the same run.

    PYTHONPATH=pymod python3 bench/memory.py [--quick] [--out DIR]

  alloc/free 4 KiB   kiln.empty(4096, uint8) made and dropped (cuMemAllocAsync from the
                     device's pool and cuMemFreeAsync on the default stream, and the Python
                     object), per pair; against cuMemAlloc + cuMemFree, and against
                     cuMemAllocAsync + cuMemFreeAsync, both from C (bench/c/memory.c)
  512 MiB pinned     kiln.to_device(h) then .get(out=back), h and back from
                     kiln.pagelocked_empty; against cuMemcpyHtoD + cuMemcpyDtoH between
                     cuMemHostAlloc memory and a buffer allocated once, from C

Each result is checked (every byte comes back) before it is timed; the C program and the kiln
loops take turns, and each figure is the median of the repeats. The JSON goes to
bench/results/<date>-<gpu>-memory.json (a --quick run to build/bench/results/).
"""

import argparse
import json
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import kiln
from common import (build_driver_program, cpu_model, driver_version, save_results,
                    source_commit, stamp, summarize)

BIG = 512 << 20


def kiln_alloc_free_us(count):
    empty, u8 = kiln.empty, np.uint8
    kiln.synchronize()
    t = time.perf_counter()
    for _ in range(count):
        empty(4096, u8)
    kiln.synchronize()
    return (time.perf_counter() - t) / count * 1e6


def kiln_copies_us(h, back):
    t = time.perf_counter()
    d = kiln.to_device(h)
    d.get(out=back)
    elapsed = time.perf_counter() - t
    del d
    return elapsed * 1e6


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats, a smoke test")
    parser.add_argument("--out", type=Path, help="also copy the results file into this folder")
    args = parser.parse_args()
    if kiln.Device.count() == 0:
        sys.exit("memory.py: needs a CUDA device")
    allocs, repeats = (20000, 3) if args.quick else (200000, 7)
    program = build_driver_program("memory")

    h = kiln.pagelocked_empty(BIG, np.uint8)
    h.reshape(-1, 256)[:] = np.arange(256, dtype=np.uint8) * np.uint8(131) + np.uint8(7)
    back = kiln.pagelocked_zeros(BIG, np.uint8)
    kiln_copies_us(h, back)
    if not np.array_equal(h, back):
        sys.exit("memory.py: kiln's pinned round trip did not bring the bytes back")
    kiln_alloc_free_us(allocs // 10)  # warm the pool

    c_runs, kiln_alloc, kiln_copy = [], [], []
    for _ in range(repeats):
        done = subprocess.run([str(program), str(allocs), str(BIG), "1"], capture_output=True,
                              text=True)
        if done.returncode:
            sys.exit(f"memory.py: {program.name} failed: {done.stderr.strip()}")
        c_runs.append(json.loads(done.stdout))
        kiln_alloc.append(kiln_alloc_free_us(allocs))
        kiln_copy.append(kiln_copies_us(h, back))

    alloc = summarize({"kiln_empty": kiln_alloc,
                       "c_cuMemAlloc_cuMemFree": [r["alloc_free_us"][0] for r in c_runs],
                       "c_cuMemAllocAsync_cuMemFreeAsync": [r["alloc_free_async_us"][0]
                                                            for r in c_runs]})
    copy = summarize({"kiln_to_device_get": kiln_copy,
                      "c_htod_dtoh": [r["htod_dtoh_us"][0] for r in c_runs]})
    gbs = {k: 2 * BIG / (v["median"] * 1e-6) / 1e9 for k, v in copy.items()}

    result = {
        **stamp(),
        "gpu": kiln.Device(0).name(), "quick": args.quick,
        "environment": {"python": platform.python_version(), "numpy": np.__version__,
                        "driver": driver_version(), "kiln_commit": source_commit(),
                        "cpu": cpu_model(), "platform": platform.platform()},
        "parameters": {"allocs": allocs, "big_bytes": BIG, "repeats": repeats},
        "alloc_free_us": alloc, "copy_512mib_us": copy, "copy_512mib_gbs": gbs,
        "figures": figures(alloc, gbs),
    }
    save_results(result, "-memory", smoke=args.quick, out=args.out)
    print_table(result)


def figures(alloc, gbs):
    """The figures with targets, from the alloc/free series and the pinned copies' GB/s."""
    figures = {
        "alloc_free_us": {"label": "DeviceArray 4 KiB make + free, µs",
                          "value": alloc["kiln_empty"]["median"], "target": 1.0},
        "alloc_vs_cuMemAlloc": {"label": "... / C cuMemAlloc + cuMemFree",
                                "value": alloc["kiln_empty"]["median"]
                                / alloc["c_cuMemAlloc_cuMemFree"]["median"], "target": None},
        "alloc_vs_async": {"label": "... / C cuMemAllocAsync + cuMemFreeAsync",
                           "value": alloc["kiln_empty"]["median"]
                           / alloc["c_cuMemAllocAsync_cuMemFreeAsync"]["median"],
                           "target": None},
        "pinned_vs_c": {"label": "512 MiB to_device + get, bandwidth / C pinned copies",
                        "value": gbs["kiln_to_device_get"] / gbs["c_htod_dtoh"],
                        "target_min": 0.95},
    }
    for f in figures.values():
        if "target" in f and f["target"] is not None:
            f["pass"] = f["value"] <= f["target"]
        elif "target_min" in f:
            f["pass"] = f["value"] >= f["target_min"]
    return figures


def print_table(result):
    sizes = result["parameters"]
    print(f"\n{result['gpu']}, {result['date']}")
    print(f"alloc + free of 4 KiB, µs per pair (median of {sizes['repeats']} x "
          f"{sizes['allocs']})")
    for name, s in result["alloc_free_us"].items():
        print(f"  {name:<40} {s['median']:8.3f}")
    print("512 MiB in and out from page-locked memory, GB/s (both directions together)")
    for name, v in result["copy_512mib_gbs"].items():
        print(f"  {name:<40} {v:8.1f}")
    print("figures")
    for f in result["figures"].values():
        target = (f" target <= {f['target']}" if f.get("target") is not None else
                  f" target >= {f['target_min']}" if "target_min" in f else "")
        verdict = "" if "pass" not in f else ("  PASS" if f["pass"] else "  MISS")
        print(f"  {f['label']:<55} {f['value']:7.3f}{target}{verdict}")


if __name__ == "__main__":
    main()
