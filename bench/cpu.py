#!/usr/bin/env python3
"""The CPU side of a launch: kiln's call against the floor's, on a driver that does no work.

    PYTHONPATH=pymod python3 bench/cpu.py [--quick] [--callgrind] [--json PATH]   (make bench-cpu)

No GPU is needed. bench/fakecuda/fakecuda.c is built as build/bench-cpu/libcuda.so.1, a CUDA
driver whose cuLaunchKernel returns at once; kiln opens it (KILN_CUDA_PATH) and the floor
(bench/floor/floor.c) is linked against it. So a loop of launches costs what the caller does
itself: the floor unpacks its ints; kiln reads its keywords, checks the shape and the context,
packs the arguments by the kernel's signature and notes the launch. The difference between
the two is the overhead that the launch row of bench/compare.py holds against the floor, with
the driver's own ~2.5 µs per launch (the same in both) taken out: at the target of 1.05 times
the floor, the difference may be about 150 ns on an H200.

The ways are compare.py's: args<n> (an int pointer and n-1 ints, n = 1, 4, 16, 64) called as
f(p, *ints, block=(32, 1, 1), grid=(1, 1)) by kiln and as launch_ints(p, *ints) by the floor,
and args4 by kiln's prepared_call(grid, block, p, 1, 2, 3) beside kiln's own call. One more
way says how much of the difference is the form of kiln's call: the floor's launch_ints_kw
called as kiln is, with block= and grid= after the unpacked arguments ("floor+kw"), which
CPython hands over through a dict it builds and then unpacks for every call. Last, both are
called as users write a launch, the arguments written out: f(a0, a1, a2, a3, block=block,
grid=grid) and launch_ints(a0, a1, a2, a3) ("written"), one CALL with a constant tuple of
keyword names and no dict (common.written_out). Each figure
is ns per call, the median of the repeats, which take turns so that a change in the machine's
load hits every way alike. With --callgrind the script runs again under valgrind and counts
instructions per call instead, which a busy machine does not disturb.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from common import BENCH, ROOT, compile_c, median, written_out
from kernels import ARG_COUNTS, COMPARE_SOURCE

OUT = ROOT / "build" / "bench-cpu"
FAKE = OUT / "libcuda.so.1"
FULL = {"calls": 200000, "repeats": 9}
QUICK = {"calls": 20000, "repeats": 3}
COUNTED_CALLS = 2000  # per way under callgrind, where every call costs the same


def build(into=OUT):
    """The fake driver (libcuda.so.1, and libcuda.so for the linker) and the floor linked
    against it, found at run time next to it. Returns the folder."""
    into.mkdir(parents=True, exist_ok=True)
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    cc = os.environ.get("CC", "cc")
    compile_c([cc, "-O2", "-Wall", "-Wextra", "-shared", "-fPIC", "-fvisibility=hidden",
               "-isystem", f"{cuda}/include", str(BENCH / "fakecuda" / "fakecuda.c"),
               "-lpthread", "-o", str(into / "libcuda.so.1")])
    link = into / "libcuda.so"
    if not link.exists():
        link.symlink_to("libcuda.so.1")
    floor = into / ("kiln_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    compile_c([cc, "-shared", "-fPIC", "-O2", "-Wall", "-Wextra",
               f"-I{sysconfig.get_paths()['include']}", "-isystem", f"{cuda}/include",
               str(BENCH / "floor" / "floor.c"), f"-L{into}", "-lcuda", "-Wl,-rpath,$ORIGIN",
               "-o", str(floor)])
    return into


def ways(kiln, kiln_floor):
    """{name: loop(count)} for every way measured, each of which launches `count` times."""
    module = kiln.SourceModule(COMPARE_SOURCE)
    dest = kiln.mem_alloc(32 * 4)
    p = int(dest)
    block, grid = (32, 1, 1), (1, 1)
    out = {}
    for n in ARG_COUNTS:
        args = (p, *range(1, n))
        f = module.get_function(f"args{n}")

        def floor(count, args=args, name=f"args{n}"):
            kiln_floor.load(b"", name)  # the fake takes any image: this picks the kernel
            launch = kiln_floor.launch_ints
            for _ in range(count):
                launch(*args)

        def floor_keywords(count, args=args, name=f"args{n}"):
            kiln_floor.load(b"", name)
            launch = kiln_floor.launch_ints_kw
            for _ in range(count):
                launch(*args, block=block, grid=grid)

        def call(count, f=f, args=args):
            for _ in range(count):
                f(*args, block=block, grid=grid)

        def floor_written(count, loop=written_out(kiln_floor.launch_ints, args),
                          name=f"args{n}"):
            kiln_floor.load(b"", name)
            loop(count)

        out[f"floor {n}"] = floor
        out[f"floor keywords {n}"] = floor_keywords
        out[f"kiln {n}"] = call
        out[f"floor written {n}"] = floor_written
        out[f"kiln written {n}"] = written_out(f, args, {"block": block, "grid": grid})
    f = module.get_function("args4").prepare("Piii")
    args = (p, 1, 2, 3)

    def prepared(count):
        call = f.prepared_call
        for _ in range(count):
            call(grid, block, *args)

    out["kiln prepared_call 4"] = prepared
    out["_keep"] = (module, dest)
    return out


def time_ways(loops, calls, repeats):
    """{name: [ns per call, one per repeat]}, the ways taking turns."""
    times = {name: [] for name in loops}
    for _ in range(repeats):
        for name, loop in loops.items():
            loop(calls // 100)  # warm
            start = time.perf_counter_ns()
            loop(calls)
            times[name].append((time.perf_counter_ns() - start) / calls)
    return times


def count_ways(loops, fake, dumps):
    """{name: instructions per call} under callgrind, through the fake's client requests: the
    dump callgrind writes after each way's calls (dumps: its output file's name) holds them."""
    import ctypes
    lib = ctypes.CDLL(str(fake))
    if not lib.fakecuda_counting():
        sys.exit("cpu.py: not under valgrind, or the fake driver was built without "
                 "valgrind/callgrind.h")
    lib.fakecuda_count_begin()
    counted = {}
    for number, (name, loop) in enumerate(loops.items(), 1):
        loop(10)
        lib.fakecuda_count_zero()
        loop(COUNTED_CALLS)
        lib.fakecuda_count_dump()
        text = Path(f"{dumps}.{number}").read_text()
        total = next(int(line.split()[1]) for line in text.splitlines()
                     if line.startswith(("totals:", "summary:")))
        counted[name] = total / COUNTED_CALLS
    return counted


def child(options):
    """The measurement, in a process whose kiln opens the fake driver."""
    import kiln
    import kiln_floor
    loops = ways(kiln, kiln_floor)
    loops.pop("_keep")
    if options.callgrind:
        dumps = options.child.parent / f"callgrind.{os.getpid()}"
        return {"unit": "instructions per call", "figures": count_ways(loops, FAKE, dumps)}
    sizes = QUICK if options.quick else FULL
    times = time_ways(loops, sizes["calls"], sizes["repeats"])
    return {"unit": "ns per call", "figures": {k: median(v) for k, v in times.items()},
            "repeats": times}


def report(result):
    unit, figures = result["unit"], result["figures"]
    print(f"\n({unit})\n{'arguments':>10}  {'floor':>10}  {'floor+kw':>10}  {'kiln':>10}  "
          f"{'kiln - floor':>13}  {'kiln - floor+kw':>16}")
    for n in ARG_COUNTS:
        a, k, b = figures[f"floor {n}"], figures[f"floor keywords {n}"], figures[f"kiln {n}"]
        print(f"{n:>10}  {a:>10.1f}  {k:>10.1f}  {b:>10.1f}  {b - a:>13.1f}  {b - k:>16.1f}")
    print(f"\nwritten out: f(a0, ..., block=, grid=) and launch_ints(a0, ...)\n"
          f"{'arguments':>10}  {'floor':>10}  {'kiln':>10}  {'kiln - floor':>13}  "
          f"{'kiln / floor':>13}")
    for n in ARG_COUNTS:
        a, b = figures[f"floor written {n}"], figures[f"kiln written {n}"]
        print(f"{n:>10}  {a:>10.1f}  {b:>10.1f}  {b - a:>13.1f}  {b / a:>13.2f}")
    p, c = figures["kiln prepared_call 4"], figures["kiln 4"]
    print(f"\nprepared_call, 4 arguments: {p:.1f}, kiln's call {c:.1f} ({p / c:.2f} of it)")


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls and repeats")
    parser.add_argument("--callgrind", action="store_true",
                        help="count instructions under valgrind instead of timing")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.child:
        sys.path.insert(0, str(OUT))
        options.child.write_text(json.dumps(child(options)))
        return

    build()
    env = dict(os.environ, KILN_CUDA_PATH=str(FAKE))
    env["PYTHONPATH"] = os.pathsep.join(
        [str(ROOT / "pymod"), *filter(None, [env.get("PYTHONPATH")])])
    # The floor is linked against libcuda.so.1: on a GPU machine the real one would be found
    # first (its folder is often on LD_LIBRARY_PATH), so for the timed child, which compiles
    # nothing, the fake's folder goes before it. (NVRTC must not meet the fake.)
    child_env = dict(env, LD_LIBRARY_PATH=os.pathsep.join(
        [str(FAKE.parent), *filter(None, [env.get("LD_LIBRARY_PATH")])]))
    # The kernels' CUBIN goes to the cache first, so the counted child does not run NVRTC
    # under valgrind.
    subprocess.run([sys.executable, "-c", "import sys, kiln; kiln.SourceModule(sys.argv[1])",
                    COMPARE_SOURCE], env=env, check=True)
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "result.json"
        command = [sys.executable, __file__, "--child", str(out)]
        command += ["--quick"] * options.quick + ["--callgrind"] * options.callgrind
        if options.callgrind:
            if not shutil.which("valgrind"):
                sys.exit("cpu.py: --callgrind needs valgrind")
            command = ["valgrind", "--tool=callgrind", "--instr-atstart=no",
                       f"--callgrind-out-file={tmp}/callgrind.%p", *command]
        subprocess.run(command, env=child_env, check=True,
                       stderr=subprocess.DEVNULL if options.callgrind else None)
        result = json.loads(out.read_text())
    report(result)
    if options.json:
        options.json.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
