"""What the benchmark scripts share: where things are, building and running the C parts, the
description of the machine and of the commit measured, results files, statistics, the
interleaved timing of the ways compared, and the seed's round trip and C baseline that
launch.py and compare.py both measure.

Only the standard library is imported when this loads (kiln and NumPy inside the functions that
use them), so that a script can say what is missing before it needs it. The CUDA sources and
the check of the seed's result are in kernels.py, the programs run in fresh processes in
children.py.
"""

import atexit
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

from kernels import SEED_KERNEL, SEED_SOURCE, expect_products

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
BUILD = ROOT / "build" / "bench"
MiB = 1 << 20

ROUND_TRIP_N = 400  # elements and threads of the seed round trip, as in bench/c/baseline.c


# ---- Building and running the C parts ----------------------------------------------------------

def compile_c(command):
    print(" ".join(command), file=sys.stderr)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"bench: building failed: {' '.join(command)}")


def driver_flags():
    """cc, the compile flags and the link flags of a program on the driver API alone."""
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    # The stub satisfies the linker; at run time the driver's libcuda.so.1 is found instead.
    return (os.environ.get("CC", "cc"), ["-O2", "-Wall", "-Wextra", f"-I{cuda}/include"],
            [f"-L{cuda}/lib64/stubs", "-lcuda"])


def build_driver_program(name, into=BUILD):
    """Compiles bench/c/<name>.c into <into>/<name> (build/bench/ by default); returns its
    path."""
    into.mkdir(parents=True, exist_ok=True)
    cc, flags, libcuda = driver_flags()
    program = into / name
    compile_c([cc, *flags, str(BENCH / "c" / f"{name}.c"), *libcuda, "-o", str(program)])
    return program


def build_floor(into=BUILD):
    """Compiles the floor, bench/floor/floor.c, into the extension module kiln_floor; returns
    its path. The folder goes on sys.path before `import kiln_floor`."""
    into.mkdir(parents=True, exist_ok=True)
    cc, flags, libcuda = driver_flags()
    floor = into / ("kiln_floor" + sysconfig.get_config_var("EXT_SUFFIX"))
    compile_c([cc, "-shared", "-fPIC", *flags, f"-I{sysconfig.get_paths()['include']}",
               str(BENCH / "floor" / "floor.c"), *libcuda, "-o", str(floor)])
    return floor


def build_c_parts(into=BUILD):
    """Compiles the baseline program and the floor extension; returns the baseline's path."""
    baseline = build_driver_program("baseline", into)
    build_floor(into)
    return baseline


def build_compile(into=BUILD):
    """Builds bench/c/compile.c against build/libkiln.a; returns the program's path."""
    library = ROOT / "build" / "libkiln.a"
    engine = ROOT / "engine"
    sources = [*(engine / "src").iterdir(), engine / "include" / "kiln.h"]
    if not library.exists() or library.stat().st_mtime < max(p.stat().st_mtime for p in sources):
        sys.exit(f"{Path(sys.argv[0]).name}: build/libkiln.a is missing or older than engine/; "
                 "run make lib")
    into.mkdir(parents=True, exist_ok=True)
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    program = into / "compile"
    # -iquote: the engine's internal headers, without its nvrtc.h hiding the toolkit's.
    command = [os.environ.get("CC", "cc"), "-O2", "-std=c11", "-D_GNU_SOURCE", "-Wall",
               "-Wextra", f"-I{engine / 'include'}", "-iquote", str(engine / "src"),
               "-isystem", f"{cuda}/include", str(BENCH / "c" / "compile.c"), str(library),
               "-lcrypto", "-ldl", "-lpthread", "-o", str(program)]
    print(" ".join(command), file=sys.stderr)
    if subprocess.run(command).returncode != 0:
        sys.exit(f"{Path(sys.argv[0]).name}: building failed: {' '.join(command)}")
    return program


class ChildFailed(Exception):
    pass


def run_compile(program, mode, source_path, count, env):
    """bench/c/compile.c in one of its modes (cold, fill); what it printed, as JSON."""
    done = subprocess.run([str(program), mode, str(source_path), str(count)], env=env,
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise ChildFailed(f"compile {mode} exited {done.returncode}: {done.stderr.strip()}")
    return json.loads(done.stdout)


class BareNvrtc:
    """NVRTC, and the driver's loading of its CUBIN, called directly through ctypes as a program
    using them would: the bare side of the cold compile, timed in the same process as the
    systems it is compared with. library is the NVRTC kiln opened (kiln.nvrtc_where()), options
    the ones kiln gives it (kiln_options)."""

    def __init__(self, library, options):
        self.rtc = ctypes.CDLL(library)
        self.options = [o.encode() for o in options]
        self._options = (ctypes.c_char_p * len(self.options))(*self.options)
        for name in ("nvrtcCreateProgram", "nvrtcCompileProgram", "nvrtcGetPTXSize",
                     "nvrtcGetPTX", "nvrtcGetCUBINSize", "nvrtcGetCUBIN",
                     "nvrtcGetProgramLogSize", "nvrtcGetProgramLog", "nvrtcDestroyProgram"):
            getattr(self.rtc, name).restype = ctypes.c_int
        self.rtc.nvrtcGetErrorString.restype = ctypes.c_char_p
        self.rtc.nvrtcGetErrorString.argtypes = [ctypes.c_int]
        self.cu = None
        self.device = ctypes.c_int()

    def _rtc(self, rc, call):
        if rc:
            raise RuntimeError(f"{call} failed: {self.rtc.nvrtcGetErrorString(rc).decode()}")

    def compile(self, source):
        """(PTX, CUBIN) of source, as bytes; the PTX without NVRTC's closing NUL."""
        prog = ctypes.c_void_p()
        self._rtc(self.rtc.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), b"kernel.cu",
                                              0, None, None), "nvrtcCreateProgram")
        try:
            rc = self.rtc.nvrtcCompileProgram(prog, len(self.options), self._options)
            if rc:
                size = ctypes.c_size_t()
                self.rtc.nvrtcGetProgramLogSize(prog, ctypes.byref(size))
                log = ctypes.create_string_buffer(max(size.value, 1))
                self.rtc.nvrtcGetProgramLog(prog, log)
                raise RuntimeError(f"nvrtcCompileProgram failed: "
                                   f"{self.rtc.nvrtcGetErrorString(rc).decode()}: "
                                   f"{log.value.decode(errors='replace')}")
            out = []
            for what in ("PTX", "CUBIN"):
                size = ctypes.c_size_t()
                self._rtc(getattr(self.rtc, f"nvrtcGet{what}Size")(prog, ctypes.byref(size)),
                          f"nvrtcGet{what}Size")
                buf = ctypes.create_string_buffer(size.value)
                self._rtc(getattr(self.rtc, f"nvrtcGet{what}")(prog, buf), f"nvrtcGet{what}")
                out.append(buf.raw)
            return out[0].rstrip(b"\0"), out[1]
        finally:
            self.rtc.nvrtcDestroyProgram(ctypes.byref(prog))

    def load(self, cubin, name):
        """Loads cubin and readies kernel name on device 0 as a launch needs it (the library
        loaded, the kernel found, an attribute read, which loads it onto the device), then
        unloads it; the kernel's maximum threads per block."""
        if self.cu is None:
            cu = ctypes.CDLL("libcuda.so.1")
            for fn in ("cuInit", "cuDeviceGet", "cuLibraryLoadData", "cuLibraryGetKernel",
                       "cuKernelGetAttribute", "cuLibraryUnload"):
                getattr(cu, fn).restype = ctypes.c_int
            cu.cuLibraryLoadData.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_char_p,
                                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint,
                                             ctypes.c_void_p, ctypes.c_void_p, ctypes.c_uint]
            cu.cuLibraryGetKernel.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                              ctypes.c_char_p]
            cu.cuKernelGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                                ctypes.c_void_p, ctypes.c_int]
            cu.cuLibraryUnload.argtypes = [ctypes.c_void_p]
            self._cu(cu.cuInit(0), "cuInit")
            self._cu(cu.cuDeviceGet(ctypes.byref(self.device), 0), "cuDeviceGet")
            self.cu = cu
        library, kernel, threads = ctypes.c_void_p(), ctypes.c_void_p(), ctypes.c_int()
        self._cu(self.cu.cuLibraryLoadData(ctypes.byref(library), cubin, None, None, 0, None,
                                           None, 0), "cuLibraryLoadData")
        try:
            self._cu(self.cu.cuLibraryGetKernel(ctypes.byref(kernel), library, name.encode()),
                     "cuLibraryGetKernel")
            # CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
            self._cu(self.cu.cuKernelGetAttribute(ctypes.byref(threads), 0, kernel,
                                                  self.device.value), "cuKernelGetAttribute")
        finally:
            self.cu.cuLibraryUnload(library)
        return threads.value

    @staticmethod
    def _cu(rc, call):
        if rc:
            raise RuntimeError(f"{call} failed with CUresult {rc}")


def kiln_options(arch):
    """The NVRTC options kiln gives a compile with no options of its own, for arch: the arch,
    the toolkit's include folders (kiln.nvrtc_where()), -default-device and -lineinfo, unless
    KILN_LINEINFO=0 (engine/src/compile.c and options.c)."""
    import kiln
    where = kiln.nvrtc_where()
    options = [f"-arch={arch}"]
    options += [f"-I{where[k]}" for k in ("include_dir", "cccl_dir") if where.get(k)]
    options.append("-default-device")
    if os.environ.get("KILN_LINEINFO") != "0":
        options.append("-lineinfo")
    return options


def turns(names, r):
    """The order of repeat r: each name first in its turn, so that no way always runs right
    after the same other one (PyCUDA's nvcc, say, whose processes leave caches cold)."""
    names = list(names)
    k = r % len(names) if names else 0
    return names[k:] + names[:k]


def run_baseline(baseline, cubin_path, sizes, problems):
    """The C figures of bench/c/baseline.c, as ({"c": launch µs per repeat}, {"c_kept": ...,
    "c_alloc": round trip µs per repeat}); failures land in problems."""
    command = [str(baseline), str(cubin_path), SEED_KERNEL, str(sizes["launches"]),
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


# ---- Measuring ---------------------------------------------------------------------------------

def written_out_source(count, keywords=(), sync=True):
    """The text of a loop(count) that calls `call` with `count` arguments written out, as a
    user writes a launch: `call(a0, a1, a2, block=block, grid=grid)`. CPython compiles that to
    one CALL with a constant tuple of keyword names; `call(*args, block=, grid=)` instead builds
    a dict of the keywords and unpacks it again for every call. Every name is a local bound
    before the loop, so the loop body is the call alone."""
    names = [f"a{i}" for i in range(count)]
    passed = names + [f"{k}={k}" for k in keywords]
    lines = ["def loop(count):",
             "    call = CALL",
             *([f"    {', '.join(names)}, = ARGS"] if names else []),
             *([f"    {', '.join(keywords)}, = KEYWORDS"] if keywords else []),
             *(["    sync = SYNC"] if sync else []),
             "    for _ in range(count):",
             f"        call({', '.join(passed)})",
             *(["    sync()"] if sync else [])]
    return "\n".join(lines) + "\n"


def written_out(call, args, keywords=None, sync=None):
    """loop(count): call(*args, **keywords) `count` times (then sync(), when given), the call
    written out in the loop's source (written_out_source), not unpacked from a tuple and a
    dict."""
    keywords = keywords or {}
    scope = {"CALL": call, "ARGS": tuple(args), "KEYWORDS": tuple(keywords.values()),
             "SYNC": sync}
    source = written_out_source(len(scope["ARGS"]), tuple(keywords), sync is not None)
    exec(compile(source, f"<written out: {len(scope['ARGS'])} arguments>", "exec"), scope)
    return scope["loop"]


def median(values):
    return statistics.median(values)


def summarize(series):
    """{name: {"median": ..., "repeats": [...]}}, leaving out a name with no repeats."""
    return {name: {"median": statistics.median(t), "repeats": t}
            for name, t in series.items() if t}


class Ways:
    """The ways of doing one operation: name -> loop(count), which does the operation count
    times and waits for the device. A way that fails to set up, to compute its result or to run
    is left out, with the reason in problems."""

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
            for r in range(repeats):
                # Each way first in its turn: a way that always ran right after the same other
                # one would inherit what that one leaves (the L2 full of its dirty lines, say).
                for name in turns(self.loops, r):
                    loop = self.loops.get(name)
                    if loop is None:  # dropped after it raised in this repeat
                        continue
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


def round_trip_ways(f, problems):
    """Every way to do the seed round trip from Python but PyCUDA's, checked: kiln_in_out and
    cupy_asarray_get. f is kiln's multiply_them."""
    import numpy as np

    import kiln
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
        kernel = cp.RawKernel(SEED_SOURCE, SEED_KERNEL)
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


# ---- PyCUDA ------------------------------------------------------------------------------------

class PyCuda:
    """PyCUDA, built from vendor/ and working in the primary context; or the reason it is not."""

    def __init__(self, scratch):
        self.reason = None
        self.cache_dir = scratch / "pycuda-cache"
        self.cache_dir.mkdir()
        try:
            import peers
            self.site = peers.build()
        except SystemExit as e:
            self.reason = str(e.code)
            return
        sys.path.insert(0, str(self.site))
        try:
            import pycuda.driver as drv
            from pycuda.compiler import SourceModule
            drv.init()
            self.context = drv.Device(0).retain_primary_context()
            self.context.push()
            atexit.register(self.context.pop)
        except Exception as e:  # built but not usable here: the rows say why
            self.reason = f"PyCUDA does not start: {type(e).__name__}: {e}"
            return
        self.drv, self.SourceModule = drv, SourceModule
        self.version = sys.modules["pycuda"].VERSION_TEXT

    def module(self, source):
        return self.SourceModule(source, no_extern_c=True, cache_dir=str(self.cache_dir))


# ---- Describing the run ------------------------------------------------------------------------

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


def stamp():
    """The date and the time of a run, the first fields of every results file."""
    return {"date": datetime.date.today().isoformat(),
            "time_utc": datetime.datetime.now(datetime.timezone.utc).isoformat(
                timespec="seconds")}


# ---- Results files -----------------------------------------------------------------------------

def gpu_slug(gpu):
    """'nvidia-h200' for 'NVIDIA H200': the GPU's part of a results file's name."""
    return re.sub(r"[^a-z0-9]+", "-", (gpu or "no gpu").lower()).strip("-")


def child_environment():
    """This process's environment for the programs a benchmark starts: no cache settings of
    kiln's or CuPy's (each run names its own folders), and the kiln being measured first on
    PYTHONPATH."""
    import kiln
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KILN_CACHE", "CUPY_CACHE"))}
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (str(Path(kiln.__file__).resolve().parent.parent),
                    os.environ.get("PYTHONPATH")) if p)
    return env


def update_performance_page(begin, end, block, heading=""):
    """Replaces the section of docs/performance.md from marker begin to marker end (markers
    included, both in block) with block; a page without it gets it at its end, after heading."""
    page = ROOT / "docs" / "performance.md"
    text = page.read_text()
    if begin in text:
        text = re.sub(re.escape(begin) + ".*?" + re.escape(end), lambda _: block, text,
                      flags=re.S)
    else:
        text += "\n" + heading + block + "\n"
    page.write_text(text)
    print(f"wrote {page}")


def save_results(result, suffix, smoke, out):
    """Writes result to bench/results/<date>-<gpu><suffix>.json (a smoke run's to
    build/bench/results/, away from the real ones), and a copy into out when given."""
    folder = BUILD / "results" if smoke else BENCH / "results"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{result['date']}-{gpu_slug(result['gpu'])}{suffix}.json"
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"wrote {path}")
    if out:
        out.mkdir(parents=True, exist_ok=True)
        shutil.copy(path, out / path.name)
        print(f"wrote {out / path.name}")
