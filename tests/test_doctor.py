"""`python -m kiln doctor`: every check on this machine, the next step for each problem, and a
non-zero exit status when something is broken. It works with no GPU."""
import os
import subprocess
import sys

import pytest

import kiln
from helpers import HAVE_GPU

PYMOD = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))


def doctor(*args, env=None, tmp_path=None):
    e = dict(os.environ, PYTHONPATH=PYMOD)
    e.update(env or {})
    r = subprocess.run([sys.executable, "-m", "kiln", "doctor", *args], capture_output=True,
                       text=True, env=e, timeout=300)
    return r.returncode, r.stdout + r.stderr


def test_every_check_is_reported(tmp_path):
    rc, out = doctor(env={"KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 0, out
    for what in ("driver", "NVRTC", "toolkit headers", "arch", "cache", "staging",
                 "compile a kernel"):
        assert f"] {what}" in out, what
    info = kiln._kiln.nvrtc_info()
    assert f"{info['version'][0]}.{info['version'][1]} at {info['path']}" in out
    assert f"arch: {kiln._kiln.default_arch()}" in out
    assert str(tmp_path / "c") in out


@pytest.mark.skipif(HAVE_GPU, reason="checks the report of a machine without a GPU")
def test_without_a_gpu_it_still_passes_and_says_so(tmp_path):
    rc, out = doctor(env={"KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 0
    assert "[warn] driver" in out and "next step:" in out
    assert "launching needs a GPU" in out
    rc, out = doctor("--gpu", env={"KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 1 and "[FAIL] driver" in out


@pytest.mark.gpu
def test_with_a_gpu_each_is_listed(tmp_path):
    rc, out = doctor("--gpu", env={"KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 0, out
    for i in range(kiln.Device.count()):
        assert f"[  ok] GPU {i}: {kiln.Device(i).name()}" in out
    assert "and launch" in out


def test_no_nvrtc_is_broken_with_the_next_step(tmp_path):
    rc, out = doctor(env={"KILN_NVRTC_PATH": str(tmp_path / "libnvrtc.so.none"),
                          "KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 1
    assert "[FAIL] NVRTC" in out and "KILN_NVRTC_PATH" in out and "next step:" in out
    assert "something is broken" in out


def test_a_cache_folder_others_can_write_is_broken(tmp_path):
    folder = tmp_path / "shared"
    folder.mkdir()
    folder.chmod(0o777)
    rc, out = doctor(env={"KILN_CACHE_DIR": str(folder)})
    assert rc == 1
    assert "[FAIL] cache" in out and "chmod 700" in out


def test_a_cache_turned_off_is_a_note(tmp_path):
    rc, out = doctor(env={"KILN_CACHE": "0"})
    assert rc == 0 and "[note] cache: off: KILN_CACHE=0" in out


def test_an_arch_nvrtc_lacks_is_broken(tmp_path):
    rc, out = doctor(env={"KILN_ARCH": "sm_12", "KILN_CACHE_DIR": str(tmp_path / "c")})
    assert rc == 1 and "[FAIL] arch" in out and "KILN_ARCH" in out
