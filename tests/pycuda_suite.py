#!/usr/bin/env python3
"""PyCUDA's own test suite, run against kiln: its test files, unchanged, with every `pycuda`
import answered by kiln's module of the same name (`pycuda.driver` is `kiln.driver`, ...).

    python3 tests/pycuda_suite.py [pytest arguments]          (make pycuda-suite)

The tests come from PyCUDA's source distribution in vendor/ (`python3 bench/peers.py fetch`
puts it there where a registry is reachable; it is not committed). They are unpacked into
build/pycuda-suite/ beside a conftest.py that installs the import alias, and pytest runs them
there, as their own pytest root. Most need a GPU. The tests of what kiln does not provide on purpose (texture
references, which CUDA 12 removed, and the CUDA arrays they read) are deselected, each with its
reason printed; every other failure is kiln's to mend.
"""
import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VENDOR = ROOT / "vendor"
SUITE = ROOT / "build" / "pycuda-suite"

# Tests of what kiln leaves out on purpose (docs/pycuda.md, "Not provided"), by node id, each
# with its reason. None: PyCUDA's tests of texture and surface references, which CUDA 12
# removed, skip themselves on a CUDA 12 or newer driver (tests/test_pycuda_suite.py checks).
NOT_PROVIDED = {}

# Tests of a behaviour in which kiln differs from PyCUDA on purpose (docs/pycuda.md, "PyCUDA's
# own tests"): expected to fail, strictly, so that a change of either shows.
DIFFERS = {
    "test_driver.py::TestDriver::test_gpuarray_cai":
        "the interface's stream is the one to wait on (1), not PyCUDA's None",
}

# The import alias, written as the suite's conftest.py (and tests/pycuda_examples.py's
# runner): `pycuda` and `pycuda.X` are kiln's modules themselves (one module object each, never
# a second copy of kiln).
ALIAS = '''\
import importlib
import importlib.abc
import importlib.util
import sys


class _KilnForPyCUDA(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def find_spec(self, name, path, target=None):
        if name == "pycuda" or name.startswith("pycuda."):
            return importlib.util.spec_from_loader(name, self)
        return None

    # The import system stamps the alias's spec on the module it is given; kiln's own is put
    # back, or kiln's relative imports would see a package other than theirs. Kept by name:
    # imports of two aliases in two threads may interleave.
    own_specs = {}

    def create_module(self, spec):
        module = importlib.import_module("kiln" + spec.name[len("pycuda"):])
        self.own_specs[module.__name__] = module.__spec__
        return module

    def exec_module(self, module):
        module.__spec__ = self.own_specs.pop(module.__name__)


sys.meta_path.insert(0, _KilnForPyCUDA())
'''

CONFTEST = ALIAS + '''

def pytest_collection_modifyitems(items):
    import pytest
    for item in items:
        why = DIFFERS.get(item.nodeid)
        if why:
            item.add_marker(pytest.mark.xfail(reason="kiln differs: " + why, strict=True))
'''


def sources():
    found = sorted(VENDOR.glob("pycuda-*.tar.gz"))
    if not found:
        sys.exit(f"pycuda_suite.py: no pycuda-*.tar.gz in {VENDOR}; run `python3 bench/peers.py "
                 "fetch` where a registry is reachable")
    return found[-1]


def unpack(sdist, into=SUITE):
    """PyCUDA's test/test_*.py from sdist into `into`, beside the alias conftest.py."""
    into.mkdir(parents=True, exist_ok=True)
    for old in into.glob("test_*.py"):
        old.unlink()
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and len(parts) == 3 and parts[1] == "test" and \
                    parts[2].startswith("test_") and parts[2].endswith(".py"):
                (into / parts[2]).write_bytes(tar.extractfile(member).read())
    (into / "conftest.py").write_text(CONFTEST + f"\n\nDIFFERS = {DIFFERS!r}\n")
    # Its own root, so that pytest reads none of kiln's settings and names tests from here.
    files = sorted(p.name for p in into.glob("test_*.py"))
    # testpaths: PyCUDA's files alone, whatever else a build folder holds.
    (into / "pytest.ini").write_text("[pytest]\nmarkers =\n    cuda: needs a GPU (PyCUDA's)\n"
                                     f"testpaths = {' '.join(files)}\n")
    return files


# Beside the suite's folder, not in it: pytest would collect the helpers' own tests.
SITE = ROOT / "build" / "pycuda-suite-site"


def unpack_helpers(vendor=VENDOR, into=SITE):
    """The pure-Python wheels in vendor/ (pytools, which PyCUDA's tests import, and what it
    needs) that this interpreter cannot import already, unpacked afresh into `into`: a folder
    for PYTHONPATH, so no interpreter is changed and none of its packages is shadowed."""
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    names = []
    for wheel in sorted(vendor.glob("*-py3-none-any.whl")):
        name = wheel.name.split("-")[0]
        if importlib.util.find_spec(name) is not None:
            continue
        with zipfile.ZipFile(wheel) as z:
            z.extractall(into)
        names.append(name)
    return names


def main(args):
    sdist = sources()
    files = unpack(sdist)
    helpers = unpack_helpers()
    print(f"pycuda_suite.py: {', '.join(files)} from {sdist.name}, pycuda.* imported as kiln.*; "
          f"beside them {', '.join(helpers) or 'no helper packages'} from {VENDOR.name}/")
    for node, why in NOT_PROVIDED.items():
        print(f"  deselected {node}: {why}")
    for node, why in DIFFERS.items():
        print(f"  expected to fail {node}: kiln differs: {why}")
    deselect = [arg for node in NOT_PROVIDED for arg in ("--deselect", node)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        p for p in (str(ROOT / "pymod"), os.environ.get("PYTHONPATH"), str(SITE))
        if p)}
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *deselect,
                           *args], cwd=SUITE, env=env).returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
