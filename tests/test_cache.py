"""The kernel cache from Python: across processes, under damage, from the command line.

Each test gets an empty cache folder; "a new process" is a Python subprocess, since the
in-process table would answer a repeated SourceModule before the disk is asked."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import kiln
from helpers import ARCH

PYMOD = pathlib.Path(kiln.__file__).resolve().parent.parent

SOURCE = """
extern "C" __global__ void twice(float *x, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= 2.0f; }
"""

# Compiles (or loads) SOURCE, launches it where there is a GPU, prints the stats and a digest
# of the code as JSON.
CHILD = textwrap.dedent("""
    import hashlib, json, os, sys, warnings
    import numpy as np
    import kiln
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        m = kiln.SourceModule(os.environ["SRC"], arch=os.environ.get("ARCH") or None,
                              options=json.loads(os.environ.get("OPTIONS", "[]")),
                              include_dirs=json.loads(os.environ.get("INCLUDES", "[]")))
    out = {"stats": kiln.cache_stats(), "warnings": [str(w.message) for w in caught],
           "cubin": hashlib.sha256(m.cubin or b"").hexdigest(), "ptx": m.ptx}
    if os.environ.get("LAUNCH") == "1":
        x = np.arange(64, dtype=np.float32)
        m.get_function("twice")(kiln.InOut(x), np.int32(64), block=(64, 1, 1))
        out["launched"] = bool((x == 2 * np.arange(64, dtype=np.float32)).all())
    print(json.dumps(out))
""")


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_PATH", raising=False)
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    return folder


def child(src=SOURCE, arch=ARCH, options=(), includes=(), launch=False, env=None, **kw):
    """Runs CHILD in a new process and gives back what it printed."""
    e = dict(os.environ, PYTHONPATH=str(PYMOD), SRC=src, ARCH=arch or "",
             OPTIONS=json.dumps(list(options)), INCLUDES=json.dumps([str(i) for i in includes]),
             LAUNCH="1" if launch else "0")
    e.update(env or {})
    r = subprocess.run([sys.executable, "-c", CHILD], env=e, capture_output=True, text=True,
                       timeout=120, **kw)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def entries(folder):
    return [p for p in folder.glob("??/*") if len(p.name) == 62]


def test_a_new_process_hits_what_another_compiled(cache):
    first = child()
    assert first["stats"]["compiles"] == 1 and first["stats"]["stores"] == 1
    second = child()
    assert second["stats"]["compiles"] == 0 and second["stats"]["disk_hits"] == 1
    assert second["cubin"] == first["cubin"] and second["ptx"] == first["ptx"]
    assert len(entries(cache)) == 1
    assert oct(cache.stat().st_mode & 0o777) == "0o700"


def test_options_and_arch_are_part_of_the_key(cache):
    child(options=["-DSCALE=2"])
    assert child(options=["-DSCALE=3"])["stats"]["compiles"] == 1
    assert child(options=["-DSCALE=2"], arch="sm_80")["stats"]["compiles"] == 1
    assert child(options=["-DSCALE=2"])["stats"]["compiles"] == 0


def test_an_edited_header_is_a_miss(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    (inc / "scale.h").write_text("#define SCALE 2.0f\n")
    src = '#include "scale.h"\n' + SOURCE.replace("2.0f", "SCALE")
    assert child(src, includes=[inc])["stats"]["compiles"] == 1
    assert child(src, includes=[inc])["stats"]["compiles"] == 0
    (inc / "scale.h").write_text("#define SCALE 3.0f\n")  # same size, edited in place
    edited = child(src, includes=[inc])
    assert edited["stats"]["compiles"] == 1
    assert "0f40400000" in edited["ptx"]  # 3.0f
    assert child(src, includes=[inc])["stats"]["compiles"] == 0


def test_an_in_process_hit_notices_an_edited_header(cache, tmp_path):
    (tmp_path / "k.h").write_text("#define K 5\n")
    src = '#include "k.h"\nextern "C" __global__ void k(int *p) { *p = K; }\n'
    a = kiln.SourceModule(src, include_dirs=[tmp_path], arch=ARCH)
    assert kiln.SourceModule(src, include_dirs=[tmp_path], arch=ARCH).ptx == a.ptx
    (tmp_path / "k.h").write_text("#define K 6\n")
    b = kiln.SourceModule(src, include_dirs=[tmp_path], arch=ARCH)
    assert ", 6;" in b.ptx and ", 5;" in a.ptx


def test_headers_given_in_memory_are_part_of_the_key(cache):
    src = '#include "v.h"\nextern "C" __global__ void k(int *p) { *p = V; }\n'
    a = kiln.SourceModule(src, headers={"v.h": "#define V 11\n"}, arch=ARCH)
    b = kiln.SourceModule(src, headers={"v.h": "#define V 12\n"}, arch=ARCH)
    assert ", 11;" in a.ptx and ", 12;" in b.ptx
    with pytest.raises(TypeError, match="headers"):
        kiln.SourceModule(src, headers=["v.h"])


def test_32_processes_on_a_cold_cache_compile_once(cache):
    env = dict(os.environ, PYTHONPATH=str(PYMOD), SRC=SOURCE, ARCH=ARCH or "", OPTIONS="[]",
               INCLUDES="[]", LAUNCH="0")
    procs = [subprocess.Popen([sys.executable, "-c", CHILD], env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(32)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err
        results.append(json.loads(out))
    assert sum(r["stats"]["compiles"] for r in results) == 1
    assert sum(r["stats"]["disk_hits"] for r in results) == 31
    assert len({r["cubin"] for r in results}) == 1
    assert len(entries(cache)) == 1


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty", "foreign"])
def test_a_damaged_entry_is_recompiled_with_one_warning(cache, damage):
    good = child()
    (entry,) = entries(cache)
    data = entry.read_bytes()
    if damage == "flip":
        data = data[:200] + bytes([data[200] ^ 1]) + data[201:]
    elif damage == "truncate":
        data = data[: len(data) // 3]
    elif damage == "empty":
        data = b""
    else:
        data = b"\x7fELF" + os.urandom(300)
    entry.write_bytes(data)
    again = child()
    assert again["stats"]["compiles"] == 1 and again["stats"]["corrupt"] == 1
    assert len(again["warnings"]) == 1 and "is damaged" in again["warnings"][0]
    assert again["cubin"] == good["cubin"]
    assert child()["stats"]["disk_hits"] == 1  # replaced


def test_a_folder_others_can_write_is_not_used(cache):
    child()
    cache.chmod(0o777)
    r = child()
    assert r["stats"]["compiles"] == 1 and r["stats"]["disk_hits"] == 0
    assert len(r["warnings"]) == 1 and "others can write" in r["warnings"][0]
    info = json.loads(subprocess.run(
        [sys.executable, "-c", "import json, kiln; print(json.dumps(kiln.cache_info()))"],
        env=dict(os.environ, PYTHONPATH=str(PYMOD)), capture_output=True, text=True,
        check=True).stdout)
    assert not info["enabled"] and "others can write" in info["reason"]


def test_a_full_disk_warns_once_and_kiln_goes_on(cache):
    def small_files():
        import resource
        resource.setrlimit(resource.RLIMIT_FSIZE, (200, 200))

    r = child(preexec_fn=small_files)
    assert r["stats"]["compiles"] == 1 and r["stats"]["stores"] == 0
    assert len(r["warnings"]) == 1 and "cannot be written" in r["warnings"][0]


def test_a_read_only_layer_is_searched_and_never_written(cache, tmp_path):
    layer = tmp_path / "shipped"
    child(env={"KILN_CACHE_DIR": str(layer)})
    before = {p: p.stat().st_mtime_ns for p in layer.rglob("*")}
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["disk_hits"] == 1 and r["stats"]["compiles"] == 0
    assert entries(cache) == []
    assert {p: p.stat().st_mtime_ns for p in layer.rglob("*")} == before


def test_cache_off_writes_nothing(cache):
    r = child(env={"KILN_CACHE": "0"})
    assert r["stats"]["compiles"] == 1 and not cache.exists()


def test_the_bound_keeps_the_folder_small(cache):
    sizes = []
    for i in range(6):
        child(SOURCE + f"// {i}\n", env={"KILN_CACHE_MAX_BYTES": "12k"})
        sizes.append(sum(p.stat().st_size for p in entries(cache)))
    assert max(sizes) <= 12 * 1024
    assert len(entries(cache)) < 6


def test_cache_stats_count_this_process(cache):
    before = kiln.cache_stats()
    # Held between the calls: a process that holds more modules than the in-process table's
    # bound (a whole test run on a GPU) lets a module go from the table as soon as it is let go.
    held = kiln.SourceModule(SOURCE + "// stats\n", arch=ARCH)
    kiln.SourceModule(SOURCE + "// stats\n", arch=ARCH)
    del held
    after = kiln.cache_stats()
    assert after["compiles"] - before["compiles"] == 1
    assert after["memory_hits"] - before["memory_hits"] == 1
    assert set(after) == {"memory_hits", "disk_hits", "misses", "compiles", "stores",
                          "evictions", "corrupt", "pch_created", "pch_used"}


def test_cache_info_list_prune_clear(cache):
    for i in range(3):
        kiln.SourceModule(SOURCE + f"// listed {i}\n", arch=ARCH)
    info = kiln.cache_info()
    assert info["dir"] == str(cache) and info["entries"] == 3 and info["writable"]
    listed = kiln.cache_list()
    assert len(listed) == 3 and all(e["kernels"] == "twice" and e["problem"] is None
                                    for e in listed)
    assert kiln.cache_prune(max_bytes=info["bytes"] - 1) == 1
    assert kiln.cache_clear() == 2
    assert kiln.cache_info()["entries"] == 0
    with pytest.raises(ValueError):
        kiln.cache_prune(max_bytes=0)


def run_cli(*args, cwd=None):
    r = subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(PYMOD)), cwd=cwd, timeout=120)
    return r


def test_cli_compile_fills_the_cache_for_each_arch(cache, tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(SOURCE)
    r = run_cli("compile", str(cu), "--arch", "sm_80,sm_90", "-D", "UNUSED=1")
    assert r.returncode == 0, r.stderr
    assert "sm_80: twice" in r.stdout and "sm_90: twice" in r.stdout
    assert len(entries(cache)) == 2
    # What the CLI compiled, a program compiling the same way finds.
    hit = child(arch="sm_90", options=["-DUNUSED=1"])
    assert hit["stats"]["disk_hits"] == 1 and hit["stats"]["compiles"] == 0
    info = run_cli("cache", "info")
    assert "entries    2" in info.stdout and "misses     2" in info.stdout
    listed = run_cli("cache", "list")
    assert listed.stdout.count("twice") == 2
    assert run_cli("cache", "prune", "--max-bytes", "1k").stdout.strip() == "removed 2 entries"
    assert run_cli("cache", "clear").returncode == 0


def test_cli_writes_ptx_and_cubin(cache, tmp_path):
    cu = tmp_path / "k.cu"
    cu.write_text(SOURCE)
    r = run_cli("compile", str(cu), "--arch", "sm_90", "-o", str(tmp_path / "k.ptx"))
    assert r.returncode == 0, r.stderr
    assert ".entry twice" in (tmp_path / "k.ptx").read_text()
    r = run_cli("compile", str(cu), "--arch", "sm_90", "-o", str(tmp_path / "k.cubin"))
    assert (tmp_path / "k.cubin").read_bytes()[:4] == b"\x7fELF"
    r = run_cli("compile", str(cu), "--arch", "sm_80,sm_90", "-o", str(tmp_path / "k.cubin"))
    assert r.returncode == 2 and "one --arch" in r.stderr
    bad = tmp_path / "bad.cu"
    bad.write_text("__global__ void k( { }\n")
    r = run_cli("compile", str(bad), "--arch", "sm_90")
    assert r.returncode == 1 and "error" in r.stderr


def test_module_from_file_reads_ptx_without_a_gpu(cache, tmp_path):
    m = kiln.SourceModule(SOURCE, arch="sm_80")
    (tmp_path / "k.ptx").write_text(m.ptx)
    p = kiln.module_from_file(tmp_path / "k.ptx")
    assert isinstance(p, kiln.Module) and not isinstance(p, kiln.SourceModule)
    assert p.arch == "sm_80" and p.kernels == ("twice",)
    assert repr(p.get_function("twice")) == repr(m.get_function("twice"))
    assert kiln.module_from_buffer(m.ptx).kernels == ("twice",)
    # PyCUDA's keyword, as its binding names it
    assert kiln.module_from_file(filename=tmp_path / "k.ptx").kernels == ("twice",)
    # Refused before the driver sees it, as the driver's LogicError (CUDA_ERROR_INVALID_IMAGE)
    # that PyCUDA programs catch, and a ValueError, as kiln's own checks are.
    for junk, said in ((b"hello world", "neither a CUBIN"), (b"", "the image is empty"),
                       (b"\x7fELF" + bytes(60), "begins as an ELF file but is no CUBIN")):
        with pytest.raises(ValueError, match=said) as e:
            kiln.module_from_buffer(junk)
        assert isinstance(e.value, kiln.LogicError) and e.value.name == "CUDA_ERROR_INVALID_IMAGE"
        with pytest.raises(kiln.LogicError, match=said):
            kiln.module_from_buffer(junk, options=[(kiln.driver.jit_option.MAX_REGISTERS, 32)])
    with pytest.raises(TypeError, match="bytes"):
        kiln.module_from_buffer(42)
    with pytest.raises(FileNotFoundError):
        kiln.module_from_file(tmp_path / "missing.cubin")
    with pytest.raises(TypeError):
        kiln.Module()


def test_module_from_cubin_without_a_driver_says_why(cache, tmp_path):
    cubin = tmp_path / "k.cubin"
    cubin.write_bytes(kiln.SourceModule(SOURCE, arch="sm_90").cubin)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(f"""
        import kiln
        try:
            kiln.module_from_file({str(cubin)!r})
        except kiln.NoDeviceError as e:
            print(e)
        """)], capture_output=True, text=True, check=True,
        env=dict(os.environ, PYTHONPATH=str(PYMOD), KILN_CUDA_PATH="/nonexistent/libcuda.so"))
    assert "no CUDA driver" in r.stdout and "PTX needs no device" in r.stdout


def test_module_from_buffer_checks_pycudas_options_first(cache):
    import kiln.driver as drv
    ptx = kiln.SourceModule(SOURCE, arch="sm_80").ptx
    with pytest.raises(TypeError, match="list of .jit_option, value. pairs"):
        kiln.module_from_buffer(ptx, options=3)
    with pytest.raises(TypeError, match="option 0 must be a .jit_option, value. pair"):
        kiln.module_from_buffer(ptx, options=[drv.jit_option.MAX_REGISTERS])
    with pytest.raises(TypeError, match="option 1 must be a .jit_option, value. pair"):
        kiln.module_from_buffer(ptx, options=[(0, 32), (0, 32, 1)])
    with pytest.raises(TypeError, match="a kiln.driver.jit_option is expected"):
        kiln.module_from_buffer(ptx, options=[["MAX_REGISTERS", 16]])  # a list pair is read
    with pytest.raises(TypeError, match="a kiln.driver.jit_option is expected"):
        kiln.module_from_buffer(ptx, options=[("MAX_REGISTERS", 16)])
    with pytest.raises(TypeError, match="an int is expected"):
        kiln.module_from_buffer(ptx, [(drv.jit_option.MAX_REGISTERS, 16.5)])
    with pytest.raises(ValueError, match="log buffers are kiln's own"):
        kiln.module_from_buffer(ptx, [(drv.jit_option.INFO_LOG_BUFFER, 0)])
    with pytest.raises(ValueError, match="unsigned 32-bit"):
        kiln.module_from_buffer(ptx, [(drv.jit_option.MAX_REGISTERS, -2)])
    with pytest.raises(TypeError, match="message_handler must be callable"):
        kiln.module_from_buffer(ptx, message_handler="print")
    with pytest.raises(ValueError, match="options are at most 64, not 65"):
        kiln.module_from_buffer(ptx, [(drv.jit_option.MAX_REGISTERS, 16)] * 65)
    # No options and no handler: PTX loads at the first launch, with no device until then.
    assert kiln.module_from_buffer(ptx, options=[]).kernels == ("twice",)


@pytest.mark.gpu
def test_gpu_module_from_buffer_with_pycudas_options_and_handler(cache):
    import kiln.driver as drv
    # The driver keeps what it compiled from PTX in its own cache (~/.nv/ComputeCache) and says
    # nothing when it loads from there: a never-taken branch on a number of this run's makes
    # the PTX new, so that the loader compiles it and writes its log.
    nonce = int.from_bytes(os.urandom(2), "little")
    src = r"""
    __global__ void heavy(float *out, const float *in) {
      if (in[0] < -NONCE.5f) return;  // inputs are in [0, 1)
      float v[24];
      #pragma unroll
      for (int i = 0; i < 24; i++) v[i] = sinf(in[threadIdx.x * 24 + i] * (i + 1));
      float s = 0;
      #pragma unroll
      for (int i = 0; i < 24; i++) s += v[i] * v[23 - i] + v[(i * 7) % 24];
      out[threadIdx.x] = s;
    }""".replace("NONCE", str(nonce))
    ptx = kiln.SourceModule(src).ptx
    heard = []
    capped = drv.module_from_buffer(
        ptx.encode(), options=[(drv.jit_option.MAX_REGISTERS, 32),  # ptxas's least is 24
                               (drv.jit_option.LOG_VERBOSE, 1)],
        message_handler=lambda ok, info, error: heard.append((ok, info, error)))
    assert len(heard) == 1 and heard[0][0] is True and "registers" in heard[0][1]
    assert 0 < capped.get_function("heavy").num_regs <= 32
    assert drv.module_from_buffer(ptx).get_function("heavy").num_regs > 32  # 38 for sm_90
    # The capped kernel computes what numpy does.
    x = np.random.default_rng(3).random(32 * 24, dtype=np.float32)
    out = np.zeros(32, np.float32)
    capped.get_function("heavy")(drv.Out(out), drv.In(x), block=(32, 1, 1))
    v = np.sin(x.reshape(32, 24) * np.arange(1, 25, dtype=np.float32))
    want = (v * v[:, ::-1] + v[:, (np.arange(24) * 7) % 24]).sum(axis=1)
    np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-5)
    # PTX the loader refuses: the handler hears it first, then the error says the log.
    broken = (".version 8.0\n.target sm_90\n.address_size 64\n"
              ".visible .entry k()\n{\n  bogus.instruction;\n  ret;\n}\n")
    heard.clear()
    with pytest.raises(drv.CudaError, match="the loader said|compiling kernel k"):
        drv.module_from_buffer(broken, message_handler=lambda *a: heard.append(a))
    assert len(heard) == 1 and heard[0][0] is False
    # A handler that raises: its exception, and no module.
    def fails(ok, info, error):
        raise KeyError("from the handler")
    with pytest.raises(KeyError, match="from the handler"):
        drv.module_from_buffer(ptx, message_handler=fails)


@pytest.mark.gpu
def test_gpu_a_disk_hit_launches(cache):
    assert child(launch=True)["launched"]
    r = child(launch=True)
    assert r["launched"] and r["stats"]["disk_hits"] == 1 and r["stats"]["compiles"] == 0


@pytest.mark.gpu
def test_gpu_module_from_cubin_and_fatbin_launch(cache, tmp_path):
    m = kiln.SourceModule(SOURCE)
    for image in (m.cubin, m.ptx.encode()):
        mod = kiln.module_from_buffer(image)
        x = np.arange(32, dtype=np.float32)
        mod.get_function("twice")(kiln.InOut(x), np.int32(32), block=(32, 1, 1))
        assert (x == 2 * np.arange(32)).all()
    nvcc = pathlib.Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "bin" / "nvcc"
    assert nvcc.exists(), "a fatbin is made with the toolkit's nvcc"
    if nvcc.exists():
        cu = tmp_path / "k.cu"
        cu.write_text(SOURCE)
        major, minor = kiln.Device(0).compute_capability()
        # nvcc is not kiln's: it runs without the ASan runtime make sanitize preloads, under
        # which it crashes (SIGSEGV)
        env = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"}
        subprocess.run([str(nvcc), "-fatbin", f"-arch=sm_{major}{minor}", "-o",
                        str(tmp_path / "k.fatbin"), str(cu)], check=True, env=env)
        mod = kiln.module_from_file(tmp_path / "k.fatbin")
        x = np.ones(8, dtype=np.float32)
        mod.get_function("twice")(kiln.InOut(x), np.int32(8), block=(8, 1, 1))
        assert (x == 2).all()


def test_warnings_are_cache_warnings(cache):
    child()
    (entry,) = entries(cache)
    entry.write_bytes(b"")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        r = subprocess.run([sys.executable, "-c",
                            "import kiln, warnings\n"
                            "warnings.simplefilter('error', kiln.CacheWarning)\n"
                            f"kiln.SourceModule({SOURCE!r}, arch={ARCH!r})"],
                           env=dict(os.environ, PYTHONPATH=str(PYMOD)), capture_output=True,
                           text=True)
    assert not caught
    assert r.returncode == 1 and "kiln.CacheWarning" in r.stderr and "damaged" in r.stderr
    assert issubclass(kiln.CacheWarning, UserWarning)


def test_the_suite_does_not_touch_the_users_cache():
    assert "kiln-pytest-cache-" in os.environ["KILN_CACHE_DIR"]
