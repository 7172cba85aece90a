#!/usr/bin/env python3
"""The programs the benchmarks time in fresh processes: a disk hit (a cache another process
filled, the context already up) and a first call (from just before `import <system>` to the
first finished kernel).

    python3 bench/children.py compare SYSTEM disk|first PYCUDA_SITE PYCUDA_CACHE PYMOD
    python3 bench/children.py cache KIND
    python3 bench/children.py arrays first_operator

compare.py runs the first form for each of kiln, cupy, cuda_core and pycuda_call; cache.py the
second, for kiln, kiln-launch, cupy-launch and cupy-fill. Each prints one line of JSON with
{"ms": ...}, or exits non-zero saying what failed. The parents build these command lines with
command().

What is loaded before a clock starts is part of what a figure means: this file imports json,
os (which every interpreter has loaded already), sys, time, NumPy and kernels.py (which imports
nothing), and reads its arguments without argparse; each system is imported in its own steps.
"""

import json
import os
import sys
import time

import numpy as np

from kernels import CACHE_SOURCE, COMPARE_SOURCE, SEED_KERNEL, expect_products, import_cuda_core

BENCH = os.path.dirname(os.path.abspath(__file__))


def command(*args):
    """The command line that runs this file with args in a new interpreter."""
    return [sys.executable, os.path.join(BENCH, "children.py"), *map(str, args)]


# ---- compare.py: the disk hit and the first call of each system ------------------------------
#
# A system is four steps: setup imports it; context makes the context and the buffer the kernel
# writes; run goes from the source text to a finished launch of args4, which writes 6 into
# dest[0..31], and gives back what it wrote where it can; check, after the clock, reads the
# buffer where run could not, and says whether kiln hit its disk cache without compiling. The
# clock of a disk hit starts after context, that of a first call before setup.

class System:
    def __init__(self, pycuda_site, pycuda_cache, pymod):
        self.pycuda_site, self.pycuda_cache, self.pymod = pycuda_site, pycuda_cache, pymod

    def check(self, got):
        return got, None


class Kiln(System):
    def setup(self, first):
        import kiln
        self.kiln = kiln

    def context(self, first):
        self.dest = self.kiln.zeros(32, np.int32)

    def run(self):
        kiln = self.kiln
        f = kiln.SourceModule(COMPARE_SOURCE).get_function("args4")
        f(self.dest, 1, 2, 3, block=(32, 1, 1), grid=(1, 1))
        kiln.synchronize()
        return self.dest.get()

    def check(self, got):
        stats = self.kiln.cache_stats()
        return got, stats["disk_hits"] == 1 and stats["compiles"] == 0


class CuPy(System):
    def setup(self, first):
        import cupy as cp
        self.cp = cp

    def context(self, first):
        self.dest = self.cp.zeros(32, self.cp.int32)

    def run(self):
        cp = self.cp
        f = cp.RawModule(code=COMPARE_SOURCE).get_function("args4")
        f((1,), (32,), (self.dest, np.int32(1), np.int32(2), np.int32(3)))
        cp.cuda.runtime.deviceSynchronize()
        return self.dest.get()


class CudaCore(System):
    """cuda.core keeps no cache, so its "hit" compiles; the result is read back with kiln, after
    the clock has stopped (cuda.core 1.2 has no copy to a NumPy array)."""

    def setup(self, first):
        self.core = import_cuda_core()

    def context(self, first):
        self.dev = dev = self.core.Device(0)
        dev.set_current()
        self.buf = dev.allocate(128, stream=dev.default_stream)
        dev.sync()

    def run(self):
        core, dev = self.core, self.dev
        cc = dev.compute_capability
        opts = core.ProgramOptions(arch=f"sm_{cc.major}{cc.minor}")
        kernel = core.Program(COMPARE_SOURCE, "c++", opts).compile("cubin").get_kernel("args4")
        core.launch(dev.default_stream, core.LaunchConfig(grid=1, block=32), kernel, self.buf,
                    np.int32(1), np.int32(2), np.int32(3))
        dev.sync()
        return None

    def check(self, got):
        sys.path.insert(0, self.pymod)
        import kiln
        got = np.empty(32, np.int32)
        kiln.memcpy_dtoh(got, int(self.buf.handle))
        return got, None


class PyCuda(System):
    """A disk hit pushes the primary context, as the other systems use; a first call starts as
    PyCUDA's users do, with pycuda.autoinit's own context."""

    def setup(self, first):
        sys.path.insert(0, self.pycuda_site)
        import pycuda.driver as drv
        from pycuda.compiler import SourceModule
        if first:
            import pycuda.autoinit  # noqa: F401
        self.drv, self.SourceModule, self.ctx = drv, SourceModule, None

    def context(self, first):
        drv = self.drv
        if not first:
            drv.init()
            self.ctx = drv.Device(0).retain_primary_context()
            self.ctx.push()
        self.dest = drv.mem_alloc(128)
        drv.memset_d32(self.dest, 0, 32)

    def run(self):
        drv = self.drv
        module = self.SourceModule(COMPARE_SOURCE, no_extern_c=True, cache_dir=self.pycuda_cache)
        module.get_function("args4")(self.dest, np.int32(1), np.int32(2), np.int32(3),
                                     block=(32, 1, 1), grid=(1, 1))
        drv.Context.synchronize()
        got = np.empty(32, np.int32)
        drv.memcpy_dtoh(got, self.dest)
        return got

    def check(self, got):
        if self.ctx is not None:
            self.ctx.pop()
        return got, None


COMPARE_SYSTEMS = {"kiln": Kiln, "cupy": CuPy, "cuda_core": CudaCore, "pycuda_call": PyCuda}


def compare_child(system, mode, pycuda_site, pycuda_cache, pymod):
    """Prints {"ms": ..., "hit": ...}: one disk hit, or with mode "first", the whole first call
    from the import; hit is None but for kiln."""
    child = COMPARE_SYSTEMS[system](pycuda_site, pycuda_cache, pymod)
    first = mode == "first"
    if first:
        t0 = time.perf_counter()
        child.setup(first)
        child.context(first)
    else:
        child.setup(first)
        child.context(first)
        t0 = time.perf_counter()
    got = child.run()
    ms = (time.perf_counter() - t0) * 1e3
    got, hit = child.check(got)
    assert (got == 6).all(), got
    print(json.dumps({"ms": ms, "hit": hit}))


# ---- cache.py: the disk hit of kiln and CuPy ------------------------------------------------

CACHE_LAUNCH_N = 256  # elements and threads of the first launch in a new process


def inputs():
    rng = np.random.default_rng(3)
    return (rng.random(CACHE_LAUNCH_N, dtype=np.float32),
            rng.random(CACHE_LAUNCH_N, dtype=np.float32))


def exit_unless_products(got, a, b, what):
    try:
        expect_products(got, a, b, what)
    except AssertionError as e:
        sys.exit(str(e))


def cache_kiln(launch):
    """SourceModule + get_function (+ first launch + synchronize), from the disk cache."""
    import kiln
    n = CACHE_LAUNCH_N
    try:
        kiln.Device(0).make_current()
        kiln.synchronize()
    except kiln.NoDeviceError:
        if launch:
            sys.exit("no GPU to launch on")
    if launch:
        a, b = inputs()
        dest, da, db = (kiln.mem_alloc(n * 4) for _ in range(3))
        kiln.memcpy_htod(da, a)
        kiln.memcpy_htod(db, b)
        block, grid = (n, 1, 1), (1, 1)
        t0 = time.perf_counter()
        module = kiln.SourceModule(CACHE_SOURCE)
        f = module.get_function(SEED_KERNEL)
        f(dest, da, db, n, block=block, grid=grid)
        kiln.synchronize()
        elapsed = time.perf_counter() - t0
        got = np.empty(n, np.float32)
        kiln.memcpy_dtoh(got, dest)
        exit_unless_products(got, a, b, "kiln's first launch")
    else:
        t0 = time.perf_counter()
        module = kiln.SourceModule(CACHE_SOURCE)
        module.get_function(SEED_KERNEL)  # raises unless the kernel is there
        elapsed = time.perf_counter() - t0
    stats = kiln.cache_stats()
    if stats["disk_hits"] != 1 or stats["compiles"] != 0:
        sys.exit(f"kiln did not hit its disk cache once without compiling: {stats}")
    return {"ms": elapsed * 1e3}


def cache_files(folder):
    from pathlib import Path
    return {(p.name, p.stat().st_size, p.stat().st_mtime_ns)
            for p in Path(folder).rglob("*") if p.is_file()}


def cache_cupy(fill):
    """RawKernel + first launch + synchronize; fill: on an empty cache, which it must fill."""
    import cupy as cp
    n = CACHE_LAUNCH_N
    a, b = inputs()
    ga, gb, gdest = cp.asarray(a), cp.asarray(b), cp.zeros(n, cp.float32)  # context up
    n32 = np.int32(n)
    folder = os.environ["CUPY_CACHE_DIR"]
    before = cache_files(folder)
    t0 = time.perf_counter()
    kernel = cp.RawKernel(CACHE_SOURCE, SEED_KERNEL)
    kernel((1,), (n,), (gdest, ga, gb, n32))
    cp.cuda.runtime.deviceSynchronize()
    elapsed = time.perf_counter() - t0
    exit_unless_products(gdest.get(), a, b, "CuPy's first launch")
    wrote = cache_files(folder) != before
    if wrote != fill:
        sys.exit("CuPy compiled instead of hitting its disk cache" if wrote
                 else "CuPy wrote nothing into CUPY_CACHE_DIR")
    return {"ms": elapsed * 1e3, "cupy": cp.__version__}


# ---- arrays.py: the first operator in a new process ------------------------------------------

def arrays_first_operator():
    """kiln's first `x * y`, from just before it to its finished result, with kiln.gpuarray
    imported and the arrays on the device: the plan, its kernel from the disk cache, the launch."""
    import kiln
    import kiln.gpuarray as gpuarray
    a, b = inputs()
    x, y = gpuarray.to_gpu(a), gpuarray.to_gpu(b)
    kiln.synchronize()
    t0 = time.perf_counter()
    z = x * y
    kiln.synchronize()
    elapsed = time.perf_counter() - t0
    if not np.array_equal(z.get(), a * b):
        sys.exit("kiln's x * y computed a wrong result")
    return {"ms": elapsed * 1e3}


ARRAYS_KINDS = {"first_operator": arrays_first_operator}

CACHE_KINDS = {"kiln": lambda: cache_kiln(False), "kiln-launch": lambda: cache_kiln(True),
               "cupy-launch": lambda: cache_cupy(False), "cupy-fill": lambda: cache_cupy(True)}


def main(argv):
    if len(argv) == 6 and argv[0] == "compare" and argv[1] in COMPARE_SYSTEMS \
            and argv[2] in ("disk", "first"):
        compare_child(*argv[1:])
    elif len(argv) == 2 and argv[0] == "cache" and argv[1] in CACHE_KINDS:
        print(json.dumps(CACHE_KINDS[argv[1]]()))
    elif len(argv) == 2 and argv[0] == "arrays" and argv[1] in ARRAYS_KINDS:
        print(json.dumps(ARRAYS_KINDS[argv[1]]()))
    else:
        sys.exit("usage: children.py compare {" + ",".join(COMPARE_SYSTEMS) + "} {disk,first} "
                 "PYCUDA_SITE PYCUDA_CACHE PYMOD\n       children.py cache {"
                 + ",".join(CACHE_KINDS) + "}\n       children.py arrays {"
                 + ",".join(ARRAYS_KINDS) + "}")


if __name__ == "__main__":
    main(sys.argv[1:])
