"""The "kiln" logger: compiles with their time, hits, misses, evictions and recompiles after a
header edit, and KILN_LOG turning it on from outside."""
import logging
import uuid

import pytest

import kiln
from helpers import ARCH, run_python


def fresh(name="logged"):
    return (f'extern "C" __global__ void {name}(float *x) '
            f'{{ x[0] = {uuid.uuid4().int % 10**6}.0f; }}\n')


@pytest.fixture
def records(tmp_path, monkeypatch, caplog):
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    caplog.set_level(logging.DEBUG, logger="kiln")
    return caplog


def messages(caplog):
    return [(r.levelno, r.getMessage(), r.kiln) for r in caplog.records if r.name == "kiln"]


def test_a_compile_then_a_hit_are_recorded(records):
    src = fresh()
    kiln.SourceModule(src, arch=ARCH)
    kiln.SourceModule(src, arch=ARCH)
    (level, text, report), (level2, text2, report2) = messages(records)
    assert level == logging.INFO and text.startswith("compiled logged for sm_")
    assert report["origin"] == "nvrtc" and report["nvrtc_seconds"] > 0
    assert report["seconds"] >= report["nvrtc_seconds"]
    assert " s (NVRTC " in text and "cache miss" in text
    assert level2 == logging.DEBUG and text2.startswith("hit logged for sm_")
    assert report2["origin"] == "memory" and report2["key"] == report["key"]


def test_a_disk_hit_in_a_new_process_is_recorded(records, tmp_path):
    src = fresh()
    kiln.SourceModule(src, arch=ARCH)
    r = run_python(f"""
        import kiln
        kiln.SourceModule({src!r}, arch={ARCH!r})
        """, env={"KILN_LOG": "debug", "KILN_CACHE_DIR": str(tmp_path / "cache")})
    assert r.returncode == 0, r.stderr
    assert "kiln DEBUG: hit logged for sm_" in r.stderr and "from the cache on disk" in r.stderr


def test_kiln_log_info_shows_compiles_but_not_hits():
    src = fresh("outside")
    r = run_python(f"""
        import kiln
        kiln.SourceModule({src!r}, arch={ARCH!r}, cache_dir=False)
        kiln.SourceModule({src!r}, arch={ARCH!r}, cache_dir=False)
        """, env={"KILN_LOG": "info"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line.startswith("kiln ")]
    assert len(lines) == 1 and lines[0].startswith("kiln INFO: compiled outside for sm_")


def test_hits_are_recorded_once_the_level_lets_them_through():
    # Hits answered from the memo skip the hook while the logger's level cache says DEBUG is
    # off; logging empties that cache in place when a level changes, and the next hit is seen.
    src = fresh("later")
    r = run_python(f"""
        import logging
        import kiln
        logger = logging.getLogger("kiln")
        logger.setLevel(logging.INFO)
        got = []
        class Keep(logging.Handler):
            def emit(self, record):
                got.append(record.getMessage().split()[0])
        logger.addHandler(Keep())
        for _ in range(3):
            kiln.SourceModule({src!r})
        logger.setLevel(logging.DEBUG)
        kiln.SourceModule({src!r})
        logger.setLevel(logging.INFO)
        kiln.SourceModule({src!r})
        print(got)
        """, env={"KILN_LOG": ""})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "['compiled', 'hit']"


def test_no_kiln_log_no_output():
    r = run_python(f"""
        import kiln
        kiln.SourceModule({fresh()!r}, arch={ARCH!r}, cache_dir=False)
        """, env={"KILN_LOG": ""})
    assert r.returncode == 0 and "kiln INFO" not in r.stderr


def test_a_bad_kiln_log_says_what_it_takes():
    r = run_python("import kiln", env={"KILN_LOG": "loud"})
    assert r.returncode == 0 and "KILN_LOG='loud' is not a level" in r.stderr


def test_a_failed_compile_is_recorded(records):
    with pytest.raises(kiln.CompileError):
        kiln.SourceModule(fresh().replace("x[0]", "y[0]"), arch=ARCH)
    ((level, text, report),) = messages(records)
    assert level == logging.INFO and text.startswith("compile failed after ")


def test_an_edited_header_is_a_recorded_recompile(records, tmp_path):
    header = tmp_path / "value.h"
    header.write_text("#define VALUE 1\n")
    src = '#include "value.h"\n' + fresh("edited").replace("x[0] =", "x[0] = VALUE +")
    kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)])
    header.write_text("#define VALUE 22\n")
    kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)])
    texts = [t for _, t, _ in messages(records)]
    assert texts[0].startswith("compiled edited")
    assert texts[1].startswith("recompiled (a header it includes changed) edited")


def test_evictions_are_recorded(records, monkeypatch):
    monkeypatch.setenv("KILN_CACHE_MAX_BYTES", "6k")
    for i in range(6):
        kiln.SourceModule(fresh(f"k{i}"), arch=ARCH)
    assert any(t.startswith("evicted ") and r["evictions"] > 0
               for _, t, r in messages(records))


def test_a_broken_hook_never_breaks_a_compile(records, monkeypatch):
    def broken(report, module):
        raise RuntimeError("the hook broke")

    seen = []
    monkeypatch.setattr("sys.unraisablehook", seen.append)
    kiln._kiln._set_compile_hook(broken)
    try:
        m = kiln.SourceModule(fresh(), arch=ARCH)
    finally:
        kiln._kiln._set_compile_hook(kiln._log._on_compile)
    assert list(m.kernels) == ["logged"]
    assert [str(u.exc_value) for u in seen] == ["the hook broke"]
    with pytest.raises(TypeError, match="must be callable or None"):
        kiln._kiln._set_compile_hook(3)
