"""CUDA source of kiln's random number generators: one module per generator type, each with
every kernel the type needs, all over cuRAND's device API (`<curand_kernel.h>`, from the
toolkit's include folder).

XORWOW and MRG32k3a keep one cuRAND state per generator on the device. There are always
GENERATORS of them (STATE_BLOCKS blocks of BLOCK threads), whatever the array and whatever
the GPU: in a call of n elements, element i is drawn by generator i % GENERATORS, in order of
i, so the numbers depend on the seeds and the sequence of calls alone. A launch may use fewer
blocks when n is small; the stride stays GENERATORS.

Philox keeps no state: Philox4x32-10 maps a 128-bit counter and a 64-bit key (the seed) to
four 32-bit values. Element i of a call starting at counter block `base` takes its bits from
block base + i / 4 (32-bit values: float16, float32, uint32, and the normals of float32, made
two at a time by Box-Muller) or base + i / 2 (64-bit values: float64, uint64, normals of
float64), so the numbers depend on the seed and the counter alone, never on the launch shape.
Poisson values take a variable number of draws each: element i runs cuRAND's Philox state on
subsequence base + 1 + i (the blocks above live in subsequence 0).

XORWOW, MRG32k3a and Sobol give uniforms in (0, 1], as PyCUDA's generators: float32 and
float64 are cuRAND's curand_uniform and curand_uniform_double, so a program's own kernel over
a generator's states draws what the generator does; float16 is the top 11 bits of a draw, k,
as (k + 1) / 2**11. Programs written for them take logarithms of uniforms, and a Sobol
sequence starts at 0 in every dimension. Philox, kiln's own and the generator behind rand,
gives the top 24 (float32), 11 (float16) or 53 (float64, from two 32-bit values) bits of its
values as k / 2**bits, in [0, 1) as NumPy's.
"""
BLOCK = 256
STATE_BLOCKS = 256
GENERATORS = BLOCK * STATE_BLOCKS

# Counter blocks of Philox a call of n elements of each kind uses: per-block counts.
PHILOX_PER_BLOCK = {"f16": 4, "f32": 4, "u32": 4, "normal_f32": 4, "lognormal_f32": 4,
                    "f64": 2, "u64": 2, "normal_f64": 2, "lognormal_f64": 2}

STATE_TYPES = {"xorwow": "curandStateXORWOW_t", "mrg32k3a": "curandStateMRG32k3a_t"}

# Sobol generators: one quasi-random dimension each, SOBOL_GENERATORS of them (no more than the
# 20,000 dimensions cuRAND's direction vectors have, so no two give the same sequence): in a
# call of n elements, element i is the next point of dimension i % SOBOL_GENERATORS.
SOBOL_BLOCKS = 64
SOBOL_GENERATORS = BLOCK * SOBOL_BLOCKS
SOBOL_DIMENSIONS = 20000  # cuRAND's direction vector sets (Joe and Kuo's)
# kind: (state type, bits of a point, scrambled)
SOBOL_KINDS = {"sobol32": ("curandStateSobol32_t", 32, False),
               "scrambled_sobol32": ("curandStateScrambledSobol32_t", 32, True),
               "sobol64": ("curandStateSobol64_t", 64, False),
               "scrambled_sobol64": ("curandStateScrambledSobol64_t", 64, True)}

_COMMON = r"""
#include <curand_kernel.h>
#include <cuda_fp16.h>

typedef unsigned long long kiln_u64;

/* Uniforms from the top bits of 32-bit draws, every value exact: [0, 1), or (0, 1] for
 * float16 when one is added to them (the stateful generators' float16). */
__device__ __forceinline__ __half kiln_f16(unsigned a, unsigned one = 0) {
  return __float2half((float)((a >> 21) + one) * (1.0f / 2048.0f));
}
__device__ __forceinline__ float kiln_f32(unsigned a) { return (float)(a >> 8) * (1.0f / 16777216.0f); }
__device__ __forceinline__ double kiln_f64(unsigned a, unsigned b) {
  return (double)(((kiln_u64)(a >> 5) << 26) | (b >> 6)) * (1.0 / 9007199254740992.0);
}
__device__ __forceinline__ kiln_u64 kiln_bits64(unsigned a, unsigned b) { return ((kiln_u64)a << 32) | b; }
"""

# What every module with states on the device has: the state type, its size, and the fills.
# Before it, each kind defines kiln_draw_<kind>(kiln_state *) for f16, f32, f64, u32, u64.
_STATES = r"""
typedef {state} kiln_state;
#define KILN_GENERATORS {generators}ull

/* Never launched: its parameter's size, read from the PTX, is the state's. */
extern "C" __global__ void kiln_rng_state_size(kiln_state s) {{ (void)s; }}
"""

_FILLS = r"""
/* Generator g draws elements g, g + GENERATORS, ... of the call, in order. */
template <class Op>
__device__ __forceinline__ void kiln_fill(kiln_state *states, typename Op::T *d, kiln_u64 n, Op op) {
  kiln_u64 g = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x;
  if (g >= n || g >= KILN_GENERATORS) return;
  kiln_state s = states[g];
  for (kiln_u64 i = g; i < n; i += KILN_GENERATORS) d[i] = op(&s, i);
  states[g] = s;
}

/* What one element is, from a generator's state. */
#define KILN_OP(name, type, expr) \
  struct kiln_op_##name { \
    typedef type T; \
    __device__ T operator()(kiln_state *s, kiln_u64) const { return expr; } \
  };
KILN_OP(f16, __half, kiln_draw_f16(s))
KILN_OP(f32, float, kiln_draw_f32(s))
KILN_OP(f64, double, kiln_draw_f64(s))
KILN_OP(u32, unsigned, kiln_draw_u32(s))
KILN_OP(u64, kiln_u64, kiln_draw_u64(s))
KILN_OP(normal_f32, float, curand_normal(s))
KILN_OP(normal_f64, double, curand_normal_double(s))
struct kiln_op_lognormal_f32 {
  typedef float T; float mean, stddev;
  __device__ T operator()(kiln_state *s, kiln_u64) const { return curand_log_normal(s, mean, stddev); }
};
struct kiln_op_lognormal_f64 {
  typedef double T; double mean, stddev;
  __device__ T operator()(kiln_state *s, kiln_u64) const { return curand_log_normal_double(s, mean, stddev); }
};
struct kiln_op_poisson {
  typedef unsigned T; double lambda;
  __device__ T operator()(kiln_state *s, kiln_u64) const { return curand_poisson(s, lambda); }
};
struct kiln_op_poisson_array {
  typedef unsigned T; const double *lambda;
  __device__ T operator()(kiln_state *s, kiln_u64 i) const { return curand_poisson(s, lambda[i]); }
};

#define KILN_FILL(name, op, type) \
  extern "C" __global__ void kiln_rng_##name(kiln_state *s, type *d, kiln_u64 n) { kiln_fill(s, d, n, op()); }
KILN_FILL(f16, kiln_op_f16, __half)
KILN_FILL(f32, kiln_op_f32, float)
KILN_FILL(f64, kiln_op_f64, double)
KILN_FILL(u32, kiln_op_u32, unsigned)
KILN_FILL(u64, kiln_op_u64, kiln_u64)
KILN_FILL(normal_f32, kiln_op_normal_f32, float)
KILN_FILL(normal_f64, kiln_op_normal_f64, double)

extern "C" __global__ void kiln_rng_lognormal_f32(kiln_state *s, float *d, kiln_u64 n, float mean, float stddev) {
  kiln_op_lognormal_f32 op = {mean, stddev};
  kiln_fill(s, d, n, op);
}
extern "C" __global__ void kiln_rng_lognormal_f64(kiln_state *s, double *d, kiln_u64 n, double mean, double stddev) {
  kiln_op_lognormal_f64 op = {mean, stddev};
  kiln_fill(s, d, n, op);
}
extern "C" __global__ void kiln_rng_poisson(kiln_state *s, unsigned *d, kiln_u64 n, double lambda) {
  kiln_op_poisson op = {lambda};
  kiln_fill(s, d, n, op);
}
extern "C" __global__ void kiln_rng_poisson_array(kiln_state *s, unsigned *d, kiln_u64 n, const double *lambda) {
  kiln_op_poisson_array op = {lambda};
  kiln_fill(s, d, n, op);
}
"""

# XORWOW and MRG32k3a: seeded states; each element one draw, or two for 64-bit values.
_STATEFUL = r"""
extern "C" __global__ void kiln_rng_init(kiln_state *states, const int *seeds, kiln_u64 offset) {
  kiln_u64 g = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x;
  if (g >= KILN_GENERATORS) return;
  kiln_state s;
  curand_init((kiln_u64)(unsigned)seeds[g], g, offset, &s);
  states[g] = s;
}

/* Uniform float32 and float64 are cuRAND's curand_uniform and curand_uniform_double, as
 * PyCUDA's: a program's own kernel over the generator's states draws the same numbers, and an
 * offset counts them (XORWOW's doubles take two draws, MRG32k3a's one). float16 and 64-bit
 * words, which cuRAND has not, are kiln's: in (0, 1] too, and two draws in a fixed order, the
 * first the high part. */
__device__ __forceinline__ __half kiln_draw_f16(kiln_state *s) { return kiln_f16(curand(s), 1); }
__device__ __forceinline__ float kiln_draw_f32(kiln_state *s) { return curand_uniform(s); }
__device__ __forceinline__ double kiln_draw_f64(kiln_state *s) { return curand_uniform_double(s); }
__device__ __forceinline__ unsigned kiln_draw_u32(kiln_state *s) { return curand(s); }
__device__ __forceinline__ kiln_u64 kiln_draw_u64(kiln_state *s) { unsigned a = curand(s); return kiln_bits64(a, curand(s)); }
""" + _FILLS + r"""
/* Skips of every generator: by counts[g] for generator g, or by count when counts is null
 * (one kernel for both: each skip function is large to compile). */
#define KILN_SKIP(name, call) \
  extern "C" __global__ void kiln_rng_##name(kiln_state *s, kiln_u64 count, const kiln_u64 *counts) { \
    kiln_u64 g = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x; \
    if (g < KILN_GENERATORS) call(counts ? counts[g] : count, &s[g]); \
  }
KILN_SKIP(skip, skipahead)
KILN_SKIP(skip_sequence, skipahead_sequence)
"""

_MRG_EXTRA = "KILN_SKIP(skip_subsequence, skipahead_subsequence)\n"

_PHILOX = r"""
/* Four 32-bit values of counter block c (subsequence 0) under key seed. */
__device__ __forceinline__ uint4 kiln_philox(kiln_u64 seed, kiln_u64 c) {
  return curand_Philox4x32_10(make_uint4((unsigned)c, (unsigned)(c >> 32), 0u, 0u),
                              make_uint2((unsigned)seed, (unsigned)(seed >> 32)));
}

/* Box-Muller of two uniforms in (0, 1] (u) and [0, 1] (v). */
__device__ __forceinline__ float2 kiln_bm_f32(unsigned a, unsigned b) {
  float u = (float)a * 2.3283064365386962890625e-10f + 1.16415321826934814453125e-10f;
  float r = sqrtf(-2.0f * logf(u)), sn, cs;
  sincospif(2.0f * ((float)b * 2.3283064365386962890625e-10f), &sn, &cs);
  return make_float2(r * cs, r * sn);
}
__device__ __forceinline__ double2 kiln_bm_f64(uint4 x) {
  double u = (double)kiln_bits64(x.x, x.y) * 5.42101086242752217003726400434970855712890625e-20 +
             2.710505431213761085018632002174854278564453125e-20;
  double v = (double)kiln_bits64(x.z, x.w) * 5.42101086242752217003726400434970855712890625e-20;
  double r = sqrt(-2.0 * log(u)), sn, cs;
  sincospi(2.0 * v, &sn, &cs);
  return make_double2(r * cs, r * sn);
}

/* The values of one counter block, as raw bits, to d[i], ..., at most up to d[n - 1]: one
 * vector store where the block is whole and aligned (always, in an array of its own), else
 * one store each. */
__device__ __forceinline__ void kiln_put(unsigned short *d, kiln_u64 i, kiln_u64 n, ushort4 v) {
  if (i + 4 <= n && ((size_t)(d + i) & 7) == 0) { *reinterpret_cast<ushort4 *>(d + i) = v; return; }
  d[i] = v.x;
  if (i + 1 < n) d[i + 1] = v.y;
  if (i + 2 < n) d[i + 2] = v.z;
  if (i + 3 < n) d[i + 3] = v.w;
}
__device__ __forceinline__ void kiln_put(unsigned *d, kiln_u64 i, kiln_u64 n, uint4 v) {
  if (i + 4 <= n && ((size_t)(d + i) & 15) == 0) { *reinterpret_cast<uint4 *>(d + i) = v; return; }
  d[i] = v.x;
  if (i + 1 < n) d[i + 1] = v.y;
  if (i + 2 < n) d[i + 2] = v.z;
  if (i + 3 < n) d[i + 3] = v.w;
}
__device__ __forceinline__ void kiln_put(kiln_u64 *d, kiln_u64 i, kiln_u64 n, ulonglong2 v) {
  if (i + 2 <= n && ((size_t)(d + i) & 15) == 0) { *reinterpret_cast<ulonglong2 *>(d + i) = v; return; }
  d[i] = v.x;
  if (i + 1 < n) d[i + 1] = v.y;
}
__device__ __forceinline__ unsigned short kiln_f16_bits(unsigned a) { return __half_as_ushort(kiln_f16(a)); }
__device__ __forceinline__ unsigned kiln_f32_bits(float f) { return __float_as_uint(f); }
__device__ __forceinline__ kiln_u64 kiln_f64_bits(double f) { return (kiln_u64)__double_as_longlong(f); }

/* What one counter block x makes: PER values of type T, as the bits W the store takes. */
struct kiln_ph_f16 { typedef __half T; typedef unsigned short W; enum { PER = 4 };
  __device__ ushort4 operator()(uint4 x) const {
    return make_ushort4(kiln_f16_bits(x.x), kiln_f16_bits(x.y), kiln_f16_bits(x.z), kiln_f16_bits(x.w));
  } };
struct kiln_ph_f32 { typedef float T; typedef unsigned W; enum { PER = 4 };
  __device__ uint4 operator()(uint4 x) const {
    return make_uint4(kiln_f32_bits(kiln_f32(x.x)), kiln_f32_bits(kiln_f32(x.y)),
                      kiln_f32_bits(kiln_f32(x.z)), kiln_f32_bits(kiln_f32(x.w)));
  } };
struct kiln_ph_u32 { typedef unsigned T; typedef unsigned W; enum { PER = 4 };
  __device__ uint4 operator()(uint4 x) const { return x; } };
struct kiln_ph_f64 { typedef double T; typedef kiln_u64 W; enum { PER = 2 };
  __device__ ulonglong2 operator()(uint4 x) const {
    return make_ulonglong2(kiln_f64_bits(kiln_f64(x.x, x.y)), kiln_f64_bits(kiln_f64(x.z, x.w)));
  } };
struct kiln_ph_u64 { typedef kiln_u64 T; typedef kiln_u64 W; enum { PER = 2 };
  __device__ ulonglong2 operator()(uint4 x) const {
    return make_ulonglong2(kiln_bits64(x.x, x.y), kiln_bits64(x.z, x.w));
  } };
/* Normals, and log-normals exp(mean + stddev * normal) when log is set. */
struct kiln_ph_normal_f32 { typedef float T; typedef unsigned W; enum { PER = 4 }; bool log; float mean, stddev;
  __device__ unsigned f(float z) const { return kiln_f32_bits(log ? expf(mean + stddev * z) : z); }
  __device__ uint4 operator()(uint4 x) const {
    float2 p = kiln_bm_f32(x.x, x.y), q = kiln_bm_f32(x.z, x.w);
    return make_uint4(f(p.x), f(p.y), f(q.x), f(q.y));
  } };
struct kiln_ph_normal_f64 { typedef double T; typedef kiln_u64 W; enum { PER = 2 }; bool log; double mean, stddev;
  __device__ kiln_u64 f(double z) const { return kiln_f64_bits(log ? exp(mean + stddev * z) : z); }
  __device__ ulonglong2 operator()(uint4 x) const {
    double2 p = kiln_bm_f64(x);
    return make_ulonglong2(f(p.x), f(p.y));
  } };

/* Counter block base + j gives elements j * PER, ..., whichever thread computes it. */
template <class Op>
__device__ __forceinline__ void kiln_philox_fill(typename Op::T *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base, Op op) {
  kiln_u64 blocks = (n + Op::PER - 1) / Op::PER;
  for (kiln_u64 j = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x; j < blocks;
       j += (kiln_u64)gridDim.x * blockDim.x)
    kiln_put(reinterpret_cast<typename Op::W *>(d), j * Op::PER, n, op(kiln_philox(seed, base + j)));
}

#define KILN_PHILOX(name, op, type) \
  extern "C" __global__ void kiln_rng_##name(type *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base) { \
    kiln_philox_fill(d, n, seed, base, op()); \
  }
KILN_PHILOX(f16, kiln_ph_f16, __half)
KILN_PHILOX(f32, kiln_ph_f32, float)
KILN_PHILOX(u32, kiln_ph_u32, unsigned)
KILN_PHILOX(f64, kiln_ph_f64, double)
KILN_PHILOX(u64, kiln_ph_u64, kiln_u64)

extern "C" __global__ void kiln_rng_normal_f32(float *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base) {
  kiln_ph_normal_f32 op = {false, 0.0f, 1.0f};
  kiln_philox_fill(d, n, seed, base, op);
}
extern "C" __global__ void kiln_rng_normal_f64(double *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base) {
  kiln_ph_normal_f64 op = {false, 0.0, 1.0};
  kiln_philox_fill(d, n, seed, base, op);
}
extern "C" __global__ void kiln_rng_lognormal_f32(float *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base,
                                                  float mean, float stddev) {
  kiln_ph_normal_f32 op = {true, mean, stddev};
  kiln_philox_fill(d, n, seed, base, op);
}
extern "C" __global__ void kiln_rng_lognormal_f64(double *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base,
                                                  double mean, double stddev) {
  kiln_ph_normal_f64 op = {true, mean, stddev};
  kiln_philox_fill(d, n, seed, base, op);
}

/* Element i runs cuRAND's Philox state on subsequence base + 1 + i, from its start. */
template <bool ARRAY>
__device__ __forceinline__ void kiln_philox_poisson(unsigned *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base,
                                                    double lambda, const double *lambdas) {
  for (kiln_u64 i = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x; i < n;
       i += (kiln_u64)gridDim.x * blockDim.x) {
    curandStatePhilox4_32_10_t s;
    curand_init(seed, base + 1 + i, 0, &s);
    d[i] = curand_poisson(&s, ARRAY ? lambdas[i] : lambda);
  }
}
extern "C" __global__ void kiln_rng_poisson(unsigned *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base, double lambda) {
  kiln_philox_poisson<false>(d, n, seed, base, lambda, 0);
}
extern "C" __global__ void kiln_rng_poisson_array(unsigned *d, kiln_u64 n, kiln_u64 seed, kiln_u64 base,
                                                  const double *lambdas) {
  kiln_philox_poisson<true>(d, n, seed, base, 0.0, lambdas);
}
"""

# Sobol: one dimension a state, its points as they are (kiln_point: unsigned or kiln_u64). The
# format fields: kiln_point, the bits of a point, and the scramble constant's argument.
_SOBOL_INIT = r"""
typedef {point} kiln_point;
#define KILN_BITS {bits}

/* Generator g is dimension g: its KILN_BITS direction vectors, its scramble constant (when
 * scrambled), `offset` points in. */
extern "C" __global__ void kiln_rng_init(kiln_state *states, kiln_point *vectors, const kiln_point *scramble,
                                         kiln_u64 offset) {{
  kiln_u64 g = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x;
  if (g >= KILN_GENERATORS) return;
  kiln_state s;
  curand_init(vectors + g * KILN_BITS, {scramble_arg}(kiln_point)offset, &s);
  states[g] = s;
}}
"""

_SOBOL = r"""
/* One point per element, which keeps the sequence's low discrepancy. Float32 and float64 are
 * cuRAND's curand_uniform and curand_uniform_double of the point, as PyCUDA's, in (0, 1]: the
 * first point, 0, is not a uniform of 0. float16 is kiln's: the point's top 11 bits, plus one,
 * times 2**-11. */
__device__ __forceinline__ unsigned kiln_top32(unsigned x) { return x; }
__device__ __forceinline__ unsigned kiln_top32(kiln_u64 x) { return (unsigned)(x >> 32); }
__device__ __forceinline__ __half kiln_draw_f16(kiln_state *s) { return kiln_f16(kiln_top32(curand(s)), 1); }
__device__ __forceinline__ float kiln_draw_f32(kiln_state *s) { return curand_uniform(s); }
__device__ __forceinline__ double kiln_draw_f64(kiln_state *s) { return curand_uniform_double(s); }
__device__ __forceinline__ unsigned kiln_draw_u32(kiln_state *s) { return kiln_top32(curand(s)); }
__device__ __forceinline__ kiln_u64 kiln_draw_u64(kiln_state *s) { return (kiln_u64)curand(s); }
""" + _FILLS + r"""
/* Skips of every dimension: by counts[g] points for dimension g, or by count when counts is
 * null. */
extern "C" __global__ void kiln_rng_skip(kiln_state *s, kiln_u64 count, const kiln_u64 *counts) {
  kiln_u64 g = blockIdx.x * (kiln_u64)blockDim.x + threadIdx.x;
  if (g < KILN_GENERATORS) skipahead((kiln_point)(counts ? counts[g] : count), &s[g]);
}
"""

VERSION_SOURCE = r"""
#include <curand.h>
/* Read back from the PTX: the version of the cuRAND headers NVRTC compiles with. */
extern "C" __device__ unsigned int kiln_curand_version = CURAND_VERSION;
extern "C" __global__ void kiln_curand_version_kernel(unsigned int *v) { *v = kiln_curand_version; }
"""


def state_type(kind):
    """The C type of one state of generator type `kind`, by its struct's name as PyCUDA gives
    it (curandStateXORWOW, not the typedef curandStateXORWOW_t)."""
    if kind in SOBOL_KINDS:
        return SOBOL_KINDS[kind][0].removesuffix("_t")
    return STATE_TYPES[kind].removesuffix("_t")


def source(kind):
    """The module of generator type `kind`: "xorwow", "mrg32k3a", "philox", or one of
    SOBOL_KINDS."""
    if kind == "philox":
        return _COMMON + _PHILOX
    if kind in SOBOL_KINDS:
        state, bits, scrambled = SOBOL_KINDS[kind]
        states = _STATES.format(state=state, generators=SOBOL_GENERATORS)
        return _COMMON + states + _SOBOL_INIT.format(
            point="unsigned" if bits == 32 else "kiln_u64", bits=bits,
            scramble_arg="scramble[g], " if scrambled else "") + _SOBOL
    try:
        state = STATE_TYPES[kind]
    except KeyError:
        raise ValueError(f"unknown generator type {kind!r}") from None
    extra = _MRG_EXTRA if kind == "mrg32k3a" else ""
    return _COMMON + _STATES.format(state=state, generators=GENERATORS) + _STATEFUL + extra
