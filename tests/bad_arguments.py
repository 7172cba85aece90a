"""Calls kiln's public callables with wrong arguments, in a process of its own, and says how
each call ended; test_bad_arguments.py runs it and reads what it prints.

    python bad_arguments.py GROUP START

GROUP is a module (`kiln.driver`, ...), `methods` (every public method of the objects the
modules make, and every attribute assigned), `keywords` (the keywords of the calls programs
make most, each given every wrong value) or `constructors` (the same for the keywords of the
constructors and factories: compile options, code generators' parts, array layouts). A call may return or raise any ordinary exception;
what it must not do is end the process (the test sees the signal), raise SystemError (a C
function that failed without saying why) or make a kernel fault (launches are synchronous here,
CUDA_LAUNCH_BLOCKING=1, so a fault is raised by the call that caused it). Before each call the
script prints `CALL <index> <what>`, so that a test seeing the process end knows the call, and
can start another process at the next index.
"""
import importlib
import inspect
import itertools
import os
import sys
import time

import numpy as np

MODULES = ("kiln", "kiln.driver", "kiln.gpuarray", "kiln.cumath", "kiln.tools", "kiln.elementwise",
           "kiln.reduction", "kiln.scan", "kiln.curandom", "kiln.compiler")
GROUPS = MODULES + ("methods", "keywords", "constructors")

# Calls that change the process for every call after them rather than check their arguments.
SKIPPED = {"kiln.driver.init", "kiln.tools.init", "kiln.cache_clear", "kiln.cache_prune",
           "kiln.pool_trim"}
# Methods that do the same to the current context.
SKIPPED_METHODS = {"Context.pop", "Context.detach", "Context.push"}
# Special methods worth calling with wrong operands; other dunders are Python's own.
SPECIAL = {"__getitem__", "__setitem__", "__call__", "__add__", "__iadd__", "__pow__",
           "__truediv__", "__floordiv__", "__mod__", "__lt__", "__and__", "__lshift__",
           "__matmul__", "__array__", "__index__", "__int__", "__float__", "__len__", "__bool__",
           "__reduce__", "__setstate__", "__copy__", "__deepcopy__", "__dlpack__"}

SOURCE = """
__global__ void k(float *a, int n) { int i = threadIdx.x; if (i < n) a[i] *= 2; }
__constant__ float c[4];
"""


def wrong_values(gpu):
    """Values of every kind a program may pass where another is expected: the first 14 are
    also tried in pairs."""
    values = [None, -1, 0, 2**70, -2**70, 1.5, float("nan"), "x", b"x", [], (), [1, 2], {},
              object(), np.zeros(3, np.float32), np.zeros((3, 4), np.float32)[:, ::2],
              np.float64(2), np.int8(-3), (1, 2, 3), (0, 0, 0), (-1, 1, 1), (2**40, 1, 1),
              np.float32]
    if gpu:
        import kiln.gpuarray as ga
        a = ga.to_gpu(np.arange(12, dtype=np.float32))
        values += [a, a[::2], a.reshape(3, 4).T, ga.empty(0, np.float32),
                   ga.to_gpu(np.arange(4, dtype=np.complex64)),
                   ga.to_gpu(np.arange(4, dtype=np.int8))]
    return values


def argument_lists(values):
    yield ()
    for v in values:
        yield (v,)
    yield from itertools.product(values[:14], repeat=2)
    for v in values:
        yield (v, v, v)


def makers(gpu):
    """name: a function making a fresh object of that kind (one per call, as a call may
    break the object it is made on)."""
    import kiln.compiler as compiler
    import kiln.curandom as curandom
    import kiln.driver as drv
    import kiln.elementwise as elementwise
    import kiln.gpuarray as ga
    import kiln.reduction as reduction
    import kiln.scan as scan
    import kiln.tools as tools
    made = {
        "Memcpy2D": drv.Memcpy2D, "Memcpy3D": drv.Memcpy3D,
        "ArrayDescriptor": drv.ArrayDescriptor, "ArrayDescriptor3D": drv.ArrayDescriptor3D,
        "SourceModule": lambda: compiler.SourceModule(SOURCE),
        "ElementwiseKernel": lambda: elementwise.ElementwiseKernel("float *x, float a",
                                                                   "x[i] = a*x[i]"),
        "ReductionKernel": lambda: reduction.ReductionKernel(np.float32, "0", "a+b", "x[i]",
                                                             "float *x"),
        "InclusiveScanKernel": lambda: scan.InclusiveScanKernel(np.float32, "a+b"),
    }
    if gpu:
        made.update({
            "GPUArray": lambda: ga.to_gpu(np.arange(12, dtype=np.float32)),
            "GPUArray2d": lambda: ga.to_gpu(np.arange(12, dtype=np.float32).reshape(3, 4)),
            "GPUArray_view": lambda: ga.to_gpu(np.arange(12, dtype=np.float32))[::3],
            "GPUArray_complex": lambda: ga.to_gpu(np.arange(6, dtype=np.complex64)),
            "GPUArray_int": lambda: ga.to_gpu(np.arange(6, dtype=np.int32)),
            "GPUArray_empty": lambda: ga.empty(0, np.float64),
            "Function": lambda: compiler.SourceModule(SOURCE).get_function("k"),
            "Stream": drv.Stream, "Event": drv.Event,
            "DeviceAllocation": lambda: drv.mem_alloc(64),
            "Device": lambda: drv.Device(0),
            "HostAllocation": lambda: drv.pagelocked_empty(8, np.float32).base,
            "CudaArray": lambda: drv.matrix_to_array(np.zeros((4, 4), np.float32), "C"),
            "XORWOW": curandom.XORWOWRandomNumberGenerator,
            "MRG32k3a": curandom.MRG32k3aRandomNumberGenerator,
            "Sobol32": curandom.Sobol32RandomNumberGenerator,
            "DeviceMemoryPool": tools.DeviceMemoryPool,
            "PageLockedMemoryPool": tools.PageLockedMemoryPool,
            "PooledDeviceAllocation": lambda: tools.DeviceMemoryPool().allocate(64),
            "DeviceData": tools.DeviceData,
            "Context": drv.Context.get_current,
        })
    return made


# (object, method, arguments that are right, keywords each given every wrong value)
KEYWORDS = [
    ("Function", "__call__", lambda ga: (ga.to_gpu(np.zeros(4, np.float32)), np.int32(4)),
     ["block", "grid", "shared", "stream", "time_kernel", "texrefs"]),
    ("GPUArray", "get", lambda ga: (), ["ary", "pagelocked", "async_", "stream"]),
    ("GPUArray", "set", lambda ga: (np.zeros(12, np.float32),), ["async_", "stream"]),
    ("GPUArray", "fill", lambda ga: (1.0,), ["stream", "out"]),
    ("GPUArray", "astype", lambda ga: (np.float64,), ["stream"]),
    ("GPUArray", "reshape", lambda ga: ((3, 4),), ["order"]),
    ("GPUArray", "sum", lambda ga: (), ["stream", "dtype"]),
    ("GPUArray2d", "transpose", lambda ga: (), ["axes"]),
    ("GPUArray", "view", lambda ga: (), ["dtype"]),
    ("GPUArray", "copy", lambda ga: (), ["order"]),
    ("ElementwiseKernel", "__call__", lambda ga: (ga.to_gpu(np.zeros(4, np.float32)), 2.0),
     ["range", "slice", "stream"]),
    ("ReductionKernel", "__call__", lambda ga: (ga.to_gpu(np.zeros(4, np.float32)),),
     ["stream", "out", "allocator", "range"]),
    ("InclusiveScanKernel", "__call__", lambda ga: (ga.to_gpu(np.zeros(4, np.float32)),),
     ["output", "stream"]),
    ("XORWOW", "gen_uniform", lambda ga: ((8,), np.float32), ["stream"]),
    ("XORWOW", "fill_uniform", lambda ga: (ga.empty(8, np.float32),), ["stream"]),
]


def constructors():
    """(what, function, arguments that are right, keywords each given every wrong value)."""
    import kiln.compiler as compiler
    import kiln.curandom as curandom
    import kiln.elementwise as elementwise
    import kiln.gpuarray as ga
    import kiln.reduction as reduction
    import kiln.scan as scan
    return [
        ("SourceModule", compiler.SourceModule, (SOURCE,),
         ["nvcc", "options", "no_extern_c", "arch", "code", "cache_dir",
          "include_dirs"]),
        ("ElementwiseKernel", elementwise.ElementwiseKernel, ("float *x, float a", "x[i] = a*x[i]"),
         ["name", "options", "preamble", "loop_prep", "after_loop"]),
        ("ReductionKernel", reduction.ReductionKernel,
         (np.float32, "0", "a+b", "x[i]", "float *x"),
         ["name", "options", "preamble", "allocator"]),
        ("InclusiveScanKernel", scan.InclusiveScanKernel, (np.float32, "a+b"),
         ["neutral", "name_prefix", "options", "preamble"]),
        ("ExclusiveScanKernel", scan.ExclusiveScanKernel, (np.float32, "a+b", "0"),
         ["name_prefix", "options", "preamble"]),
        ("GPUArray", ga.GPUArray, ((4,), np.float32),
         ["allocator", "base", "gpudata", "strides", "order"]),
        ("empty", ga.empty, ((4,), np.float32), ["order", "allocator"]),
        ("zeros", ga.zeros, ((4,), np.float32), ["order", "allocator"]),
        ("arange", ga.arange, (0, 8), ["step", "dtype", "allocator"]),
        ("to_gpu", ga.to_gpu, (np.zeros(4, np.float32),), ["allocator"]),
        ("rand", curandom.rand, ((4,),), ["dtype", "stream"]),
    ]


def constructor_calls(gpu):
    for what, f, right, keywords in constructors():
        for keyword, v in itertools.product(keywords, wrong_values(gpu)):
            yield (f"{what}({keyword}=)", (v,),
                   lambda f=f, right=right, keyword=keyword, v=v: f(*right, **{keyword: v}))


def module_calls(name, gpu):
    """(what, call) for each public callable of the module and each list of wrong arguments."""
    module = importlib.import_module(name)
    values = wrong_values(gpu)
    for attr in sorted(dir(module)):
        f = getattr(module, attr)
        what = f"{name}.{attr}"
        if attr.startswith("_") or not callable(f) or inspect.ismodule(f) or what in SKIPPED:
            continue
        for args in argument_lists(values):
            yield what, args, (lambda f=f, args=args: f(*args))


def method_calls(gpu):
    values = wrong_values(gpu)
    for kind, make in makers(gpu).items():
        probe = make()
        for attr in sorted(dir(probe)):
            what = f"{kind}.{attr}"
            if (attr.startswith("_") and attr not in SPECIAL) or what in SKIPPED_METHODS:
                continue
            try:
                is_method = callable(getattr(probe, attr))
            except Exception:  # an attribute that cannot be read on this object
                continue
            if is_method:
                for args in argument_lists(values):
                    yield what, args, (lambda make=make, attr=attr, args=args:
                                       getattr(make(), attr)(*args))
            else:
                for v in values:
                    yield what + " =", (v,), (lambda make=make, attr=attr, v=v:
                                              setattr(make(), attr, v))


def keyword_calls(gpu):
    if not gpu:
        return
    import kiln.gpuarray as ga
    made = makers(gpu)
    for kind, attr, right, keywords in KEYWORDS:
        for keyword, v in itertools.product(keywords, wrong_values(gpu)):
            yield (f"{kind}.{attr}({keyword}=)", (v,),
                   lambda kind=kind, attr=attr, right=right, keyword=keyword, v=v:
                   getattr(made[kind](), attr)(*right(ga), **{keyword: v}))


def main(group, start):
    try:
        import kiln.autoinit  # noqa: F401
        gpu = True
    except Exception as e:  # no device here: the calls stop earlier, and are still made
        print("NO GPU", type(e).__name__, flush=True)
        gpu = False
    calls = (method_calls(gpu) if group == "methods" else keyword_calls(gpu)
             if group == "keywords" else constructor_calls(gpu) if group == "constructors"
             else module_calls(group, gpu))
    done = 0
    for index, (what, args, call) in enumerate(calls):
        if index < start:
            continue
        kinds = ", ".join(type(a).__name__ for a in args)
        print(f"CALL {index} {what}({kinds})", flush=True)
        began = time.monotonic()
        try:
            call()
        except SystemError as e:
            print(f"SYSTEMERROR {index} {what}({kinds}): {e}", flush=True)
        except BaseException as e:  # noqa: B036 - SystemExit and the rest are answers too
            text = str(e)
            if "these launches" in text or "illegal" in text.lower():
                print(f"FAULT {index} {what}({kinds}): {text[:300]!r}", flush=True)
                os._exit(3)  # the context is lost: the test goes on in another process
        if time.monotonic() - began > 10:
            print(f"SLOW {index} {what}({kinds}): {time.monotonic() - began:.1f} s", flush=True)
        done += 1
    print(f"DONE {group} {done}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
