#!/usr/bin/env python3
"""The interactive loop: recompiling an edited kernel that includes a heavy header, and
compiling many sources at once, each beside bare NVRTC doing the same in the same run.

Run from the repository root once the extension is built (make ext):

    PYTHONPATH=pymod python3 bench/interactive.py [--quick] [--out DIR]

  recompile with a PCH   A kernel including <cub/block/block_reduce.cuh> is compiled, then
                         edited (its body changes, its #include lines do not) and compiled
                         again, several times. kiln (SourceModule: the compile goes to
                         kiln-nvrtc, the compile helper, whose precompiled header is written by
                         the first compile of the #include lines and used by every later one)
                         beside bare NVRTC with its own automatic PCH (-pch --pch-dir) and bare
                         NVRTC without one, each given the options kiln's compile has
                         (-default-device, -lineinfo). Each side runs in fresh processes, kiln
                         and NVRTC with the PCH taking turns over three rounds (the host's
                         speed drifts between rounds by more than they differ). The figure is
                         each edit's compile over the same process's first compile: the median
                         ratio, and the absolute seconds beside it.
  in a new process       The edit compiled in a new process after another process compiled
                         the first version: kiln's seconds, and its time over its first
                         compile. The helper lays NVRTC out at the same addresses in every
                         run, so the PCH the other process's compile wrote serves this one
                         (bare NVRTC takes a PCH only in the process that made it); the cache
                         folder's lasting helper, started by the first process, compiles it
                         with that PCH already in its memory (the results say which helper
                         ran it).
  parallel compiles      16 distinct small kernels compiled one after another, then all at once
                         (kiln.compile_many on as many threads as there are cores; bare NVRTC
                         from as many threads through ctypes, which releases the GIL, and from
                         as many processes with NVRTC loaded, started before the clock):
                         parallel time over serial time, each side against itself.

Every source is new to every cache (a fresh folder and a fresh constant per compile). The JSON,
with every raw repeat, goes to bench/results/<date>-<gpu>-interactive.json; a --quick run, or one
on a machine without a GPU, writes to build/bench/results/ instead and leaves
docs/performance.md alone. NVRTC runs without a GPU, so every figure is measured anywhere; the
machine's core count decides the parallel one (the targets are for 16 cores).
"""

import argparse
import ctypes
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (child_environment, cpu_model, kiln_options, save_results,  # noqa: E402
                    source_commit, stamp, turns, update_performance_page)

HEAVY = "#include <cub/block/block_reduce.cuh>\n"
EDIT = ("__global__ void reduce_{tag}(const float *in, float *out)\n"
        "{{\n  typedef cub::BlockReduce<float, 128> R;\n"
        "  __shared__ typename R::TempStorage t;\n"
        "  float v = R(t).Sum(in[blockIdx.x * 128 + threadIdx.x] * {value}f);\n"
        "  if (threadIdx.x == 0) out[blockIdx.x] = v;\n}}\n")
SMALL = ('extern "C" __global__ void small_{tag}(float *x, int n)\n'
         "{{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] = x[i] * {value}f + "
         "{i}.0f; }}\n")
TARGETS = {"pch_same_process_s": 0.2, "pch_new_process_s": 0.25, "parallel_ratio": 0.35}


def edit(i):
    return HEAVY + EDIT.format(tag=uuid.uuid4().hex[:8], value=1.0 + i / 1000)


# ---- Bare NVRTC through ctypes ---------------------------------------------------------------

def nvrtc_library():
    import kiln._kiln
    return ctypes.CDLL(kiln._kiln.nvrtc_info()["path"])


def nvrtc_compile(lib, src, opts):
    """One bare NVRTC compile to CUBIN; its seconds. ctypes drops the GIL around each call."""
    prog = ctypes.c_void_p()
    if lib.nvrtcCreateProgram(ctypes.byref(prog), src.encode(), b"kernel.cu", 0, None, None):
        raise RuntimeError("nvrtcCreateProgram failed")
    args = (ctypes.c_char_p * len(opts))(*[o.encode() for o in opts])
    t = time.perf_counter()
    rc = lib.nvrtcCompileProgram(prog, len(opts), args)
    size = ctypes.c_size_t()
    lib.nvrtcGetCUBINSize(prog, ctypes.byref(size))
    dt = time.perf_counter() - t
    lib.nvrtcDestroyProgram(ctypes.byref(prog))
    if rc:
        raise RuntimeError(f"NVRTC failed with {rc}")
    return dt


# ---- Children: one side each, in a fresh process -----------------------------------------------

def child_recompile(side, arch, edits):
    times = []
    if side == "kiln":
        import kiln
        for i in range(edits + 1):
            t = time.perf_counter()
            kiln.SourceModule(edit(i), arch=arch)
            times.append(time.perf_counter() - t)
        stats = kiln.cache_stats()
        extra = {"pch_created": stats["pch_created"], "pch_used": stats["pch_used"]}
    else:
        lib = nvrtc_library()
        opts = kiln_options(arch)
        if side == "nvrtc-pch":
            opts += ["-pch", f"--pch-dir={tempfile.mkdtemp(prefix='kiln-bench-pch-')}"]
        times = [nvrtc_compile(lib, edit(i), opts) for i in range(edits + 1)]
        extra = {}
    print(json.dumps({"first_s": times[0], "edits_s": times[1:], **extra}))


def child_new_process(arch):
    import kiln
    t = time.perf_counter()
    kiln.SourceModule(edit(0), arch=arch)
    seconds = time.perf_counter() - t
    report = kiln._kiln.last_compile_report()
    print(json.dumps({"seconds": seconds, "pch_used": kiln.cache_stats()["pch_used"],
                      "helper": report["helper"], "nvrtc_seconds": report["nvrtc_seconds"]}))


def run_child(args, env):
    done = subprocess.run([sys.executable, __file__, "--child", *args], capture_output=True,
                          text=True, env=env, timeout=1200)
    if done.returncode != 0:
        raise RuntimeError(f"child {args} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


# ---- The measurements ----------------------------------------------------------------------------

def recompile(arch, edits, env, rounds, scratch):
    """kiln and bare NVRTC with its automatic PCH in turns, a fresh process (and for kiln a
    fresh cache folder, so that each round's first compile writes the PCH) each round: the
    host's speed drifts between rounds by more than the two sides differ. Bare NVRTC without a
    PCH, much slower, runs once. Returns the results and the cache folder of kiln's last round,
    whose lasting helper holds the PCH for the new processes after."""
    out, folder = {}, None
    for r in range(rounds):
        for side in turns(["kiln", "nvrtc-pch"], r):
            child_env = env
            if side == "kiln":
                folder = os.path.join(scratch, f"cache-{r}")
                child_env = {**env, "KILN_CACHE_DIR": folder}
            out.setdefault(side, {"rounds": []})["rounds"].append(
                run_child(["recompile", side, arch, str(edits)], child_env))
    out["nvrtc"] = {"rounds": [run_child(["recompile", "nvrtc", arch, str(edits)], env)]}
    for side, r in out.items():
        done = r["rounds"]
        r["first_s"] = statistics.median(d["first_s"] for d in done)
        r["edits_s"] = [e for d in done for e in d["edits_s"]]
        r["edit_over_first"] = [e / d["first_s"] for d in done for e in d["edits_s"]]
        r["median_edit_s"] = statistics.median(r["edits_s"])
        r["median_ratio"] = statistics.median(r["edit_over_first"])
        print(f"  {side:10} first {r['first_s']:.3f} s, edit {r['median_edit_s']:.3f} s "
              f"({r['median_ratio']:.2f} of the first; {len(done)} processes)", flush=True)
    return out, folder


def new_process(arch, repeats, env, first_s):
    times = [run_child(["new-process", arch], env) for _ in range(repeats)]
    seconds = [t["seconds"] for t in times]
    r = {"seconds": seconds, "median_s": statistics.median(seconds),
         "over_same_process_first": statistics.median(seconds) / first_s,
         "pch_used": [t["pch_used"] for t in times], "helper": [t["helper"] for t in times],
         "nvrtc_seconds": [t["nvrtc_seconds"] for t in times]}
    r["median_nvrtc_s"] = statistics.median(r["nvrtc_seconds"])
    print(f"  kiln       an edit in a new process {r['median_s']:.3f} s "
          f"({r['over_same_process_first']:.2f} of a first compile; NVRTC's own run in the "
          f"helper {r['median_nvrtc_s']:.3f} s)", flush=True)
    return r


_pool_nvrtc = None


def pool_compile(job):
    """One bare NVRTC compile in a pool process, its NVRTC opened at the process's first."""
    global _pool_nvrtc
    src, arch = job
    if _pool_nvrtc is None:
        _pool_nvrtc = nvrtc_library()
    return nvrtc_compile(_pool_nvrtc, src, kiln_options(arch))


def parallel(arch, count, workers, repeats):
    import kiln
    lib = nvrtc_library()
    opts = kiln_options(arch)
    # Processes with NVRTC loaded and warm, made before the clock: the floor of compiles at once
    # where NVRTC's own work within a process is not shared between them.
    pool = multiprocessing.get_context("forkserver").Pool(workers)
    pool.map(pool_compile, [(src, arch) for src in
                            [SMALL.format(tag=f"warm{uuid.uuid4().hex[:8]}_{i}", value=1.5, i=i)
                             for i in range(2 * workers)]], chunksize=1)

    def sources():
        tag = uuid.uuid4().hex[:8]
        return [SMALL.format(tag=f"{tag}_{i}", value=1.5, i=i) for i in range(count)]

    def kiln_serial():
        for src in sources():
            kiln.SourceModule(src, arch=arch, cache_dir=False)

    def kiln_parallel():
        kiln.compile_many(sources(), arch=arch, cache_dir=False, workers=workers)

    def nvrtc_serial():
        for src in sources():
            nvrtc_compile(lib, src, opts)

    def nvrtc_parallel():
        srcs = sources()
        chunks = [srcs[i::workers] for i in range(workers)]
        threads = [threading.Thread(target=lambda c=c: [nvrtc_compile(lib, s, opts) for s in c])
                   for c in chunks]
        for t in threads:
            t.start()
        for t in threads:
            t.join()

    def nvrtc_processes():
        pool.map(pool_compile, [(src, arch) for src in sources()], chunksize=1)

    ways = {"kiln_serial": kiln_serial, "kiln_parallel": kiln_parallel,
            "nvrtc_serial": nvrtc_serial, "nvrtc_parallel": nvrtc_parallel,
            "nvrtc_processes": nvrtc_processes}
    raw = {name: [] for name in ways}
    kiln_serial()  # NVRTC opened and warm before anything is timed
    for r in range(repeats):
        order = list(ways.items())
        if r % 2:
            order.reverse()  # a drift in load hits every way alike
        for name, way in order:
            t = time.perf_counter()
            way()
            raw[name].append(time.perf_counter() - t)
    pool.close()
    pool.join()
    med = {name: statistics.median(v) for name, v in raw.items()}
    out = {"raw_s": raw, "median_s": med,
           "kiln_ratio": med["kiln_parallel"] / med["kiln_serial"],
           "nvrtc_ratio": med["nvrtc_parallel"] / med["nvrtc_serial"],
           "nvrtc_processes_ratio": med["nvrtc_processes"] / med["nvrtc_serial"]}
    print(f"  parallel/serial: kiln {out['kiln_ratio']:.2f}, bare NVRTC {out['nvrtc_ratio']:.2f} "
          f"from threads, {out['nvrtc_processes_ratio']:.2f} from processes "
          f"({count} kernels, {workers} workers)", flush=True)
    return out


def gpu_name():
    import kiln
    try:
        return kiln.Device(0).name() if kiln.Device.count() else None
    except kiln.Error:
        return None


def table(result):
    rc, par, new = result["recompile"], result["parallel"], result["new_process"]
    cores = result["environment"]["cores"]
    rows = [
        ("first compile with CUB's BlockReduce, s", f"{rc['kiln']['first_s']:.2f}",
         f"{rc['nvrtc-pch']['first_s']:.2f}", f"{rc['nvrtc']['first_s']:.2f}", ""),
        ("an edit in the same process, s", f"{rc['kiln']['median_edit_s']:.3f}",
         f"{rc['nvrtc-pch']['median_edit_s']:.3f}", f"{rc['nvrtc']['median_edit_s']:.3f}",
         f"≤ {TARGETS['pch_same_process_s']}"),
        ("  the same, over the first compile", f"{rc['kiln']['median_ratio']:.2f}",
         f"{rc['nvrtc-pch']['median_ratio']:.2f}", f"{rc['nvrtc']['median_ratio']:.2f}", ""),
        ("an edit in a new process, s", f"{new['median_s']:.3f}", "", "",
         f"≤ {TARGETS['pch_new_process_s']}"),
    ]
    if "median_nvrtc_s" in new:  # results written before it lack it
        rows.append(("  of which NVRTC's own run in the helper, s", f"{new['median_nvrtc_s']:.3f}",
                     "", "", ""))
    rows += [
        (f"16 kernels at once / one by one ({cores} cores)", f"{par['kiln_ratio']:.2f}",
         "", f"{par['nvrtc_ratio']:.2f}", f"≤ {TARGETS['parallel_ratio']} (16 cores)"),
    ]
    if "nvrtc_processes_ratio" in par:  # results written before it have threads alone
        rows.append((f"  NVRTC from {cores} processes instead of threads", "", "",
                     f"{par['nvrtc_processes_ratio']:.2f}", ""))
    head = "| | kiln | NVRTC, automatic PCH | NVRTC | target |\n| --- | --- | --- | --- | --- |\n"
    return head + "\n".join("| " + " | ".join(r) + " |" for r in rows) + "\n"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer repeats: a smoke run")
    parser.add_argument("--out", type=Path, help="also copy the results file here")
    parser.add_argument("--arch", default="sm_90", help="the arch compiled for (sm_90)")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        kind, *rest = args.child
        if kind == "recompile":
            return child_recompile(rest[0], rest[1], int(rest[2]))
        return child_new_process(rest[0])

    edits, repeats, rounds = (2, 1, 1) if args.quick else (6, 5, 3)
    cores = os.cpu_count() or 1
    gpu = gpu_name()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-interactive-") as scratch:
        env = child_environment()
        env["KILN_CACHE_DIR"] = os.path.join(scratch, "cache")
        os.environ["KILN_CACHE_DIR"] = os.path.join(scratch, "parallel")
        print("recompiling an edited kernel that includes CUB:", flush=True)
        rc, folder = recompile(args.arch, edits, env, rounds, scratch)
        new = new_process(args.arch, repeats, {**env, "KILN_CACHE_DIR": folder},
                          rc["kiln"]["first_s"])
        print("compiling many small kernels:", flush=True)
        par = parallel(args.arch, 16, cores, repeats)
        os.environ.pop("KILN_CACHE_DIR")
    import kiln._kiln
    info = kiln._kiln.nvrtc_info()
    result = {
        **stamp(), "gpu": gpu, "quick": args.quick,
        "environment": {"python": platform.python_version(), "cpu": cpu_model(),
                        "cores": cores, "nvrtc": "%d.%d" % tuple(info["version"]),
                        "arch": args.arch, "kiln_commit": source_commit(),
                        "platform": platform.platform()},
        "parameters": {"edits": edits, "repeats": repeats, "rounds": rounds,
                       "nvrtc_options": kiln_options(args.arch), "header": HEAVY.strip(),
                       "parallel_kernels": 16, "threads": cores},
        "recompile": rc, "new_process": new, "parallel": par, "targets": TARGETS,
    }
    smoke = args.quick or gpu is None
    save_results(result, "-interactive", smoke=smoke, out=args.out)
    block = table(result)
    print(block)
    if not smoke:
        update_performance_page(
            "<!-- interactive:begin -->", "<!-- interactive:end -->",
            f"<!-- interactive:begin -->\nMeasured {result['date']} by bench/interactive.py on "
            f"{cpu_model()} ({cores} cores), NVRTC {result['environment']['nvrtc']}, "
            f"{args.arch}:\n\n{block}<!-- interactive:end -->",
            heading="## The interactive loop: recompiles and parallel compiles\n\n")


if __name__ == "__main__":
    main()
