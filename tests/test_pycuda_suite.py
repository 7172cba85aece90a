"""tests/pycuda_suite.py, which runs PyCUDA's own test files against kiln: the unpacking and
the import alias, on a source distribution made here (PyCUDA's own runs on the GPU machine:
make pycuda-suite)."""
import re
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

import pycuda_suite
from helpers import write_sdist

SUITE_TEST = b'''
import pycuda
import pycuda.driver as drv
import pycuda.gpuarray as gpuarray
from pycuda.compiler import SourceModule
from pycuda.tools import dtype_to_ctype
import kiln, kiln.driver, kiln.gpuarray


def test_the_alias_gives_kilns_own_modules():
    assert pycuda is kiln and drv is kiln.driver and gpuarray is kiln.gpuarray
    assert SourceModule is kiln.SourceModule and dtype_to_ctype("float32") == "float"
    assert drv.__name__ == "kiln.driver"


def test_a_name_kiln_lacks_is_an_error_naming_it():
    try:
        import pycuda.nothing_of_that_name  # noqa: F401
    except ModuleNotFoundError as e:
        assert "kiln.nothing_of_that_name" in str(e)
    else:
        raise AssertionError("imported a module that does not exist")


def test_where_kiln_differs():
    assert False, "marked as an expected failure by the conftest"
'''



def test_unpack_takes_the_test_files_alone(tmp_path, monkeypatch):
    monkeypatch.setattr(pycuda_suite, "DIFFERS", {
        "test_alias.py::test_where_kiln_differs": "a reason"})
    sdist = tmp_path / "pycuda-2099.1.tar.gz"
    write_sdist(sdist, {"pycuda-2099.1/test/test_alias.py": SUITE_TEST,
                   "pycuda-2099.1/test/undistributed/test_no.py": b"",
                   "pycuda-2099.1/pycuda/driver.py": b"",
                   "pycuda-2099.1/test/helper.py": b""})
    into = tmp_path / "suite"
    assert pycuda_suite.unpack(sdist, into) == ["test_alias.py"]
    assert {p.name for p in into.iterdir()} == {"test_alias.py", "conftest.py", "pytest.ini"}
    stale = into / "site" / "pkg" / "test"  # what an older layout left there is not collected
    stale.mkdir(parents=True)
    (stale / "test_other.py").write_text("def test_fails():\n    raise AssertionError\n")
    pymod = Path(__file__).resolve().parent.parent / "pymod"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=into, capture_output=True, text=True,
                          env={"PYTHONPATH": str(pymod), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed, 1 xfailed" in done.stdout


def test_the_deselected_tests_are_named_with_a_reason():
    for node, why in pycuda_suite.NOT_PROVIDED.items():
        assert node.startswith("test_") and "::" in node and why


def test_pycudas_tests_of_texture_references_skip_themselves_on_cuda_12():
    """NOT_PROVIDED deselects none of them: each begins by skipping on a driver of CUDA 12 or
    newer, which kiln needs."""
    found = sorted(pycuda_suite.VENDOR.glob("pycuda-*.tar.gz"))
    if not found:
        pytest.skip(f"no PyCUDA source distribution in {pycuda_suite.VENDOR}")
    with tarfile.open(found[-1]) as tar:
        member = next(m for m in tar.getmembers() if m.name.endswith("/test/test_driver.py"))
        text = tar.extractfile(member).read().decode()
    tests = re.split(r"\n    def (?=test_)", text)[1:]
    uses = [t for t in tests if re.search(r"get_texref|get_surfref|texrefs=|_to_texref", t)]
    assert len(uses) >= 10
    for test in uses:
        body = [line.strip() for line in test.splitlines()[1:] if line.strip()]
        assert body[0] == "if drv.get_driver_version() // 1000 >= 12:", test.splitlines()[0]
        assert body[1].startswith("pytest.skip("), test.splitlines()[0]


def test_the_pure_python_wheels_beside_the_sdist_are_unpacked_for_the_tests(tmp_path):
    vendor = tmp_path / "vendor"
    vendor.mkdir()
    with zipfile.ZipFile(vendor / "helperpkg-1.0-py3-none-any.whl", "w") as z:
        z.writestr("helperpkg/__init__.py", "def match_precision(): return 1\n")
    with zipfile.ZipFile(vendor / "native-1.0-cp312-cp312-manylinux_2_17_x86_64.whl", "w") as z:
        z.writestr("native/__init__.py", "")
    with zipfile.ZipFile(vendor / "pytest-1.0-py3-none-any.whl", "w") as z:  # importable here
        z.writestr("pytest/__init__.py", "raise ImportError('shadowed')\n")
    site = tmp_path / "site"
    (site / "stale").mkdir(parents=True)  # what an older unpacking left is gone
    assert pycuda_suite.unpack_helpers(vendor, site) == ["helperpkg"]
    assert not (site / "stale").exists() and not (site / "pytest").exists()
    done = subprocess.run([sys.executable, "-c", "import helperpkg; print(helperpkg.match_precision())"],
                          env={"PYTHONPATH": str(site), "PATH": "/usr/bin:/bin"},
                          capture_output=True, text=True)
    assert done.stdout.strip() == "1" and not (site / "native").exists()
