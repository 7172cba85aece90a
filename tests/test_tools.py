"""tools/: the layering check on small made-up trees, and the format check with the pinned
clang-format (where `make lint-tools` has installed it)."""
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tools"))
import format as format_tool  # noqa: E402
import layers  # noqa: E402


def tree(root, files):
    """Writes {relative path: text} under root; returns root."""
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return root


# An engine and a module laid out as kiln's are, with no cycle: each file leans downwards.
ACYCLIC = {
    "engine/include/kiln.h": "int kiln_version(void);\n",
    "engine/src/internal.h": '#include "kiln.h"\nint kiln__fail(int s);\n',
    "engine/src/status.c": '#include "internal.h"\nint kiln__fail(int s) { return s; }\n',
    "engine/src/driver.h": '#include "internal.h"\nint kiln__driver_load(void);\n',
    "engine/src/driver.c": '#include "driver.h"\nint kiln__driver_load(void) { return 0; }\n',
    "engine/src/memory.h": '#include "driver.h"\nint kiln__alloc(void);\n',
    "engine/src/memory.c": '#include "memory.h"\n#include <stdlib.h>\n'
                           'int kiln__alloc(void) { return kiln__driver_load(); }\n',
    "pymod/_kiln/kpy.h": "#include <Python.h>\n#include \"kiln.h\"\n"
                         "int kpy_args_init(void);\nint kpy_array_init(void);\n",
    "pymod/_kiln/args.h": '#include "kpy.h"\nint kpy_pack(void);\n',
    "pymod/_kiln/args.c": '#include "args.h"\nint kpy_pack(void) { return 0; }\n',
    "pymod/_kiln/array.c": '#include "args.h"\nint kpy_array(void) { return kpy_pack(); }\n',
}


def problems_of(tmp_path, files):
    return layers.check(tree(tmp_path, files))


def test_an_acyclic_tree_passes(tmp_path):
    assert problems_of(tmp_path, ACYCLIC) == []
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "layers.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout
    assert "no include cycle" in done.stdout


def test_a_cycle_is_named_node_by_node(tmp_path):
    files = dict(ACYCLIC)
    files["engine/src/driver.c"] = ('#include "driver.h"\n#include "memory.h"\n'
                                    "int kiln__driver_load(void) { return 0; }\n")
    problems = problems_of(tmp_path, files)
    assert problems == ["engine/src: include cycle driver -> memory -> driver (driver.c "
                        "includes memory.h, memory.h includes driver.h)"]
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "layers.py"), str(tmp_path)],
                          capture_output=True, text=True)
    assert done.returncode == 1 and "layers: engine/src: include cycle" in done.stdout


def test_every_group_of_nodes_in_a_cycle_is_reported(tmp_path):
    files = dict(ACYCLIC)
    files["engine/src/internal.h"] = ('#include "kiln.h"\n#include "memory.h"\n'
                                      "int kiln__fail(int);\n")
    files["pymod/_kiln/array.h"] = '#include "args.h"\n'
    files["pymod/_kiln/args.h"] = '#include "kpy.h"\n#include "array.h"\nint kpy_pack(void);\n'
    files["pymod/_kiln/kpy.h"] = '#include "kiln.h"\n#include "args.h"\n'
    problems = problems_of(tmp_path, files)
    # internal.h declares status.c's functions alone: it is status's header, in status's node.
    assert problems == [
        "engine/src: include cycle driver -> status -> memory -> driver (driver.h includes "
        "internal.h, internal.h includes memory.h, memory.h includes driver.h)",
        "pymod/_kiln: include cycle args -> array -> args (args.h includes array.h, array.c "
        "includes args.h); 3 nodes lean on one another: args, array, kpy"]


def test_an_aggregate_header_leans_on_what_it_declares(tmp_path):
    """kpy.h declares functions of two .c files that include it: each leans on the other
    through it."""
    files = dict(ACYCLIC)
    files["pymod/_kiln/args.c"] = ('#include "kpy.h"\nint kpy_args_init(void) { return 0; }\n')
    files["pymod/_kiln/array.c"] = ('#include "kpy.h"\nint kpy_array_init(void) { return 0; }\n')
    del files["pymod/_kiln/args.h"]
    (problem,) = problems_of(tmp_path, files)
    assert problem.startswith("pymod/_kiln: include cycle args -> kpy -> args (args.c includes "
                              "kpy.h, kpy.h declares functions of args.c)")
    # A header whose functions all live in one file is that file's header: no cycle.
    files["pymod/_kiln/kpy.h"] = '#include "kiln.h"\nint kpy_args_init(void);\n'
    del files["pymod/_kiln/array.c"]
    shutil.rmtree(tmp_path / "pymod")
    assert problems_of(tmp_path, files) == []


def test_the_module_sees_the_engine_through_kiln_h_alone(tmp_path):
    files = dict(ACYCLIC)
    files["pymod/_kiln/args.c"] = '#include "args.h"\n#include "memory.h"\n'
    assert problems_of(tmp_path, files) == [
        "pymod/_kiln/args.c includes the engine's memory.h; pymod/ knows the engine only "
        "through kiln.h"]


def test_the_engine_includes_nothing_of_python(tmp_path):
    files = dict(ACYCLIC)
    files["engine/src/memory.c"] = '#include "memory.h"\n#include <Python.h>\n'
    files["engine/src/driver.h"] = '#include "internal.h"\n#include <numpy/arrayobject.h>\n'
    assert problems_of(tmp_path, files) == [
        "engine/src/driver.h includes numpy/arrayobject.h; the engine knows nothing of Python",
        "engine/src/memory.c includes Python.h; the engine knows nothing of Python"]


def test_the_layers_check_reads_this_tree():
    """It runs on kiln itself and names every folder's cycles, if any, by the rule above."""
    for problem in layers.check(ROOT):
        assert re.match(r"(engine/src|pymod/_kiln): include cycle \w+( -> \w+)+ \(", problem), \
            problem


# ---- format ------------------------------------------------------------------------------------

def pinned_clang_format():
    version = re.search(r"^CLANG_FORMAT_VERSION = (\S+)$", (ROOT / "Makefile").read_text(),
                        re.M).group(1)
    try:
        return format_tool.executable(version)
    except SystemExit as e:
        pytest.skip(str(e))


def test_format_check_counts_the_files_and_shows_their_diff(tmp_path, capsys):
    binary = pinned_clang_format()
    shutil.copy(ROOT / ".clang-format", tmp_path / ".clang-format")
    good = tmp_path / "good.c"
    good.write_text("static int one(void) { return 1; }\n")
    bad = tmp_path / "bad.c"
    bad.write_text("static int two(void)\n{\n    return 2;\n}\n")
    assert format_tool.check(binary, [good], tmp_path) == 0
    assert "the 1 C files match .clang-format" in capsys.readouterr().out
    assert format_tool.check(binary, [good, bad], tmp_path) == 1
    out = capsys.readouterr().out
    assert "format: 1 of 2 C files differ from .clang-format" in out and "bad.c" in out
    assert "+static int two(void) { return 2; }" in out


def test_format_style_teaches_the_python_macros(tmp_path):
    """PyObject_HEAD stays a line of its own; the code between Py_BEGIN_ALLOW_THREADS and
    Py_END_ALLOW_THREADS is a block."""
    binary = pinned_clang_format()
    shutil.copy(ROOT / ".clang-format", tmp_path / ".clang-format")
    src = tmp_path / "m.c"
    src.write_text("typedef struct obj {\n  PyObject_HEAD\n  int n;\n} obj;\n\n"
                   "static int f(void) {\n  int s;\n  Py_BEGIN_ALLOW_THREADS\n  s = g();\n"
                   "  Py_END_ALLOW_THREADS\n  return s;\n}\n")
    out = subprocess.run([binary, str(src)], capture_output=True, text=True, check=True).stdout
    assert "  PyObject_HEAD\n  int n;\n" in out
    assert "  Py_BEGIN_ALLOW_THREADS\n    s = g();\n  Py_END_ALLOW_THREADS\n" in out
