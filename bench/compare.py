#!/usr/bin/env python3
"""kiln beside PyCUDA, CuPy, cuda.core and raw C: every figure, every system, one run.

    PYTHONPATH=pymod python3 bench/compare.py [--quick] [--out DIR]     (make bench runs it)

Systems: raw C through the driver (bench/c/compare.c, bench/c/baseline.c, bench/c/transfer.c
and bench/c/compile.c, built here); the floor, a bare METH_FASTCALL C launcher
(bench/floor/floor.c); kiln; CuPy RawKernel; cuda.core launch(); PyCUDA SourceModule called
with __call__, with prepared_call, and with In/Out. PyCUDA is built from vendor/ by
bench/peers.py first (the GPU machine reaches no registry); when it cannot be, its rows keep the
reason. Figures:

  launch overhead     async launches of a kernel taking one int pointer and 0, 3, 15 or 63
                      ints (1, 4, 16, 64 arguments), then one synchronize; µs per launch. The
                      arguments are unpacked from a tuple: `launch_ints(*args)` for the floor,
                      `f(*args, block=block, grid=grid)` for kiln and PyCUDA's __call__, which
                      makes CPython build a dict of the keywords and unpack it for every call;
                      the floor is also called that way, `launch_ints_kw(*args, block=block,
                      grid=grid)` (floor_keywords in the results, not a column)
  launch written out  the same launches with the call written out as users write it,
                      `launch_ints(a0, a1, a2, a3)`, `f(a0, a1, a2, a3, block=block,
                      grid=grid)`, every name a local bound before the loop (common.written_out
                      generates the loop for each argument count); taking turns with the
                      unpacked ways in the same repeats. CPython itself passes more than about
                      30 arguments written out through a list it builds (and the keywords
                      through a dict), so at 64 arguments this is dearer than unpacking. CuPy
                      takes its arguments as one tuple and has no such figure
  prepared_call       args4 (a pointer and 3 ints) by kiln's and PyCUDA's prepared_call, then
                      one synchronize, beside kiln's own call taking turns with them (kept as
                      kiln_call in the results); each also written out (<way>_written in the
                      results); C is its launch of args4; µs per launch
  constant memory     get_global of a __constant__ float and a 4-byte memcpy_htod into it; C
                      is cuModuleGetGlobal + cuMemcpyHtoD (bench/c/compare.c); µs per pair
  round trip          the seed: In a, In b, Out dest of 400 float32, the launch; µs
  cold compile        a source no one has seen (a comment made unique), to a kernel loaded
                      on the device (kiln loads at a first launch or attribute read, so its
                      way reads num_regs); the systems take turns, a different one first in
                      each repeat. C is NVRTC and cuLibraryLoadData called directly (ctypes)
                      in this process with exactly the options kiln gives NVRTC (-arch, the
                      toolkit's -I folders, -default-device, -lineinfo), checked to build
                      kiln's very CUBIN; bench/c/compile.c's kiln and bare NVRTC in one C
                      process are kept as cold_compile_c_ms; ms
  in-process hit      the same source again in the same process; C is cuModuleLoadData +
                      cuModuleGetFunction of the CUBIN already in memory; ms
  disk hit            a new process with its context up and its 32-int buffer made: from the
                      source to a first finished launch whose result is back on the host
                      (cuda.core's, which has no copy to NumPy, is read after the clock), from
                      the system's disk cache; one timed hit per process, a first untimed
                      process filling the cache. C is one such process too (compare.c disk):
                      read the CUBIN file, cuModuleLoadData, cuModuleGetFunction, the launch,
                      cuCtxSynchronize and the copy back, the process's first module load; ms
  module reload       C only: the CUBIN read and loaded again, launched and synchronized in a
                      process that has loaded and unloaded it just before (compare.c load),
                      which costs less than a process's first load; what C's disk hit was
                      before it was a new process; ms
  In / Out bandwidth  a launch with one In (Out) array of 64 or 512 MiB of ordinary pageable
                      memory, each system copying arrays of its own, again and again (kiln
                      page-locks such an array from its second copy); C is cuMemcpyHtoD /
                      cuMemcpyDtoH of malloc'd memory; GB/s
  first call          a new process, from just before `import <system>` (NumPy is imported
                      before) to the first finished kernel, with the system's disk cache warm;
                      C from the start of main, its CUBIN on disk; ms

Every way is checked to compute the right result before it is timed; ways measured in this
process take turns within each repeat; each figure is the median of its repeats and is also
given as a ratio to the raw-C figure of the same run. The targets kiln is held to (TARGETS)
are printed last, worked out from the same figures. PyCUDA works in the primary context, as
every other system here does (pushed, not pycuda.autoinit's own context), except in its
first-call figure, which uses pycuda.autoinit as its users do.

Writes bench/results/<date>-<gpu>.json, docs/compare-launch.png and docs/compare-bandwidth.png,
and the section of docs/performance.md between its `compare` markers (a --quick run writes
under build/bench/ and leaves docs/ alone). A short table comes last.
"""

import argparse
import atexit
import gc
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
from common import (BUILD, ROOT, BareNvrtc, MiB, PyCuda, Ways, build_c_parts, build_compile,
                    build_driver_program, child_environment, cpu_model, driver_version,
                    gpu_slug, kiln_options, median, package_version, round_trip_ways,
                    run_baseline, run_compile, save_results, source_commit, stamp, turns,
                    update_performance_page, written_out)
from kernels import (ARG_COUNTS, GLOBAL_NAME, GLOBAL_SOURCE, SEED_KERNEL,
                     import_cuda_core)
from kernels import COMPARE_SOURCE as SOURCE

CUDA = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
BANDWIDTH_SIZES = (64 * MiB, 512 * MiB)

SYSTEMS = {
    "c": "raw C (driver API)",
    "floor": "floor (METH_FASTCALL)",
    "kiln": "kiln",
    "cupy": "CuPy RawKernel",
    "cuda_core": "cuda.core launch",
    "pycuda_call": "PyCUDA __call__",
    "pycuda_prepared": "PyCUDA prepared_call",
    "pycuda_inout": "PyCUDA In/Out",
}
# A way's name + WRITTEN: the same call written out (common.written_out) rather than unpacked.
WRITTEN = "_written"
FULL = {"launches": 10000, "round_trips": 2000, "repeats": 7, "cold": 7, "hits": 200,
        "processes": 7, "bandwidth_repeats": 5, "globals": 10000}
QUICK = {"launches": 1000, "round_trips": 200, "repeats": 3, "cold": 3, "hits": 20,
         "processes": 3, "bandwidth_repeats": 2, "globals": 1000}

# Why a system has no figure in a row, when that is its nature rather than a failure.
NOT_APPLICABLE = {
    ("floor", "round_trip_us"): "launches only",
    ("cuda_core", "round_trip_us"): "no copy between NumPy arrays and device memory in "
                                    "cuda.core 1.2",
    ("cuda_core", "in_process_hit_ms"): "no cache: every Program.compile runs NVRTC",
    ("cuda_core", "in_gbs"): "no copy between NumPy arrays and device memory in cuda.core 1.2",
    ("cuda_core", "out_gbs"): "no copy between NumPy arrays and device memory in cuda.core 1.2",
    ("pycuda_inout", "launch_us"): "In/Out is the round trip row",
    ("pycuda_call", "round_trip_us"): "see PyCUDA In/Out",
    ("pycuda_prepared", "round_trip_us"): "see PyCUDA In/Out",
    ("floor", "prepared_us"): "no prepared call",
    ("cupy", "prepared_us"): "no prepared call",
    ("cuda_core", "prepared_us"): "no prepared call",
    ("pycuda_call", "prepared_us"): "see PyCUDA prepared_call",
    ("pycuda_inout", "prepared_us"): "see PyCUDA prepared_call",
    ("floor", "global_us"): "launches only",
    ("cupy", "global_us"): "measured beside C and PyCUDA only",
    ("cuda_core", "global_us"): "measured beside C and PyCUDA only",
    ("pycuda_prepared", "global_us"): "see PyCUDA __call__",
    ("pycuda_inout", "global_us"): "see PyCUDA __call__",
    ("cupy", "launch_written_us"): "takes its arguments as one tuple",
    ("pycuda_inout", "launch_written_us"): "In/Out is the round trip row",
}
# Why every system but C has no figure in a row.
C_ONLY = {"reload_hit_ms": "raw C only: the module loaded again from its file in a process "
                           "that has loaded it before"}

# What kiln is asked to meet (issue 12): each figure's check, from the figures of one run.
TARGETS = {
    **{f"launch x the floor, written out, at {n} argument{'s' if n > 1 else ''} (at most 1.05)":
       (lambda f, n=n: _ratio(f.get("launch_written_us", {}), str(n), "kiln", "floor"))
       for n in ARG_COUNTS},
    **{f"launch x the floor with keywords, f(*args, block=, grid=), at {n} "
       f"argument{'s' if n > 1 else ''} (at most 1.05)":
       (lambda f, n=n: _ratio(f.get("launch_us", {}), str(n), "kiln", "floor_keywords"))
       for n in ARG_COUNTS},
    "prepared_call over kiln's own call, 4 arguments (at most 1.05)":
        lambda f: _ratio(f, "prepared_us", "kiln", "kiln_call"),
    "prepared_call over kiln's own call, both written out, 4 arguments (at most 1.05)":
        lambda f: _ratio(f, "prepared_us", "kiln" + WRITTEN, "kiln_call" + WRITTEN),
    "prepared_call over PyCUDA's prepared_call, 4 arguments (below 1)":
        lambda f: _ratio(f, "prepared_us", "kiln", "pycuda_prepared"),
    "get_global + 4-byte memcpy_htod less C's, µs (at most 1)":
        lambda f: _difference(f, "global_us", "kiln", "c"),
    # issue 18: a cold compile costs what NVRTC with the same options costs, and less than
    # cuda.core's
    "cold compile over bare NVRTC with kiln's options, in this process (at most 1.05)":
        lambda f: _ratio(f, "cold_compile_ms", "kiln", "c"),
    "cold compile over bare NVRTC with kiln's options, in one C process (at most 1.05)":
        lambda f: _ratio(f, "cold_compile_c_ms", "kiln", "c"),
    "cold compile over cuda.core's (below 1)":
        lambda f: _ratio(f, "cold_compile_ms", "kiln", "cuda_core"),
}


# ---- Launch overhead and the round trip ----------------------------------------------------------

def launch_ways(n, module, cubin, pycuda, problems):
    """Every way to launch args<n> from Python, checked to write the sum of its ints. The
    arguments are unpacked from a tuple, `f(*args, block=block, grid=grid)`, as this script has
    always timed them; the floor is also called so, with keywords (floor_keywords, the same
    form as kiln's call). Every system that takes its arguments one by one is also timed with
    the call written out (its name + WRITTEN), `f(a0, a1, a2, a3, block=block, grid=grid)`, as
    users write a launch: no dict is built then, nor a tuple unpacked (common.written_out)."""
    name = f"args{n}"
    ints = list(range(1, n))
    want = sum(ints)
    dest = kiln.mem_alloc(32 * 4)
    p = int(dest)
    block, grid = (32, 1, 1), (1, 1)
    zeros = np.zeros(32, np.int32)

    def checked(loop, what, read=None):
        kiln.memcpy_htod(dest, zeros)
        loop(1)
        got = read() if read else np.empty(32, np.int32)
        if read is None:
            kiln.memcpy_dtoh(got, dest)
        if not np.all(got == want):
            raise AssertionError(f"{what} wrote {got[0]}, not {want}")
        return loop

    loaded = []

    def floor_module():
        """kiln_floor with args<n> picked, loaded once for the floor's three ways."""
        import kiln_floor
        if not loaded:
            loaded.append(kiln_floor.load(cubin, name))
        kiln_floor.select(loaded[0])
        return kiln_floor

    def floor():
        kiln_floor = floor_module()
        launch, sync, args = kiln_floor.launch_ints, kiln_floor.synchronize, (p, *ints)

        def loop(count):
            for _ in range(count):
                launch(*args)
            sync()
        return checked(loop, "the floor")

    def floor_keywords():
        kiln_floor = floor_module()
        launch, sync, args = kiln_floor.launch_ints_kw, kiln_floor.synchronize, (p, *ints)

        def loop(count):
            for _ in range(count):
                launch(*args, block=block, grid=grid)
            sync()
        return checked(loop, "the floor with keywords")

    def floor_written():
        kiln_floor = floor_module()
        return checked(written_out(kiln_floor.launch_ints, (p, *ints),
                                   sync=kiln_floor.synchronize), "the floor, written out")

    def kiln_way():
        f, args, sync = module.get_function(name), (p, *ints), kiln.synchronize

        def loop(count):
            for _ in range(count):
                f(*args, block=block, grid=grid)
            sync()
        return checked(loop, "kiln")

    def kiln_written():
        return checked(written_out(module.get_function(name), (p, *ints),
                                   {"block": block, "grid": grid}, kiln.synchronize),
                       "kiln, written out")

    def cupy():
        import cupy as cp
        kernel = cp.RawKernel(SOURCE, name)
        gdest = cp.zeros(32, cp.int32)
        args = (gdest, *(np.int32(i) for i in ints))
        sync = cp.cuda.runtime.deviceSynchronize

        def loop(count):
            for _ in range(count):
                kernel((1,), (32,), args)
            sync()
        return checked(loop, "CuPy", read=gdest.get)

    def cuda_core(written=False):
        core = import_cuda_core()
        device = core.Device(0)
        device.set_current()
        kernel = core.ObjectCode.from_cubin(cubin).get_kernel(name)
        config = core.LaunchConfig(grid=1, block=32)
        stream, launch = device.default_stream, core.launch
        args = (p, *(np.int32(i) for i in ints))  # a Python int is a pointer to cuda.core

        def loop(count):
            for _ in range(count):
                launch(stream, config, kernel, *args)
            device.sync()
        if written:
            return checked(written_out(launch, (stream, config, kernel, *args),
                                       sync=device.sync), "cuda.core, written out")
        return checked(loop, "cuda.core")

    def pycuda_call(written=False):
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        f = pycuda.module(SOURCE).get_function(name)
        args = (np.intp(p), *(np.int32(i) for i in ints))
        sync = pycuda.drv.Context.synchronize

        def loop(count):
            for _ in range(count):
                f(*args, block=block, grid=grid)
            sync()
        if written:
            return checked(written_out(f, args, {"block": block, "grid": grid}, sync),
                           "PyCUDA __call__, written out")
        return checked(loop, "PyCUDA __call__")

    def pycuda_prepared(written=False):
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        f = pycuda.module(SOURCE).get_function(name)
        f.prepare("P" + "i" * len(ints))
        call, args, sync = f.prepared_call, (p, *ints), pycuda.drv.Context.synchronize

        def loop(count):
            for _ in range(count):
                call(grid, block, *args)
            sync()
        if written:
            return checked(written_out(call, (grid, block, *args), sync=sync),
                           "PyCUDA prepared_call, written out")
        return checked(loop, "PyCUDA prepared_call")

    ways = Ways(problems)
    ways.buffers.append(dest)
    for key, setup in (("floor", floor), ("floor_keywords", floor_keywords),
                       ("kiln", kiln_way), ("cupy", cupy), ("cuda_core", cuda_core),
                       ("pycuda_call", pycuda_call), ("pycuda_prepared", pycuda_prepared),
                       ("floor" + WRITTEN, floor_written), ("kiln" + WRITTEN, kiln_written),
                       ("cuda_core" + WRITTEN, lambda: cuda_core(written=True)),
                       ("pycuda_call" + WRITTEN, lambda: pycuda_call(written=True)),
                       ("pycuda_prepared" + WRITTEN, lambda: pycuda_prepared(written=True))):
        ways.add(key, setup)
    return ways


def by_form(measured, problems):
    """{"launch_us": (figures, problems), "launch_written_us": (...)}: launch_ways' figures and
    problems split by the form of the call, the written-out ways under their systems' names."""
    out = {}
    for figure, written in (("launch_us", False), ("launch_written_us", True)):
        out[figure] = tuple({k.removesuffix(WRITTEN): v for k, v in d.items()
                             if k.endswith(WRITTEN) == written} for d in (measured, problems))
    return out


def round_trips(module, pycuda, problems):
    """The seed round trip by kiln and CuPy (common.round_trip_ways, as launch.py measures it)
    and PyCUDA's In/Out."""
    ways = round_trip_ways(module.get_function(SEED_KERNEL), problems)
    ways.loops["kiln"] = ways.loops.pop("kiln_in_out", None)
    ways.loops["cupy"] = ways.loops.pop("cupy_asarray_get", None)
    for old, new in (("kiln_in_out", "kiln"), ("cupy_asarray_get", "cupy")):
        if old in problems:
            problems[new] = problems.pop(old)
    ways.loops = {k: v for k, v in ways.loops.items() if v}

    def pycuda_inout():
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        drv = pycuda.drv
        f = pycuda.module(SOURCE).get_function(SEED_KERNEL)
        rng = np.random.default_rng(2)
        a, b = rng.random(400, dtype=np.float32), rng.random(400, dtype=np.float32)
        dest, n = np.zeros(400, np.float32), np.int32(400)
        block, grid = (400, 1, 1), (1, 1)

        def loop(count):
            for _ in range(count):
                f(drv.Out(dest), drv.In(a), drv.In(b), n, block=block, grid=grid)
        loop(1)
        if not np.array_equal(dest, a * b):
            raise AssertionError("PyCUDA In/Out did not compute a*b")
        return loop

    ways.add("pycuda_inout", pycuda_inout)
    return ways


# ---- PyCUDA's surface: prepared calls, constant memory ------------------------------------------

def prepared_ways(module, pycuda, problems):
    """args4 launched by kiln's call (kiln_call), kiln's prepared_call (kiln) and PyCUDA's
    prepared_call, taking turns in one run so the ratio of kiln's two is of the same moment;
    each checked to write the sum of its ints. Each also written out (its name + WRITTEN):
    `call(grid, block, a0, a1, a2, a3)`, `f(a0, a1, a2, a3, block=block, grid=grid)`."""
    ints, want = (1, 2, 3), 6
    dest = kiln.mem_alloc(32 * 4)
    p = int(dest)
    block, grid = (32, 1, 1), (1, 1)
    zeros = np.zeros(32, np.int32)

    def checked(loop, what, read=None):
        kiln.memcpy_htod(dest, zeros)
        loop(1)
        got = np.empty(32, np.int32)
        kiln.memcpy_dtoh(got, dest)
        if not np.all(got == want):
            raise AssertionError(f"{what} wrote {got[0]}, not {want}")
        return loop

    def kiln_call(written=False):
        f, args, sync = module.get_function("args4"), (p, *ints), kiln.synchronize

        def loop(count):
            for _ in range(count):
                f(*args, block=block, grid=grid)
            sync()
        if written:
            return checked(written_out(f, args, {"block": block, "grid": grid}, sync),
                           "kiln's call, written out")
        return checked(loop, "kiln's call")

    def kiln_prepared(written=False):
        f = module.get_function("args4").prepare("Piii")
        call, args, sync = f.prepared_call, (p, *ints), kiln.synchronize

        def loop(count):
            for _ in range(count):
                call(grid, block, *args)
            sync()
        if written:
            return checked(written_out(call, (grid, block, *args), sync=sync),
                           "kiln's prepared_call, written out")
        return checked(loop, "kiln's prepared_call")

    def pycuda_prepared(written=False):
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        f = pycuda.module(SOURCE).get_function("args4")
        f.prepare("Piii")
        call, args, sync = f.prepared_call, (p, *ints), pycuda.drv.Context.synchronize

        def loop(count):
            for _ in range(count):
                call(grid, block, *args)
            sync()
        if written:
            return checked(written_out(call, (grid, block, *args), sync=sync),
                           "PyCUDA's prepared_call, written out")
        return checked(loop, "PyCUDA's prepared_call")

    ways = Ways(problems)
    ways.buffers.append(dest)
    for key, setup in (("kiln_call", kiln_call), ("kiln", kiln_prepared),
                       ("pycuda_prepared", pycuda_prepared)):
        ways.add(key, setup)
        ways.add(key + WRITTEN, lambda setup=setup: setup(written=True))
    return ways


def global_ways(pycuda, problems):
    """get_global of a __constant__ float and a 4-byte memcpy_htod into it, by kiln and by
    PyCUDA (in PyCUDA's __call__ column, which holds its figures that are not launches), each
    checked to leave in the variable the last value it copied. A copy is synchronous, so a loop
    needs no synchronize."""
    values = [np.array([v], np.float32) for v in (1.0, 2.0, 3.0, 4.0)]

    def checked(loop, get_global, copy_back, what):
        loop(3)
        got = np.empty(1, np.float32)
        ptr, size = get_global(GLOBAL_NAME)
        copy_back(got, ptr)
        if size != 4 or got[0] != values[2][0]:
            raise AssertionError(f"{what} left {got[0]} in a variable of {size} bytes, not "
                                 f"{values[2][0]} in 4")
        return loop

    def kiln_way():
        get_global, copy = kiln.SourceModule(GLOBAL_SOURCE).get_global, kiln.memcpy_htod

        def loop(count):
            for i in range(count):
                ptr, _ = get_global(GLOBAL_NAME)
                copy(ptr, values[i & 3])
        return checked(loop, get_global, kiln.memcpy_dtoh, "kiln")

    def pycuda_way():
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        get_global, copy = pycuda.module(GLOBAL_SOURCE).get_global, pycuda.drv.memcpy_htod

        def loop(count):
            for i in range(count):
                ptr, _ = get_global(GLOBAL_NAME)
                copy(ptr, values[i & 3])
        return checked(loop, get_global, pycuda.drv.memcpy_dtoh, "PyCUDA")

    ways = Ways(problems)
    ways.add("kiln", kiln_way)
    ways.add("pycuda_call", pycuda_way)
    return ways


# ---- Compiling: cold, in-process hit, disk hit, first call ---------------------------------------

def run_child(system, first, pycuda, env, timed=True):
    """The ms of one new process (children.py); a timed kiln child must have hit its disk cache
    without compiling."""
    site = pycuda.site if system == "pycuda_call" else ""
    code = children.command("compare", system, "first" if first else "disk", site,
                            pycuda.cache_dir, Path(kiln.__file__).resolve().parent.parent)
    done = subprocess.run(code, capture_output=True, text=True, env=env, timeout=120)
    if done.returncode:
        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip()
                           else f"exited {done.returncode}")
    out = json.loads(done.stdout.strip().splitlines()[-1])
    if timed and out["hit"] is False:
        raise RuntimeError("kiln compiled instead of hitting its disk cache")
    return out["ms"]


def cold_ways(pycuda, problems):
    """{system: compile(src)}: each takes a source no one has seen to a kernel loaded on the
    device and ready to launch, as the system's users write it; each is run once on a warm-up
    text first (first-use costs, such as opening NVRTC, stay out) and left out, with the reason
    in problems, when that fails. "c" is NVRTC and the driver called directly from this process
    with the options kiln gives NVRTC, checked to build the very CUBIN kiln builds."""
    def kiln_cold(src):
        # kiln loads a module at its first launch, or when a kernel attribute is read
        kiln.SourceModule(src).get_function("args4").num_regs

    def cupy_cold(src):
        import cupy as cp
        cp.RawModule(code=src).get_function("args4")

    def cuda_core_cold(src):
        core = import_cuda_core()
        cc = core.Device(0).compute_capability
        opts = core.ProgramOptions(arch=f"sm_{cc.major}{cc.minor}")
        core.Program(src, "c++", opts).compile("cubin").get_kernel("args4")

    def pycuda_cold(src):
        if pycuda.reason:
            raise RuntimeError(pycuda.reason)
        pycuda.module(src).get_function("args4")

    colds = {"kiln": kiln_cold, "cupy": cupy_cold, "cuda_core": cuda_core_cold,
             "pycuda_call": pycuda_cold}
    nonce = time.time_ns()
    warm = SOURCE + f"\n// warm-up {nonce}\n"
    for system, cold in list(colds.items()):
        try:
            cold(warm)
        except Exception as e:
            problems[f"{system}:cold_compile_ms"] = f"{type(e).__name__}: {e}"
            del colds[system]
    try:
        module = kiln.SourceModule(warm)  # from kiln's table: the warm-up compiled it
        bare = BareNvrtc(kiln.nvrtc_where()["library"], kiln_options(module.arch))
        _, cubin = bare.compile(warm)
        if cubin != module.cubin:
            raise RuntimeError(f"NVRTC with {bare.options} built another CUBIN than kiln's "
                               f"({len(cubin)} bytes, kiln's {len(module.cubin)}): the options "
                               "differ")
        bare.load(cubin, "args4")
        colds = {"c": lambda src: bare.load(bare.compile(src)[1], "args4"), **colds}
    except Exception as e:
        problems["c:cold_compile_ms"] = f"{type(e).__name__}: {e}"
    return colds


def measure_cold(colds, repeats, problems):
    """{system: [ms per repeat]}: each repeat a text no one has compiled, given to every system
    in turn, the one that goes first changing from repeat to repeat; a system that fails is
    left out from then on, with the reason in problems."""
    times = {system: [] for system in colds}
    nonce = time.time_ns()
    gc.collect()
    gc.disable()  # a collection would land in one system's compile alone
    try:
        for r in range(repeats):
            src = SOURCE + f"\n// cold {nonce} {r}\n"
            for system in turns(times, r):
                try:
                    t = time.perf_counter()
                    colds[system](src)
                    times[system].append((time.perf_counter() - t) * 1e3)
                except Exception as e:
                    problems[f"{system}:cold_compile_ms"] = (f"{type(e).__name__} while timed: "
                                                             f"{e}")
                    del times[system]
    finally:
        gc.enable()
    return times


def compile_figures(sizes, scratch, env, pycuda, compare, cubin_path, problems):
    """{figure: {system: [ms per repeat]}} for cold, in-process hit, disk hit and first call."""
    out = {"cold_compile_ms": {}, "in_process_hit_ms": {}, "disk_hit_ms": {},
           "first_call_ms": {}}
    source_path = scratch / "compare.cu"
    source_path.write_text(SOURCE)

    # kiln and bare NVRTC with the same options, taking turns in one C process (compile.c)
    try:
        c = run_compile(build_compile(), "cold", source_path, sizes["cold"],
                        {**env, "KILN_CACHE_DIR": str(fresh(scratch, "c-cold"))})
        out["cold_compile_c_ms"] = {"kiln": c["kiln_ms"], "c": c["bare_ms"]}
    except Exception as e:
        problems["c:cold_compile_c_ms"] = str(e)
    loads = json.loads(checked_run([str(compare), "load", str(cubin_path), str(sizes["hits"])]))
    out["in_process_hit_ms"]["c"] = loads["memory_load_ms"]
    out["reload_hit_ms"] = {"c": loads["reload_hit_ms"]}
    # C's disk hit as kiln's: one new process per repeat, its context up and its buffer made
    # before the clock, which then runs to the result copied back
    # (a first, untimed one as for the others, which read their caches' files once before)
    c_disk = [str(compare), "disk", str(cubin_path)]
    checked_run(c_disk)
    out["disk_hit_ms"]["c"] = [json.loads(checked_run(c_disk))["disk_hit_ms"]
                               for _ in range(sizes["processes"])]
    out["first_call_ms"]["c"] = [
        json.loads(checked_run([str(compare), "first", str(cubin_path)]))["first_call_ms"]
        for _ in range(sizes["processes"])]

    out["cold_compile_ms"].update(measure_cold(cold_ways(pycuda, problems), sizes["cold"],
                                               problems))

    # in-process hit: the same text again, per call
    def per_call(f, count):
        f()
        t = time.perf_counter()
        for _ in range(count):
            f()
        return (time.perf_counter() - t) * 1e3 / count

    hits = {"kiln": (lambda: kiln.SourceModule(SOURCE), sizes["hits"] * 10)}
    if "cupy:cold_compile_ms" not in problems:
        import cupy as cp
        hits["cupy"] = (lambda: cp.RawKernel(SOURCE, "args4").kernel, sizes["hits"])
    if not pycuda.reason:
        hits["pycuda_call"] = (lambda: pycuda.module(SOURCE), max(5, sizes["hits"] // 10))
    for system, (f, count) in hits.items():
        out["in_process_hit_ms"][system] = [per_call(f, count) for _ in range(sizes["repeats"])]

    # disk hit and first call: new processes, caches filled by a first, untimed one
    child_env = {**env, "KILN_CACHE_DIR": str(fresh(scratch, "kiln-cache")),
                 "CUPY_CACHE_DIR": str(fresh(scratch, "cupy-cache"))}
    for system in ("kiln", "cupy", "cuda_core", "pycuda_call"):
        if system == "pycuda_call" and pycuda.reason:
            for figure in ("disk_hit_ms", "first_call_ms"):
                problems[f"pycuda_call:{figure}"] = pycuda.reason
            continue
        for figure, first in (("disk_hit_ms", False), ("first_call_ms", True)):
            try:
                run_child(system, first, pycuda, child_env, timed=False)  # fills the cache
                out[figure][system] = [run_child(system, first, pycuda, child_env)
                                       for _ in range(sizes["processes"])]
            except Exception as e:
                problems[f"{system}:{figure}"] = f"{type(e).__name__}: {e}"
    return out


def fresh(scratch, name):
    folder = scratch / name
    folder.mkdir(mode=0o700)
    return folder


def checked_run(command):
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode:
        raise RuntimeError(f"{Path(command[0]).name} failed: {done.stderr.strip()}")
    return done.stdout


# ---- Bandwidth ---------------------------------------------------------------------------------

def bandwidth(sizes, module, pycuda, transfer, problems):
    """{"in_gbs": {size: {system: [GB/s]}}, "out_gbs": ...} for pageable arrays."""
    out = {"in_gbs": {}, "out_gbs": {}}
    reps = sizes["bandwidth_repeats"]
    c = json.loads(checked_run([str(transfer), str(reps)] + [str(n) for n in BANDWIDTH_SIZES]))
    touch, copy = module.get_function("touch"), module.get_function("copy_bytes")
    one = {"block": (1, 1, 1), "grid": (1, 1)}
    many = {"block": (256, 1, 1), "grid": (1024, 1)}
    if not pycuda.reason:
        pm = pycuda.module(SOURCE)
        p_touch, p_copy, drv = pm.get_function("touch"), pm.get_function("copy_bytes"), pycuda.drv
    for n in BANDWIDTH_SIZES:
        rng = np.random.default_rng(n)
        h = np.resize(rng.integers(0, 256, 1_000_003, dtype=np.uint8), n)
        n64 = np.uint64(n)
        ins = {"c": c[str(n)]["pageable_htod"]}
        outs = {"c": c[str(n)]["pageable_dtoh"]}

        def timed(f):
            t = time.perf_counter()
            f()
            return n / (time.perf_counter() - t) / 1e9

        # Each system copies arrays of its own: kiln page-locks an array it copies again and
        # again, and another system copying that same array would move it at that speed too.
        arrays = {system: (h.copy(), np.ones(n, np.uint8))
                  for system in ("kiln", "cupy", "pycuda_inout")}
        kh, kb = arrays["kiln"]
        ways = {"kiln": (lambda: touch(kiln.In(kh), **one), lambda: touch(kiln.Out(kb), **one),
                         lambda: copy(kiln.Out(kb), kiln.In(kh), n64, **many))}
        try:
            import cupy as cp
            ch, cb = arrays["cupy"]
            ways["cupy"] = (lambda: (cp.asarray(ch), cp.cuda.runtime.deviceSynchronize()),
                            lambda: g.get(out=cb),
                            lambda: cp.asarray(ch).get(out=cb))
            g = cp.asarray(ch)
        except Exception as e:
            problems["cupy:in_gbs"] = problems["cupy:out_gbs"] = f"{type(e).__name__}: {e}"
        if not pycuda.reason:
            ph, pb = arrays["pycuda_inout"]
            ways["pycuda_inout"] = (lambda: p_touch(drv.In(ph), **one),
                                    lambda: p_touch(drv.Out(pb), **one),
                                    lambda: p_copy(drv.Out(pb), drv.In(ph), n64, **many))
        for system, (w_in, w_out, check) in ways.items():
            back = arrays[system][1]
            back[:] = 0
            check()
            if not np.array_equal(back, h):
                problems[f"{system}:in_gbs"] = f"{n} bytes did not come back intact"
                continue
            ins[system], outs[system] = [], []
        for _ in range(reps):
            for system in ins:
                if system != "c":
                    ins[system].append(timed(ways[system][0]))
                    outs[system].append(timed(ways[system][1]))
        out["in_gbs"][n], out["out_gbs"][n] = ins, outs
    return out


# ---- Reporting ---------------------------------------------------------------------------------

ROWS = [  # (figure, size key or None, label, unit, lower is better)
    *[("launch_us", k, f"launch, {k} argument{'s' if k > 1 else ''}", "µs", True)
      for k in ARG_COUNTS],
    *[("launch_written_us", k, f"launch written out, {k} argument{'s' if k > 1 else ''}", "µs",
       True) for k in ARG_COUNTS],
    ("prepared_us", None, "prepared_call, 4 arguments", "µs", True),
    ("global_us", None, "get_global + 4-byte memcpy_htod", "µs", True),
    ("round_trip_us", None, "round trip (In, In, Out of 400 float32)", "µs", True),
    ("cold_compile_ms", None, "cold compile", "ms", True),
    ("in_process_hit_ms", None, "in-process hit", "ms", True),
    ("disk_hit_ms", None, "disk hit, new process", "ms", True),
    ("reload_hit_ms", None, "module reload in a warm process", "ms", True),
    *[(f, n, f"{d} {n // MiB} MiB, pageable", "GB/s", False)
      for n in BANDWIDTH_SIZES for f, d in (("in_gbs", "In"), ("out_gbs", "Out"))],
    ("first_call_ms", None, "first call, import to finished kernel", "ms", True),
]


def row_values(result, figure, key):
    data = result["figures"].get(figure, {})
    if key is not None:
        data = data.get(str(key), {})
    return data


def cell(result, figure, key, system):
    """(median, ratio to C) or None."""
    values = row_values(result, figure, key)
    if system not in values or not values[system]:
        return None
    m = median(values[system])
    c = values.get("c")
    return m, (m / median(c) if c else None)


def reason(result, figure, system):
    if (system, figure) in NOT_APPLICABLE:
        return NOT_APPLICABLE[(system, figure)]
    if figure in C_ONLY and system != "c":
        return C_ONLY[figure]
    if figure not in result["figures"]:
        return "not measured in this run: the row is newer than its results"
    return result["problems"].get(f"{system}:{figure}") or result["problems"].get(system)


def as_measured(result):
    """The result with the figures of a run made before disk_hit_ms's C figure was a new
    process: that run's C disk hit was the module loaded again in a warm process, which is
    reload_hit_ms now, and it had no C figure for a new process."""
    figures = result["figures"]
    if "reload_hit_ms" in figures or "c" not in figures.get("disk_hit_ms", {}):
        return result
    disk = dict(figures["disk_hit_ms"])
    reload = {"c": disk.pop("c")}
    problems = {**result["problems"], "c:disk_hit_ms": "not measured in this run: its C figure "
                "was the module reload in a warm process (the row below)"}
    return {**result, "figures": {**figures, "disk_hit_ms": disk, "reload_hit_ms": reload},
            "problems": problems}


# The launch rows over the floor, by the form of the call: (heading, figure, kiln's way,
# the floor's way).
FLOOR_RATIOS = [
    ("`f(*args, block=, grid=)` ÷ `launch_ints(*args)`", "launch_us", "kiln", "floor"),
    ("`f(*args, block=, grid=)` ÷ `launch_ints_kw(*args, block=, grid=)`", "launch_us", "kiln",
     "floor_keywords"),
    ("written out: `f(a0, …, block=, grid=)` ÷ `launch_ints(a0, …)`", "launch_written_us",
     "kiln", "floor"),
]


def floor_ratios(result):
    """The table of kiln's launch over the floor's at each argument count, by the form of the
    call; "—" where a run did not measure it."""
    launch = result["figures"]
    lines = ["| arguments | " + " | ".join(h for h, *_ in FLOOR_RATIOS) + " |",
             "| --- |" + " --- |" * len(FLOOR_RATIOS)]
    for n in ARG_COUNTS:
        row = [str(n)]
        for _, figure, mine, floor in FLOOR_RATIOS:
            r = _ratio(launch.get(figure, {}), str(n), mine, floor)
            row.append("—" if r is None else f"{r:.2f}")
        lines.append("| " + " | ".join(row) + " |")
    return "\n".join(lines)


def markdown(result):
    result = as_measured(result)
    systems = list(SYSTEMS)
    head = "| figure | " + " | ".join(SYSTEMS[s] for s in systems) + " |"
    lines = [head, "| --- |" + " --- |" * len(systems)]
    notes = {}
    for figure, key, label, unit, _ in ROWS:
        row = [f"{label}, {unit}"]
        for s in systems:
            got = cell(result, figure, key, s)
            if got is None:
                why = reason(result, figure, s)
                if why:
                    mark = notes.setdefault(why, len(notes) + 1)
                    row.append(f"— [{mark}]")
                else:
                    row.append("—")
                continue
            value, ratio = got
            shown = f"{value:.3g}" if value < 100 else f"{value:.0f}"
            row.append(shown if s == "c" or ratio is None else f"{shown} ({ratio:.2f}×)")
        lines.append("| " + " | ".join(row) + " |")
    lines.append("")
    lines.append("(×: the figure over raw C's in the same row; for GB/s higher is better, for "
                 "the rest lower. Raw C has one launch figure per argument count: its calls "
                 "have no form.)")
    lines += ["", "kiln's launch over the floor's, by the form of the call (target 1.05):", "",
              floor_ratios(result)]
    if notes:
        lines.append("")
        for why, mark in notes.items():
            lines.append(f"[{mark}] {why.splitlines()[0][:300]}")
    return "\n".join(lines)


def kiln_vs_peers(result):
    """kiln's figure over each peer's for launch, prepared_call, constant memory, round trip and
    disk hit (below 1: kiln is faster); kiln_call is kiln's own call beside its prepared_call."""
    out = {}
    peers_by_figure = {"launch_us": ["cupy", "cuda_core", "pycuda_call", "pycuda_prepared"],
                       "launch_written_us": ["cuda_core", "pycuda_call", "pycuda_prepared"],
                       "prepared_us": ["kiln_call", "pycuda_prepared"],
                       "global_us": ["c", "pycuda_call"],
                       "round_trip_us": ["cupy", "pycuda_inout"],
                       "disk_hit_ms": ["cupy", "cuda_core", "pycuda_call"]}
    for figure, peer_list in peers_by_figure.items():
        keys = [str(k) for k in ARG_COUNTS] if figure.startswith("launch") else [None]
        for key in keys:
            values = row_values(result, figure, key)
            if "kiln" not in values:
                continue
            for peer in peer_list:
                if values.get(peer):
                    label = f"{figure}[{key}]" if key else figure
                    out[f"{label} kiln/{peer}"] = median(values["kiln"]) / median(values[peer])
    return out


def _figure(figures, figure, system):
    values = figures.get(figure, {}).get(system)
    return median(values) if values else None


def _ratio(figures, figure, system, other):
    a, b = _figure(figures, figure, system), _figure(figures, figure, other)
    return a / b if a is not None and b else None


def _difference(figures, figure, system, other):
    a, b = _figure(figures, figure, system), _figure(figures, figure, other)
    return a - b if a is not None and b is not None else None


def targets(result):
    """{target: the run's figure for it, or None where it was not measured}."""
    return {name: check(result["figures"]) for name, check in TARGETS.items()}


def plots(result, folder):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("compare.py: matplotlib is not installed; no plots", file=sys.stderr)
        return []
    drawn = []
    fig, ax = plt.subplots(figsize=(8, 5))
    launch = result["figures"]["launch_us"]
    written = result["figures"].get("launch_written_us", {})
    for s in SYSTEMS:
        xs = [k for k in ARG_COUNTS if launch.get(str(k), {}).get(s)]
        color = None
        if xs:
            line, = ax.plot(xs, [median(launch[str(k)][s]) for k in xs], marker="o",
                            label=SYSTEMS[s])
            color = line.get_color()
        xs = [k for k in ARG_COUNTS if written.get(str(k), {}).get(s)]
        if xs and s in ("floor", "kiln"):  # the pair the written-out target is about
            ax.plot(xs, [median(written[str(k)][s]) for k in xs], marker="x", linestyle="--",
                    color=color, label=f"{SYSTEMS[s]}, written out")
    ax.set_xscale("log", base=2)
    ax.set_xticks(list(ARG_COUNTS))
    ax.set_xticklabels([str(k) for k in ARG_COUNTS])
    ax.set_xlabel("kernel arguments")
    ax.set_ylabel("µs per launch (median)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(f"Launch overhead, {result['gpu']}")
    fig.tight_layout()
    path = folder / "compare-launch.png"
    fig.savefig(path, dpi=110)
    drawn.append(path)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.5), sharey=True)
    for ax, figure, title in ((axes[0], "in_gbs", "In (host → device)"),
                              (axes[1], "out_gbs", "Out (device → host)")):
        data = result["figures"][figure]
        for s in SYSTEMS:
            xs = [n for n in BANDWIDTH_SIZES if data.get(str(n), {}).get(s)]
            if xs:
                ax.plot([n // MiB for n in xs], [median(data[str(n)][s]) for n in xs],
                        marker="o", label=SYSTEMS[s] if s != "c" else "raw C, pageable")
        ax.set_xscale("log", base=2)
        ax.set_xticks([n // MiB for n in BANDWIDTH_SIZES])
        ax.set_xticklabels([str(n // MiB) for n in BANDWIDTH_SIZES])
        ax.set_xlabel("MiB, pageable NumPy array")
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("GB/s (median)")
    axes[0].set_ylim(bottom=0)
    axes[1].legend(fontsize=8)
    fig.suptitle(f"In/Out bandwidth, {result['gpu']}")
    fig.tight_layout()
    path = folder / "compare-bandwidth.png"
    fig.savefig(path, dpi=110)
    drawn.append(path)
    for p in drawn:
        print(f"wrote {p}")
    return drawn


PAGE_BEGIN, PAGE_END = "<!-- compare:begin -->", "<!-- compare:end -->"


def performance_block(result, table):
    """The section of docs/performance.md between the compare markers, markers included."""
    env = result["environment"]
    return (f"{PAGE_BEGIN}\n_Written by `bench/compare.py` on {result['gpu']}, {result['date']}, "
            f"kiln {env['kiln_commit']}, driver {env['driver']}, CuPy {env['cupy']}, "
            f"cuda.core {env['cuda_core']}, PyCUDA {env['pycuda'] or 'not built'}; medians; "
            f"results in `bench/results/{result['date']}-{result['slug']}.json`._\n\n"
            f"{table}\n\n![launch overhead against argument count](compare-launch.png)\n\n"
            f"![In/Out bandwidth against size](compare-bandwidth.png)\n{PAGE_END}")


def short_table(result):
    result = as_measured(result)
    print(f"\n{result['gpu']}, {result['date']}: medians, and over raw C")
    cols = [s for s in SYSTEMS]
    print(f"{'':<34}" + "".join(f"{s[:14]:>15}" for s in cols))
    for figure, key, label, unit, _ in ROWS:
        line = f"{(label + ', ' + unit)[:33]:<34}"
        for s in cols:
            got = cell(result, figure, key, s)
            if got is None:
                line += f"{'—':>15}"
            else:
                v, r = got
                line += f"{v:9.3g}" + (f" {r:4.2f}x" if r is not None and s != "c" else "      ")
        print(line)
    print("kiln over each peer (below 1: kiln is faster)")
    for k, v in result["kiln_vs_peers"].items():
        print(f"  {k:<40} {v:6.3f}")
    print("targets")
    for k, v in result.get("targets", {}).items():
        print(f"  {k:<66} {'not measured' if v is None else f'{v:6.3f}'}")
    for k, v in result["problems"].items():
        print(f"  not measured: {k}: {v.splitlines()[0][:150]}")


# ---- The run -----------------------------------------------------------------------------------

def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats; build/bench/ only")
    parser.add_argument("--out", type=Path, help="also copy the results and plots here")
    args = parser.parse_args()
    if kiln.Device.count() == 0:
        sys.exit("compare.py: needs a CUDA device")
    started = time.perf_counter()
    sizes = QUICK if args.quick else FULL
    os.environ["PATH"] = f"{CUDA / 'bin'}:{os.environ.get('PATH', '')}"  # PyCUDA runs nvcc
    scratch = Path(tempfile.mkdtemp(prefix="kiln-compare-"))
    atexit.register(shutil.rmtree, scratch, True)
    env = child_environment()

    problems = {}
    pycuda = PyCuda(scratch)
    if pycuda.reason:
        for s in ("pycuda_call", "pycuda_prepared", "pycuda_inout"):
            problems[s] = pycuda.reason

    baseline = build_c_parts()
    sys.path.insert(0, str(BUILD))  # kiln_floor
    compare, transfer = build_driver_program("compare"), build_driver_program("transfer")

    module = kiln.SourceModule(SOURCE)
    cubin_path = BUILD / "compare.cubin"
    cubin_path.write_bytes(module.cubin)
    figures = {"launch_us": {}, "launch_written_us": {}}

    # launch overhead: C in its own process, the Python systems taking turns in this one
    c_launch = json.loads(checked_run([str(compare), "launch", str(cubin_path),
                                       str(sizes["launches"]), str(sizes["repeats"])]))
    for n in ARG_COUNTS:
        local = {}
        ways = launch_ways(n, module, module.cubin, pycuda, local)
        measured = ways.measure(sizes["launches"], sizes["repeats"])
        for figure, (values, why) in by_form(measured, local).items():
            figures[figure][str(n)] = {"c": c_launch[str(n)], **values}
            problems.update({f"{k}:{figure}": v for k, v in why.items()})

    # PyCUDA's surface: prepared_call beside kiln's call and PyCUDA's, with C's launch of args4;
    # get_global and a 4-byte copy into the variable beside C's cuModuleGetGlobal + cuMemcpyHtoD
    local = {}
    measured = prepared_ways(module, pycuda, local).measure(sizes["launches"], sizes["repeats"])
    figures["prepared_us"] = {"c": c_launch["4"], **measured}
    problems.update({f"{k}:prepared_us": v for k, v in local.items()})
    local = {}
    global_cubin = BUILD / "global.cubin"
    global_cubin.write_bytes(kiln.SourceModule(GLOBAL_SOURCE).cubin)
    c_global = json.loads(checked_run([str(compare), "global", str(global_cubin), GLOBAL_NAME,
                                       str(sizes["globals"]), str(sizes["repeats"])]))
    measured = global_ways(pycuda, local).measure(sizes["globals"], sizes["repeats"])
    figures["global_us"] = {"c": c_global["global_us"], **measured}
    problems.update({f"{k}:global_us": v for k, v in local.items()})

    # the round trip: C from baseline.c (buffers kept), the rest here
    local = {}
    c_run = {"launches": 1000, "round_trips": sizes["round_trips"],
             "repeats": sizes["repeats"]}
    _, c_round = run_baseline(baseline, cubin_path, c_run, local)
    measured = round_trips(module, pycuda, local).measure(sizes["round_trips"],
                                                          sizes["repeats"])
    figures["round_trip_us"] = {**({"c": c_round["c_kept"]} if "c_kept" in c_round else {}),
                                **measured}
    problems.update({f"{k}:round_trip_us": v for k, v in local.items()})

    gc.collect()
    figures.update(compile_figures(sizes, scratch, env, pycuda, compare, cubin_path, problems))
    bw = bandwidth(sizes, module, pycuda, transfer, problems)
    figures["in_gbs"] = {str(n): v for n, v in bw["in_gbs"].items()}
    figures["out_gbs"] = {str(n): v for n, v in bw["out_gbs"].items()}

    gpu = kiln.Device(0).name()
    result = {
        **stamp(),
        "gpu": gpu, "slug": gpu_slug(gpu), "quick": args.quick,
        "environment": {"python": sys.version.split()[0], "numpy": np.__version__,
                        "driver": driver_version(), "kiln_commit": source_commit(),
                        "cupy": package_version("cupy", "cupy"),
                        "cuda_core": package_version("cuda.core", "cuda-core"),
                        "pycuda": None if pycuda.reason else pycuda.version,
                        "cpu": cpu_model(), "cpus": len(os.sched_getaffinity(0))},
        "parameters": sizes, "systems": SYSTEMS,
        "figures": figures, "problems": problems,
        "not_applicable": {f"{s}:{f}": why for (s, f), why in NOT_APPLICABLE.items()},
    }
    result["kiln_vs_peers"] = kiln_vs_peers(result)
    result["targets"] = targets(result)
    result["seconds"] = round(time.perf_counter() - started, 1)
    table = markdown(result)
    result["markdown"] = table
    folder = BUILD if args.quick else ROOT / "docs"
    folder.mkdir(parents=True, exist_ok=True)
    drawn = plots(result, folder)
    save_results(result, "", smoke=args.quick, out=args.out)
    if not args.quick:
        update_performance_page(PAGE_BEGIN, PAGE_END, performance_block(result, table))
    if args.out:
        for p in drawn + ([] if args.quick else [ROOT / "docs" / "performance.md"]):
            shutil.copy(p, args.out / p.name)
    short_table(result)
    print(f"compare.py: {result['seconds']} s")


if __name__ == "__main__":
    main()
