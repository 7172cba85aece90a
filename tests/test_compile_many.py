"""kiln.compile_many and `python -m kiln compile` with many sources: all at once, in order,
failures raised after the rest, progress reported."""
import os
import subprocess
import sys
import uuid

import pytest

import kiln
from helpers import ARCH


def source(i, tag=None):
    tag = tag or uuid.uuid4().hex[:8]
    return (f'extern "C" __global__ void k{i}_{tag}(float *x) '
            f'{{ x[threadIdx.x] += {i}.0f; }}\n')


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_modules_come_back_in_source_order():
    tag = uuid.uuid4().hex[:8]
    mods = kiln.compile_many([source(i, tag) for i in range(8)], arch=ARCH, workers=4)
    assert [list(m.kernels) for m in mods] == [[f"k{i}_{tag}"] for i in range(8)]
    assert all(isinstance(m, kiln.SourceModule) for m in mods)


def test_per_source_keywords_add_to_the_shared_ones():
    src = '__global__ void v(int *x) { x[0] = VALUE; }\n'
    a, b = kiln.compile_many([(src, {"options": ["-DVALUE=11"]}),
                              (src, {"options": ["-DVALUE=22"]})], arch="sm_90")
    assert "11" in a.ptx and "22" in b.ptx and a.arch == b.arch == "sm_90"


def test_a_failure_is_raised_after_the_others_compiled():
    tag = uuid.uuid4().hex[:8]
    bad = "__global__ void broken(float *x) { x[0] = undefined_name; }\n"
    with pytest.raises(kiln.CompileError, match="undefined_name"):
        kiln.compile_many([source(0, tag), bad, source(2, tag)], arch=ARCH)
    before = kiln.cache_stats()["memory_hits"]
    kiln.SourceModule(source(2, tag), arch=ARCH)  # it was compiled all the same
    assert kiln.cache_stats()["memory_hits"] == before + 1


def test_return_exceptions_puts_the_error_in_its_place():
    bad = "__global__ void broken(float *x) { x[0] = undefined_name; }\n"
    good, err = kiln.compile_many([source(0), bad], arch=ARCH, return_exceptions=True)
    assert isinstance(good, kiln.SourceModule) and isinstance(err, kiln.CompileError)


def test_progress_callable_sees_every_source():
    seen = []
    kiln.compile_many([source(i) for i in range(5)], arch=ARCH,
                      progress=lambda done, total: seen.append((done, total)))
    assert seen == [(i, 5) for i in range(1, 6)]


@pytest.mark.parametrize("bad, error, phrase", [
    ([b"bytes"], TypeError, "source strings or"),
    ([("src", ["not", "a", "dict"])], TypeError, "source strings or"),
])
def test_bad_sources_say_what_is_taken(bad, error, phrase):
    with pytest.raises(error, match=phrase):
        kiln.compile_many(bad)


@pytest.mark.parametrize("workers", [0, -1, 1.5, True])
def test_bad_workers(workers):
    with pytest.raises(ValueError, match="workers must be a positive int"):
        kiln.compile_many([source(0)], workers=workers)


def test_bad_progress():
    with pytest.raises(TypeError, match="progress is True, False or a callable"):
        kiln.compile_many([source(0)], progress="yes")


def test_an_empty_list_gives_an_empty_list():
    assert kiln.compile_many([]) == []


def test_threads_compile_at_once_from_many_threads():
    """Each thread's compile lies inside the others' (NVRTC holds no GIL): with 4 sources on 4
    threads, the sum of the compile times exceeds the wall time whenever two overlap. That
    needs two cores, so here only the results are checked, not the overlap."""
    tag = uuid.uuid4().hex[:8]
    mods = kiln.compile_many([source(i, tag) for i in range(4)], arch=ARCH, workers=4)
    assert sorted(k for m in mods for k in m.kernels) == sorted(f"k{i}_{tag}" for i in range(4))


def test_the_cli_compiles_many_files_with_progress(tmp_path, cache):
    files = []
    for i in range(3):
        f = tmp_path / f"s{i}.cu"
        f.write_text(source(i, "cli"))
        files.append(str(f))
    env = {**os.environ, "KILN_CACHE_DIR": str(cache),
           "PYTHONPATH": str(kiln.__path__[0] + "/..")}
    r = subprocess.run([sys.executable, "-m", "kiln", "compile", *files, "--arch", "sm_90"],
                       capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, r.stderr
    for i, f in enumerate(files):
        assert f"{f}: sm_90: k{i}_cli" in r.stdout
    # tqdm's bar where it is installed, else one line per source.
    assert "kiln compile" in r.stderr and ("3/3" in r.stderr)


def test_the_cli_reports_each_failed_file(tmp_path, cache):
    good, bad = tmp_path / "good.cu", tmp_path / "bad.cu"
    good.write_text(source(0, "ok"))
    bad.write_text("__global__ void broken(float *x) { x[0] = undefined_name; }\n")
    env = {**os.environ, "KILN_CACHE_DIR": str(cache),
           "PYTHONPATH": str(kiln.__path__[0] + "/..")}
    r = subprocess.run([sys.executable, "-m", "kiln", "compile", str(good), str(bad),
                        "--arch", "sm_90"], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 1
    assert f"{bad}: " in r.stderr and "undefined_name" in r.stderr
    assert f"{good}: sm_90: k0_ok" in r.stdout


# ---- Compiles at once go to compile helpers -------------------------------------------------

def slow_source(tag, kernels=48):
    """A source that keeps NVRTC busy for seconds (here: 1.8 s)."""
    return "".join(f'extern "C" __global__ void slow_{tag}_{i}(float *x, int n) {{ '
                   f"for (int j = threadIdx.x; j < n; j += 32) "
                   f"x[j] = sinf(x[j]) * {i}.5f + cosf(x[j] * {i}.25f); }}\n"
                   for i in range(kernels))


def while_nvrtc_runs_here(work, fresh_helper=True):
    """work() called while another thread's compile runs NVRTC in this process; its result,
    once that thread's compile is checked to have run in the process."""
    import threading
    import time
    if fresh_helper:  # the helper as the package sets it, not given up by an earlier test
        kiln._pickle.use_compile_helper()
    started, report, failed = threading.Event(), {}, []

    def busy():
        started.set()
        try:
            kiln.SourceModule(slow_source(uuid.uuid4().hex[:8]), arch=ARCH, cache_dir=False)
            report.update(kiln._kiln.last_compile_report())
        except Exception as e:  # raised below, after the join
            failed.append(e)

    thread = threading.Thread(target=busy)
    thread.start()
    started.wait()
    time.sleep(0.2)  # well inside the busy compile, which takes seconds
    try:
        result = work()
    finally:
        thread.join()
    if failed:
        raise failed[0]
    assert report["helper"] == "none" and report["origin"] == "nvrtc", report
    return result


def test_a_compile_while_another_runs_nvrtc_goes_to_a_helper_and_gives_the_same_code():
    src = source(1)
    # The same code twice, under two keys: a macro that nothing reads.
    alone = kiln.SourceModule(src, arch=ARCH, cache_dir=False, options=["-DKILN_TEST_ALONE"])
    assert kiln._kiln.last_compile_report()["helper"] == "none"

    def crowded():
        m = kiln.SourceModule(src, arch=ARCH, cache_dir=False, options=["-DKILN_TEST_CROWDED"])
        return m, kiln._kiln.last_compile_report()

    module, report = while_nvrtc_runs_here(crowded)
    assert report["helper"] == "own" and report["origin"] == "nvrtc", report
    assert module.cubin == alone.cubin and module.ptx == alone.ptx
    assert list(module.kernels) == list(alone.kernels)


def test_a_crowded_compile_that_fails_says_why_as_one_in_the_process_would():
    bad = "__global__ void broken(float *x) { x[0] = undefined_name; }\n"

    def crowded():
        with pytest.raises(kiln.CompileError, match="undefined_name") as e:
            kiln.SourceModule(bad, arch=ARCH, cache_dir=False)
        return e.value

    error = while_nvrtc_runs_here(crowded)
    assert "broken" in str(error) or "undefined_name" in error.log


def test_with_the_helper_off_a_crowded_compile_runs_in_the_process(monkeypatch):
    monkeypatch.setenv("KILN_NVRTC_HELPER", "0")

    def crowded():
        kiln.SourceModule(source(2), arch=ARCH, cache_dir=False)
        return kiln._kiln.last_compile_report()

    assert while_nvrtc_runs_here(crowded)["helper"] == "none"


def test_a_crowded_compile_is_stored_in_the_cache_and_found_by_the_next_process(cache):
    src = source(3)
    while_nvrtc_runs_here(lambda: kiln.SourceModule(src, arch=ARCH))
    child = (f"import kiln; kiln.SourceModule({src!r}, arch={ARCH!r}); "
             "print(kiln.cache_stats()['disk_hits'], kiln.cache_stats()['compiles'])")
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         env={**os.environ, "KILN_CACHE_DIR": str(cache)}, check=True)
    assert out.stdout.split() == ["1", "0"], out.stdout + out.stderr


def test_a_helper_that_cannot_fix_its_layout_still_takes_crowded_compiles(tmp_path, monkeypatch):
    """Its PCH files would serve no later run, so compiles that could use one stay in the
    process; a compile that comes while NVRTC runs here still goes to a helper."""
    helper = os.path.join(os.path.dirname(kiln.__file__), "kiln-nvrtc")
    wrapper = tmp_path / "randomised-helper"  # told it tried already, so it stays randomised
    wrapper.write_text(f'#!/bin/sh\nKILN__NVRTC_AGAIN=1 exec {helper} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("KILN_NVRTC_HELPER", str(wrapper))
    kiln._pickle.use_compile_helper()  # nothing given up before
    heavy = "#include <cuda_fp16.h>\n" + source(4)
    kiln.SourceModule(heavy, arch=ARCH)  # in the helper, which says it is not fixed
    kiln.SourceModule("#include <cuda_fp16.h>\n" + source(5), arch=ARCH)
    assert kiln._kiln.last_compile_report()["helper"] == "none"

    def crowded():
        kiln.SourceModule(source(6), arch=ARCH, cache_dir=False)
        return kiln._kiln.last_compile_report()

    try:
        assert while_nvrtc_runs_here(crowded, fresh_helper=False)["helper"] == "own"
    finally:
        monkeypatch.undo()
        kiln._pickle.use_compile_helper()  # the later tests' helper, PCH compiles and all
