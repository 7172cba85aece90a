#!/usr/bin/env python3
"""The kernel cache: what a cold compile, an in-process hit and a disk hit cost, side by side.

Run from the repository root once the extension and the static library are built
(make ext lib):

    PYTHONPATH=pymod python3 bench/cache.py [--quick] [--out DIR]

kiln.SourceModule(src) looks in an in-process table, then in the cache folder, and compiles with
NVRTC on a miss. Each path has a cost that matters to someone: the miss must cost no more than
NVRTC itself, the table hit must be cheap enough to call SourceModule in a loop, and the disk hit
is the start-up cost of every later process. This script builds bench/c/compile.c into
build/bench/ and measures, in one run, on one realistic source (the seed's multiply_them and a
templated kernel in two instantiations):

  cold compile     kiln_module_from_source on a cold cache (it misses, compiles and stores)
                   over a bare NVRTC compile of the same text with the same arch and include
                   options, in one C process (bench/c/compile.c): each repeat compiles a text no
                   side has seen, the two sides take turns going first, and the figure is the
                   median of the per-repeat ratios (and, to read it by, of the differences). A
                   warm-up round checks that both give the same PTX and CUBIN, and every timed
                   kiln call is checked to have stored.
  in-process hit   kiln.SourceModule(src) again in the same process, per call (timeit), beside
                   hashing the source with hashlib.sha256, the least any keyed lookup costs.
  disk hit         a new process per repeat, its CUDA context already up, times
                   SourceModule + get_function (and, with a GPU, a first launch and a
                   synchronize) on a cache another process filled; it checks the products and
                   that cache_stats() counts one disk hit and no compile. CuPy's RawKernel does
                   the same on its own disk cache, prefilled the same way, and is checked to have
                   written nothing new.
  lookup at scale  the disk hit (without the launch) in folders of 10 to 10,000 entries: the
                   source's own and synthetic ones that bench/c/compile.c stores under made-up
                   keys through the engine's writer, each holding the same code.

Without a GPU (or without CuPy) what needs one is skipped with the reason, and the disk hit is
marked CPU-only: no context, no launch. Repeats of the ways compared are interleaved, so that a
drift in clocks or load hits them alike; each figure is the median over repeats. The cache
folders are made fresh beside kiln's default one ($XDG_CACHE_HOME or ~/.cache), on the file
system a user's cache is on, and removed at the end. A cold compile creates files there (a
temporary file renamed into place, once per shard a folder), and what that costs is the file
system's: on the ext4 disks this was first run on, one creation took 0.03 to 0.5 ms from one
minute to the next, which moves the cold ratio of a 10 ms compile by up to 5%.

The JSON, with every raw repeat, goes to bench/results/<date>-<gpu>-cache.json, beside
launch.py's file; a --quick run, or one without a GPU, writes to build/bench/results/ instead, so
that smoke figures never land among the real ones. A table with the targets comes last.
"""

import argparse
import hashlib
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import timeit
from pathlib import Path

try:
    import numpy as np
    import kiln
except ImportError as e:
    sys.exit(f"cache.py: {e}; build the extension (make ext) and run with PYTHONPATH=pymod "
             "from the repository root")

import children
from children import CACHE_LAUNCH_N as LAUNCH_N
from common import (ChildFailed, build_compile, cpu_model, driver_version, run_compile,
                    save_results, source_commit, stamp, summarize)
from kernels import CACHE_SOURCE as SOURCE
from kernels import SEED_KERNEL as KERNEL

SCALE = (10, 100, 1000, 10000)  # entries in the folder for the lookup at scale
FULL = {"cold_repeats": 21, "hit_calls": 20000, "hit_repeats": 7, "processes": 11,
        "scale_processes": 7}
QUICK = {"cold_repeats": 5, "hit_calls": 2000, "hit_repeats": 3, "processes": 3,
         "scale_processes": 3}

# What could make a child process look somewhere else, or not at all: this run sets its own.
CACHE_ENVIRONMENT = ("KILN_CACHE", "KILN_CACHE_DIR", "KILN_CACHE_PATH", "KILN_CACHE_MAX_BYTES",
                     "CUPY_CACHE_DIR", "CUPY_CACHE_IN_MEMORY", "CUPY_CACHE_SAVE_CUDA_SOURCE")

# A peer that fails is a finding, not a failed run; every other figure must be measured.
OPTIONAL = {"cupy-launch"}

# The ways a new process is timed: child kind -> label.
DISK_WAYS = {
    "kiln": "kiln: SourceModule + get_function",
    "kiln-launch": "kiln: the same + first launch + sync",
    "cupy-launch": "CuPy: RawKernel + first launch + sync",
}


# ---- The child processes -----------------------------------------------------------------------
#
# Each runs `children.py cache KIND` in a fresh interpreter, times one cache hit and prints
# {"ms": ...} as JSON, or exits non-zero saying what failed.

def run_child(kind, env):
    done = subprocess.run(children.command("cache", kind), env=env, capture_output=True,
                          text=True)
    if done.returncode != 0:
        last = (done.stderr.strip() or done.stdout.strip() or "no output").splitlines()[-1]
        raise ChildFailed(f"the {kind} process exited {done.returncode}: {last}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- Measuring ---------------------------------------------------------------------------------

class Run:
    """What the measurements share: the sizes, the scratch folder, the environment children
    get, and where skips and failures are written down."""

    def __init__(self, sizes, scratch, gpu):
        self.sizes = sizes
        self.scratch = scratch
        self.gpu = gpu
        self.skipped = {}   # figure -> why it was not measured on this machine
        self.problems = {}  # figure -> what failed
        self.source_path = scratch / "source.cu"
        self.source_path.write_text(SOURCE)
        pymod = str(Path(kiln.__file__).resolve().parent.parent)
        self.base_env = {k: v for k, v in os.environ.items() if k not in CACHE_ENVIRONMENT}
        self.base_env["PYTHONPATH"] = os.pathsep.join(
            p for p in (pymod, os.environ.get("PYTHONPATH")) if p)

    def env(self, **cache_dirs):
        """The children's environment with fresh cache folders of the given names."""
        env = dict(self.base_env)
        for name, folder in cache_dirs.items():
            (self.scratch / folder).mkdir(mode=0o700)
            env[name] = str(self.scratch / folder)
        return env


def cold_compile(run, program):
    """bench/c/compile.c cold: the series, in ms or as ratios, and what NVRTC was run with."""
    try:
        out = run_compile(program, "cold", run.source_path, run.sizes["cold_repeats"],
                          run.env(KILN_CACHE_DIR="cold"))
    except ChildFailed as e:
        run.problems["cold_compile"] = str(e)
        return {}, {}
    series = {"kiln": {"median": out["kiln_median_ms"], "repeats": out["kiln_ms"]},
              "bare_nvrtc": {"median": out["bare_median_ms"], "repeats": out["bare_ms"]},
              "kiln_over_bare": {"median": out["kiln_over_bare_median"],
                                 "repeats": out["kiln_over_bare"]},
              "kiln_minus_bare": {"median": out["kiln_minus_bare_median_ms"],
                                  "repeats": out["kiln_minus_bare_ms"]}}
    return series, {k: out[k] for k in ("arch", "nvrtc", "nvrtc_options")}


def memory_hit(run):
    """kiln.SourceModule(src) answered by the in-process table, µs per call, beside sha256."""
    os.environ["KILN_CACHE_DIR"] = str(run.scratch / "in-process")  # kiln rereads it
    module = kiln.SourceModule(SOURCE)
    before = kiln.cache_stats()
    again = kiln.SourceModule(SOURCE)
    hits = kiln.cache_stats()["memory_hits"] - before["memory_hits"]
    if hits != 1 or again.get_function(KERNEL).name != module.get_function(KERNEL).name:
        run.problems["memory_hit"] = f"a second SourceModule was not a table hit ({hits} hits)"
        return {}
    data = SOURCE.encode()
    timers = {"kiln": timeit.Timer("SourceModule(SOURCE)", globals={
                  "SourceModule": kiln.SourceModule, "SOURCE": SOURCE}),
              "sha256": timeit.Timer("sha256(data).digest()", globals={
                  "sha256": hashlib.sha256, "data": data})}
    calls, repeats = run.sizes["hit_calls"], run.sizes["hit_repeats"]
    for timer in timers.values():
        timer.timeit(calls // 10 + 1)  # first-use costs stay out of the repeats
    before = kiln.cache_stats()
    times = {name: [] for name in timers}
    for _ in range(repeats):
        for name, timer in timers.items():  # timeit turns the collector off while it times
            times[name].append(timer.timeit(calls) / calls * 1e6)
    after = kiln.cache_stats()
    if (after["memory_hits"] - before["memory_hits"] != calls * repeats
            or after["compiles"] != before["compiles"]):
        run.problems["memory_hit"] = f"not every timed call was a table hit: {before} -> {after}"
        return {}
    return summarize(times)


def disk_hit(run, program):
    """A new process per repeat for each way, on caches filled beforehand: ms per process."""
    env = run.env(KILN_CACHE_DIR="disk-kiln", CUPY_CACHE_DIR="disk-cupy")
    ways, versions = ["kiln"], {}
    try:
        run_compile(program, "fill", run.source_path, 1, env)
    except ChildFailed as e:
        run.problems["disk_hit"] = str(e)
        return {}, {}
    if not run.gpu:
        run.skipped["kiln-launch"] = "no GPU: the kiln disk hit is timed CPU-only, no launch"
        run.skipped["cupy-launch"] = "no GPU"
    else:
        ways.append("kiln-launch")
        if importlib.util.find_spec("cupy") is None:
            run.skipped["cupy-launch"] = "CuPy is not installed"
        else:
            try:
                versions["cupy"] = run_child("cupy-fill", env)["cupy"]
                ways.append("cupy-launch")
            except ChildFailed as e:
                run.problems["cupy-launch"] = str(e)
    times = {way: [] for way in ways}
    for i in range(run.sizes["processes"]):
        for way in ways[i % len(ways):] + ways[:i % len(ways)]:  # each way takes turns first
            if way not in times:
                continue
            try:
                times[way].append(run_child(way, env)["ms"])
            except ChildFailed as e:
                run.problems[way] = str(e)
                del times[way]
    return summarize(times), versions


def lookup_at_scale(run, program):
    """The kiln disk hit (no launch) with N entries in the folder, ms per process, by N."""
    envs, filled = {}, {}
    for n in SCALE:
        env = run.env(KILN_CACHE_DIR=f"entries-{n}")
        try:
            filled[n] = run_compile(program, "fill", run.source_path, n, env)
            envs[n] = env
        except ChildFailed as e:
            run.problems[f"lookup_{n}"] = str(e)
    times = {n: [] for n in envs}
    for _ in range(run.sizes["scale_processes"]):
        for n in list(times):
            try:
                times[n].append(run_child("kiln", envs[n])["ms"])
            except ChildFailed as e:
                run.problems[f"lookup_{n}"] = str(e)
                del times[n]
    result = summarize(times)
    for n, series in result.items():
        series["bytes"] = filled[n]["bytes"]
        series["fill_s"] = filled[n]["fill_s"]
    return {str(n): series for n, series in result.items()}


# ---- Reporting ---------------------------------------------------------------------------------

def median_of(result, *path):
    node = result
    for key in path:
        if key not in node:
            return None
        node = node[key]
    return node["median"]


def ratio(num, den):
    return num / den if num is not None and den is not None else None


def figures(result):
    """The figures with targets: key -> label, value, unit, target (the most it may be), pass."""
    cold, hit = result["cold_compile_ms"], result["memory_hit_us"]
    disk, scale = result["disk_hit_ms"], result["lookup_ms"]
    cpu_only = " (CPU-only)" if result["gpu"] is None else ""
    rows = [
        ("cold_compile_vs_nvrtc", "cold compile, kiln / bare NVRTC",
         median_of(cold, "kiln_over_bare"), "x", 1.05),
        ("memory_hit_us", "in-process hit, µs", median_of(hit, "kiln"), "µs", 5.0),
        ("memory_hit_vs_sha256", "in-process hit / sha256 of the source",
         ratio(median_of(hit, "kiln"), median_of(hit, "sha256")), "x", None),
        ("disk_hit_ms", "disk hit, no launch, ms" + cpu_only, median_of(disk, "kiln"), "ms",
         None),
        ("disk_hit_launch_ms", "disk hit + first launch, ms", median_of(disk, "kiln-launch"),
         "ms", 0.5),
        ("disk_hit_launch_vs_cupy", "disk hit + first launch, kiln / CuPy",
         ratio(median_of(disk, "kiln-launch"), median_of(disk, "cupy-launch")), "x", None),
        ("lookup_10000_vs_10", "disk hit, 10,000 / 10 entries",
         ratio(median_of(scale, "10000"), median_of(scale, "10")), "x", None),
    ]
    return {key: {"label": label, "value": value, "unit": unit, "target": target,
                  "pass": None if value is None or target is None else value <= target}
            for key, label, value, unit, target in rows}


def print_table(result):
    sizes = result["parameters"]
    cold, hit = result["cold_compile_ms"], result["memory_hit_us"]
    disk, scale = result["disk_hit_ms"], result["lookup_ms"]
    sections = [
        (f"cold compile, ms (median of {sizes['cold_repeats']}, the two taking turns)", [
            ("kiln_module_from_source, cold cache", median_of(cold, "kiln")),
            ("bare NVRTC: create, compile, PTX, CUBIN", median_of(cold, "bare_nvrtc")),
            ("kiln - bare, per repeat", median_of(cold, "kiln_minus_bare"))]),
        (f"in-process hit, µs per call (median of {sizes['hit_repeats']} x "
         f"{sizes['hit_calls']})", [
            ("kiln.SourceModule(src), table hit", median_of(hit, "kiln")),
            ("hashlib.sha256 of the source", median_of(hit, "sha256"))]),
        (f"disk hit in a new process, ms (median of {sizes['processes']} processes)"
         + (", CPU-only" if result["gpu"] is None else ""),
         [(label, median_of(disk, way)) for way, label in DISK_WAYS.items()]),
        (f"lookup at scale, kiln disk hit, ms (median of {sizes['scale_processes']} "
         "processes each)",
         [(f"{n:,} entries in the folder", median_of(scale, str(n))) for n in SCALE]),
    ]
    env = result["environment"]
    print(f"\n{result['gpu'] or 'no GPU'}, driver {env['driver'] or 'none'}, "
          f"NVRTC {env['nvrtc'] or 'unknown'} ({env['kiln_arch'] or 'arch unknown'}), "
          f"Python {env['python']}, {result['date']}"
          + (" (quick run: smoke figures only)" if result["quick"] else ""))
    for title, rows in sections:
        print(title)
        for label, value in rows:
            shown = f"{value:12.3f}" if value is not None else "not measured".rjust(12)
            print(f"  {label:<42}{shown}")
    print("figures (lower is better)")
    for f in result["figures"].values():
        if f["value"] is None:
            print(f"  {f['label']:<42}         n/a")
            continue
        verdict = ""
        if f["target"] is not None:
            verdict = (f"  target <= {f['target']:.2f}{'' if f['unit'] == 'x' else ' ' + f['unit']}"
                       f"  {'PASS' if f['pass'] else 'MISS'}")
        print(f"  {f['label']:<42}{f['value']:12.3f}{verdict}")
    for name, reason in result["skipped"].items():
        print(f"  skipped: {name}: {reason}")
    for name, reason in result["problems"].items():
        print(f"  not measured: {name}: {reason.splitlines()[0][:160]}")


def scratch_parent():
    """The folder kiln's default cache is in: a cache folder elsewhere (a /tmp on another file
    system, or a slow one) would measure that file system instead."""
    xdg = os.environ.get("XDG_CACHE_HOME", "")
    parent = Path(xdg) if xdg.startswith("/") else Path.home() / ".cache"
    parent.mkdir(parents=True, exist_ok=True)
    return parent


def gpu_name():
    try:
        return kiln.Device(0).name()
    except kiln.Error:
        return None


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="few repeats: a smoke run, written to build/bench/")
    parser.add_argument("--out", type=Path, help="also write the JSON into this folder")
    args = parser.parse_args()
    sizes = QUICK if args.quick else FULL

    program = build_compile()
    gpu = gpu_name()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-", dir=scratch_parent()) as scratch:
        run = Run(sizes, Path(scratch), gpu)
        cold, nvrtc = cold_compile(run, program)
        hit = memory_hit(run)
        disk, versions = disk_hit(run, program)
        scale = lookup_at_scale(run, program)
        os.environ.pop("KILN_CACHE_DIR")  # the folder goes with the scratch

    result = {
        **stamp(),
        "gpu": gpu,
        "quick": args.quick,
        "environment": {
            "python": platform.python_version(),
            "numpy": np.__version__,
            "driver": driver_version(),
            "nvrtc": nvrtc.get("nvrtc"),
            "cupy": versions.get("cupy"),
            "kiln_commit": source_commit(),
            "kiln_arch": nvrtc.get("arch"),
            "nvrtc_options": nvrtc.get("nvrtc_options"),
            "cpu": cpu_model(),
            "cache_folders_in": str(scratch_parent()),
            "platform": platform.platform(),
        },
        "parameters": {**sizes, "scale_entries": list(SCALE), "launch_elements": LAUNCH_N,
                       "kernel": KERNEL},
        "cold_compile_ms": cold,
        "memory_hit_us": hit,
        "disk_hit_ms": disk,
        "lookup_ms": scale,
        "skipped": run.skipped,
        "problems": run.problems,
    }
    result["figures"] = figures(result)

    save_results(result, "-cache", smoke=args.quick or gpu is None, out=args.out)

    print_table(result)
    missing = sorted(run.problems.keys() - OPTIONAL)
    if missing:
        sys.exit(f"cache.py: not measured: {', '.join(missing)}")


if __name__ == "__main__":
    main()
