"""What kiln opens on disk, planted with what it must not wait on, follow or read whole: FIFOs,
devices, symlinks, folders others can write, large files. Every compile here runs in a child
process with a timeout, so a regression hangs one test for a minute, never the suite."""
import json
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

import kiln
from helpers import ARCH

PYMOD = pathlib.Path(kiln.__file__).resolve().parent.parent
TIMEOUT = 60  # far above a compile; a blocked open() would sit here forever

SOURCE = 'extern "C" __global__ void k(int *p) { *p = 7; }\n'

# Compiles SRC with the environment's cache and prints the stats, the warnings and the peak
# memory of the process as JSON; a compile error is printed, not raised.
CHILD = textwrap.dedent("""
    import json, os, resource, sys, warnings
    import kiln
    warnings.simplefilter("always")
    out = {}
    with warnings.catch_warnings(record=True) as caught:
        try:
            m = kiln.SourceModule(os.environ["SRC"], arch=os.environ.get("ARCH") or None,
                                  options=json.loads(os.environ.get("OPTIONS", "[]")))
            out["ptx"] = m.ptx
        except (kiln.Error, ValueError) as e:
            out["error"] = f"{type(e).__name__}: {e}"
    out["stats"] = kiln.cache_stats()
    out["nvrtc_loaded"] = any("libnvrtc" in line for line in open("/proc/self/maps"))
    out["warnings"] = [str(w.message) for w in caught]
    out["maxrss_kib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(json.dumps(out))
""")


def child(src=SOURCE, options=(), env=None, cwd=None):
    e = dict(os.environ, PYTHONPATH=str(PYMOD), SRC=src, ARCH=ARCH or "",
             OPTIONS=json.dumps(list(options)))
    e.update(env or {})
    try:
        r = subprocess.run([sys.executable, "-c", CHILD], env=e, cwd=cwd, capture_output=True,
                           text=True, timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        pytest.fail(f"the compile did not finish in {TIMEOUT} s: an open() or read blocked")
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_PATH", raising=False)
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    return folder


def entries(folder):
    return [p for p in folder.glob("??/*") if len(p.name) == 62]


def the_entry(folder):
    [entry] = entries(folder)
    return entry


def fifo_at(path):
    path.unlink(missing_ok=True)
    os.mkfifo(path)
    assert path.is_fifo()


# ---- hangs --------------------------------------------------------------------------------


def test_a_fifo_where_an_entry_goes_is_a_miss_not_a_hang(cache):
    child()
    fifo_at(the_entry(cache))
    r = child()
    assert r["stats"]["compiles"] == 1 and "ptx" in r
    assert any("not a regular file" in w for w in r["warnings"]), r["warnings"]
    assert the_entry(cache).is_file()  # the store replaced it


def test_a_fifo_where_an_entry_goes_in_a_layer_is_not_waited_on(cache, tmp_path):
    layer = tmp_path / "layer"
    child(env={"KILN_CACHE_DIR": str(layer)})
    fifo_at(the_entry(layer))
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["compiles"] == 1 and r["stats"]["disk_hits"] == 0


def test_a_fifo_as_the_nvrtc_note_is_not_waited_on(cache):
    child()
    [note] = cache.glob("nvrtc-*")
    fifo_at(note)
    r = child(SOURCE + "// another key\n")
    assert r["stats"]["compiles"] == 1 and "ptx" in r


def numbers_line(note):
    return note.read_text().split("\n")[2]


def test_a_hit_in_a_new_process_reads_nvrtc_from_its_note_and_a_damaged_note_is_rewritten(cache):
    child()
    [note] = cache.glob("nvrtc-*")
    good = note.read_text()
    r = child()  # the note says which NVRTC compiles here: a hit never loads it
    assert r["stats"]["disk_hits"] == 1 and not r["nvrtc_loaded"]
    n = numbers_line(note).split()
    assert len(n) == 10 + int(n[9]), n  # two files' stamps, version, size, the archs
    damaged = [" ".join(n[:3]) + " x" + " ".join(n[3:]),     # not a number
               " ".join(n[:-1]),                            # an arch short
               " ".join(n[:9] + ["0"] + n[10:]),           # no archs
               " ".join(n[:9] + ["99999"] + n[10:]),       # more archs than there can be
               " ".join(n[:6] + ["-1"] + n[7:]),           # a negative version
               " ".join(n[:8] + ["99999999999999999999"] + n[9:]),  # past 64 bits
               " ".join(n[:6] + [n[6] + "x"] + n[7:])]     # digits then garbage
    for line in damaged:
        lines = good.split("\n")
        lines[2] = line
        note.write_text("\n".join(lines))
        r = child()  # NVRTC itself says which it is, and the note is written again
        assert r["stats"]["disk_hits"] == 1 and r["nvrtc_loaded"], line
        assert note.read_text() == good, line


@pytest.mark.parametrize("name", ["stats", "locks"])
def test_a_fifo_as_the_stats_or_locks_file_is_not_waited_on(cache, name):
    child()
    fifo_at(cache / name)
    r = child(SOURCE + "// another key\n")
    assert r["stats"]["compiles"] == 1 and "ptx" in r
    assert child(SOURCE + "// another key\n")["stats"]["disk_hits"] == 1


@pytest.mark.parametrize("guard", [False, True])
def test_a_header_that_is_a_fifo_or_a_device_is_refused_unopened(cache, tmp_path, guard):
    # NVRTC refuses such a header itself, but only after opening it, and the open of a FIFO
    # waits for a writer: the compile, and the compile helper every process of the user
    # shares, would wait without end. An #include under #if 0 counts, as every scanned one.
    work = tmp_path / "work"
    work.mkdir()
    os.mkfifo(work / "never.h")
    for name, kind in [("never.h", "a FIFO"), ("/dev/zero", "a character device")]:
        src = f'#include "{name}"\n' + SOURCE
        if guard:
            src = "#if 0\n" + src.replace("\n", "\n#endif\n", 1)
        r = child(src, cwd=work)
        assert "ptx" not in r and r["stats"]["compiles"] == 0, r
        assert r["error"].startswith("ValueError") and kind in r["error"], r
        assert "not a regular file" in r["error"] and name.split("/")[-1] in r["error"]
    # The same source with a file there compiles and is stored.
    (work / "never.h").unlink()
    (work / "never.h").write_text("#define NEVER 1\n")
    r = child('#include "never.h"\n' + SOURCE, cwd=work)
    assert r["stats"]["compiles"] == 1 and r["stats"]["stores"] == 1


def test_a_fifo_given_to_module_from_file_is_refused(tmp_path):
    fifo = tmp_path / "k.cubin"
    os.mkfifo(fifo)
    code = f"import kiln\ntry:\n  kiln.module_from_file({str(fifo)!r})\nexcept ValueError as e:\n" \
           f"  print(type(e).__name__, e)\n"
    r = subprocess.run([sys.executable, "-c", code], env=dict(os.environ, PYTHONPATH=str(PYMOD)),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "ValueError" in r.stdout and "not a regular file" in r.stdout


def test_module_from_file_refuses_a_huge_file_unread(tmp_path):
    big = tmp_path / "big.cubin"
    with open(big, "wb") as f:
        f.truncate((1 << 30) + 1)  # sparse
    with pytest.raises(ValueError, match="larger than any"):
        kiln.module_from_file(big)
    with pytest.raises(ValueError, match="not a regular file"):
        kiln.module_from_file("/dev/zero")
    with pytest.raises(FileNotFoundError):
        kiln.module_from_file(tmp_path / "missing.cubin")


# ---- large files --------------------------------------------------------------------------


def test_a_huge_file_that_is_no_entry_is_not_read_whole(cache, tmp_path):
    layer = tmp_path / "layer"
    child(env={"KILN_CACHE_DIR": str(layer)})
    entry = the_entry(layer)
    baseline = child(SOURCE + "// baseline\n")["maxrss_kib"]
    with open(entry, "wb") as f:  # sparse: costs no disk, 1 GiB - 1 to a reader
        f.truncate((1 << 30) - 1)
        f.seek(0)
        f.write(b"garbage, not a kiln entry")
    entry.chmod(0o600)
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["compiles"] == 1
    assert any("not a kiln cache entry" in w for w in r["warnings"]), r["warnings"]
    # Read whole, it would add a GiB to the peak.
    assert r["maxrss_kib"] < baseline + 200 * 1024, (r["maxrss_kib"], baseline)


def test_a_huge_header_is_not_read_and_never_served_stale(cache, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    with open(work / "big.h", "wb") as f:
        f.truncate(300 << 20)  # past the largest header the scan reads
    src = '#if 0\n#include "big.h"\n#endif\n' + SOURCE
    baseline = child(SOURCE + "// baseline\n", cwd=work)["maxrss_kib"]  # the driver's own share
    r = child(src, cwd=work)
    # Read whole, it would add 300 MiB to the peak.
    assert r["stats"]["compiles"] == 1
    assert r["maxrss_kib"] < baseline + 200 * 1024, (r["maxrss_kib"], baseline)


# ---- symlinks and folders others can write --------------------------------------------------


def test_the_stats_file_is_never_written_through_a_symlink(cache, tmp_path):
    child()
    precious = tmp_path / "precious"
    precious.write_text("keep me\n")
    (cache / "stats").unlink()
    (cache / "stats").symlink_to(precious)
    r = child()
    assert r["stats"]["disk_hits"] == 1
    child(SOURCE + "// a store\n")
    assert precious.read_text() == "keep me\n"


def test_an_entry_that_is_a_symlink_is_not_loaded(cache, tmp_path):
    child()
    entry = the_entry(cache)
    elsewhere = tmp_path / "elsewhere"
    entry.rename(elsewhere)
    entry.symlink_to(elsewhere)
    r = child()
    assert r["stats"]["disk_hits"] == 0 and r["stats"]["compiles"] == 1
    assert any("symbolic link" in w for w in r["warnings"]), r["warnings"]


@pytest.mark.parametrize("mode", [0o777, 0o770])
def test_a_shard_folder_others_can_write_is_not_loaded_from(cache, tmp_path, mode):
    layer = tmp_path / "layer"
    child(env={"KILN_CACHE_DIR": str(layer)})
    entry = the_entry(layer)
    entry.parent.chmod(mode)
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["disk_hits"] == 0 and r["stats"]["compiles"] == 1
    assert any("others can write to its shard folder" in w for w in r["warnings"]), r["warnings"]
    entry.parent.chmod(0o700)
    assert child(env={"KILN_CACHE_PATH": str(layer)})["stats"]["disk_hits"] == 1


def test_a_shard_folder_that_is_a_symlink_is_not_loaded_from(cache, tmp_path):
    layer = tmp_path / "layer"
    child(env={"KILN_CACHE_DIR": str(layer)})
    shard = the_entry(layer).parent
    moved = tmp_path / "moved"
    shard.rename(moved)
    shard.symlink_to(moved)
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["disk_hits"] == 0 and r["stats"]["compiles"] == 1


def test_a_cache_under_a_folder_others_can_write_is_not_used(tmp_path):
    open_parent = tmp_path / "open"
    open_parent.mkdir()
    open_parent.chmod(0o777)  # anyone could rename cache away and put their own there
    folder = open_parent / "cache"
    r = child(env={"KILN_CACHE_DIR": str(folder), "KILN_CACHE_PATH": ""})
    assert r["stats"]["stores"] == 0
    assert any("others can write to its parent" in w for w in r["warnings"]), r["warnings"]
    open_parent.chmod(0o1777)  # the sticky bit: others cannot rename what is not theirs (/tmp)
    r = child(env={"KILN_CACHE_DIR": str(folder), "KILN_CACHE_PATH": ""})
    assert r["stats"]["stores"] == 1 and r["warnings"] == []


def test_a_layer_under_a_folder_others_can_write_is_not_used(cache, tmp_path):
    open_parent = tmp_path / "open"
    layer = open_parent / "layer"
    child(env={"KILN_CACHE_DIR": str(layer)})
    open_parent.chmod(0o777)
    r = child(env={"KILN_CACHE_PATH": str(layer)})
    assert r["stats"]["disk_hits"] == 0
    assert any("is not used" in w and "parent" in w for w in r["warnings"]), r["warnings"]


@pytest.mark.parametrize("name", [".cuda_device", ".cuda-device"])
@pytest.mark.parametrize("plant", ["fifo", "dev_zero"])
def test_a_cuda_device_file_that_is_no_file_is_refused_unread(tmp_path, plant, name):
    home = tmp_path / "home"
    home.mkdir()
    if plant == "fifo":
        os.mkfifo(home / name)
    else:
        (home / name).symlink_to("/dev/zero")
    code = ("import kiln.tools\ntry:\n  kiln.tools._chosen_ordinal()\nexcept ValueError as e:\n"
            "  print(e)\n")
    env = dict(os.environ, PYTHONPATH=str(PYMOD), HOME=str(home))
    env.pop("CUDA_DEVICE", None)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.returncode == 0, r.stderr
    assert "must be a file that holds a device number" in r.stdout
    (home / name).unlink()
    (home / name).write_text("1\n")
    r = subprocess.run([sys.executable, "-c", "import kiln.tools; print(kiln.tools."
                        "_chosen_ordinal())"], env=env, capture_output=True, text=True,
                       timeout=TIMEOUT)
    assert r.stdout.strip() == "1", r.stderr


def test_pycudas_cuda_device_file_comes_before_the_hyphened_name(tmp_path):
    """PyCUDA reads ~/.cuda_device (its messages name ~/.cuda-device, read where the first is
    missing)."""
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cuda_device").write_text("3\n")
    (home / ".cuda-device").write_text("2\n")
    env = dict(os.environ, PYTHONPATH=str(PYMOD), HOME=str(home))
    env.pop("CUDA_DEVICE", None)
    code = "import kiln.tools; print(kiln.tools._chosen_ordinal())"

    def chosen():
        r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                           text=True, timeout=TIMEOUT)
        assert r.returncode == 0, r.stderr
        return r.stdout.strip()

    assert chosen() == "3"
    (home / ".cuda_device").unlink()
    assert chosen() == "2"
    (home / ".cuda-device").unlink()
    assert chosen() == "None"
    env["CUDA_DEVICE"] = "5"
    (home / ".cuda_device").write_text("3\n")
    assert chosen() == "5"
