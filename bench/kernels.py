"""The CUDA sources the benchmarks compile, the check of what the seed kernel computes, and the
way to cuda.core's API.

This module imports nothing when it loads (NumPy and cuda.core only inside the functions that
need them): the fresh processes of children.py load it before their clocks start, and a
first-call figure must count the import of the system it measures and nothing else.
"""

# The seed's multiply_them, extern "C" so that C, the floor, CuPy and cuda.core all find it by
# its plain name.
SEED_KERNEL = "multiply_them"
SEED_SOURCE = r"""
extern "C" __global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dest[i] = a[i] * b[i];
}
"""

# compare.py: a kernel per argument count, the seed, and the bandwidth kernels.
ARG_COUNTS = (1, 4, 16, 64)


def args_kernel(n):
    """args<n>(int *dest, int x1, ..., int x<n-1>): writes the sum of its ints, so a launch
    that passed them wrong shows."""
    params = ", ".join(["int *dest"] + [f"int x{i}" for i in range(1, n)])
    total = " + ".join(f"x{i}" for i in range(1, n)) or "0"
    return f'extern "C" __global__ void args{n}({params}) {{ dest[threadIdx.x] = {total}; }}\n'


# Byte for byte the text the recorded figures were measured on: touch follows the seed directly.
COMPARE_SOURCE = "".join(args_kernel(n) for n in ARG_COUNTS) + SEED_SOURCE + r"""
extern "C" __global__ void touch(const unsigned char *p) {}
extern "C" __global__ void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
""".lstrip("\n")

# compare.py's constant-memory row: a __constant__ float the host sets (get_global, then a
# 4-byte memcpy_htod), and a kernel that reads it. A variable at namespace scope keeps its plain
# name in C++ as in C.
GLOBAL_NAME = "scale"
GLOBAL_SOURCE = r"""
__constant__ float scale;
extern "C" __global__ void scaled(float *x) { x[threadIdx.x] *= scale; }
"""

# cache.py: the seed's multiply_them and a templated kernel: a small module, but one with C++
# in it. The text must not name #include's keyword, so that its cache key does not depend on
# the working folder.
CACHE_SOURCE = r"""
extern "C" __global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dest[i] = a[i] * b[i];
}

template <typename T>
__global__ void axpy(T *y, const T *x, T alpha, int n)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x)
        y[i] = alpha * x[i] + y[i];
}

template __global__ void axpy<float>(float *, const float *, float, int);
template __global__ void axpy<double>(double *, const double *, double, int);
"""

# transfer.py: a launch that does nothing with its array, and a copy that checks every byte.
TRANSFER_SOURCE = r"""
extern "C" __global__ void touch(const unsigned char *p) {}
extern "C" __global__ void copy_bytes(unsigned char *dst, const unsigned char *src, size_t n) {
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x)
        dst[i] = src[i];
}
"""


def expect_products(got, a, b, what):
    """Raises AssertionError unless got is a*b exactly: float32 products are correctly rounded
    on both sides."""
    import numpy as np
    want = a * b
    if not np.array_equal(got, want):
        bad = np.flatnonzero(got != want)
        i = bad[0]
        raise AssertionError(f"{what}: {bad.size} of {want.size} elements are not a*b "
                             f"(dest[{i}] = {got[i]}, expected {want[i]})")


def import_cuda_core():
    """Newer cuda.core releases export their API from cuda.core, older ones from
    cuda.core.experimental."""
    import cuda.core as core
    if hasattr(core, "launch"):
        return core
    import cuda.core.experimental as experimental
    return experimental
