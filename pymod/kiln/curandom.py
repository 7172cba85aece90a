"""Random numbers on the GPU: PyCUDA's `pycuda.curandom`, over cuRAND's device API.

    import kiln.curandom as curandom
    x = curandom.rand((1000, 1000))                        # float32 in [0, 1)
    gen = curandom.PhiloxRandomNumberGenerator(seed=42)
    y = gen.gen_normal(10**6, np.float64)
    gen.fill_poisson(counts_gpu, 3.5)
    xw = curandom.XORWOWRandomNumberGenerator(curandom.seed_getter_uniform)

Three generators, each with every kernel it needs in one module (`_curand_src`), compiled the
first time one of its kind is made (then found in kiln's cache):

- `PhiloxRandomNumberGenerator(seed=None, offset=0)`: counter-based and stateless on the
  device, so making one costs nothing on the GPU; the default behind `rand`.
- `XORWOWRandomNumberGenerator(seed_getter=None, offset=0)` and
  `MRG32k3aRandomNumberGenerator(seed_getter=None, offset=0)`: PyCUDA's, with one cuRAND
  state per generator kept on the device (set up once, at construction: cuRAND's curand_init
  is slow for XORWOW).

Reproducibility: the same seed (or seeds) and offset, and the same sequence of calls (the same
methods, sizes and dtypes), give the same numbers, in every process and on every GPU. XORWOW
and MRG32k3a always run 65536 generators (element i of a call comes from generator
i % 65536), not one per multiprocessor as PyCUDA does, so their numbers do not depend on the
GPU either. Philox's numbers depend on its seed and counter alone.

Where kiln differs from PyCUDA: uniform floats are in [0, 1) (cuRAND's, and so PyCUDA's, are
in (0, 1]); every fill writes arrays of any strides (through a contiguous temporary) and
refuses a dtype it cannot fill with a TypeError (PyCUDA: NotImplementedError); skips reach
every generator (PyCUDA's reach those of the first block); float16 and 64-bit integers can be
filled uniformly; fill_poisson takes a device array of lambdas too. Calls on one XORWOW or
MRG32k3a generator update its states in place: queue them on one stream (or synchronize
between streams).
"""
import functools
import os
import random
import re

import numpy as np

from . import _curand_src, _ops
from ._kiln import DeviceArray, empty, to_device
from .elementwise import compile_source

__all__ = ["rand", "get_curand_version", "seed_getter_uniform", "seed_getter_unique",
           "XORWOWRandomNumberGenerator", "MRG32k3aRandomNumberGenerator",
           "PhiloxRandomNumberGenerator"]

_UNIFORM = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64", np.dtype(np.uint32): "u32", np.dtype(np.int32): "u32",
            np.dtype(np.uint64): "u64", np.dtype(np.int64): "u64"}
_FLOATS = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_POISSON = {np.dtype(np.uint32): "u32"}

# Philox launches: one thread per counter block up to this many blocks of threads, then each
# thread takes several (a grid-stride loop); the numbers do not depend on it.
_PHILOX_MAX_GRID = 1 << 20


# ---- Module-level functions --------------------------------------------------------------------

@functools.lru_cache(maxsize=None)
def get_curand_version():
    """(major, minor, patch) of the cuRAND headers kiln's generators are compiled with."""
    m = compile_source(_curand_src.VERSION_SOURCE)
    ptx = m.ptx.decode() if isinstance(m.ptx, bytes) else m.ptx
    found = re.search(r"kiln_curand_version\s*=\s*(\d+)", ptx)
    if not found:
        raise RuntimeError("the cuRAND version could not be read from the compiled headers")
    v = int(found.group(1))
    return (v // 1000, (v % 1000) // 100, v % 100)


def seed_getter_uniform(N):
    """A device int32 array of N copies of one random seed (from Python's `random`)."""
    value = random.randint(0, 2**31 - 1)
    return to_device(np.full(int(N), value, dtype=np.int32))


def seed_getter_unique(N):
    """A device int32 array of N random seeds (from NumPy's global generator)."""
    return to_device(np.random.randint(0, 2**31 - 1, int(N)).astype(np.int32))


def rand(shape, dtype=np.float32, stream=None):
    """An array of shape filled with uniform values of dtype in [0, 1) (random bits for
    integer dtypes), from a Philox generator seeded from NumPy's global generator, so
    `np.random.seed(s)` makes it repeat, as it does PyCUDA's."""
    seed = int(np.random.randint(0, 2**63 - 1, dtype=np.int64))
    return PhiloxRandomNumberGenerator(seed).gen_uniform(shape, dtype, stream)


# ---- What every generator shares ---------------------------------------------------------------

_MODULES = {}


def _module(kind):
    m = _MODULES.get(kind)
    if m is None:
        m = _MODULES[kind] = compile_source(_curand_src.source(kind))
    return m


def _check_data(data, table, method):
    if not isinstance(data, DeviceArray):
        raise TypeError(f"{method} fills a device array (kiln.empty(...)), not "
                        f"{type(data).__name__}")
    try:
        return table[data.dtype]
    except KeyError:
        names = ", ".join(sorted({str(d) for d in table}))
        raise TypeError(f"{method} fills arrays of {names}, not {data.dtype}") from None


def _kernel_name(dist, kind, params):
    """The kernel (kiln_rng_<name>) of a distribution over data of kind (_UNIFORM's values)."""
    if dist == "uniform":
        return kind
    if dist == "poisson":
        return "poisson_array" if isinstance(params[0], DeviceArray) else "poisson"
    return f"{dist}_{kind}"


def _real(value, name):
    try:
        return float(value)
    except (TypeError, ValueError):
        raise TypeError(f"{name} is a real number, not {type(value).__name__}") from None


class _Generator:
    """fill_* and gen_* over a generator's _run(kernel name, data, n, params, stream): the
    kernels are kiln_rng_<name> of the generator's module."""

    def _function(self, name):
        f = self._functions.get(name)
        if f is None:
            f = self._functions[name] = self.module.get_function(f"kiln_rng_{name}")
        return f

    def _fill(self, method, table, data, dist, params, stream):
        kind = _check_data(data, table, method)
        if data.size == 0:
            return data
        name = _kernel_name(dist, kind, params)
        if data.flags.c_contiguous:
            self._run(name, data, data.size, params, stream)
        else:
            tmp = empty(data.shape, data.dtype, stream=stream)
            self._run(name, tmp, tmp.size, params, stream)
            _ops.copy(data, tmp, stream=stream)
        return data

    def fill_uniform(self, data, stream=None):
        """Fills data with uniform values in [0, 1) (float16, float32, float64), or with random
        bits (int32, uint32, int64, uint64)."""
        self._fill("fill_uniform", _UNIFORM, data, "uniform", (), stream)

    def fill_normal(self, data, stream=None):
        """Fills data (float32 or float64) with values of the standard normal distribution."""
        self._fill("fill_normal", _FLOATS, data, "normal", (), stream)

    def fill_log_normal(self, data, mean, stddev, stream=None):
        """Fills data (float32 or float64) with exp(mean + stddev * z), z standard normal."""
        mean, stddev = _real(mean, "mean"), _real(stddev, "stddev")
        if not stddev >= 0:
            raise ValueError(f"stddev must be >= 0, not {stddev}")
        self._fill("fill_log_normal", _FLOATS, data, "lognormal", (mean, stddev), stream)

    def fill_poisson(self, data, lambda_value=None, stream=None):
        """Fills data (uint32) with Poisson values of mean lambda_value: a number > 0, or a
        device array of data's shape giving each element's mean."""
        if lambda_value is None:
            raise TypeError("fill_poisson needs lambda_value, the mean of the distribution")
        _check_data(data, _POISSON, "fill_poisson")
        if isinstance(lambda_value, DeviceArray):
            if tuple(lambda_value.shape) != tuple(data.shape):
                raise ValueError(f"lambda_value has shape {lambda_value.shape}; data has "
                                 f"{data.shape}")
            if lambda_value.dtype.kind not in "biuf":
                raise TypeError(f"lambda_value is real, not {lambda_value.dtype}")
            lam = lambda_value
            if lam.dtype != np.float64 or not lam.flags.c_contiguous:
                lam = _ops.astype(lam, np.float64, stream=stream)
        else:
            lam = _real(lambda_value, "lambda_value")
            if not lam > 0:
                raise ValueError(f"lambda_value must be > 0, not {lam}")
        self._fill("fill_poisson", _POISSON, data, "poisson", (lam,), stream)

    def gen_uniform(self, shape, dtype=np.float32, stream=None):
        """A new array of shape and dtype filled by fill_uniform."""
        return self._gen(shape, dtype, _UNIFORM, "gen_uniform", stream,
                         lambda a: self.fill_uniform(a, stream))

    def gen_normal(self, shape, dtype=np.float32, stream=None):
        """A new array of shape and dtype filled by fill_normal."""
        return self._gen(shape, dtype, _FLOATS, "gen_normal", stream,
                         lambda a: self.fill_normal(a, stream))

    def gen_log_normal(self, shape, dtype, mean, stddev, stream=None):
        """A new array of shape and dtype filled by fill_log_normal."""
        return self._gen(shape, dtype, _FLOATS, "gen_log_normal", stream,
                         lambda a: self.fill_log_normal(a, mean, stddev, stream))

    def gen_poisson(self, shape, dtype, lambda_value, stream=None):
        """A new array of shape and dtype (uint32) filled by fill_poisson."""
        return self._gen(shape, dtype, _POISSON, "gen_poisson", stream,
                         lambda a: self.fill_poisson(a, lambda_value, stream))

    @staticmethod
    def _gen(shape, dtype, table, method, stream, fill):
        dtype = np.dtype(dtype)
        if dtype not in table:
            names = ", ".join(sorted({str(d) for d in table}))
            raise TypeError(f"{method} makes arrays of {names}, not {dtype}")
        result = empty(shape, dtype, stream=stream)
        fill(result)
        return result


# ---- Philox ------------------------------------------------------------------------------------

class PhiloxRandomNumberGenerator(_Generator):
    """PhiloxRandomNumberGenerator(seed=None, offset=0)

    Philox4x32-10 with key `seed` (an int of up to 64 bits; None draws one from the operating
    system) and a counter of 128-bit blocks starting at `offset`. A call takes the blocks
    from the counter on and moves it past them: ceil(n / 4) blocks for n 32-bit values
    (float16, float32, uint32, int32, and the normals of float32), ceil(n / 2) for 64-bit
    ones, n for Poisson values. `offset` is the counter now; setting it (or
    call_skip_ahead) moves it."""

    def __init__(self, seed=None, offset=0):
        if seed is None:
            seed = int.from_bytes(os.urandom(8), "little")
        if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
            raise TypeError(f"seed is an int, not {type(seed).__name__}")
        self.seed = int(seed) % 2**64
        self.offset = _count(offset, "offset")
        self.module = _module("philox")
        self._functions = {}

    def call_skip_ahead(self, i, stream=None):
        """Moves the counter i blocks on, as if calls had used them."""
        self.offset = (self.offset + _count(i, "i")) % 2**64

    def _run(self, name, data, n, params, stream):
        per = _curand_src.PHILOX_PER_BLOCK.get(name)
        used = n if per is None else -(-n // per)  # Poisson: one subsequence an element
        grid = max(1, min(-(-used // _curand_src.BLOCK), _PHILOX_MAX_GRID))
        self._function(name)(data, n, self.seed, self.offset, *params,
                             block=(_curand_src.BLOCK, 1, 1), grid=(grid, 1), stream=stream)
        self.offset = (self.offset + used) % 2**64


def _count(value, name):
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < 0:
        raise ValueError(f"{name} is an int >= 0, not {value!r}")
    return int(value)


# ---- Generators with states on the device ------------------------------------------------------

class _StatefulGenerator(_Generator):
    """One cuRAND state per generator, GENERATORS of them, on the device."""

    _kind = None
    generators_per_block = _curand_src.BLOCK
    block_count = _curand_src.STATE_BLOCKS
    has_box_muller = True

    def __init__(self, seed_getter=None, offset=0, *, seed=None):
        count = _curand_src.GENERATORS
        if seed is not None and seed_getter is not None:
            raise TypeError("give seed_getter or seed, not both")
        if seed is not None:
            if not isinstance(seed, (int, np.integer)) or isinstance(seed, bool):
                raise TypeError(f"seed is an int, not {type(seed).__name__}")
            seeds = to_device(np.full(count, int(seed) % 2**32, np.uint32).view(np.int32))
        else:
            seeds = (seed_getter or seed_getter_unique)(count)
            if isinstance(seeds, np.ndarray):
                seeds = to_device(np.ascontiguousarray(seeds))
            if not (isinstance(seeds, DeviceArray) and seeds.dtype == np.int32
                    and seeds.size == count):
                raise TypeError(f"seed_getter({count}) must give a device array of {count} "
                                f"int32 seeds, not {_describe(seeds)}")
            if not seeds.flags.c_contiguous:
                seeds = _ops.ascontiguous(seeds)
        self.offset = _count(offset, "offset")
        self.module = _module(self._kind)
        self._functions = {}
        size = _state_size(self.module)
        self.state = empty((count * size,), np.uint8)
        self._launch("init", seeds, self.offset)

    def _launch(self, name, *args, stream=None, threads=_curand_src.GENERATORS):
        grid = max(1, -(-threads // _curand_src.BLOCK))
        self._function(name)(self.state, *args, block=(_curand_src.BLOCK, 1, 1),
                             grid=(min(grid, _curand_src.STATE_BLOCKS), 1), stream=stream)

    def _run(self, name, data, n, params, stream):
        self._launch(name, data, n, *params, stream=stream, threads=n)

    def _skip_array(self, name, counts, stream):
        if isinstance(counts, np.ndarray):
            counts = to_device(np.ascontiguousarray(counts, dtype=np.uint64))
        count = _curand_src.GENERATORS
        if not (isinstance(counts, DeviceArray) and counts.dtype in (np.uint64, np.int64)
                and counts.size == count):
            raise TypeError(f"{name} takes a device array of {count} uint64 counts, one per "
                            f"generator, not {_describe(counts)}")
        if not counts.flags.c_contiguous:
            counts = _ops.ascontiguous(counts, stream=stream)
        self._launch(name, 0, counts, stream=stream)

    def call_skip_ahead(self, i, stream=None):
        """Moves every generator i values on (as drawing and dropping them would)."""
        self._launch("skip", _count(i, "i"), 0, stream=stream)

    def call_skip_ahead_array(self, i, stream=None):
        """Moves generator g i[g] values on; i holds one uint64 per generator."""
        self._skip_array("skip", i, stream)

    def call_skip_ahead_sequence(self, i, stream=None):
        """Moves every generator i subsequences (XORWOW's: 2**67 values) on."""
        self._launch("skip_sequence", _count(i, "i"), 0, stream=stream)

    def call_skip_ahead_sequence_array(self, i, stream=None):
        """Moves generator g i[g] subsequences on."""
        self._skip_array("skip_sequence", i, stream)


def _describe(obj):
    if isinstance(obj, (DeviceArray, np.ndarray)):
        return f"an array of {obj.size} {obj.dtype}"
    return type(obj).__name__


def _state_size(module):
    """sizeof the module's cuRAND state, read from its kiln_rng_state_size kernel's PTX."""
    (param,) = module.get_function("kiln_rng_state_size").signature
    found = re.search(r"\[(\d+)\]", param)
    if not found:
        raise RuntimeError(f"cannot read the size of the cuRAND state from {param!r}")
    return int(found.group(1))


class XORWOWRandomNumberGenerator(_StatefulGenerator):
    """XORWOWRandomNumberGenerator(seed_getter=None, offset=0, *, seed=None)

    cuRAND's XORWOW (period 2**190 - 1), one generator per thread of a fixed launch shape
    (65536 of them): generator g starts at subsequence g of its seed, `offset` values in.
    `seed_getter(65536)` gives their seeds as a device int32 array (None: seed_getter_unique,
    drawn from NumPy's global generator); `seed=` an int gives them all that seed."""

    _kind = "xorwow"


class MRG32k3aRandomNumberGenerator(_StatefulGenerator):
    """MRG32k3aRandomNumberGenerator(seed_getter=None, offset=0, *, seed=None)

    cuRAND's MRG32k3a (period 2**191), with the same arguments as
    XORWOWRandomNumberGenerator (its subsequences are 2**76 values long), and skips by
    subsequences besides sequences (2**127 values)."""

    _kind = "mrg32k3a"

    def call_skip_ahead_subsequence(self, i, stream=None):
        """Moves every generator i subsequences (of 2**76 values) on."""
        self._launch("skip_subsequence", _count(i, "i"), 0, stream=stream)

    def call_skip_ahead_subsequence_array(self, i, stream=None):
        """Moves generator g i[g] subsequences on."""
        self._skip_array("skip_subsequence", i, stream)

    def call_skip_ahead_sequence(self, i, stream=None):
        """Moves every generator i sequences (of 2**127 values) on."""
        self._launch("skip_sequence", _count(i, "i"), 0, stream=stream)
