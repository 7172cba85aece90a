#!/usr/bin/env python3
"""Large In/Out with pageable NumPy arrays: kiln's stager beside the driver's pageable and
page-locked copies, in one run.

    PYTHONPATH=pymod python3 bench/transfer.py [--quick] [--out DIR]
    PYTHONPATH=pymod python3 bench/transfer.py --sweep [--out DIR]

For each size it measures, in GB/s:

  kiln In         f(kiln.In(h)) on an ordinary numpy array h: device memory from the pool, the
                  staged copy, a launch of an empty kernel, the synchronize
  kiln Out        f(kiln.Out(h)): the same the other way
  kiln to_device  kiln.to_device(h), and .get(out=h) into an ordinary numpy array
  kiln set        d.set(h): the copy to the device alone, into an array made before
  kiln launch     the launch of In's empty kernel on a DeviceArray and a synchronize, with no
                  copy, given as the size over its time: the most In and Out could reach at
                  that size if their copies took no time at all
  C pageable      cuMemcpyHtoD / cuMemcpyDtoH from and to malloc'd memory (bench/c/transfer.c)
  C pinned        the same with cuMemHostAlloc memory: the ceiling

A repeat of a small size times a loop of calls (as many as make about 8 MiB, at most 256),
kiln's and C's alike: one copy of a few KiB is shorter than the clock's jitter. Each path's
repeats run back to back, kiln's as C's. kiln's In and
Out include the launch of a one-thread kernel that the driver's copies do not.

Host arrays are written before they are timed, so that no figure includes the kernel handing
out fresh pages. Every kiln path is first checked to move every byte (a kernel copies between
the In/Out array and a DeviceArray, compared on the host). The C program runs once before and
once after the kiln loops; each figure is the median of all repeats. The JSON goes to
bench/results/<date>-<gpu>-transfer.json and the plot to docs/transfer-bandwidth.png (a --quick
run writes both under build/bench/).

--sweep measures what the defaults come from, each setting in a new process (they are read
once): In and Out of 512 MiB for chunk sizes and thread counts (bench/results/<date>-<gpu>-
staging-sweep.json), and with --sweep threshold, staged against direct copies of 256 KiB to
16 MiB (-staging-threshold.json).
"""

import argparse
import datetime
import json
import os
import platform
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import kiln
from common import (BUILD, ROOT, MiB, build_driver_program, cpu_model, driver_version,
                    median, save_results, source_commit, stamp)
from kernels import TRANSFER_SOURCE as SOURCE

SIZES = [4 << 10, 64 << 10, 256 << 10, 1 * MiB, 4 * MiB, 16 * MiB, 64 * MiB, 256 * MiB, 512 * MiB, 2048 * MiB]
QUICK_SIZES = [256 << 10, 4 * MiB, 64 * MiB]
HEADLINE = [64 * MiB, 512 * MiB, 2048 * MiB]

def run_c(program, sizes, repeats):
    done = subprocess.run([str(program), str(repeats)] + [str(n) for n in sizes],
                          capture_output=True, text=True)
    if done.returncode:
        sys.exit(f"transfer.py: {program.name} failed: {done.stderr.strip()}")
    return {int(k): v for k, v in json.loads(done.stdout).items()}


def copies(n):
    """Calls in one timed repeat: bench/c/transfer.c's transfer_copies."""
    return max(1, min(256, (8 * MiB) // n))


def pattern(n, seed):
    """n bytes that repeat only every 1,000,003 (a prime): no chunk, whose offsets are
    multiples of a power of two, can land in another's place unnoticed."""
    rng = np.random.default_rng(seed)
    return np.resize(rng.integers(0, 256, 1_000_003, dtype=np.uint8), n)


class Kiln:
    def __init__(self):
        module = kiln.SourceModule(SOURCE)
        self.touch = module.get_function("touch")
        self.copy = module.get_function("copy_bytes")

    def check(self, n):
        """Every kiln path moves every byte of n, in place."""
        src = pattern(n, 1)
        d = kiln.zeros(n, np.uint8)
        self.copy(d, kiln.In(src), np.uint64(n), block=(256, 1, 1), grid=(1024, 1))
        if not np.array_equal(d.get(), src):
            sys.exit(f"transfer.py: kiln.In of {n} bytes did not arrive intact")
        back = np.ones(n, np.uint8)
        self.copy(kiln.Out(back), d, np.uint64(n), block=(256, 1, 1), grid=(1024, 1))
        if not np.array_equal(back, src):
            sys.exit(f"transfer.py: kiln.Out of {n} bytes did not come back intact")
        back[:] = 0
        kiln.to_device(src).get(out=back)
        if not np.array_equal(back, src):
            sys.exit(f"transfer.py: to_device + get of {n} bytes did not come back intact")

    def measure(self, n, repeats, arrays=True):
        """GB/s of each path for n bytes, one value per repeat; In and Out only without
        arrays. As bench/c/transfer.c does, each path's repeats run back to back, and a repeat
        of a small size times as many calls as it times copies (about 8 MiB)."""
        h = pattern(n, 2)
        d = kiln.to_device(h)
        one = (1, 1, 1)
        loop = range(copies(n))
        touch, In, Out, to_device = self.touch, kiln.In, kiln.Out, kiln.to_device

        def kiln_in():
            for _ in loop:
                touch(In(h), block=one, grid=(1, 1))

        def kiln_out():
            for _ in loop:
                touch(Out(h), block=one, grid=(1, 1))

        def kiln_to_device():
            for _ in loop:
                e = to_device(h)
                del e

        def kiln_get():
            for _ in loop:
                d.get(out=h)

        def kiln_set():
            for _ in loop:
                d.set(h)

        sync = kiln.synchronize

        def kiln_launch():
            for _ in loop:
                touch(d, block=one, grid=(1, 1))
                sync()

        paths = {"kiln_in": kiln_in, "kiln_out": kiln_out}
        if arrays:
            paths.update(kiln_to_device=kiln_to_device, kiln_get=kiln_get, kiln_set=kiln_set,
                         kiln_launch=kiln_launch)
        out = {}
        for name, path in paths.items():
            kiln.synchronize()
            path()  # a warm-up, not kept
            out[name] = []
            for _ in range(repeats):
                t = time.perf_counter()
                path()
                out[name].append(n * len(loop) / (time.perf_counter() - t) / 1e9)
        return out


def plot(sizes, table, path):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("transfer.py: matplotlib is not installed; no plot", file=sys.stderr)
        return None
    lines = [("kiln_in", "kiln In (pageable)", "C0", "-"),
             ("kiln_out", "kiln Out (pageable)", "C1", "-"),
             ("c_pageable_htod", "driver, pageable host→device", "C0", ":"),
             ("c_pageable_dtoh", "driver, pageable device→host", "C1", ":"),
             ("c_pinned_htod", "driver, pinned host→device", "C0", "--"),
             ("c_pinned_dtoh", "driver, pinned device→host", "C1", "--")]
    fig, ax = plt.subplots(figsize=(8, 5))
    mib = [n / MiB for n in sizes]
    for key, label, color, style in lines:
        ax.plot(mib, [table[n][key] for n in sizes], style, color=color, marker="o",
                label=label)
    ax.set_xscale("log", base=2)
    ax.set_xticks(mib)
    ax.set_xticklabels([f"{m:g}" for m in mib])
    ax.legend(fontsize=8, loc="lower right")
    ax.set_xlabel("size, MiB")
    ax.set_ylabel("GB/s (median)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(f"Host↔device bandwidth, {kiln.Device(0).name()}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    print(f"wrote {path}")
    return path


def environment():
    return {"python": platform.python_version(), "numpy": np.__version__,
            "driver": driver_version(), "kiln_commit": source_commit(), "cpu": cpu_model(),
            "cpus": len(os.sched_getaffinity(0)), "platform": platform.platform()}


def figures_run(args):
    sizes = QUICK_SIZES if args.quick else SIZES
    repeats = 3 if args.quick else 7
    program = build_driver_program("transfer")
    c_runs = [run_c(program, sizes, repeats)]
    k = Kiln()
    for n in sizes:
        k.check(n)
    kiln_runs = {n: k.measure(n, repeats) for n in sizes}
    c_runs.append(run_c(program, sizes, repeats))

    table, raw = {}, {}
    for n in sizes:
        raw[n] = dict(kiln_runs[n])
        for key in ("pageable_htod", "pageable_dtoh", "pinned_htod", "pinned_dtoh"):
            raw[n]["c_" + key] = c_runs[0][n][key] + c_runs[1][n][key]
        table[n] = {key: median(v) for key, v in raw[n].items()}

    png = (BUILD if args.quick else ROOT / "docs") / "transfer-bandwidth.png"
    drawn = plot(sizes, table, png)
    if drawn and args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / png.name).write_bytes(png.read_bytes())
    result = {
        **stamp(),
        "gpu": kiln.Device(0).name(), "quick": args.quick, "environment": environment(),
        "staging": kiln.staging_info(),
        "parameters": {"sizes": sizes, "repeats": repeats, "c_runs": 2},
        "gbs_median": {str(n): table[n] for n in sizes},
        "gbs_repeats": {str(n): raw[n] for n in sizes},
        "figures": figures(table),
        "plot": str(png.relative_to(ROOT)) if drawn else None,
    }
    save_results(result, "-transfer", smoke=args.quick, out=args.out)
    print_table(result)


def figures(table):
    """The headline figures with their targets, from {size: {path: median GB/s}}."""
    figures = {}
    for n in HEADLINE:
        if n not in table:
            continue
        t, name = table[n], f"{n // MiB} MiB"
        figures[f"in_{n // MiB}mib"] = {
            "label": f"In {name}, GB/s", "value": t["kiln_in"], "target_min": 25.0}
        figures[f"in_{n // MiB}mib_vs_pageable"] = {
            "label": f"In {name} / driver pageable HtoD",
            "value": t["kiln_in"] / t["c_pageable_htod"], "target_min": 2.6}
        figures[f"in_{n // MiB}mib_vs_pinned"] = {
            "label": f"In {name} / driver pinned HtoD",
            "value": t["kiln_in"] / t["c_pinned_htod"]}
        figures[f"out_{n // MiB}mib"] = {
            "label": f"Out {name}, GB/s", "value": t["kiln_out"], "target_min": 30.0}
        figures[f"out_{n // MiB}mib_vs_pageable"] = {
            "label": f"Out {name} / driver pageable DtoH",
            "value": t["kiln_out"] / t["c_pageable_dtoh"], "target_min": 1.6}
        figures[f"out_{n // MiB}mib_vs_pinned"] = {
            "label": f"Out {name} / driver pinned DtoH",
            "value": t["kiln_out"] / t["c_pinned_dtoh"]}
    for f in figures.values():
        if "target_min" in f:
            f["pass"] = f["value"] >= f["target_min"]
    return figures


def print_table(result):
    print(f"\n{result['gpu']}, {result['date']}; staging {result['staging']}")
    cols = ["kiln_in", "c_pageable_htod", "c_pinned_htod", "kiln_out", "c_pageable_dtoh",
            "c_pinned_dtoh", "kiln_to_device", "kiln_get", "kiln_set", "kiln_launch"]
    print("GB/s, median      " + " ".join(f"{c:>16}" for c in cols))
    for n in result["parameters"]["sizes"]:
        row = result["gbs_median"][str(n)]
        size = f"{n >> 10} KiB" if n < MiB else f"{n // MiB} MiB"
        # kiln_set and kiln_launch are missing from the results written before them.
        print(f"  {size:>12}     " + " ".join(f"{row[c]:16.1f}" if c in row else f"{'-':>16}"
                                             for c in cols))
    print("figures")
    for f in result["figures"].values():
        target = f" target >= {f['target_min']}" if "target_min" in f else ""
        verdict = "" if "pass" not in f else ("  PASS" if f["pass"] else "  MISS")
        print(f"  {f['label']:<45} {f['value']:7.2f}{target}{verdict}")


# ---- The sweep behind the defaults -----------------------------------------------------------

def child(spec):
    """Runs in a fresh process with the staging variables set; prints JSON."""
    n, repeats, sizes = spec["n"], spec["repeats"], spec["sizes"]
    out = {}
    if n:
        k = Kiln()
        k.check(n)
        m = k.measure(n, repeats, arrays=False)
        out["in"] = median(m["kiln_in"])
        out["out"] = median(m["kiln_out"])
    for size in sizes:
        h = pattern(size, 3)
        d = kiln.mem_alloc(size)
        kiln.memcpy_htod(d, h)
        times_in, times_out = [], []
        count = max(3, (64 * MiB) // size)
        for _ in range(repeats):
            t = time.perf_counter()
            for _ in range(count):
                kiln.memcpy_htod(d, h)
            times_in.append(size * count / (time.perf_counter() - t) / 1e9)
            t = time.perf_counter()
            for _ in range(count):
                kiln.memcpy_dtoh(h, d)
            times_out.append(size * count / (time.perf_counter() - t) / 1e9)
        out[str(size)] = {"in": median(times_in), "out": median(times_out)}
    out["staging"] = kiln.staging_info()
    print(json.dumps(out))


def spawn(env, spec):
    done = subprocess.run([sys.executable, __file__, "--child", json.dumps(spec)],
                          capture_output=True, text=True, env={**os.environ, **env})
    if done.returncode:
        sys.exit(f"transfer.py: a sweep process failed ({env}): {done.stderr.strip()}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def sweep_run(args):
    if args.sweep == "threshold":
        return threshold_run(args)
    cpus = len(os.sched_getaffinity(0))
    chunks = [512 << 10, 1 * MiB, 2 * MiB, 4 * MiB, 8 * MiB, 16 * MiB]
    threads = sorted({t for t in (1, 2, 4, 8, 12, 16) if t <= cpus})
    grid = []
    for c in chunks:
        for t in threads:
            r = spawn({"KILN_STAGING_MIN": "0", "KILN_STAGING_CHUNK": str(c),
                       "KILN_STAGING_THREADS": str(t)}, {"n": 512 * MiB, "repeats": 3, "sizes": []})
            grid.append({"chunk": c, "threads": t, "in": r["in"], "out": r["out"]})
            print(f"chunk {c >> 10:>6} KiB  threads {t:>2}  In {r['in']:6.1f}  Out "
                  f"{r['out']:6.1f} GB/s", flush=True)
    best = max(grid, key=lambda g: g["in"] + g["out"])
    print(f"best: chunk {best['chunk']} threads {best['threads']}")
    result = {"date": datetime.date.today().isoformat(), "gpu": kiln.Device(0).name(),
              "environment": environment(), "grid_512mib_gbs": grid, "best": best}
    save_results(result, "-staging-sweep", smoke=False, out=args.out)


def threshold_run(args):
    """Staged against direct copies of small sizes, with the default chunk and threads."""
    small = [256 << 10, 512 << 10, 1 * MiB, 2 * MiB, 3 * MiB, 4 * MiB, 6 * MiB, 8 * MiB,
             16 * MiB]
    runs = {"direct": [], "staged": []}
    for _ in range(3):  # the two take turns, three times over
        for label, value in (("direct", "off"), ("staged", "0")):
            r = spawn({"KILN_STAGING_MIN": value}, {"n": 0, "repeats": 5, "sizes": small})
            runs[label].append(r)
    table = {label: {str(s): {d: median([r[str(s)][d] for r in rs]) for d in ("in", "out")}
                     for s in small} for label, rs in runs.items()}
    for s in small:
        d, t = table["direct"][str(s)], table["staged"][str(s)]
        print(f"{s >> 10:>8} KiB  direct In {d['in']:6.1f} Out {d['out']:6.1f}   staged In "
              f"{t['in']:6.1f} Out {t['out']:6.1f}")
    result = {"date": datetime.date.today().isoformat(), "gpu": kiln.Device(0).name(),
              "environment": environment(), "staging": runs["staged"][0]["staging"],
              "threshold_gbs": table}
    save_results(result, "-staging-threshold", smoke=False, out=args.out)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    parser.add_argument("--sweep", nargs="?", const="grid", choices=["grid", "threshold"],
                        help="measure chunk and threads (grid), or the size from which "
                        "staging pays (threshold)")
    parser.add_argument("--out", type=Path, help="also copy the results into this folder")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return child(json.loads(args.child))
    if kiln.Device.count() == 0:
        sys.exit("transfer.py: needs a CUDA device")
    return sweep_run(args) if args.sweep else figures_run(args)


if __name__ == "__main__":
    main()
