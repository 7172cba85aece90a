"""tests/pycuda_examples.py, which runs PyCUDA's example programs against kiln: the unpacking,
the reading of a script's imports and the verdicts, on scripts made here; and, on a GPU with
PyCUDA's source distribution in vendor/, every example (make pycuda-examples)."""
import pytest

import pycuda_examples
import pycuda_suite
from helpers import write_sdist


def test_unpack_takes_the_example_scripts_alone(tmp_path):
    sdist = tmp_path / "pycuda-2099.1.tar.gz"
    write_sdist(sdist, {"pycuda-2099.1/examples/hello.py": b"print('hello')\n",
                   "pycuda-2099.1/examples/from-wiki/wiki.py": b"",
                   "pycuda-2099.1/examples/from-wiki/deeper/no.py": b"",
                   "pycuda-2099.1/examples/data.txt": b"",
                   "pycuda-2099.1/test/test_driver.py": b""})
    into = tmp_path / "examples"
    assert pycuda_examples.unpack(sdist, into) == ["hello.py", "wiki.py"]
    assert {p.name for p in into.iterdir()} == {"hello.py", "wiki.py", "_kiln_runner.py"}


def test_the_imports_that_decide_a_skip_are_the_third_partys(tmp_path):
    script = tmp_path / "s.py"
    script.write_text("from __future__ import annotations\nimport sys, os.path\n"
                      "import numpy as np\nimport pycuda.autoinit\nfrom pycuda import gpuarray\n"
                      "def f():\n    from matplotlib.pyplot import plot\n"
                      "from . import local\n")
    assert pycuda_examples.third_party_imports(script) == ["matplotlib.pyplot", "numpy"]


def test_verdicts(tmp_path, monkeypatch):
    into = tmp_path / "examples"
    into.mkdir()
    (into / "_kiln_runner.py").write_text(pycuda_examples.RUNNER)
    (into / "ok.py").write_text("import pycuda, kiln\nassert pycuda is kiln\n"
                                "assert input() == ''\nprint('done')\n")
    (into / "bad.py").write_text("raise RuntimeError('a failure of its own')\n")
    (into / "needs.py").write_text("import no_such_module_anywhere\n")
    (into / "slow.py").write_text("import time\nwhile True:\n    time.sleep(1)\n")
    assert pycuda_examples.run("ok.py", 60, into) == ("passed", "")
    result, why = pycuda_examples.run("bad.py", 60, into)
    assert result == "failed" and "a failure of its own" in why
    result, why = pycuda_examples.run("needs.py", 60, into)
    assert result == "skipped" and "needs no_such_module_anywhere" in why
    pycuda_examples.NEEDS["ok.py"] = "import no_such_module_anywhere.part"
    try:
        result, why = pycuda_examples.run("ok.py", 60, into)
    finally:
        del pycuda_examples.NEEDS["ok.py"]
    assert result == "skipped" and "no_such_module_anywhere.part" in why
    result, why = pycuda_examples.run("slow.py", 2, into)
    assert result == "failed" and "still running after 2 s" in why
    # One that runs until stopped passes once it has printed its line, whatever the
    # environment says of buffering.
    (into / "forever.py").write_text("import time\nprint('made it')\n"
                                     "while True:\n    time.sleep(1)\n")
    monkeypatch.delenv("PYTHONUNBUFFERED", raising=False)
    monkeypatch.setitem(pycuda_examples.UNTIL_STOPPED, "forever.py", ([], "made it", 3))
    assert pycuda_examples.run("forever.py", 60, into) == ("passed", "")
    monkeypatch.setitem(pycuda_examples.UNTIL_STOPPED, "forever.py", ([], "never said", 3))
    assert pycuda_examples.run("forever.py", 60, into)[0] == "failed"


def test_every_skip_says_why():
    for name, why in pycuda_examples.SKIPPED.items():
        assert name.endswith(".py") and why
    for name, statement in pycuda_examples.NEEDS.items():
        assert name.endswith(".py") and statement.startswith("import ")
    for name, (args, marker, seconds) in pycuda_examples.UNTIL_STOPPED.items():
        assert name.endswith(".py") and marker and seconds > 0


HAVE_SDIST = bool(sorted(pycuda_suite.VENDOR.glob("pycuda-*.tar.gz")))


@pytest.mark.gpu
@pytest.mark.skipif(not HAVE_SDIST, reason=f"no PyCUDA source distribution in "
                    f"{pycuda_suite.VENDOR} (python3 bench/peers.py fetch)")
def test_pycudas_examples_run_on_kiln():
    names = pycuda_examples.unpack(pycuda_suite.sources())
    pycuda_suite.unpack_helpers()
    failed, passed = {}, []
    for name in names:
        result, why = pycuda_examples.run(name, 180)
        if result == "failed":
            failed[name] = why
        elif result == "passed":
            passed.append(name)
    assert not failed, "\n\n".join(f"{name}:\n{why}" for name, why in failed.items())
    # The examples that need nothing but NumPy run here whatever else is installed.
    assert {"demo.py", "hello_gpu.py", "demo_elementwise.py", "dump_properties.py",
            "matrixmul_tiled.py", "demo_complex.py"} <= set(passed)
