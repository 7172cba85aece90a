"""kiln.curandom: PyCUDA's curandom over cuRAND's device API. Without a GPU: the functions and
classes exist with PyCUDA's signatures, each generator's module compiles with every kernel it
needs, bad input is refused before anything is launched (device arrays that are never
launched stand in, from a CUDA array interface). On the GPU: at 10**6 samples, means and
variances within five standard errors for uniform, normal, log-normal and Poisson values, a
chi-square test of 100 buckets (64 for float16) for uniform ones; the same seed giving the same numbers (in
another process too), other seeds other numbers; the counter and skip-ahead semantics."""
import hashlib
import inspect
import shutil
import subprocess

import numpy as np
import pytest

import kiln
import kiln.curandom as curandom
import kiln.gpuarray
from kiln import SourceModule, _curand_src

from helpers import ARCH, run_python

GENERATORS = [curandom.PhiloxRandomNumberGenerator, curandom.XORWOWRandomNumberGenerator,
              curandom.MRG32k3aRandomNumberGenerator]
N = 10**6
G = _curand_src.GENERATORS


def stand_in(shape, dtype):
    """A DeviceArray over memory that is never touched: enough for the checks made before a
    launch."""
    class Interface:
        __cuda_array_interface__ = {"shape": tuple(shape), "typestr": np.dtype(dtype).str,
                                    "data": (0x10000, False), "version": 3, "strides": None,
                                    "stream": None}
    return kiln.asarray(Interface())


def make(cls, seed):
    return cls(seed=seed)


def in_unit_interval(cls, x):
    """Whether uniforms x are where cls puts them: (0, 1] as cuRAND's curand_uniform for
    PyCUDA's generators, [0, 1) for kiln's Philox."""
    if cls is curandom.PhiloxRandomNumberGenerator:
        return x.min() >= 0 and x.max() < 1
    return x.min() > 0 and x.max() <= 1


# ---- without a GPU ---------------------------------------------------------------------------

def params(f):
    return list(inspect.signature(f).parameters)


def test_module_functions_take_pycudas_arguments():
    assert params(curandom.rand) == ["shape", "dtype", "stream"]
    assert inspect.signature(curandom.rand).parameters["dtype"].default is np.float32
    assert params(curandom.seed_getter_uniform) == ["n"]  # PyCUDA 2026.1's name
    assert params(curandom.seed_getter_unique) == ["n"]
    version = curandom.get_curand_version()
    assert isinstance(version, tuple) and len(version) == 3
    assert all(isinstance(v, int) for v in version) and version >= (3, 2, 0)


@pytest.mark.parametrize("cls", GENERATORS)
def test_generator_methods_take_pycudas_arguments(cls):
    expect = {"fill_uniform": ["data", "stream"], "gen_uniform": ["shape", "dtype", "stream"],
              "fill_normal": ["data", "stream"], "gen_normal": ["shape", "dtype", "stream"],
              "fill_log_normal": ["data", "mean", "stddev", "stream"],
              "gen_log_normal": ["shape", "dtype", "mean", "stddev", "stream"],
              "fill_poisson": ["data", "lambda_value", "stream"],
              "gen_poisson": ["shape", "dtype", "lambda_value", "stream"],
              "call_skip_ahead": ["i", "stream"]}
    if cls is not curandom.PhiloxRandomNumberGenerator:
        expect.update({"call_skip_ahead_array": ["i", "stream"],
                       "call_skip_ahead_sequence": ["i", "stream"],
                       "call_skip_ahead_sequence_array": ["i", "stream"]})
        assert params(cls)[:2] == ["seed_getter", "offset"]
    else:
        assert params(cls) == ["seed", "offset"]
    if cls is curandom.MRG32k3aRandomNumberGenerator:
        expect.update({"call_skip_ahead_subsequence": ["i", "stream"],
                       "call_skip_ahead_subsequence_array": ["i", "stream"]})
    for name, want in expect.items():
        assert params(getattr(cls, name))[1:] == want, name


@pytest.mark.parametrize("kind", ["philox", "xorwow", "mrg32k3a"])
def test_each_generator_type_is_one_module_with_all_its_kernels(kind):
    m = SourceModule(_curand_src.source(kind), arch=ARCH or "sm_90")
    fills = {f"kiln_rng_{k}" for k in ("f16", "f32", "f64", "u32", "u64", "normal_f32",
                                      "normal_f64", "lognormal_f32", "lognormal_f64",
                                      "poisson", "poisson_array")}
    assert fills <= set(m.kernels)
    if kind != "philox":
        assert {"kiln_rng_init", "kiln_rng_skip", "kiln_rng_skip_sequence"} <= set(m.kernels)
        assert curandom._state_size(m) >= 40  # cuRAND's 48 bytes today
    if kind == "mrg32k3a":
        assert "kiln_rng_skip_subsequence" in m.kernels


def test_philox_needs_no_gpu_to_start_and_counts_its_blocks():
    g = curandom.PhiloxRandomNumberGenerator(seed=5, offset=7)
    assert (g.seed, g.offset) == (5, 7)
    g.call_skip_ahead(10)
    assert g.offset == 17
    assert curandom.PhiloxRandomNumberGenerator(seed=-1).seed == 2**64 - 1
    seeds = {curandom.PhiloxRandomNumberGenerator().seed for _ in range(4)}
    assert len(seeds) == 4  # drawn from the operating system


def test_bad_input_is_refused_before_a_launch():
    g = curandom.PhiloxRandomNumberGenerator(seed=1)
    with pytest.raises(TypeError, match="fills a device array"):
        g.fill_uniform(np.zeros(4, np.float32))
    with pytest.raises(TypeError, match="fill_uniform fills arrays of .* not int8"):
        g.fill_uniform(stand_in((4,), np.int8))
    with pytest.raises(TypeError, match="fill_normal fills arrays of float32, float64, not "
                                        "int32"):
        g.fill_normal(stand_in((4,), np.int32))
    with pytest.raises(TypeError, match="fill_log_normal fills arrays of"):
        g.fill_log_normal(stand_in((4,), np.complex64), 0.0, 1.0)
    with pytest.raises(ValueError, match="stddev must be >= 0"):
        g.fill_log_normal(stand_in((4,), np.float32), 0.0, -1.0)
    with pytest.raises(TypeError, match="mean is a real number"):
        g.fill_log_normal(stand_in((4,), np.float32), "zero", 1.0)
    with pytest.raises(TypeError, match="fill_poisson fills arrays of uint32, not float32"):
        g.fill_poisson(stand_in((4,), np.float32), 2.0)
    with pytest.raises(TypeError, match="fill_poisson without lambda_value fills arrays of "
                                        "float32, float64, uint32, not int8"):
        g.fill_poisson(stand_in((4,), np.int8))
    with pytest.raises(ValueError, match="lambda_value must be > 0"):
        g.fill_poisson(stand_in((4,), np.uint32), 0.0)
    with pytest.raises(ValueError, match=r"lambda_value has shape \(3,\); data has \(4,\)"):
        g.fill_poisson(stand_in((4,), np.uint32), stand_in((3,), np.float64))
    with pytest.raises(TypeError, match="gen_normal makes arrays of float32, float64, not "
                                        "int32"):
        g.gen_normal((3,), np.int32)
    with pytest.raises(TypeError, match="gen_poisson makes arrays of uint32"):
        g.gen_poisson((3,), np.float32, 1.0)
    # Also the NotImplementedError PyCUDA's generators raise for a dtype they do not fill.
    with pytest.raises(NotImplementedError, match="gen_normal makes arrays of"):
        g.gen_normal((3,), np.int32)
    with pytest.raises(NotImplementedError, match="fill_uniform fills arrays of"):
        g.fill_uniform(stand_in((4,), np.int8))
    with pytest.raises(TypeError, match="seed is an int"):
        curandom.PhiloxRandomNumberGenerator(seed="x")
    with pytest.raises(ValueError, match="offset is an int >= 0"):
        curandom.PhiloxRandomNumberGenerator(offset=-1)
    with pytest.raises(ValueError, match="i is an int >= 0"):
        g.call_skip_ahead(-3)
    empty = stand_in((0,), np.float32)
    assert g.fill_uniform(empty) is None and g.offset == 0  # nothing launched, nothing used


@pytest.mark.parametrize("cls", GENERATORS[1:])
def test_seed_getters_that_give_the_wrong_seeds_are_refused(cls):
    with pytest.raises(TypeError, match=f"device array of {G} int32 seeds, not an array of "
                                        f"{G} int64"):
        cls(lambda n: stand_in((n,), np.int64))
    with pytest.raises(TypeError, match=f"{G} int32 seeds, not an array of 10 int32"):
        cls(lambda n: stand_in((10,), np.int32))
    with pytest.raises(TypeError, match="not both"):
        cls(curandom.seed_getter_unique, seed=3)
    with pytest.raises(TypeError, match="seed is an int"):
        cls(seed=1.5)


SOBOLS = [curandom.Sobol32RandomNumberGenerator, curandom.ScrambledSobol32RandomNumberGenerator,
          curandom.Sobol64RandomNumberGenerator, curandom.ScrambledSobol64RandomNumberGenerator]
S = _curand_src.SOBOL_GENERATORS


def test_sobol_generators_take_pycudas_arguments():
    for cls in SOBOLS:
        scrambled = "Scrambled" in cls.__name__
        assert params(cls) == (["dir_vector", "scramble_vector", "offset"] if scrambled
                               else ["dir_vector", "offset"])
        for name in ("fill_uniform", "gen_uniform", "fill_normal", "gen_normal",
                     "fill_log_normal", "gen_log_normal", "fill_poisson", "gen_poisson",
                     "call_skip_ahead", "call_skip_ahead_array"):
            assert callable(getattr(cls, name)), (cls, name)
    assert params(curandom.generate_direction_vectors) == ["count", "direction"]
    assert curandom.direction_vector_set.VECTOR_32 == 101
    assert curandom.direction_vector_set.SCRAMBLED_VECTOR_64 == 104


@pytest.mark.parametrize("kind", list(_curand_src.SOBOL_KINDS))
def test_each_sobol_type_is_one_module_with_all_its_kernels(kind):
    m = SourceModule(_curand_src.source(kind), arch=ARCH or "sm_90")
    assert {"kiln_rng_init", "kiln_rng_skip", "kiln_rng_f32", "kiln_rng_f64", "kiln_rng_u32",
            "kiln_rng_u64", "kiln_rng_normal_f64", "kiln_rng_lognormal_f32",
            "kiln_rng_poisson", "kiln_rng_poisson_array"} <= set(m.kernels)
    bits = _curand_src.SOBOL_KINDS[kind][1]
    assert curandom._state_size(m) > bits * bits // 8  # the state holds the direction vectors
    assert S <= _curand_src.SOBOL_DIMENSIONS  # every generator a dimension of its own


def test_the_direction_vectors_and_scramble_constants_from_curand():
    from kiln import _curand_host
    v = _curand_host.direction_vectors(S, curandom.direction_vector_set.VECTOR_32)
    assert v.shape == (S, 32) and v.dtype == np.uint32
    # The first dimension is van der Corput's sequence: v_k = 2**(31 - k).
    np.testing.assert_array_equal(v[0], (1 << (31 - np.arange(32))).astype(np.uint32))
    assert len({row.tobytes() for row in v}) == S  # no two dimensions alike
    v64 = _curand_host.direction_vectors(3, curandom.direction_vector_set.VECTOR_64)
    assert v64.shape == (3, 64) and v64.dtype == np.uint64
    np.testing.assert_array_equal(v64[0], np.uint64(1) << (np.uint64(63) -
                                                          np.arange(64, dtype=np.uint64)))
    # Past the 20,000 dimensions the vectors start again, as PyCUDA's do.
    many = _curand_host.direction_vectors(20002, curandom.direction_vector_set.VECTOR_32)
    np.testing.assert_array_equal(many[20000:], many[:2])
    c32 = _curand_host.scramble_constants(5, 32)
    c64 = _curand_host.scramble_constants(5, 64)
    assert c32.dtype == np.uint32 and c64.dtype == np.uint64 and len(set(c32)) == 5
    with pytest.raises(ValueError, match="direction is one of direction_vector_set's values"):
        _curand_host.direction_vectors(3, 7)


def test_sobol_arguments_are_checked_before_the_gpu():
    with pytest.raises(ValueError, match="offset is a point of the 32-bit sequence"):
        curandom.Sobol32RandomNumberGenerator(offset=2**32)
    with pytest.raises(ValueError, match="offset is an int >= 0"):
        curandom.Sobol64RandomNumberGenerator(offset=-1)
    with pytest.raises(TypeError, match=rf"dir_vector must be a device array of shape "
                                        rf"\({S}, 32\) and dtype uint32, not list"):
        curandom.Sobol32RandomNumberGenerator(dir_vector=[1, 2])
    with pytest.raises(TypeError, match=rf"of shape \({S}, 64\) and dtype uint64, not an array "
                                        rf"of {S * 32} uint32"):
        curandom.Sobol64RandomNumberGenerator(dir_vector=stand_in((S, 32), np.uint32))
    with pytest.raises(TypeError, match=rf"scramble_vector must be a device array of shape "
                                        rf"\({S},\)"):
        curandom.ScrambledSobol32RandomNumberGenerator(
            dir_vector=stand_in((S, 32), np.uint32), scramble_vector=stand_in((3,), np.uint32))


# ---- on the GPU ------------------------------------------------------------------------------

def chi2_limit(dof, z=3.719):
    """The chi-square value exceeded with probability 1e-4 (z: the normal quantile of 1e-4),
    by Wilson and Hilferty's approximation."""
    k = 2 / (9 * dof)
    return dof * (1 - k + z * np.sqrt(k)) ** 3


def within(value, expected, stderr, what):
    assert abs(value - expected) <= 5 * stderr, (what, value, expected, stderr)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("cls", GENERATORS)
def test_uniform_values(cls, dtype):
    x = make(cls, 1234).gen_uniform(N, dtype).get().astype(np.float64)
    assert in_unit_interval(cls, x)
    within(x.mean(), 0.5, np.sqrt(1 / 12 / N), "mean")
    within(x.var(), 1 / 12, np.sqrt((1 / 80 - 1 / 144) / N), "variance")
    buckets = 64 if dtype == np.float16 else 100  # float16 has 2048 values: 32 a bucket
    counts = np.bincount(np.minimum((x * buckets).astype(int), buckets - 1), minlength=buckets)
    expected = N / buckets
    assert ((counts - expected) ** 2 / expected).sum() < chi2_limit(buckets - 1)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.uint32, np.int32, np.uint64, np.int64])
@pytest.mark.parametrize("cls", GENERATORS)
def test_uniform_bits(cls, dtype):
    x = make(cls, 99).gen_uniform(N, dtype).get().view(np.uint32 if np.dtype(dtype).itemsize
                                                       == 4 else np.uint64)
    bits = np.dtype(dtype).itemsize * 8
    ones = [((x >> np.array(b, x.dtype)) & 1).mean() for b in range(bits)]
    for b, share in enumerate(ones):
        within(share, 0.5, 0.5 / np.sqrt(N), f"bit {b}")


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("cls", GENERATORS)
def test_normal_and_log_normal_values(cls, dtype):
    g = make(cls, 77)
    z = g.gen_normal(N, dtype).get().astype(np.float64)
    within(z.mean(), 0, 1 / np.sqrt(N), "mean")
    within(z.var(), 1, np.sqrt(2 / N), "variance")
    within((z > 1.96).mean(), 0.025, np.sqrt(0.025 * 0.975 / N), "upper tail")
    mu, sigma = 0.5, 0.3
    x = g.gen_log_normal(N, dtype, mu, sigma).get().astype(np.float64)
    assert x.min() > 0
    log = np.log(x)
    within(log.mean(), mu, sigma / np.sqrt(N), "mean of the log")
    within(log.var(), sigma**2, sigma**2 * np.sqrt(2 / N), "variance of the log")
    var = (np.exp(sigma**2) - 1) * np.exp(2 * mu + sigma**2)
    within(x.mean(), np.exp(mu + sigma**2 / 2), np.sqrt(var / N), "mean")


@pytest.mark.gpu
@pytest.mark.parametrize("lam", [3.5, 100.0, 5000.0])
@pytest.mark.parametrize("cls", GENERATORS)
def test_poisson_values(cls, lam):
    x = make(cls, 5).gen_poisson(N, np.uint32, lam)
    assert x.dtype == np.uint32
    x = x.get().astype(np.float64)
    within(x.mean(), lam, np.sqrt(lam / N), "mean")
    within(x.var(), lam, np.sqrt((lam + 2 * lam**2) / N), "variance")


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS)
def test_poisson_with_a_mean_per_element(cls):
    lam = np.where(np.arange(N) % 2 == 0, 2.0, 50.0).astype(np.float32)
    x = kiln.empty(N, np.uint32)
    make(cls, 6).fill_poisson(x, kiln.to_device(lam))
    x = x.get().astype(np.float64)
    within(x[0::2].mean(), 2.0, np.sqrt(2.0 / (N / 2)), "mean of the first half")
    within(x[1::2].mean(), 50.0, np.sqrt(50.0 / (N / 2)), "mean of the second half")


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS)
def test_the_same_seed_gives_the_same_numbers_and_others_do_not(cls):
    def draw(seed):
        g = make(cls, seed)
        return [g.gen_uniform(1001, np.float32).get(), g.gen_normal(257, np.float64).get(),
                g.gen_poisson(100, np.uint32, 4.0).get(), g.gen_uniform(3, np.uint64).get()]
    a, b, c = draw(42), draw(42), draw(43)
    for x, y, z in zip(a, b, c):
        np.testing.assert_array_equal(x, y)
        assert not np.array_equal(x, z)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", ["PhiloxRandomNumberGenerator", "XORWOWRandomNumberGenerator",
                                 "MRG32k3aRandomNumberGenerator"])
def test_the_same_seed_gives_the_same_numbers_in_another_process(cls):
    here = make(getattr(curandom, cls), 2024).gen_normal(4099, np.float32).get()
    proc = run_python(f"""
        import sys, numpy as np, kiln.curandom as c
        x = c.{cls}(seed=2024).gen_normal(4099, np.float32).get()
        sys.stdout.write(x.tobytes().hex())
    """)
    assert proc.returncode == 0, proc.stderr
    np.testing.assert_array_equal(np.frombuffer(bytes.fromhex(proc.stdout), np.float32), here)


@pytest.mark.gpu
def test_philox_numbers_depend_on_the_counter_alone():
    g = curandom.PhiloxRandomNumberGenerator(seed=8)
    whole = g.gen_uniform(16, np.float32).get()
    assert g.offset == 4  # four blocks of four values
    h = curandom.PhiloxRandomNumberGenerator(seed=8)
    np.testing.assert_array_equal(np.concatenate([h.gen_uniform(8, np.float32).get(),
                                                  h.gen_uniform(8, np.float32).get()]), whole)
    k = curandom.PhiloxRandomNumberGenerator(seed=8)
    k.call_skip_ahead(2)
    np.testing.assert_array_equal(k.gen_uniform(8, np.float32).get(), whole[8:])
    five = curandom.PhiloxRandomNumberGenerator(seed=8).gen_uniform(5, np.float32).get()
    np.testing.assert_array_equal(five, whole[:5])
    big = curandom.PhiloxRandomNumberGenerator(seed=8).gen_uniform(2**20 + 1, np.float32).get()
    np.testing.assert_array_equal(big[:16], whole)
    d = curandom.PhiloxRandomNumberGenerator(seed=8, offset=1).gen_uniform(2, np.float64).get()
    np.testing.assert_array_equal(
        d, curandom.PhiloxRandomNumberGenerator(seed=8).gen_uniform(4, np.float64).get()[2:])


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS[1:])
def test_stateful_generators_draw_element_i_from_generator_i_mod_65536(cls):
    whole = make(cls, 3).gen_uniform(2 * G, np.uint32).get()
    np.testing.assert_array_equal(make(cls, 3).gen_uniform(5, np.uint32).get(), whole[:5])
    g = make(cls, 3)
    g.call_skip_ahead(1)
    np.testing.assert_array_equal(g.gen_uniform(G, np.uint32).get(), whole[G:])
    h = make(cls, 3)
    h.call_skip_ahead_array(kiln.to_device(np.ones(G, np.uint64)))
    np.testing.assert_array_equal(h.gen_uniform(G, np.uint32).get(), whole[G:])
    s = make(cls, 3)
    s.call_skip_ahead_sequence(1)
    t = make(cls, 3)
    t.call_skip_ahead_sequence_array(np.ones(G, np.uint64))
    after = s.gen_uniform(G, np.uint32).get()
    np.testing.assert_array_equal(t.gen_uniform(G, np.uint32).get(), after)
    assert not np.array_equal(after, whole[:G])
    o = cls(seed=3, offset=1)
    np.testing.assert_array_equal(o.gen_uniform(G, np.uint32).get(), whole[G:])


@pytest.mark.gpu
def test_mrg32k3a_subsequence_skips():
    a = curandom.MRG32k3aRandomNumberGenerator(seed=4)
    b = curandom.MRG32k3aRandomNumberGenerator(seed=4)
    a.call_skip_ahead_subsequence(1)
    b.call_skip_ahead_subsequence_array(kiln.to_device(np.ones(G, np.uint64)))
    x = a.gen_uniform(1000, np.uint32).get()
    np.testing.assert_array_equal(b.gen_uniform(1000, np.uint32).get(), x)
    c = curandom.MRG32k3aRandomNumberGenerator(seed=4)
    assert not np.array_equal(c.gen_uniform(1000, np.uint32).get(), x)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS)
def test_sizes_views_and_streams(cls):
    g = make(cls, 11)
    for n in (0, 1, 3, 255, 256, 257, 2**20 + 1):
        x = g.gen_uniform(n, np.float32).get()
        assert x.shape == (n,) and (n < 2 or np.unique(x).size > n // 2)
        assert n == 0 or in_unit_interval(cls, x)
    a = kiln.zeros((100, 40), np.float64)
    g.fill_normal(a[:, ::2])
    host = a.get()
    assert np.all(host[:, 1::2] == 0) and np.all(host[:, ::2] != 0)
    s = kiln.Stream()
    y = g.gen_log_normal((10, 10), np.float32, 0.0, 1.0, stream=s)
    s.synchronize()
    assert y.shape == (10, 10) and y.get().min() > 0


@pytest.mark.gpu
def test_rand_and_the_seed_getters():
    x = curandom.rand((300, 7))
    assert x.shape == (300, 7) and x.dtype == np.float32
    h = x.get()
    assert h.min() >= 0 and h.max() < 1
    assert curandom.rand(10, np.float64).dtype == np.float64
    assert curandom.rand(10, np.uint32).dtype == np.uint32
    np.random.seed(17)
    a = curandom.rand(1000).get()
    np.random.seed(17)
    np.testing.assert_array_equal(curandom.rand(1000).get(), a)
    # rand draws its seed as PyCUDA's does, one np.random.randint(2**31 - 1): a program's NumPy
    # numbers drawn after it are those it drew under PyCUDA.
    after = np.random.randn(3)
    np.random.seed(17)
    np.random.randint(2**31 - 1)
    np.testing.assert_array_equal(np.random.randn(3), after)
    u = curandom.seed_getter_uniform(G).get()
    assert u.dtype == np.int32 and u.size == G and np.all(u == u[0])
    q = curandom.seed_getter_unique(G).get()
    assert q.dtype == np.int32 and np.unique(q).size > G * 0.99
    xw = curandom.XORWOWRandomNumberGenerator(curandom.seed_getter_uniform)
    assert in_unit_interval(type(xw), xw.gen_uniform(10, np.float32).get())
    xu = curandom.XORWOWRandomNumberGenerator()
    assert xu.state.nbytes == G * curandom._state_size(xu.module)
    assert xu._state is xu.state  # PyCUDA's name, which programs with kernels of their own read


@pytest.mark.gpu
def test_a_program_gives_the_generator_states_of_its_own():
    # As PyCUDA's, state reads _state, which a program may replace with memory whose states its
    # own kernel set up (sized by characterize.sizeof(gen.state_type, ...)); the generator then
    # draws from those.
    import kiln.characterize as characterize
    import kiln.driver as drv
    g = curandom.XORWOWRandomNumberGenerator(seed=5)
    assert g.state_type == "curandStateXORWOW"
    size = characterize.sizeof(g.state_type, "#include <curand_kernel.h>")
    count = g.block_count * g.generators_per_block
    assert g.state.nbytes == count * size
    own = drv.mem_alloc(count * size)
    drv.memcpy_dtod(own, g.state.gpudata, count * size)
    want = g.gen_uniform(1000, np.float32).get()
    g._state = own
    assert g.state is own
    np.testing.assert_array_equal(g.gen_uniform(1000, np.float32).get(), want)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS[1:] + SOBOLS)
def test_a_programs_own_kernel_over_the_states_draws_what_the_generator_draws(cls):
    # PyCUDA's generators are cuRAND's curand_uniform over gen.state, element g from state g: a
    # program's own kernel of that form, over one generator's states, gives what a twin's
    # gen_uniform gives (XORWOW's doubles two draws each, MRG32k3a's and Sobol's one), and
    # leaves the states where the twin's are.
    a, b = (cls() if cls in SOBOLS else make(cls, 21) for _ in range(2))
    count = a.block_count * a.generators_per_block
    draw = SourceModule("""
#include <curand_kernel.h>
extern "C" __global__ void draw(%s *s, float *f, double *d) {
  unsigned g = blockIdx.x * blockDim.x + threadIdx.x;
  f[g] = curand_uniform(&s[g]);
  d[g] = curand_uniform_double(&s[g]);
}""" % a.state_type, no_extern_c=True).get_function("draw")
    f, d = kiln.empty(count, np.float32), kiln.empty(count, np.float64)
    draw(a.state, f, d, block=(a.generators_per_block, 1, 1), grid=(a.block_count, 1))
    np.testing.assert_array_equal(f.get(), b.gen_uniform(count, np.float32).get())
    np.testing.assert_array_equal(d.get(), b.gen_uniform(count, np.float64).get())
    np.testing.assert_array_equal(a.gen_uniform(count, np.uint32).get(),
                                  b.gen_uniform(count, np.uint32).get())
    if cls is curandom.MRG32k3aRandomNumberGenerator:
        # An offset counts draws: one a double.
        doubles = make(cls, 21).gen_uniform(2 * count, np.float64).get()
        np.testing.assert_array_equal(cls(seed=21, offset=1).gen_uniform(count, np.float64)
                                      .get(), doubles[count:])


@pytest.mark.parametrize("kind", ["xorwow", "mrg32k3a", "sobol32", "scrambled_sobol32",
                                  "sobol64", "scrambled_sobol64"])
def test_state_types_are_pycudas_names_of_the_states_kiln_keeps(kind):
    import kiln.characterize as characterize
    from kiln import _curand_src
    name = _curand_src.state_type(kind)
    assert name.startswith("curandState") and not name.endswith("_t")
    module = curandom._module(kind)
    assert characterize.sizeof(name, "#include <curand_kernel.h>") == \
        curandom._state_size(module)


def md5_compress(words):
    """MD5's compression of one block of sixteen 32-bit words from its starting state, written
    here from RFC 1321 apart from kiln's CUDA: what md5_code leaves in a, b, c and d."""
    from kiln._md5_src import _K, _S, _START
    a, b, c, d = _START
    for j in range(64):
        f, g = [((b & c) | (~b & d), j), ((b & d) | (c & ~d), (5 * j + 1) % 16),
                (b ^ c ^ d, (3 * j + 5) % 16), (c ^ (b | ~d), (7 * j) % 16)][j // 16]
        t = (a + f + _K[j] + words[g]) & 0xFFFFFFFF
        r = _S[(j // 16) * 4 + j % 4]
        a, b, c, d = d, (b + ((t << r) | (t >> (32 - r)))) & 0xFFFFFFFF, b, c
    return tuple((v + s) & 0xFFFFFFFF for v, s in zip((a, b, c, d), _START))


@pytest.mark.parametrize("message", [b"", b"a", b"kiln", bytes(range(55))])
def test_md5_reference_is_md5(message):
    # One block: the message, a 1 bit, zeros, and its length in bits (little-endian words).
    block = message + b"\x80" + bytes(55 - len(message)) + (8 * len(message)).to_bytes(8, "little")
    got = md5_compress(np.frombuffer(block, "<u4").tolist())
    assert b"".join(v.to_bytes(4, "little") for v in got) == hashlib.md5(message).digest()


MD5_OPERATION = """
    out[4 * i] = a; out[4 * i + 1] = b; out[4 * i + 2] = c; out[4 * i + 3] = d;"""


def md5_words_kernel():
    """md5_code in a get_elwise_kernel operation, as PyCUDA's rand used it: element i's four
    words to out[4i .. 4i+3]."""
    from kiln.elementwise import get_elwise_kernel
    return get_elwise_kernel("unsigned int *out, unsigned int seed",
                             curandom.md5_code + MD5_OPERATION, "md5_words")


def test_md5_code_compiles_as_pycudas_rand_used_it():
    k = md5_words_kernel()
    assert k.signature == ("ptr", "u32", "u64")
    assert "md5_code" in curandom.__all__


HOST_MD5 = r"""#include <stdio.h>
struct kiln_dim { unsigned int x, y, z; };
static kiln_dim threadIdx, blockIdx, blockDim, gridDim;
int main() {
  unsigned int seed, i, n;
  while (scanf("%u %u %u %u %u %u %u %u %u %u %u %u %u %u %u", &threadIdx.x, &threadIdx.y,
               &threadIdx.z, &blockIdx.x, &blockIdx.y, &blockIdx.z, &seed, &i, &n, &blockDim.x,
               &blockDim.y, &blockDim.z, &gridDim.x, &gridDim.y, &gridDim.z) == 15) {
    MD5_CODE
    printf("%u %u %u %u\n", a, b, c, d);
  }
  return 0;
}
"""


@pytest.mark.skipif(shutil.which("c++") is None, reason="needs a host C++ compiler")
def test_md5_code_compiled_for_the_host_agrees_with_the_reference(tmp_path):
    # Every one of the sixteen words in its place, which a launch of one dimension cannot show.
    (tmp_path / "md5.cpp").write_text(HOST_MD5.replace("MD5_CODE", curandom.md5_code))
    exe = tmp_path / "md5"
    subprocess.run(["c++", "-O1", "-w", str(tmp_path / "md5.cpp"), "-o", str(exe)], check=True)
    words = np.random.default_rng(5).integers(0, 2**32, (200, 15), dtype=np.uint64).tolist()
    out = subprocess.run([str(exe)], input="".join(" ".join(map(str, w)) + "\n" for w in words),
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert len(out) == len(words)
    for w, line in zip(words, out):
        assert tuple(map(int, line.split())) == md5_compress(w + [0]), w


@pytest.mark.gpu
def test_md5_code_gives_md5_of_the_launch_indices_seed_i_and_n():
    k = md5_words_kernel()
    n, seed, block, grid = 100, 123456789, 32, 2
    out = kiln.zeros(4 * n, np.uint32)
    k.prepared_call((grid, 1), (block, 1, 1), out.gpudata, seed, n)
    got = out.get().reshape(n, 4)
    for i in range(n):
        t = i % (block * grid)  # PyCUDA's loop: element i is thread i % total_threads's
        words = [t % block, 0, 0, t // block, 0, 0, seed, i, n, block, 1, 1, grid, 1, 1, 0]
        assert tuple(got[i]) == md5_compress(words), i


def curand_uniform_f32(x):
    """cuRAND's float uniform of 32-bit words x (_curand_uniform): x rounded to a float, times
    2**-32, plus 2**-33, rounded once (the product is exact, and the sum exact in float64)."""
    return (x.astype(np.float32).astype(np.float64) * 2.0**-32 + 2.0**-33).astype(np.float32)


def sobol_points(vectors, count, offset, scramble=None):
    """Points offset ... offset + count - 1 of each dimension (rows of vectors), as cuRAND's
    Gray-code Sobol makes them: the XOR of the direction vectors of the bits of k ^ (k >> 1)."""
    bits = vectors.shape[1]
    k = np.arange(offset, offset + count, dtype=np.uint64)
    gray = k ^ (k >> np.uint64(1))
    out = np.zeros((count, vectors.shape[0]), vectors.dtype)
    for j in range(bits):
        on = ((gray >> np.uint64(j)) & np.uint64(1)).astype(bool)
        out[on] ^= vectors[:, j]
    if scramble is not None:
        out ^= scramble
    return out  # out[p, d]: point offset + p of dimension d


@pytest.mark.gpu
@pytest.mark.parametrize("cls", SOBOLS)
def test_sobol_points_are_curands_for_element_i_from_dimension_i_mod_16384(cls):
    from kiln import _curand_host
    bits = 64 if "64" in cls.__name__ else 32
    scrambled = "Scrambled" in cls.__name__
    vectors = _curand_host.direction_vectors(S, cls._set)
    scramble = _curand_host.scramble_constants(S, bits) if scrambled else None
    g = cls(offset=5)
    if bits == 32:
        got = g.gen_uniform(3 * S, np.uint32).get().reshape(3, S)
        expect = sobol_points(vectors, 3, 5, scramble)
    else:
        got = g.gen_uniform(3 * S, np.uint64).get().reshape(3, S)
        expect = sobol_points(vectors, 3, 5, scramble)
    np.testing.assert_array_equal(got, expect)
    # The next call goes on with each dimension's next point; floats are cuRAND's uniforms of
    # the points, in (0, 1] as PyCUDA's.
    nxt = g.gen_uniform(S, np.float64).get()
    point = sobol_points(vectors, 1, 8, scramble)[0]
    unit = ((point + 1.0) / 2.0**32 if bits == 32
            else (point >> np.uint64(11)) / 2.0**53 + 2.0**-54)
    np.testing.assert_array_equal(nxt, unit)
    g.call_skip_ahead(10)  # points 9 ... 18 skipped
    f32 = g.gen_uniform(S, np.float32).get()
    # A skip of each dimension's own count, in 32-bit counts as PyCUDA's Sobol32 takes them.
    h = cls(offset=5)
    h.call_skip_ahead_array(kiln.to_device(np.full(S, 2, np.uint32)))
    want = got[2] if bits == 32 else got[2].astype(np.uint64)
    np.testing.assert_array_equal(h.gen_uniform(S, got.dtype).get(), want)
    top = sobol_points(vectors, 1, 19, scramble)[0]
    top = top if bits == 32 else top >> np.uint64(32)
    np.testing.assert_array_equal(f32, curand_uniform_f32(top.astype(np.uint32)))
    # Given vectors and constants are used as given.
    again = (cls(dir_vector=kiln.to_device(vectors), scramble_vector=kiln.to_device(scramble),
                 offset=5) if scrambled else cls(dir_vector=vectors, offset=5))
    np.testing.assert_array_equal(again.gen_uniform(3 * S, got.dtype).get().reshape(3, S),
                                  expect)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", SOBOLS)
def test_sobol_distributions(cls):
    from statistics import NormalDist
    from kiln import _curand_host
    bits = 64 if "64" in cls.__name__ else 32
    vectors = _curand_host.direction_vectors(S, cls._set)
    scramble = (_curand_host.scramble_constants(S, bits) if "Scrambled" in cls.__name__
                else None)
    g = cls()
    # The first 64 points of each dimension fall one in each 64th of [0, 1), and the uniforms
    # are cuRAND's of the points, in (0, 1]: the first point, 0, is the smallest uniform.
    u = g.gen_uniform(64 * S, np.float32).get()
    assert u.min() > 0 and u.max() <= 1
    if "Scrambled" not in cls.__name__:
        assert np.all(u[:S] == np.float32(2**-33))
    top = sobol_points(vectors, 64, 0, scramble)
    top = (top if bits == 32 else top >> np.uint64(32)).astype(np.uint32)
    np.testing.assert_array_equal(np.bincount((top >> 26).ravel(), minlength=64),
                                  np.full(64, S))
    np.testing.assert_array_equal(u.reshape(64, S), curand_uniform_f32(top))
    # Normals are cuRAND's inverse normal CDF of each point, off zero by half a step.
    z = g.gen_normal(2 * S, np.float64).get().reshape(2, S)
    x = sobol_points(vectors, 2, 64, scramble)
    unit = ((x if bits == 32 else x >> np.uint64(11)).astype(np.float64) + 0.5) / \
        2.0**(32 if bits == 32 else 53)
    expect = [NormalDist().inv_cdf(v) for v in unit[:, :500].ravel()]
    np.testing.assert_allclose(z[:, :500].ravel(), expect, rtol=1e-7, atol=1e-9)
    ln = g.gen_log_normal(S, np.float32, 1.0, 0.5).get()
    top = sobol_points(vectors, 1, 66, scramble)[0]
    top = top if bits == 32 else top >> np.uint64(32)
    unit = (top.astype(np.float64) + 0.5) / 2.0**32
    expect = [np.exp(1.0 + 0.5 * NormalDist().inv_cdf(v)) for v in unit[:500]]
    np.testing.assert_allclose(ln[:500], expect, rtol=1e-4)
    p = g.gen_poisson(64 * S, np.uint32, 13.0).get().astype(np.float64)
    within(p.mean(), 13.0, 0.02, "mean of the Poisson values")
    if bits == 64:
        assert g.gen_uniform(10, np.int64).dtype == np.int64
    else:
        with pytest.raises(TypeError, match="gen_uniform makes arrays of .* not uint64"):
            g.gen_uniform(10, np.uint64)
    with pytest.raises(ValueError, match=r"i is below 2\*\*"):
        g.call_skip_ahead(2**bits)


@pytest.mark.gpu
@pytest.mark.parametrize("cls", GENERATORS + SOBOLS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.uint32])
def test_poisson_in_place_takes_each_elements_mean_from_it(cls, dtype):
    a = kiln.empty(200000, dtype)
    a.fill(10)
    a[:100000].fill(2)
    g = cls() if cls in SOBOLS else make(cls, 11)
    assert g.fill_poisson(a) is None
    got = a.get().astype(np.float64)
    assert got.dtype == np.float64 and np.all(got == np.round(got)) and got.min() >= 0
    if cls in SOBOLS:
        # A quasi-random sequence's first dozen points of a dimension are not independent
        # draws (an unscrambled one starts at 0), so no mean test: each value must be cuRAND's
        # Poisson inversion of its element's point instead.
        lam = np.where(np.arange(a.size) < 100000, 2.0, 10.0)
        expect = poisson_inversion(sobol_units(cls, a.size), lam)
        assert np.abs(got - expect).max() <= 1 and np.mean(got != expect) < 1e-4
        return
    within(got[:100000].mean(), 2.0, 0.02, "mean where lambda is 2")
    within(got[100000:].mean(), 10.0, 0.05, "mean where lambda is 10")


def sobol_units(cls, count):
    """The first count elements' points in (0, 1) as cuRAND's Poisson inversion takes them."""
    from kiln import _curand_host
    bits = 64 if "64" in cls.__name__ else 32
    scramble = (_curand_host.scramble_constants(S, bits) if "Scrambled" in cls.__name__
                else None)
    x = sobol_points(_curand_host.direction_vectors(S, cls._set), -(-count // S), 0,
                     scramble).ravel()[:count]
    if bits == 32:
        return x.astype(np.float64) / 2.0**32 + 2.0**-33
    return (x >> np.uint64(11)).astype(np.float64) / 2.0**53 + 2.0**-55


def poisson_inversion(u, lam):
    """cuRAND's _curand_poisson_ITR_double for lambda below 500: the least k whose CDF reaches
    u, the CDF summed term by term from exp(-lambda)."""
    p = np.exp(-lam)
    q = p.copy()
    k = np.zeros(u.shape)
    while True:
        more = u > q
        if not more.any():
            return k
        k = np.where(more, k + 1, k)
        p = np.where(more, p * lam / np.maximum(k, 1), p)
        q = np.where(more, q + p, q)


@pytest.mark.gpu
def test_pycudas_curand_wrappers_loop():
    """The loop of PyCUDA's own test_curand_wrappers, on every generator it names."""
    for cls in [curandom.XORWOWRandomNumberGenerator, curandom.Sobol32RandomNumberGenerator,
                curandom.ScrambledSobol32RandomNumberGenerator,
                curandom.Sobol64RandomNumberGenerator,
                curandom.ScrambledSobol64RandomNumberGenerator,
                curandom.MRG32k3aRandomNumberGenerator]:
        gen = cls()
        for dtype in (np.float32, np.float64):
            gen.gen_normal(10000, dtype)
            gen.gen_normal(10001, dtype)
            gen.gen_log_normal(10000, dtype, 10.0, 3.0)
            gen.gen_log_normal(10001, dtype, 10.0, 3.0)
            x = gen.gen_uniform(10000, dtype).get()
            assert (x >= -1).all() and (x <= 1).all()
        gen.gen_uniform(10000, np.uint32)
        gen.gen_poisson(10000, np.uint32, 13.0)
        for dtype in (np.float32, np.float64, np.uint32):
            a = kiln.gpuarray.empty(1000000, dtype=dtype)
            a.fill(10)
            gen.fill_poisson(a)
            assert 0.1 < (a.get() == 9).sum() / a.size < 0.16  # Poisson(10) at 9: 0.1251
