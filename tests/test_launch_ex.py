"""Launches beyond the plain one: cooperative grids, thread-block clusters, programmatic
dependent launches, dynamic shared memory past 48 KiB, and the occupancy calculator. The
argument checks at the top need no device; the rest are marked gpu."""
import ctypes
import ctypes.util

import numpy as np
import pytest

import kiln
import kiln.driver as drv
from helpers import ARCH

SRC = r"""
#include <cooperative_groups.h>
namespace cg = cooperative_groups;

// Every block sums a grid-strided share into partial[block], the whole grid waits, then the
// first thread adds the partials: right only when every block is resident at once.
extern "C" __global__ void grid_sum(const float *x, float *partial, float *out, int n)
{
    cg::grid_group grid = cg::this_grid();
    __shared__ float s[256];
    float acc = 0;
    for (int i = (int)grid.thread_rank(); i < n; i += (int)grid.size()) acc += x[i];
    s[threadIdx.x] = acc;
    __syncthreads();
    for (int w = 128; w > 0; w >>= 1) {
        if ((int)threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
        __syncthreads();
    }
    if (threadIdx.x == 0) partial[blockIdx.x] = s[0];
    grid.sync();
    if (grid.thread_rank() == 0) {
        float t = 0;
        for (unsigned b = 0; b < gridDim.x; b++) t += partial[b];
        out[0] = t;
    }
}

// Each block reads the shared memory of the next block of its cluster.
extern "C" __global__ void neighbour(int *out)
{
    __shared__ int v;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    if (threadIdx.x == 0) v = (int)rank * 10 + 1;
    cluster.sync();
    int *remote = cluster.map_shared_rank(&v, (rank + 1) % cluster.num_blocks());
    if (threadIdx.x == 0) out[blockIdx.x] = *remote;
    cluster.sync();
}

// The same with the cluster's shape in the kernel.
extern "C" __global__ void __cluster_dims__(2, 1, 1) neighbour_fixed(int *out)
{
    __shared__ int v;
    cg::cluster_group cluster = cg::this_cluster();
    unsigned rank = cluster.block_rank();
    if (threadIdx.x == 0) v = (int)rank * 10 + 1;
    cluster.sync();
    int *remote = cluster.map_shared_rank(&v, (rank + 1) % cluster.num_blocks());
    if (threadIdx.x == 0) out[blockIdx.x] = *remote;
    cluster.sync();
}

// Every byte of the dynamic shared memory written, then read back in another order.
extern "C" __global__ void fill_shared(unsigned *out, unsigned words)
{
    extern __shared__ unsigned buf[];
    for (unsigned i = threadIdx.x; i < words; i += blockDim.x) buf[i] = i * 2654435761u;
    __syncthreads();
    unsigned acc = 0;
    for (unsigned i = words - 1 - threadIdx.x; i < words; i -= blockDim.x) {
        acc ^= buf[i];
        if (i < blockDim.x) break;
    }
    atomicXor(out, acc);
}

// Programmatic dependent launch: the second waits for the first's memory in
// cudaGridDependencySynchronize (griddepcontrol.wait), and may begin before it ends.
extern "C" __global__ void first(int *x, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = i;
    cudaTriggerProgrammaticLaunchCompletion();
}
extern "C" __global__ void second(const int *x, int *y, int n)
{
    cudaGridDependencySynchronize();
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] * 3;
}

// Registers and static shared memory enough that occupancy is not simply the maximum.
extern "C" __global__ void heavy(float *x)
{
    __shared__ float pad[3000];
    float a[24];
    for (int k = 0; k < 24; k++) a[k] = x[threadIdx.x * 24 + k];
    pad[threadIdx.x % 3000] = a[threadIdx.x % 24];
    __syncthreads();
    float t = 0;
    for (int k = 0; k < 24; k++) t += a[k] * pad[(threadIdx.x + k) % 3000];
    x[threadIdx.x] = t;
}
"""


@pytest.fixture(scope="module")
def mod():
    return kiln.SourceModule(SRC, arch=ARCH)


# ---- Checks that need no device -------------------------------------------------------------


def test_cluster_needs_every_dimension(mod):
    with pytest.raises(ValueError, match="every dimension at least 1"):
        mod.get_function("neighbour")(np.uintp(0), block=32, grid=4, cluster=(2, 0, 1))


def test_cluster_must_divide_the_grid(mod):
    with pytest.raises(ValueError, match="not a multiple of cluster.x") as refused:
        mod.get_function("neighbour")(np.uintp(0), block=32, grid=(4, 1), cluster=3)
    # the driver's refusal under PyCUDA, a LogicError, with its CUresult
    assert isinstance(refused.value, kiln.LaunchConfigError)
    assert isinstance(refused.value, kiln.LogicError)
    assert refused.value.name == "CUDA_ERROR_INVALID_CLUSTER_SIZE"


def test_cluster_of_more_than_16_blocks(mod):
    with pytest.raises(ValueError, match="at most 16"):
        mod.get_function("neighbour")(np.uintp(0), block=32, grid=(8, 4), cluster=(8, 4, 1))


def test_cluster_must_be_a_shape(mod):
    with pytest.raises(ValueError, match="cluster must be an int or a tuple"):
        mod.get_function("neighbour")(np.uintp(0), block=32, grid=4, cluster="wide")


def test_options_refuse_in_out(mod):
    out = np.zeros(4, np.int32)
    with pytest.raises(ValueError, match="are for the plain launch"):
        mod.get_function("neighbour")(kiln.Out(out), block=32, grid=4, cooperative=True)


def test_options_off_are_the_plain_launch_before_the_device(mod):
    out = np.zeros(4, np.int32)
    # In/Out is taken, and the call reaches the plain launch's checks (the zero grid).
    with pytest.raises(ValueError, match="grid.x is 0"):
        mod.get_function("neighbour")(kiln.Out(out), block=32, grid=(0, 1), cooperative=False,
                                      cluster=None, programmatic=False)


def test_unknown_keyword_names_the_new_ones(mod):
    with pytest.raises(TypeError, match="cooperative, cluster and programmatic"):
        mod.get_function("neighbour")(np.uintp(0), block=32, clusters=2)


def test_occupancy_arguments_checked(mod):
    f = mod.get_function("heavy")
    with pytest.raises(ValueError, match="from 1 to 1024"):
        f.max_active_blocks((64, 32))
    with pytest.raises(ValueError, match="shared must be a number of bytes"):
        f.max_active_blocks(64, shared=-1)
    with pytest.raises(ValueError, match="at least 1"):
        f.available_dynamic_shared(0, 64)
    with pytest.raises(ValueError, match="limit must be from 0"):
        f.suggested_block_size(block_limit=4096)
    assert f.occupancy is f  # cuda.core's Kernel.occupancy, with its method names
    assert callable(f.max_active_blocks_per_multiprocessor)
    assert callable(drv.occupancyMaxPotentialBlockSize)


# ---- On the GPU -----------------------------------------------------------------------------


def _multiprocessors():
    return kiln.Device(0).get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)


@pytest.mark.gpu
def test_cooperative_grid_sum_matches_numpy(mod):
    f = mod.get_function("grid_sum")
    x = (np.arange(1 << 20) % 7 - 3).astype(np.float32)  # small integers: any order is exact
    blocks = f.max_active_blocks(256) * _multiprocessors()
    assert blocks >= 1
    dx = kiln.to_device(x)
    partial = kiln.zeros(blocks, np.float32)
    out = kiln.zeros(1, np.float32)
    f(dx, partial, out, np.int32(x.size), block=256, grid=blocks, cooperative=True)
    assert out.get()[0] == x.sum(dtype=np.float64)
    # A second, smaller grid: still correct.
    f(dx, partial, out, np.int32(x.size), block=256, grid=max(1, blocks // 2), cooperative=True)
    assert out.get()[0] == x.sum(dtype=np.float64)


@pytest.mark.gpu
def test_cooperative_grid_too_large_raises_before_launch(mod):
    f = mod.get_function("grid_sum")
    blocks = f.max_active_blocks(256) * _multiprocessors()
    dx = kiln.zeros(1024, np.float32)
    partial = kiln.zeros(blocks + 1, np.float32)
    out = kiln.to_device(np.array([42.0], np.float32))
    with pytest.raises(ValueError, match="resident on the device at once") as e:
        f(dx, partial, out, np.int32(1024), block=256, grid=blocks + 1, cooperative=True)
    assert f"{blocks + 1} blocks" in str(e.value)
    assert out.get()[0] == 42.0  # nothing ran


@pytest.mark.gpu
def test_cluster_reads_distributed_shared_memory(mod):
    f = mod.get_function("neighbour")
    out = kiln.zeros(8, np.int32)
    assert f.max_active_clusters((4, 1, 1), 32) >= 1
    f(out, block=32, grid=8, cluster=(4, 1, 1))
    want = [((b % 4 + 1) % 4) * 10 + 1 for b in range(8)]
    assert out.get().tolist() == want
    # A cluster of 2 on a kiln stream.
    s = kiln.Stream()
    f(out, block=32, grid=8, cluster=2, stream=s)
    s.synchronize()
    assert out.get().tolist() == [((b % 2 + 1) % 2) * 10 + 1 for b in range(8)]


@pytest.mark.gpu
def test_cluster_dims_kernel_works_without_the_keyword(mod):
    f = mod.get_function("neighbour_fixed")
    assert f.required_cluster_width == 2
    out = kiln.zeros(6, np.int32)
    f(out, block=32, grid=6)
    assert out.get().tolist() == [((b % 2 + 1) % 2) * 10 + 1 for b in range(6)]
    with pytest.raises(ValueError, match=r"grid.x is 3, not a multiple of 2, the cluster.x"):
        f(out, block=32, grid=3)
    with pytest.raises(ValueError, match=r"declares __cluster_dims__\(2, 1, 1\)"):
        f(out, block=32, grid=8, cluster=(4, 1, 1))
    f(out, block=32, grid=6, cluster=2)  # the kernel's own shape, given again
    assert out.get().tolist() == [((b % 2 + 1) % 2) * 10 + 1 for b in range(6)]


@pytest.mark.gpu
def test_dynamic_shared_memory_at_the_device_maximum(mod):
    f = mod.get_function("fill_shared")
    most = kiln.Device(0).get_attribute(drv.device_attribute.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    assert most > 48 * 1024
    words = most // 4
    out = kiln.zeros(1, np.uint32)
    f(out, np.uint32(words), block=256, grid=1, shared=most)
    want = np.bitwise_xor.reduce((np.arange(words, dtype=np.uint64) * 2654435761) % 2**32)
    assert out.get()[0] == want
    assert f.max_dynamic_shared_size_bytes == most
    with pytest.raises(ValueError, match="dynamic shared memory"):
        f(out, np.uint32(words), block=256, grid=1, shared=most + 4)


@pytest.mark.gpu
def test_programmatic_dependent_launch(mod):
    n = 1 << 16
    x = kiln.zeros(n, np.int32)
    y = kiln.zeros(n, np.int32)
    s = kiln.Stream()
    for _ in range(3):
        mod.get_function("first")(x, np.int32(n), block=256, grid=n // 256, stream=s)
        mod.get_function("second")(x, y, np.int32(n), block=256, grid=n // 256, stream=s,
                                   programmatic=True)
    s.synchronize()
    assert (y.get() == np.arange(n, dtype=np.int32) * 3).all()


@pytest.mark.gpu
def test_cooperative_and_cluster_keywords_off_are_the_plain_launch(mod):
    f = mod.get_function("neighbour_fixed")
    out = kiln.zeros(2, np.int32)
    f(out, block=32, grid=2, cooperative=False, cluster=None, programmatic=False)
    assert out.get().tolist() == [11, 1]


def _driver_occupancy(mod, name, block, shared, blocks_per_sm):
    """The driver's own figures, from libcuda through ctypes on kiln's current context."""
    cuda = ctypes.CDLL(ctypes.util.find_library("cuda") or "libcuda.so.1")
    module, fn = ctypes.c_void_p(), ctypes.c_void_p()
    assert cuda.cuModuleLoadData(ctypes.byref(module), mod.cubin) == 0
    try:
        assert cuda.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()) == 0
        active, min_grid, best = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        avail = ctypes.c_size_t()
        assert cuda.cuOccupancyMaxActiveBlocksPerMultiprocessor(
            ctypes.byref(active), fn, ctypes.c_int(block), ctypes.c_size_t(shared)) == 0
        assert cuda.cuOccupancyMaxPotentialBlockSize(
            ctypes.byref(min_grid), ctypes.byref(best), fn, None, ctypes.c_size_t(shared),
            ctypes.c_int(0)) == 0
        assert cuda.cuOccupancyAvailableDynamicSMemPerBlock(
            ctypes.byref(avail), fn, ctypes.c_int(blocks_per_sm), ctypes.c_int(block)) == 0
        return active.value, (min_grid.value, best.value), avail.value
    finally:
        cuda.cuModuleUnload(module)


@pytest.mark.gpu
def test_occupancy_equals_the_drivers(mod):
    f = mod.get_function("heavy")
    f.max_active_blocks(64)  # kiln's context is current on this thread from here on
    for block, shared in [(64, 0), (256, 4096), (512, 0), (96, 20000)]:
        active, potential, avail = _driver_occupancy(mod, "heavy", block, shared, 2)
        assert f.max_active_blocks(block, shared=shared) == active
        assert f.max_active_blocks_per_multiprocessor(block, shared) == active
        assert drv.occupancyMaxActiveBlocksPerMultiprocessor(f, block, shared) == active
        assert f.max_potential_block_size(shared) == potential
        assert drv.occupancyMaxPotentialBlockSize(f, shared) == potential
        assert f.suggested_block_size(shared=shared) == potential[1]
        assert f.available_dynamic_shared(2, block) == avail
        assert f.available_dynamic_shared_memory_per_block(2, block) == avail
    assert f.max_active_blocks((8, 8, 1)) == f.max_active_blocks(64)
