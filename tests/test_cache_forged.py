"""A cache entry forged under a valid checksum: its signature is held to the rules a parsed one
keeps, so a kernel whose f64 parameter claims 1 byte is compiled again, never called with 8
bytes packed into a 1-byte slot.

The entry is edited the way an attacker with write access to the folder would: decoded, one
parameter's size changed, the SHA-256 over the body computed again."""
import hashlib
import json
import os
import pathlib
import struct
import subprocess
import sys
import textwrap

import pytest

import kiln
from helpers import ARCH

PYMOD = pathlib.Path(kiln.__file__).resolve().parent.parent

SOURCE = """
extern "C" __global__ void axpy(double *x, double a, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += a; }
"""

CHILD = textwrap.dedent("""
    import json, os, warnings
    import numpy as np
    import kiln
    warnings.simplefilter("always")
    with warnings.catch_warnings(record=True) as caught:
        m = kiln.SourceModule(os.environ["SRC"], arch=os.environ.get("ARCH") or None)
    f = m.get_function("axpy")
    out = {"stats": kiln.cache_stats(), "warnings": [str(w.message) for w in caught],
           "signature": list(f.signature)}
    if os.environ.get("LAUNCH") == "1":
        x = np.arange(64, dtype=np.float64)
        f(kiln.InOut(x), 0.25, np.int32(64), block=(64, 1, 1))
        out["launched"] = bool((x == np.arange(64, dtype=np.float64) + 0.25).all())
    print(json.dumps(out))
""")

HEADER = 88  # magic[8], u32 version, u32 header size, u64 body size, key[32], SHA-256[32]
F64 = 14     # KILN_PARAM_F64 in kiln.h


@pytest.fixture
def cache(tmp_path, monkeypatch):
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_PATH", raising=False)
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    return folder


def child(launch=False):
    env = dict(os.environ, PYTHONPATH=str(PYMOD), SRC=SOURCE, ARCH=ARCH or "",
               LAUNCH="1" if launch else "0")
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def forge(path, size):
    """Sets the second parameter of the entry's first kernel to `size` bytes (alignment 1) and
    signs the body again."""
    data = bytearray(path.read_bytes())
    body = data[HEADER:]
    at = 0

    def skip_blob():
        nonlocal at
        (n,) = struct.unpack_from("<Q", body, at)
        at += 8 + n

    skip_blob()  # arch
    at += 4      # arch number
    skip_blob()  # CUBIN
    skip_blob()  # PTX
    skip_blob()  # log
    (n_names,) = struct.unpack_from("<I", body, at)
    at += 4
    for _ in range(2 * n_names):
        skip_blob()
    (n_kernels,) = struct.unpack_from("<I", body, at)
    assert n_kernels == 1
    at += 4
    skip_blob()  # name
    skip_blob()  # plain name
    (n_params,) = struct.unpack_from("<I", body, at)
    assert n_params == 3
    at += 4 + 12  # to the second parameter: class, size, alignment
    cls, old_size, _ = struct.unpack_from("<III", body, at)
    assert (cls, old_size) == (F64, 8)
    struct.pack_into("<III", body, at, F64, size, 1)
    data[HEADER:] = body
    data[56:88] = hashlib.sha256(bytes(body)).digest()
    tmp = path.with_name(path.name + ".forged")
    tmp.write_bytes(bytes(data))
    os.replace(tmp, path)


def the_entry(folder):
    found = [p for p in folder.glob("??/*") if len(p.name) == 62]
    assert len(found) == 1, found
    return found[0]


@pytest.mark.parametrize("size", [1, 4, 16])
def test_a_forged_f64_size_is_damage_not_a_signature(cache, size):
    first = child()
    assert first["stats"]["compiles"] == 1
    assert first["signature"] == ["b64", "f64", "b32"]
    forge(the_entry(cache), size)
    again = child()
    assert again["stats"]["compiles"] == 1, "the forged entry was used"
    assert again["signature"] == ["b64", "f64", "b32"]
    assert len(again["warnings"]) == 1
    assert "damaged" in again["warnings"][0]
    assert "size does not fit its class" in again["warnings"][0]
    third = child()
    assert third["stats"]["compiles"] == 0 and third["warnings"] == []  # replaced by a good one


@pytest.mark.gpu
def test_a_kernel_whose_entry_was_forged_launches_with_its_real_signature(cache):
    child()
    forge(the_entry(cache), 1)
    out = child(launch=True)
    assert out["stats"]["compiles"] == 1
    assert out["launched"]
