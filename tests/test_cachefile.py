"""`python -m kiln cache export FILE` / `import FILE`: a cache folder in one file, checked entry
by entry on import, read on the receiving node as a read-only layer."""
import io
import os
import subprocess
import sys
import tarfile
import uuid

import kiln
from helpers import ARCH, run_python

SOURCE = 'extern "C" __global__ void inc(int *x) {{ x[threadIdx.x] += {}; }}'


def _cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "kiln", *args], capture_output=True, text=True,
                          timeout=120, env={**os.environ, **(env or {})})


def test_export_import_then_hit_from_a_layer(tmp_path):
    src_dir, layer = tmp_path / "build-cache", tmp_path / "node-layer"
    sources = [SOURCE.format(uuid.uuid4().int % 1000) + f"// {uuid.uuid4().hex}" for _ in range(3)]
    fill = "import kiln, sys\nfor s in sys.argv[1:]: kiln.SourceModule(s, arch=%r)" % (ARCH,)
    r = subprocess.run([sys.executable, "-c", fill, *sources], capture_output=True, text=True,
                       env={**os.environ, "KILN_CACHE_DIR": str(src_dir)}, timeout=120)
    assert r.returncode == 0, r.stderr
    packed = tmp_path / "cache.tar.gz"
    r = _cli("cache", "export", str(packed), env={"KILN_CACHE_DIR": str(src_dir)})
    assert r.returncode == 0, r.stderr
    assert "exported 3 entries" in r.stdout
    with tarfile.open(packed) as tar:
        names = tar.getnames()
    assert len(names) == 3 and all(len(n) == 65 and n[2] == "/" for n in names)

    r = _cli("cache", "import", str(packed), "--into", str(layer))
    assert r.returncode == 0, r.stderr
    assert "imported 3 entries" in r.stdout and f"KILN_CACHE_PATH={layer}" in r.stdout
    assert oct(os.stat(layer).st_mode & 0o777) == oct(0o700)

    # A node with an empty cache of its own and the layer: every source hits, none compiles.
    r = run_python(f"""
        import kiln, sys
        for s in {sources!r}:
            kiln.SourceModule(s, arch={ARCH!r})
        st = kiln.cache_stats()
        print(st['disk_hits'], st['compiles'])
    """, env={"KILN_CACHE_DIR": str(tmp_path / "node-own"), "KILN_CACHE_PATH": str(layer)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["3", "0"]


def _archive(path, members):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in members:
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_import_checks_every_entry(tmp_path):
    m = kiln.SourceModule(SOURCE.format(7) + f"// {uuid.uuid4().hex}", arch=ARCH)
    good = kiln._kiln._module_serialize(m)
    key = good[24:56].hex()
    other = "ab" + "0" * 62
    flipped = good[:-3] + bytes([good[-3] ^ 0x40]) + good[-2:]
    packed = tmp_path / "mixed.tar.gz"
    _archive(packed, [
        (f"{key[:2]}/{key[2:]}", good),             # kept
        (f"{other[:2]}/{other[2:]}", good),         # another key's code
        (f"{key[:2]}/{key[2:-1]}0", flipped),       # damaged
        ("../escape", good),                        # not a key's name
        ("ab/readme.txt", b"hello"),
    ])
    into = tmp_path / "into"
    r = _cli("cache", "import", str(packed), "--into", str(into))
    assert r.returncode == 1  # something was left out, and said so
    assert "imported 1 entries" in r.stdout
    assert "another key's code" in r.stderr
    assert "checksum" in r.stderr or "another key's code" in r.stderr
    assert "../escape: its name is not a cache key" in r.stderr
    assert "ab/readme.txt: its name is not a cache key" in r.stderr
    assert not (tmp_path / "escape").exists()
    files = sorted(os.path.relpath(os.path.join(d, f), into)
                   for d, _, fs in os.walk(into) for f in fs)
    assert files == [f"{key[:2]}/{key[2:]}"]


def test_export_without_a_folder_says_so(tmp_path):
    r = _cli("cache", "export", str(tmp_path / "x.tgz"), "--from", str(tmp_path / "none"))
    assert r.returncode == 1
    assert "no cache folder to export" in r.stderr


def test_import_of_a_file_that_is_no_archive(tmp_path):
    bad = tmp_path / "bad.tgz"
    bad.write_bytes(b"not a tar file at all")
    r = _cli("cache", "import", str(bad), "--into", str(tmp_path / "into"))
    assert r.returncode == 1
    assert "kiln: cache import:" in r.stderr
