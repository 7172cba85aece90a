"""kiln under dask.distributed (docs/cluster.md): one worker process per GPU, a kernel compiled
once per machine through the shared cache or shipped compiled, results checked against NumPy.
Skips where distributed is not installed (CI installs it; the GPU machine has no network)."""
import os
import pathlib
import uuid

import numpy as np
import pytest

import kiln
from helpers import ARCH

distributed = pytest.importorskip("distributed")

SCALE = """
extern "C" __global__ void scale_add(float *y, const float *x, float a, float b, long long n)
{
    long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = a * x[i] + b;
}
"""
TESTS = str(pathlib.Path(__file__).resolve().parent)


# ---- What runs on the workers (module-level, so workers import it by name) ------------------

def compile_and_count(source, arch):
    """Compiles source on the worker (through the cache folder all workers share) and gives
    back this worker process's cache statistics."""
    kiln.SourceModule(source, arch=arch)
    return kiln.cache_stats()


def describe_shipped(module):
    """What a worker sees of a compiled Module it was sent: its kernels, its code, and whether
    receiving it compiled anything."""
    return {"kernels": sorted(module.kernels), "cubin": module.cubin, "ptx": module.ptx,
            "compiles": kiln.cache_stats()["compiles"], "module": module}


def scale_chunk(module, chunk, a, b):
    """y = a * x + b over one chunk, on this worker's GPU; gives back the result and the GPU's
    PCI bus id, so a test can see which GPU did the work."""
    f = module.get_function("scale_add")
    x = kiln.to_device(chunk)
    y = kiln.empty(chunk.shape, np.float32)
    n = chunk.size
    f(y, x, np.float32(a), np.float32(b), np.int64(n), block=(256, 1, 1),
      grid=((n + 255) // 256, 1))
    return y.get(), kiln.Device(kiln.current_device()).pci_bus_id()


def compile_and_scale(source, chunk, a, b):
    """Compiles source on this worker, for its own GPU, through the machine's cache folder, then
    runs it over chunk: the result, the GPU's PCI bus id and its compute capability."""
    module = kiln.SourceModule(source, arch=None)
    y, bus = scale_chunk(module, chunk, a, b)
    return y, bus, kiln.Device(kiln.current_device()).compute_capability()


# ---- Clusters ---------------------------------------------------------------------------------

@pytest.fixture
def shared_cache(tmp_path, monkeypatch):
    """One cache folder for the test process and its workers: a machine's cache. Workers
    inherit the environment, so they import kiln and this file as the test does."""
    folder = tmp_path / "machine-cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    path = os.environ.get("PYTHONPATH", "")
    monkeypatch.setenv("PYTHONPATH", TESTS + (os.pathsep + path if path else ""))
    return folder


def cpu_cluster(n):
    return distributed.LocalCluster(n_workers=n, threads_per_worker=1, processes=True,
                                    dashboard_address=None)


def gpu_cluster():
    """One worker per GPU: dask-cuda's LocalCUDACluster where it is installed, else a Nanny per
    device with CUDA_VISIBLE_DEVICES set, which is what LocalCUDACluster does."""
    try:
        from dask_cuda import LocalCUDACluster
    except ImportError:
        pass
    else:
        return LocalCUDACluster(threads_per_worker=1, dashboard_address=None)
    n = kiln.Device.count()
    workers = {f"gpu-{i}": {"cls": distributed.Nanny,
                            "options": {"nthreads": 1, "env": {"CUDA_VISIBLE_DEVICES": str(i)}}}
               for i in range(n)}
    scheduler = {"cls": distributed.Scheduler, "options": {"dashboard_address": None}}
    return distributed.SpecCluster(workers=workers, scheduler=scheduler)


# ---- Without a GPU --------------------------------------------------------------------------

def test_workers_compile_once_through_the_shared_cache(shared_cache):
    source = SCALE + f"// {uuid.uuid4().hex}\n"
    with cpu_cluster(3) as cluster, distributed.Client(cluster) as client:
        # client.run runs on every worker at once: three processes miss together.
        stats = client.run(compile_and_count, source, ARCH)
        assert len(stats) == 3
        assert sum(s["compiles"] for s in stats.values()) == 1
        assert sum(s["disk_hits"] for s in stats.values()) == 2
        # A second round is answered by each worker's in-process table.
        again = client.run(compile_and_count, source, ARCH)
        assert sum(s["compiles"] for s in again.values()) == 1
        assert sum(s["memory_hits"] for s in again.values()) == 3
    assert kiln.cache_info()["entries"] >= 1


def test_a_compiled_module_ships_to_workers_and_back(shared_cache):
    module = kiln.SourceModule(SCALE + f"// {uuid.uuid4().hex}\n", arch=ARCH)
    with cpu_cluster(2) as cluster, distributed.Client(cluster) as client:
        [shipped] = client.scatter([module], broadcast=True)
        seen = client.gather([client.submit(describe_shipped, shipped, workers=[w], pure=False)
                              for w in client.scheduler_info()["workers"]])
    assert len(seen) == 2
    for s in seen:
        assert s["kernels"] == sorted(module.kernels)
        assert s["cubin"] == module.cubin and s["ptx"] == module.ptx
        assert s["compiles"] == 0  # nothing was compiled on the workers
        back = s["module"]  # and back again, pickled by the worker
        assert isinstance(back, kiln.Module) and back.cubin == module.cubin


# ---- On GPUs ----------------------------------------------------------------------------------

def _run_over_chunks(n_chunks, n=10_000_000):
    rng = np.random.default_rng(7)
    x = rng.standard_normal(n, dtype=np.float32)
    chunks = np.array_split(x, n_chunks)
    module = kiln.SourceModule(SCALE, arch=None)
    with gpu_cluster() as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(kiln.Device.count())
        workers = sorted(client.scheduler_info()["workers"])
        [shipped] = client.scatter([module], broadcast=True)
        futures = [client.submit(scale_chunk, shipped, c, 2.5, -1.0, workers=[workers[i % len(
            workers)]], allow_other_workers=False, pure=False) for i, c in enumerate(chunks)]
        results = client.gather(futures)
    y = np.concatenate([r for r, _ in results])
    np.testing.assert_allclose(y, np.float32(2.5) * x + np.float32(-1.0), rtol=1e-6, atol=1e-6)
    return {bus for _, bus in results}


@pytest.mark.gpu
def test_kernel_over_chunks_on_every_gpu():
    buses = _run_over_chunks(16)
    assert len(buses) == kiln.Device.count()


@pytest.mark.gpu
@pytest.mark.gpus2
def test_both_gpus_do_the_work():
    buses = _run_over_chunks(8)
    expected = {kiln.Device(i).pci_bus_id() for i in range(kiln.Device.count())}
    assert buses == expected and len(buses) >= 2


@pytest.mark.gpu
@pytest.mark.gpus2
def test_every_gpu_compiles_through_the_machine_cache_once(shared_cache):
    # The source is sent, not the module: each GPU's worker compiles it for its own device, and
    # the machine's cache folder makes that one compile per architecture for the whole machine
    # (workers of the same GPU model share the entry). The test process compiles nothing.
    source = SCALE + f"// {uuid.uuid4().hex}\n"
    n_gpus = kiln.Device.count()
    rng = np.random.default_rng(11)
    x = rng.standard_normal(4_000_000, dtype=np.float32)
    chunks = np.array_split(x, 4 * n_gpus)
    before = kiln.cache_stats()["compiles"]
    with gpu_cluster() as cluster, distributed.Client(cluster) as client:
        client.wait_for_workers(n_gpus)
        workers = sorted(client.scheduler_info()["workers"])
        assert len(workers) == n_gpus
        futures = [client.submit(compile_and_scale, source, c, 2.5, -1.0,
                                 workers=[workers[i % n_gpus]], allow_other_workers=False,
                                 pure=False) for i, c in enumerate(chunks)]
        results = client.gather(futures)
        stats = client.run(kiln.cache_stats)
    assert kiln.cache_stats()["compiles"] == before
    y = np.concatenate([r[0] for r in results])
    np.testing.assert_allclose(y, np.float32(2.5) * x + np.float32(-1.0), rtol=1e-6, atol=1e-6)
    buses = {r[1] for r in results}
    assert buses == {kiln.Device(i).pci_bus_id() for i in range(n_gpus)}  # every GPU worked
    archs = {tuple(r[2]) for r in results}
    compiles = sum(s["compiles"] for s in stats.values())
    assert compiles == len(archs), (stats, archs)  # one compile per architecture, machine-wide
    # Every chunk after a worker's first was answered from its own process.
    assert sum(s["memory_hits"] for s in stats.values()) >= len(chunks) - n_gpus
