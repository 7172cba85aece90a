"""Pickling: a Module or Function travels as compiled code and signatures (never its source, no
NVRTC on the receiving side), a DeviceArray by value."""
import pickle
import uuid

import numpy as np
import pytest

import kiln
from helpers import ARCH, run_python

SCALE = """
extern "C" __global__ void scale(float *x, float a, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] *= a; }
template <typename T> __global__ void twice(T *x, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) x[i] += x[i]; }
"""


def _module(tag=""):
    return kiln.SourceModule(f"// {tag}\n" + SCALE, arch=ARCH,
                             name_expressions=["twice<double>"])


def test_module_pickles_as_code_not_source():
    tag = uuid.uuid4().hex
    m = _module(tag)
    data = pickle.dumps(m)
    assert tag.encode() not in data  # no source travels (the PTX has no comments)
    before = kiln.cache_stats()
    back = pickle.loads(data)
    after = kiln.cache_stats()
    assert after["compiles"] == before["compiles"]
    assert after["misses"] == before["misses"]
    assert type(back) is kiln.Module
    assert back.arch == m.arch
    assert back.cubin == m.cubin and back.ptx == m.ptx
    assert sorted(back.kernels) == sorted(m.kernels)
    assert back.get_function("scale").name == "scale"


def test_function_pickles_as_its_module_and_name():
    m = _module()
    f = m.get_function("twice<double>")
    back = pickle.loads(pickle.dumps(f))
    assert isinstance(back, kiln.Function)
    assert back.name == f.name
    assert repr(back) == repr(f)  # the same signature, read back from the code


def test_unpickled_module_needs_no_nvrtc(tmp_path):
    m = _module(uuid.uuid4().hex)
    data = pickle.dumps(m)
    path = tmp_path / "module.pickle"
    path.write_bytes(data)
    # A new process whose NVRTC cannot be opened still gets the module and its kernels.
    r = run_python(f"""
        import pickle, kiln
        m = pickle.loads(open({str(path)!r}, 'rb').read())
        print(sorted(m.kernels), m.get_function('scale'))
        try:
            kiln.nvrtc_where()
        except kiln.Error as e:
            print('no nvrtc:', type(e).__name__)
    """, env={"KILN_NVRTC_PATH": str(tmp_path / "missing-libnvrtc.so")})
    assert r.returncode == 0, r.stderr
    assert r.stdout.splitlines()[0] == f"{sorted(m.kernels)} {m.get_function('scale')!r}"
    assert "no nvrtc:" in r.stdout


@pytest.mark.parametrize("damage", ["truncate", "flip", "garbage"])
def test_damaged_bytes_are_refused(damage):
    good = kiln._kiln._module_serialize(_module())
    bad = {"truncate": good[:-10], "flip": good[:-5] + bytes([good[-5] ^ 1]) + good[-4:],
           "garbage": b"\x00" * 200}[damage]
    with pytest.raises(ValueError, match="not a serialized kiln module"):
        kiln._kiln._module_deserialize(bad)


def test_bad_arguments_name_what_was_expected():
    with pytest.raises(TypeError, match="takes a kiln.Module"):
        kiln._kiln._module_serialize("source")
    with pytest.raises(TypeError, match="takes bytes"):
        kiln._kiln._module_deserialize(12)
    with pytest.raises(ValueError, match="too few"):
        kiln._kiln._module_deserialize(b"")


@pytest.mark.gpu
def test_unpickled_module_launches():
    m = pickle.loads(pickle.dumps(_module(uuid.uuid4().hex)))
    f = pickle.loads(pickle.dumps(m.get_function("scale")))
    x = np.arange(1000, dtype=np.float32)
    out = x.copy()
    f(kiln.InOut(out), np.float32(3), np.int32(x.size), block=(128, 1, 1), grid=(8, 1))
    np.testing.assert_array_equal(out, x * 3)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [np.float32, np.int64, np.complex128])
def test_device_array_pickles_by_value(dtype):
    host = (np.arange(24) - 5).astype(dtype).reshape(4, 6)
    a = kiln.to_device(host)
    back = pickle.loads(pickle.dumps(a))
    assert isinstance(back, kiln.DeviceArray)
    assert back.shape == a.shape and back.dtype == a.dtype
    assert back.ptr != a.ptr  # a copy, not the same memory
    np.testing.assert_array_equal(back.get(), host)


@pytest.mark.gpu
def test_device_array_view_pickles_its_values():
    host = np.arange(40, dtype=np.float32).reshape(5, 8)
    view = kiln.to_device(host)[1:4, ::2]
    back = pickle.loads(pickle.dumps(view))
    np.testing.assert_array_equal(back.get(), host[1:4, ::2])
