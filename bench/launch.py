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
import ctypes
import datetime
import gc
import importlib.metadata
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import sysconfig
import time
from pathlib import Path

try:
    import numpy as np
    import kiln
except ImportError as e:
    sys.exit(f"launch.py: {e}; build the extension (make ext) and run with PYTHONPATH=pymod "
             "from the repository root")

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BUILD = ROOT / "build" / "bench"

KERNEL = "multiply_them"
# extern "C" so that C, the floor, CuPy and cuda.core all find it by its plain name.
SOURCE = r"""
extern "C" __global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dest[i] = a[i] * b[i];
}
"""
LAUNCH_N = 256  # elements and threads per launch; the floor and baseline.c hard-code it too
ROUND_TRIP_N = 400  # elements and threads of the seed round trip, as in baseline.c

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


# ---- Building the C parts -------------------------------------------------------------------

def driver_flags():
    """cc, the compile flags and the link flags of a program on the driver API alone."""
    BUILD.mkdir(parents=True, exist_ok=True)
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    # The stub satisfies the linker; at run time the driver's libcuda.so.1 is found instead.
    return (os.environ.get("CC", "cc"), ["-O2", "-Wall", "-Wextra", f"-I{cuda}/include"],
            [f"-L{cuda}/lib64/stubs", "-lcuda"])


def build_driver_program(name):
    """Compiles bench/c/<name>.c into build/bench/<name>; returns its path."""
    cc, flags, libcuda = driver_flags()
    program = BUILD / name
    compile_c([cc, *flags, str(BENCH / "c" / f"{name}.c"), *libcuda, "-o", str(program)])
    return program


def build_c_parts():
    """Compiles the baseline program and the floor extension; returns the baseline's path."""
    baseline = build_driver_program("baseline")
    cc, flags, libcuda = driver_flags()
    floor = BUILD / ("kiln_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    compile_c([cc, "-shared", "-fPIC", *flags, f"-I{sysconfig.get_paths()['include']}",
               str(BENCH / "floor" / "floor.c"), *libcuda, "-o", str(floor)])
    return baseline


def compile_c(command):
    print(" ".join(command), file=sys.stderr)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"bench: building failed: {' '.join(command)}")


# ---- Measuring --------------------------------------------------------------------------------

def expect_products(got, a, b, what):
    """Raises unless got is a*b exactly: float32 products are correctly rounded on both sides."""
    want = a * b
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {want.size} elements are not a*b "
                             f"(dest[{i}] = {got[i]}, expected {want[i]})")


class Ways:
    """The ways of doing one operation: name -> loop(count), which does the operation count
    times and waits for the device. A way that fails to set up, to compute a*b or to run is
    left out, with the reason in problems."""

    def __init__(self, problems):
        self.loops = {}
        self.problems = problems
        # Device buffers that loops reach only through their addresses as ints: they must
        # outlive the loops.
        self.buffers = []

    def add(self, name, setup):
        """setup() makes the way ready, checks its result and returns its loop."""
        try:
            self.loops[name] = setup()
        except Exception as e:  # a peer missing or broken is a finding, not the end of the run
            self.problems[name] = f"{type(e).__name__}: {e}"

    def measure(self, count, repeats):
        """{name: [microseconds per operation, one per repeat]}."""
        for name, loop in list(self.loops.items()):
            self._run(name, loop, count // 10 + 1)  # first-use costs stay out of the repeats
        times = {name: [] for name in self.loops}
        # As timeit does: a collection landing in one way's loop would be charged to it alone.
        gc.disable()
        try:
            for _ in range(repeats):
                for name, loop in list(self.loops.items()):
                    elapsed = self._run(name, loop, count)
                    if elapsed is not None:
                        times[name].append(elapsed / count / 1e3)
        finally:
            gc.enable()
        return {name: t for name, t in times.items() if name in self.loops}

    def _run(self, name, loop, count):
        """Nanoseconds for loop(count), or None when it raised (and then the way is dropped)."""
        try:
            t0 = time.perf_counter_ns()
            loop(count)
            return time.perf_counter_ns() - t0
        except Exception as e:
            self.problems[name] = f"{type(e).__name__} while timed: {e}"
            del self.loops[name]
            return None


def run_baseline(baseline, cubin_path, sizes, problems):
    """The C figures, as {name: [µs per repeat]}; failures land in problems."""
    command = [str(baseline), str(cubin_path), KERNEL, str(sizes["launches"]),
               str(sizes["round_trips"]), str(sizes["repeats"])]
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        reason = f"{baseline.name} exited {done.returncode}: {done.stderr.strip()}"
        for name in ("c", "c_kept", "c_alloc"):
            problems[name] = reason
        return {}, {}
    out = json.loads(done.stdout)
    return ({"c": out["launch_us"]},
            {"c_kept": out["roundtrip_kept_us"], "c_alloc": out["roundtrip_alloc_us"]})


def import_cuda_core():
    """Newer cuda.core releases export their API from cuda.core, older ones from
    cuda.core.experimental."""
    import cuda.core as core
    if hasattr(core, "launch"):
        return core
    import cuda.core.experimental as experimental
    return experimental


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


def round_trip_ways(f, problems):
    """Every way to do the seed round trip from Python, checked."""
    rng = np.random.default_rng(2)
    a = rng.random(ROUND_TRIP_N, dtype=np.float32)
    b = rng.random(ROUND_TRIP_N, dtype=np.float32)
    n = ROUND_TRIP_N
    block, grid = (ROUND_TRIP_N, 1, 1), (1, 1)

    def kiln_in_out():
        dest = np.zeros(ROUND_TRIP_N, np.float32)

        def loop(count):
            for _ in range(count):
                f(kiln.Out(dest), kiln.In(a), kiln.In(b), n, block=block, grid=grid)
            kiln.synchronize()
        loop(1)
        expect_products(dest, a, b, "kiln In/Out")
        return loop

    def cupy_asarray_get():
        import cupy as cp
        kernel = cp.RawKernel(SOURCE, KERNEL)
        n32 = np.int32(ROUND_TRIP_N)
        cp_grid, cp_block = (1,), (ROUND_TRIP_N,)
        sync = cp.cuda.runtime.deviceSynchronize

        def once():
            ga, gb = cp.asarray(a), cp.asarray(b)
            gdest = cp.empty_like(ga)
            kernel(cp_grid, cp_block, (gdest, ga, gb, n32))
            return gdest.get()

        def loop(count):
            for _ in range(count):
                once()
            sync()
        expect_products(once(), a, b, "CuPy asarray/get")
        return loop

    ways = Ways(problems)
    ways.add("kiln_in_out", kiln_in_out)
    ways.add("cupy_asarray_get", cupy_asarray_get)
    return ways


# ---- Reporting --------------------------------------------------------------------------------

def driver_version():
    """'13.0' from cuDriverGetVersion, which needs no context."""
    try:
        version = ctypes.c_int()
        if ctypes.CDLL("libcuda.so.1").cuDriverGetVersion(ctypes.byref(version)) != 0:
            return None
        return f"{version.value // 1000}.{version.value % 1000 // 10}"
    except OSError:
        return None


def package_version(module_name, distribution):
    """The version of a peer this run imported; None when it did not import."""
    module = sys.modules.get(module_name)
    if module is None:
        return None
    try:
        return module.__version__
    except AttributeError:
        try:
            return importlib.metadata.version(distribution)
        except importlib.metadata.PackageNotFoundError:
            return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def source_commit():
    """The commit measured, with -dirty when the tree differs; None outside a git checkout.
    A tree copied without its history names its commit in $KILN_COMMIT."""
    if os.environ.get("KILN_COMMIT"):
        return os.environ["KILN_COMMIT"]
    try:
        head = subprocess.run(["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"],
                              capture_output=True, text=True, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(ROOT), "status", "--porcelain"],
                               capture_output=True, text=True, check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return None
    return head + ("-dirty" if dirty else "")


def save_results(result, suffix, smoke, out):
    """Writes result to bench/results/<date>-<gpu><suffix>.json (a smoke run's to
    build/bench/results/, away from the real ones), and a copy into out when given."""
    slug = re.sub(r"[^a-z0-9]+", "-", (result["gpu"] or "no gpu").lower()).strip("-")
    folder = BUILD / "results" if smoke else BENCH / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['date']}-{slug}{suffix}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    if out:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.name)
        print(f"wrote {out / path.name}")


def summarize(series):
    return {name: {"median": statistics.median(t), "repeats": t} for name, t in series.items()}


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
    today = datetime.date.today().isoformat()
    launch_us, round_trip_us = summarize(launch_us), summarize(round_trip_us)
    medians = {name: s["median"] for name, s in {**launch_us, **round_trip_us}.items()}
    result = {
        "date": today,
        "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
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
