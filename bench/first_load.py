#!/usr/bin/env python3
"""A new process's first module load and launch: the driver's two ways, beside kiln's disk hit.

Run from the repository root once the extension is built (make ext), on a machine with a GPU:

    PYTHONPATH=pymod python3 bench/first_load.py [--repeats N] [--out DIR]

compare.py's disk hit puts kiln beside a C program that loads the CUBIN with cuModuleLoadData.
kiln loads through the library API instead (cuLibraryLoadData, one library for every context
and device), and reads each kernel's limits at its first launch (cuKernelGetAttribute: the
largest block, static shared memory and the cluster shape). This script times, each in a new
process whose context is up and whose 32-int buffer is made before the clock, the same CUBIN
(compare.py's source, args4) through ctypes:

  module           cuModuleLoadData, cuModuleGetFunction, the launch, cuCtxSynchronize and a
                   128-byte cuMemcpyDtoH: what compare.py's C disk hit does
  module+attrs     the same with the five limits read (cuFuncGetAttribute) before the launch
  library          cuLibraryLoadData, cuLibraryGetKernel, the launch (of the CUkernel), the
                   synchronize and the copy
  library+attrs    the same with the five limits read (cuKernelGetAttribute) as kiln reads them
  kiln             SourceModule (a disk hit), get_function, the launch, kiln.synchronize() and
                   get(), as compare.py's kiln child, phase by phase

Each figure is µs, per phase and in all, the median over the repeats; the ways take turns in a
new order each round. The JSON goes to bench/results/<date>-<gpu>-first-load.json.
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import child_environment, save_results, source_commit, stamp  # noqa: E402

WAYS = ("module", "module+attrs", "library", "library+attrs", "kiln")
PHASES = {"driver": ("load", "get function", "limits", "launch", "synchronize", "copy back"),
          "kiln": ("SourceModule", "get_function", "launch", "synchronize", "get")}

# The limits kiln reads at a kernel's first launch (engine/src/module.c), by number: the
# largest block, static shared memory, and the required cluster's width, height and depth.
LIMITS = (0, 1, 11, 12, 13)


def driver_child(way, cubin_path):
    """One way through the driver alone; prints its phases' µs."""
    import ctypes
    import time
    from ctypes import byref, c_int, c_uint64, c_void_p
    cu = ctypes.CDLL("libcuda.so.1")

    def check(rc, call):
        if rc:
            sys.exit(f"{call} failed: CUresult {rc}")

    check(cu.cuInit(0), "cuInit")
    dev, ctx, dest = c_int(), c_void_p(), c_uint64()
    check(cu.cuDeviceGet(byref(dev), 0), "cuDeviceGet")
    check(cu.cuDevicePrimaryCtxRetain(byref(ctx), dev), "cuDevicePrimaryCtxRetain")
    check(cu.cuCtxSetCurrent(ctx), "cuCtxSetCurrent")
    check(cu.cuMemAlloc_v2(byref(dest), 128), "cuMemAlloc")
    check(cu.cuMemsetD8_v2(dest, 0, 128), "cuMemsetD8")
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    image = Path(cubin_path).read_bytes()
    buf = ctypes.create_string_buffer(image, len(image))
    args = [c_uint64(dest.value), c_int(1), c_int(2), c_int(3)]
    params = (c_void_p * 4)(*[ctypes.cast(byref(a), c_void_p) for a in args])
    got, value = (c_int * 32)(), c_int()
    f = c_void_p()
    t = [time.perf_counter()]
    if way.startswith("module"):
        m = c_void_p()
        check(cu.cuModuleLoadData(byref(m), buf), "cuModuleLoadData")
        t.append(time.perf_counter())
        check(cu.cuModuleGetFunction(byref(f), m, b"args4"), "cuModuleGetFunction")
        t.append(time.perf_counter())
        for a in LIMITS if way.endswith("attrs") else ():
            check(cu.cuFuncGetAttribute(byref(value), a, f), "cuFuncGetAttribute")
    else:
        lib = c_void_p()
        check(cu.cuLibraryLoadData(byref(lib), buf, None, None, 0, None, None, 0),
              "cuLibraryLoadData")
        t.append(time.perf_counter())
        check(cu.cuLibraryGetKernel(byref(f), lib, b"args4"), "cuLibraryGetKernel")
        t.append(time.perf_counter())
        for a in LIMITS if way.endswith("attrs") else ():
            check(cu.cuKernelGetAttribute(byref(value), a, f, dev), "cuKernelGetAttribute")
    t.append(time.perf_counter())
    check(cu.cuLaunchKernel(f, 1, 1, 1, 32, 1, 1, 0, None, params, None), "cuLaunchKernel")
    t.append(time.perf_counter())
    check(cu.cuCtxSynchronize(), "cuCtxSynchronize")
    t.append(time.perf_counter())
    check(cu.cuMemcpyDtoH_v2(got, dest, 128), "cuMemcpyDtoH")
    t.append(time.perf_counter())
    if list(got) != [6] * 32:
        sys.exit(f"args4 wrote {list(got)}, not 6")
    print(json.dumps([(b - a) * 1e6 for a, b in zip(t, t[1:])]))


def kiln_child():
    """compare.py's kiln disk hit, phase by phase; prints their µs."""
    import time

    import numpy as np

    import kiln
    from kernels import COMPARE_SOURCE
    dest = kiln.zeros(32, np.int32)
    t = [time.perf_counter()]
    module = kiln.SourceModule(COMPARE_SOURCE)
    t.append(time.perf_counter())
    f = module.get_function("args4")
    t.append(time.perf_counter())
    f(dest, 1, 2, 3, block=(32, 1, 1), grid=(1, 1))
    t.append(time.perf_counter())
    kiln.synchronize()
    t.append(time.perf_counter())
    got = dest.get()
    t.append(time.perf_counter())
    stats = kiln.cache_stats()
    if (got != 6).any() or stats["disk_hits"] != 1 or stats["compiles"]:
        sys.exit(f"kiln's child did not hit its disk cache once, or args4 wrote {got}: {stats}")
    print(json.dumps([(b - a) * 1e6 for a, b in zip(t, t[1:])]))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=15, help="new processes per way (15)")
    parser.add_argument("--out", type=Path, help="also copy the results file here")
    parser.add_argument("--child", nargs="+", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        return kiln_child() if args.child[0] == "kiln" else driver_child(*args.child)

    import kiln
    from kernels import COMPARE_SOURCE
    if not kiln.Device.count():
        sys.exit("first_load.py needs a GPU")
    gpu = kiln.Device(0).name()
    with tempfile.TemporaryDirectory(prefix="kiln-bench-first-load-") as scratch:
        env = child_environment()
        env["KILN_CACHE_DIR"] = os.path.join(scratch, "cache")
        cubin = Path(scratch) / "compare.cubin"
        # The cache filled, and the CUBIN written, by a process of their own.
        fill = ("import sys, kiln; from kernels import COMPARE_SOURCE; "
                "open(sys.argv[1], 'wb').write(kiln.SourceModule(COMPARE_SOURCE).cubin)")
        env["PYTHONPATH"] = os.pathsep.join([str(Path(__file__).resolve().parent),
                                             env["PYTHONPATH"]])
        subprocess.run([sys.executable, "-c", fill, str(cubin)], env=env, check=True)
        raw = {way: [] for way in WAYS}
        order = list(WAYS)
        for _ in range(args.repeats):
            random.shuffle(order)
            for way in order:
                child = ["kiln"] if way == "kiln" else [way, str(cubin)]
                done = subprocess.run([sys.executable, __file__, "--child", *child], env=env,
                                      capture_output=True, text=True)
                if done.returncode:
                    sys.exit(f"{way}: {done.stderr.strip()[-2000:]}")
                raw[way].append(json.loads(done.stdout.strip().splitlines()[-1]))
    medians = {way: {"phases_us": [statistics.median(p) for p in zip(*rows)],
                     "total_us": statistics.median(sum(r) for r in rows)}
               for way, rows in raw.items()}
    result = {**stamp(), "gpu": gpu, "kiln_commit": source_commit(), "repeats": args.repeats,
              "phases": PHASES, "raw_us": raw, "median": medians}
    save_results(result, "-first-load", smoke=False, out=args.out)
    for way in WAYS:
        names = PHASES["kiln" if way == "kiln" else "driver"]
        parts = ", ".join(f"{n} {v:.0f}" for n, v in zip(names, medians[way]["phases_us"]))
        print(f"{way:14} {medians[way]['total_us']:6.0f} µs in all: {parts}")


if __name__ == "__main__":
    main()
