"""Random numbers on the GPU: PyCUDA's `pycuda.curandom`, over cuRAND's device API.

    import kiln.curandom as curandom
    x = curandom.rand((1000, 1000))                        # float32 in [0, 1)
    gen = curandom.PhiloxRandomNumberGenerator(seed=42)
    y = gen.gen_normal(10**6, np.float64)
    gen.fill_poisson(counts_gpu, 3.5)
    xw = curandom.XORWOWRandomNumberGenerator(curandom.seed_getter_uniform)

The generators, each type with every kernel it needs in one module (`_curand_src`), compiled
the first time one of its kind is made (then found in kiln's cache):

- `PhiloxRandomNumberGenerator(seed=None, offset=0)`: counter-based and stateless on the
  device, so making one costs nothing on the GPU; the default behind `rand`.
- `XORWOWRandomNumberGenerator(seed_getter=None, offset=0)` and
  `MRG32k3aRandomNumberGenerator(seed_getter=None, offset=0)`: PyCUDA's, with one cuRAND
  state per generator kept on the device (set up once, at construction: cuRAND's curand_init
  is slow for XORWOW).
- `Sobol32RandomNumberGenerator(dir_vector=None, offset=0)`, `Sobol64...` and their
  `ScrambledSobol...` forms: quasi-random, 16384 dimensions with a state each on the device;
  element i of a call is the next point of dimension i % 16384 (docs/cumath.md). Their tables
  (direction vectors, scramble constants) come from cuRAND's host library (`_curand_host`).

`md5_code` is PyCUDA's too: the statements that give an elementwise operation of
get_elwise_kernel four random words `a` to `d`, from MD5 over the launch's indices, `seed`,
`i` and `n` (`_md5_src`).

Reproducibility: the same seed (or seeds) and offset, and the same sequence of calls (the same
methods, sizes and dtypes), give the same numbers, in every process and on every GPU. XORWOW
and MRG32k3a always run 65536 generators (element i of a call comes from generator
i % 65536), not one per multiprocessor as PyCUDA does, so their numbers do not depend on the
GPU either. Philox's numbers depend on its seed and counter alone.

Uniform floats of XORWOW, MRG32k3a and Sobol are in (0, 1], as PyCUDA's (cuRAND's
curand_uniform); Philox's, and so rand's, are in [0, 1), as NumPy's.

Where kiln differs from PyCUDA: every fill writes arrays of any strides (through a contiguous temporary) and
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

from . import _curand_host, _curand_src, _ops
# PyCUDA's curandom imports these, and programs that import only pycuda.curandom use
# pycuda.gpuarray after it.
from . import characterize, compiler, gpuarray  # noqa: F401
from ._kiln import DeviceArray, empty, to_device
from ._md5_src import md5_code
from .elementwise import compile_source

__all__ = ["rand", "get_curand_version", "seed_getter_uniform", "seed_getter_unique",
           "XORWOWRandomNumberGenerator", "MRG32k3aRandomNumberGenerator",
           "PhiloxRandomNumberGenerator", "Sobol32RandomNumberGenerator",
           "ScrambledSobol32RandomNumberGenerator", "Sobol64RandomNumberGenerator",
           "ScrambledSobol64RandomNumberGenerator", "direction_vector_set",
           "generate_direction_vectors", "generate_scramble_constants32",
           "generate_scramble_constants64", "md5_code"]

_UNIFORM = {np.dtype(np.float16): "f16", np.dtype(np.float32): "f32",
            np.dtype(np.float64): "f64", np.dtype(np.uint32): "u32", np.dtype(np.int32): "u32",
            np.dtype(np.uint64): "u64", np.dtype(np.int64): "u64"}
_FLOATS = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64"}
_POISSON = {np.dtype(np.uint32): "u32"}
_POISSON_IN_PLACE = {np.dtype(np.float32): "f32", np.dtype(np.float64): "f64",
                     np.dtype(np.uint32): "u32"}
# A 32-bit Sobol point makes no 64-bit integer.
_UNIFORM_32 = {d: k for d, k in _UNIFORM.items() if k != "u64"}

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


def seed_getter_uniform(n):
    """A device int32 array of n copies of one random seed (from Python's `random`)."""
    value = random.randint(0, 2**31 - 1)
    return to_device(np.full(int(n), value, dtype=np.int32))


def seed_getter_unique(n):
    """A device int32 array of n random seeds (from NumPy's global generator)."""
    return to_device(np.random.randint(0, 2**31 - 1, int(n)).astype(np.int32))


def rand(shape, dtype=np.float32, stream=None):
    """An array of shape filled with uniform values of dtype in [0, 1) (random bits for
    integer dtypes), from a Philox generator seeded from NumPy's global generator, so
    `np.random.seed(s)` makes it repeat, as it does PyCUDA's. The seed is drawn as PyCUDA
    draws its own, np.random.randint(2**31 - 1), so NumPy's numbers drawn after it are the
    ones a program drew under PyCUDA."""
    seed = int(np.random.randint(2**31 - 1))
    return PhiloxRandomNumberGenerator(seed).gen_uniform(shape, dtype, stream)


# ---- What every generator shares ---------------------------------------------------------------

_MODULES = {}


def _module(kind):
    m = _MODULES.get(kind)
    if m is None:
        m = _MODULES[kind] = compile_source(_curand_src.source(kind))
    return m


class UnsupportedDtypeError(TypeError, NotImplementedError):
    """A dtype a generator does not fill: a TypeError, and the NotImplementedError PyCUDA's
    generators raise, which programs catch."""


def _check_data(data, table, method):
    if not isinstance(data, DeviceArray):
        raise TypeError(f"{method} fills a device array (kiln.empty(...)), not "
                        f"{type(data).__name__}")
    try:
        return table[data.dtype]
    except KeyError:
        names = ", ".join(sorted({str(d) for d in table}))
        raise UnsupportedDtypeError(f"{method} fills arrays of {names}, not {data.dtype}") \
            from None


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

    _uniform = _UNIFORM  # the dtypes fill_uniform fills

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
        """Fills data with uniform values (float16, float32, float64: in (0, 1] from XORWOW,
        MRG32k3a and Sobol, as PyCUDA's; in [0, 1) from Philox), or with random bits (int32,
        uint32, int64, uint64)."""
        self._fill("fill_uniform", self._uniform, data, "uniform", (), stream)

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
        device array of data's shape giving each element's mean. Without lambda_value,
        PyCUDA's in-place form: each element of data (float32, float64 or uint32) is the
        mean of the value that replaces it."""
        if lambda_value is None:
            _check_data(data, _POISSON_IN_PLACE, "fill_poisson without lambda_value")
            if data.size:
                counts = empty(data.shape, np.uint32, stream=stream)
                self.fill_poisson(counts, _ops.astype(data, np.float64, stream=stream), stream)
                _ops.copy(data, counts, stream=stream)
            return
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
        return self._gen(shape, dtype, self._uniform, "gen_uniform", stream,
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
            raise UnsupportedDtypeError(f"{method} makes arrays of {names}, not {dtype}")
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

class _StatesOnDevice(_Generator):
    """One cuRAND state per generator, block_count blocks of generators_per_block of them, on
    the device (self.state, which reads self._state)."""

    _kind = None
    generators_per_block = _curand_src.BLOCK
    block_count = _curand_src.STATE_BLOCKS

    @property
    def _generators(self):
        return self.block_count * self.generators_per_block

    @property
    def state(self):
        """The states, block_count * generators_per_block of them, as bytes on the device. As in
        PyCUDA, this reads _state, which a program may replace with memory of its own (states
        its kernels set up) that the generator then draws from."""
        return self._state

    @property
    def state_type(self):
        """The C type of one state, as PyCUDA names it (curandStateXORWOW): programs size
        their own states with characterize.sizeof(gen.state_type, "#include <curand_kernel.h>")."""
        return _curand_src.state_type(self._kind)

    def _make_states(self):
        self.module = _module(self._kind)
        self._functions = {}
        self._state = empty((self._generators * _state_size(self.module),), np.uint8)

    def _launch(self, name, *args, stream=None, threads=None):
        threads = self._generators if threads is None else threads
        grid = max(1, -(-threads // self.generators_per_block))
        self._function(name)(self._state, *args, block=(self.generators_per_block, 1, 1),
                             grid=(min(grid, self.block_count), 1), stream=stream)

    def _run(self, name, data, n, params, stream):
        self._launch(name, data, n, *params, stream=stream, threads=n)

    def _skip_array(self, name, counts, stream):
        if isinstance(counts, np.ndarray):
            counts = to_device(np.ascontiguousarray(counts, dtype=np.uint64))
        count = self._generators
        if isinstance(counts, DeviceArray) and counts.dtype.kind in "iu" and \
                counts.dtype.itemsize < 8 and counts.size == count:
            # PyCUDA's 32-bit Sobol generators read 32-bit counts: widened for kiln's kernel.
            counts = counts.astype(np.uint64, stream=stream)
        if not (isinstance(counts, DeviceArray) and counts.dtype in (np.uint64, np.int64)
                and counts.size == count):
            raise TypeError(f"{name} takes a device array of {count} uint64 counts, one per "
                            f"generator, not {_describe(counts)}")
        if not counts.flags.c_contiguous:
            counts = _ops.ascontiguous(counts, stream=stream)
        self._launch(name, 0, counts, stream=stream)

    def call_skip_ahead_array(self, i, stream=None):
        """Moves generator g i[g] values on; i holds one count per generator (uint64, or
        32-bit integers, which PyCUDA's 32-bit Sobol generators take)."""
        self._skip_array("skip", i, stream)


class _StatefulGenerator(_StatesOnDevice):
    """The pseudo-random generators with states: GENERATORS of them, seeded."""

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
        self._make_states()
        self._launch("init", seeds, self.offset)

    def call_skip_ahead(self, i, stream=None):
        """Moves every generator i values on (as drawing and dropping them would)."""
        self._launch("skip", _count(i, "i"), 0, stream=stream)

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


# ---- Sobol: quasi-random numbers -----------------------------------------------------------------

class direction_vector_set:  # noqa: N801 (PyCUDA's name)
    """cuRAND's sets of Sobol direction vectors (Joe and Kuo's, 20,000 dimensions), by the
    numbers curand.h gives them."""
    VECTOR_32 = 101
    SCRAMBLED_VECTOR_32 = 102
    VECTOR_64 = 103
    SCRAMBLED_VECTOR_64 = 104


def generate_direction_vectors(count, direction=direction_vector_set.VECTOR_32):
    """A device array of count direction vectors from cuRAND's set `direction`: (count, 32)
    uint32 for the 32-bit sets, (count, 64) uint64 for the 64-bit ones. Past the set's 20,000
    dimensions the vectors start again from the first, as PyCUDA's do."""
    return to_device(_curand_host.direction_vectors(_count(count, "count"), direction))


def generate_scramble_constants32(count):
    """A device array of count uint32 scramble constants for ScrambledSobol32."""
    return to_device(_curand_host.scramble_constants(_count(count, "count"), 32))


def generate_scramble_constants64(count):
    """A device array of count uint64 scramble constants for ScrambledSobol64."""
    return to_device(_curand_host.scramble_constants(_count(count, "count"), 64))


class _SobolGenerator(_StatesOnDevice):
    """SOBOL_GENERATORS dimensions of a Sobol sequence, one state each on the device."""

    block_count = _curand_src.SOBOL_BLOCKS
    has_box_muller = False
    _bits = 32
    _set = direction_vector_set.VECTOR_32
    _scrambled = False

    def __init__(self, dir_vector=None, scramble_vector=None, offset=0):
        limit = 2**self._bits
        self.offset = _count(offset, "offset")
        if self.offset >= limit:
            raise ValueError(f"offset is a point of the {self._bits}-bit sequence, below "
                             f"2**{self._bits}, not {offset}")
        count = self._generators
        point = np.dtype(np.uint32 if self._bits == 32 else np.uint64)
        vectors = _points(generate_direction_vectors(count, self._set)
                          if dir_vector is None else dir_vector,
                          (count, self._bits), point, "dir_vector")
        scramble = 0
        if self._scrambled:
            made = (generate_scramble_constants32 if self._bits == 32
                    else generate_scramble_constants64)
            scramble = _points(made(count) if scramble_vector is None else scramble_vector,
                               (count,), point, "scramble_vector")
        self._make_states()
        self._launch("init", vectors, scramble, self.offset)
        self._uniform = _UNIFORM_32 if self._bits == 32 else _UNIFORM

    def call_skip_ahead(self, i, stream=None):
        """Moves every dimension i points on."""
        i = _count(i, "i")
        if i >= 2**self._bits:
            raise ValueError(f"i is below 2**{self._bits}, the sequence's length, not {i}")
        self._launch("skip", i, 0, stream=stream)


def _points(value, shape, dtype, name):
    """value (a device or NumPy array of shape, of dtype or its signed twin) as a contiguous
    device array of dtype."""
    if isinstance(value, np.ndarray):
        value = to_device(np.ascontiguousarray(value))
    signed = np.dtype(dtype.str.replace("u", "i"))
    if not (isinstance(value, DeviceArray) and tuple(value.shape) == shape
            and value.dtype in (dtype, signed)):
        raise TypeError(f"{name} must be a device array of shape {shape} and dtype {dtype}, "
                        f"not {_describe(value)}"
                        + (f" of shape {tuple(value.shape)}" if hasattr(value, "shape") else ""))
    if not value.flags.c_contiguous:
        value = _ops.ascontiguous(value)
    return value.view(dtype) if value.dtype != dtype else value


class Sobol32RandomNumberGenerator(_SobolGenerator):
    """Sobol32RandomNumberGenerator(dir_vector=None, offset=0)

    cuRAND's 32-bit Sobol sequence: 16384 dimensions (generators), dimension g with
    direction vectors dir_vector[g] (a (16384, 32) uint32 array; None: cuRAND's first 16384
    dimensions), each `offset` points in. In a call of n elements, element i is the next
    point of dimension i % 16384."""

    _kind = "sobol32"

    def __init__(self, dir_vector=None, offset=0):
        super().__init__(dir_vector, None, offset)


class ScrambledSobol32RandomNumberGenerator(_SobolGenerator):
    """ScrambledSobol32RandomNumberGenerator(dir_vector=None, scramble_vector=None, offset=0)

    Sobol32's scrambled form: scramble_vector (16384 uint32; None: cuRAND's constants) is
    XORed into each dimension's points."""

    _kind = "scrambled_sobol32"
    _set = direction_vector_set.SCRAMBLED_VECTOR_32
    _scrambled = True


class Sobol64RandomNumberGenerator(_SobolGenerator):
    """Sobol64RandomNumberGenerator(dir_vector=None, offset=0)

    cuRAND's 64-bit Sobol sequence, as Sobol32 with (16384, 64) uint64 direction vectors; it
    also fills int64 and uint64 arrays."""

    _kind = "sobol64"
    _bits = 64
    _set = direction_vector_set.VECTOR_64

    def __init__(self, dir_vector=None, offset=0):
        super().__init__(dir_vector, None, offset)


class ScrambledSobol64RandomNumberGenerator(_SobolGenerator):
    """ScrambledSobol64RandomNumberGenerator(dir_vector=None, scramble_vector=None, offset=0)

    Sobol64's scrambled form, with 16384 uint64 scramble constants."""

    _kind = "scrambled_sobol64"
    _bits = 64
    _set = direction_vector_set.SCRAMBLED_VECTOR_64
    _scrambled = True
