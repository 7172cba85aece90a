"""`python -m kiln`: every input it cannot act on gives one line on stderr that says why, and
a non-zero exit; never a traceback, never a hang."""
import os
import pathlib
import subprocess
import sys

import pytest

import kiln

PYMOD = pathlib.Path(kiln.__file__).resolve().parent.parent
SOURCE = 'extern "C" __global__ void k(int *p) { *p = 7; }\n'


def run_cli(*args, env=None, cwd=None):
    e = dict(os.environ, PYTHONPATH=str(PYMOD))
    e.update(env or {})
    try:
        return subprocess.run([sys.executable, "-m", "kiln", *map(str, args)], env=e, cwd=cwd,
                              capture_output=True, text=True, timeout=60)
    except subprocess.TimeoutExpired:
        pytest.fail("python -m kiln did not finish in 60 s")


def one_line_error(r, phrase):
    assert r.returncode != 0, r.stdout
    assert "Traceback" not in r.stderr, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert lines[0].startswith("python -m kiln: error: "), lines[0]
    assert phrase in lines[0], lines[0]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_PATH", raising=False)
    monkeypatch.delenv("KILN_CACHE", raising=False)
    return folder


@pytest.fixture
def cu(tmp_path):
    path = tmp_path / "k.cu"
    path.write_text(SOURCE)
    return path


def test_a_missing_file(cache, tmp_path):
    one_line_error(run_cli("compile", tmp_path / "missing.cu"), "No such file")


def test_a_folder(cache, tmp_path):
    one_line_error(run_cli("compile", tmp_path), "is a folder")


def test_a_file_that_is_not_utf8(cache, tmp_path):
    bad = tmp_path / "bad.cu"
    bad.write_bytes(b"__global__ void k() {}\n// \xff\xfe\n")
    one_line_error(run_cli("compile", bad), "is not UTF-8")


def test_dev_zero_is_not_read(cache):
    one_line_error(run_cli("compile", "/dev/zero"), "not a regular file")


def test_a_fifo_is_not_waited_on(cache, tmp_path):
    fifo = tmp_path / "k.cu"
    os.mkfifo(fifo)
    one_line_error(run_cli("compile", fifo), "not a regular file")


def test_a_huge_file_is_not_read(cache, tmp_path):
    big = tmp_path / "big.cu"
    with open(big, "wb") as f:
        f.truncate(1 << 30)  # sparse
    one_line_error(run_cli("compile", big), "larger than any source")


def test_an_unreadable_file(cache, tmp_path, cu):
    if os.geteuid() == 0:
        pytest.skip("root reads any file")
    cu.chmod(0)
    one_line_error(run_cli("compile", cu), "Permission denied")


@pytest.mark.parametrize("arch", ["sm_1", "banana", ",", "sm_80,compute_0"])
def test_a_bad_arch(cache, cu, arch):
    one_line_error(run_cli("compile", cu, "--arch", arch), "arch")


def test_an_output_that_cannot_be_written(cache, tmp_path, cu):
    one_line_error(run_cli("compile", cu, "--arch", "sm_80", "-o", tmp_path / "no" / "k.cubin"),
                   "cannot write")


def test_an_option_written_with_a_space(cache, cu):
    r = run_cli("compile", cu, "--arch", "sm_80", "--option", "-lineinfo")
    assert r.returncode == 0, r.stderr
    assert "sm_80: k" in r.stdout


def test_an_option_nvrtc_refuses_gives_its_log(cache, cu):
    r = run_cli("compile", cu, "--arch", "sm_80", "--option", "-no-such-option")
    assert r.returncode == 1 and "Traceback" not in r.stderr
    assert "-no-such-option" in r.stderr


def test_a_huge_max_bytes_keeps_everything(cache, cu):
    assert run_cli("compile", cu, "--arch", "sm_80").returncode == 0
    r = run_cli("cache", "prune", "--max-bytes", "99999999999999999999999G")
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "removed 0 entries"
    assert "entries    1" in run_cli("cache", "info").stdout


@pytest.mark.parametrize("value", ["0", "-5", "lots", "", "5T"])
def test_a_bad_max_bytes(cache, value):
    r = run_cli("cache", "prune", "--max-bytes", value)
    assert r.returncode == 2 and "Traceback" not in r.stderr
    assert "--max-bytes" in r.stderr


@pytest.mark.parametrize("action", ["clear", "prune"])
def test_a_cache_action_with_the_cache_off(cache, action):
    one_line_error(run_cli("cache", action, env={"KILN_CACHE": "0"}), "KILN_CACHE=0")


def test_the_cache_info_and_list_with_the_cache_off(cache):
    for action in ("info", "list"):
        r = run_cli("cache", action, env={"KILN_CACHE": "0"})
        assert r.returncode == 0 and "Traceback" not in r.stderr, r.stderr


def test_cache_prune_takes_bounds_past_64_bits(cache, cu):
    assert run_cli("compile", cu, "--arch", "sm_80").returncode == 0
    assert kiln.cache_prune(max_bytes=1 << 80) == 0
    assert kiln.cache_info()["entries"] == 1
    with pytest.raises(ValueError, match="at least 1"):
        kiln.cache_prune(max_bytes=-(1 << 80))
    with pytest.raises(ValueError, match="at least 1"):
        kiln.cache_prune(max_bytes=-1)
    with pytest.raises(TypeError):
        kiln.cache_prune(max_bytes="1G")
