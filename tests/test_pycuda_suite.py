"""tests/pycuda_suite.py, which runs PyCUDA's own test files against kiln: the unpacking and
the import alias, on a source distribution made here (PyCUDA's own runs on the GPU machine:
make pycuda-suite)."""
import io
import subprocess
import sys
import tarfile
from pathlib import Path

import pycuda_suite

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
'''


def _sdist(path, files):
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))


def test_unpack_takes_the_test_files_alone(tmp_path):
    sdist = tmp_path / "pycuda-2099.1.tar.gz"
    _sdist(sdist, {"pycuda-2099.1/test/test_alias.py": SUITE_TEST,
                   "pycuda-2099.1/test/undistributed/test_no.py": b"",
                   "pycuda-2099.1/pycuda/driver.py": b"",
                   "pycuda-2099.1/test/helper.py": b""})
    into = tmp_path / "suite"
    assert pycuda_suite.unpack(sdist, into) == ["test_alias.py"]
    assert {p.name for p in into.iterdir()} == {"test_alias.py", "conftest.py", "pytest.ini"}
    pymod = Path(__file__).resolve().parent.parent / "pymod"
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
                          cwd=into, capture_output=True, text=True,
                          env={"PYTHONPATH": str(pymod), "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 passed" in done.stdout


def test_the_deselected_tests_are_named_with_a_reason():
    for node, why in pycuda_suite.NOT_PROVIDED.items():
        assert node.startswith("test_") and "::" in node and why
