"""The %%kiln cell magic (IPython), and kernels' printf in a notebook cell, in order with
Python's own prints: in an IPython shell here, and in a notebook run by a real Jupyter kernel."""
import io
import os
import sys
import textwrap

import pytest

import kiln
from helpers import ARCH
from kiln import _magic

SCALE = """
extern "C" __global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }
__global__ void shift(float *x, float b) { x[threadIdx.x] += b; }
"""

ARCH_LINE = f"-arch={ARCH}" if ARCH else ""


def _ipython_shell():
    pytest.importorskip("IPython", reason="IPython is not installed here (make deps-notebook "
                        "installs it where a registry is reachable)")
    from IPython.core.interactiveshell import InteractiveShell

    return InteractiveShell.instance()


@pytest.fixture
def shell():
    sh = _ipython_shell()
    sh.run_line_magic("load_ext", "kiln")
    try:
        yield sh
    finally:
        sh.run_line_magic("unload_ext", "kiln")
        for name in ("scale", "shift", "mod", "twice"):
            sh.user_ns.pop(name, None)


# ---- %%kiln ----------------------------------------------------------------------------------


def test_magic_binds_kernels_by_plain_name(shell):
    shell.run_cell_magic("kiln", f"{ARCH_LINE} --module mod", SCALE)
    ns = shell.user_ns
    assert isinstance(ns["scale"], kiln.Function) and ns["scale"].name == "scale"
    # shift is C++ (mangled), bound by the name it was declared with
    assert isinstance(ns["shift"], kiln.Function) and ns["shift"].name.startswith("_Z5shift")
    assert isinstance(ns["mod"], kiln.Module)
    assert sorted(ns["mod"].kernels) == sorted([ns["scale"].name, ns["shift"].name])


def test_unchanged_cell_is_a_cache_hit_and_a_changed_one_recompiles(shell):
    shell.run_cell_magic("kiln", ARCH_LINE, SCALE)
    first = shell.user_ns["scale"]
    shell.run_cell_magic("kiln", ARCH_LINE, SCALE)
    assert shell.user_ns["scale"] is first
    changed = SCALE.replace("*= a", "*= 2 * a")
    shell.run_cell_magic("kiln", ARCH_LINE, changed)
    assert shell.user_ns["scale"] is not first
    shell.run_cell_magic("kiln", f"{ARCH_LINE} --module mod", SCALE)
    old_ptx = shell.user_ns["mod"].ptx
    shell.run_cell_magic("kiln", f"{ARCH_LINE} --module mod", changed)
    assert shell.user_ns["mod"].ptx != old_ptx


def test_magic_line_options_reach_the_compiler(shell):
    src = """
    #ifndef FACTOR
    #error FACTOR is not defined
    #endif
    extern "C" __global__ void twice(float *x) { x[threadIdx.x] *= FACTOR; }
    """
    shell.run_cell_magic("kiln", f"{ARCH_LINE} -DFACTOR=2", src)
    assert shell.user_ns["twice"].name == "twice"
    with pytest.raises(kiln.CompileError, match="FACTOR is not defined"):
        shell.run_cell_magic("kiln", ARCH_LINE, src)


def test_compile_error_shows_nvrtc_message_and_the_cell_lines(shell):
    cell = "extern \"C\" __global__ void broken(float *x) {\n  x[0] = y;\n}\n"
    with pytest.raises(_magic.CellCompileError) as info:
        shell.run_cell_magic("kiln", ARCH_LINE, cell)
    lines = info.value._render_traceback_()
    text = "\n".join(lines)
    assert 'identifier "y" is undefined' in text
    assert any(line.startswith(">") and "x[0] = y;" in line for line in lines), text
    assert "Traceback" not in text
    assert isinstance(info.value, kiln.CompileError) and "error" in info.value.log
    assert info.value.stderr == info.value.log and info.value.stdout == ""


def test_compile_error_in_run_cell_prints_no_traceback(shell, capsys):
    result = shell.run_cell(f"%%kiln {ARCH_LINE}\nextern \"C\" __global__ void b(int *p) {{ q; }}\n")
    assert isinstance(result.error_in_exec, _magic.CellCompileError)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert 'identifier "q" is undefined' in shown
    assert "Traceback (most recent call last)" not in shown
    assert "run_cell_magic" not in shown


def test_magic_line_refuses_a_bad_module_name(shell):
    from IPython.core.error import UsageError

    with pytest.raises(UsageError, match="not a Python name"):
        shell.run_cell_magic("kiln", "--module 3x", SCALE)
    with pytest.raises(UsageError, match="--module takes a value: --module MODULE"):
        shell.run_cell_magic("kiln", "--module", SCALE)
    with pytest.raises(UsageError, match="--arch takes a value: --arch ARCH"):
        shell.run_cell_magic("kiln", "--module m --arch", SCALE)


def test_magic_line_names_the_arch_with_its_own_word(shell):
    # nvcc's -arch among the options gives way to the device's (as in SourceModule), so the
    # magic has a word of its own for the arch=: the one compiled for on a GPU machine too.
    for line in ("--arch sm_89 --module mod", "--arch=sm_89 --module=mod -DUNUSED=1"):
        shell.run_cell_magic("kiln", line, SCALE)
        assert shell.user_ns["mod"].arch == "sm_89"
    shell.run_cell_magic("kiln", "--arch sm_80 --module mod", SCALE)  # a cell of its own
    assert shell.user_ns["mod"].arch == "sm_80"


@pytest.mark.parametrize("entry, plain", [
    ("scale", "scale"),
    ("_Z5scalePff", "scale"),
    ("_ZN2ns5scaleEPf", "scale"),
    ("_ZN5outer5inner4stepEv", "step"),
    ("_Z3addIfEvPT_S1_", "add"),
    ("_ZNK1A1fEv", "f"),
])
def test_plain_names(entry, plain):
    assert _magic.plain_name(entry) == plain


def test_template_instances_sharing_a_name_are_not_bound():
    src = """
    template <typename T> __global__ void fill(T *x) { x[threadIdx.x] = T(1); }
    template __global__ void fill<float>(float *);
    template __global__ void fill<int>(int *);
    extern "C" __global__ void only(int *x) { x[0] = 0; }
    """
    mod = kiln.SourceModule(src, arch=ARCH)
    ns = {}
    assert _magic.bind_kernels(mod, ns) == ["only"]
    assert "fill" not in ns and ns["only"].name == "only"


# ---- Descriptor 1 into sys.stdout, in order ----------------------------------------------------


def test_fd1_capture_keeps_order_with_python_writes():
    import ctypes

    capture = _magic._Fd1Capture()
    sink = io.StringIO()
    out = _magic._OrderedStdout(sink, capture)
    try:
        out.write("python 1\n")
        os.write(1, b"fd one\n")
        # C's stdio buffers a pipe fully: only the drain's fflush lets this through
        ctypes.CDLL(None).printf(b"c printf %d\n", ctypes.c_int(7))
        out.write("python 2\n")
        os.write(1, b"after\n")
        out.flush_pending()
    finally:
        rest = capture.close()
    assert sink.getvalue() == "python 1\nfd one\nc printf 7\npython 2\nafter\n"
    assert rest == ""


def test_fd1_capture_takes_more_than_a_pipe_holds():
    capture = _magic._Fd1Capture()
    try:
        block = b"x" * 1023 + b"\n"
        for _ in range(1024):  # 1 MiB: the pipe holds 64 KiB; the thread empties it
            os.write(1, block)
        got = capture.drain()
    finally:
        capture.close()
    assert len(got) == 1 << 20 and got.count("\n") == 1024


def test_extension_leaves_fd1_and_stdout_as_it_found_them():
    sh = _ipython_shell()
    before_stdout, before_fd = sys.stdout, os.fstat(1)
    sh.run_line_magic("load_ext", "kiln")
    captured = _magic._magics[id(sh)].capture is not None
    sh.run_line_magic("unload_ext", "kiln")
    assert sys.stdout is before_stdout
    after_fd = os.fstat(1)
    assert (after_fd.st_ino, after_fd.st_dev) == (before_fd.st_ino, before_fd.st_dev)
    # pytest's sys.stdout is not descriptor 1, so the capture was on
    assert captured
    assert "kiln" not in sh.magics_manager.magics["cell"]


# ---- A notebook run by a real Jupyter kernel ---------------------------------------------------

def _notebook_client():
    """nbformat and nbclient, or a skip naming the one missing. CI installs them (make
    deps-notebook); an offline machine may not have them."""
    missing = []
    for name in ("IPython", "nbformat", "nbclient", "ipykernel"):
        try:
            __import__(name)
        except ImportError:
            missing.append(name)
    if missing:
        pytest.skip(f"{', '.join(missing)} not installed here, so no notebook can be run "
                    "(make deps-notebook installs them where a registry is reachable)")
    import nbclient
    import nbformat

    return nbformat, nbclient


def _run_notebook(cells):
    """Runs the cells (source strings) in a fresh kernel; the executed cells."""
    nbformat, nbclient = _notebook_client()
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(textwrap.dedent(c).strip()) for c in cells]
    pymod = os.path.dirname(os.path.dirname(os.path.abspath(kiln.__file__)))
    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = pymod + (os.pathsep + old if old else "")
    try:
        client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                         allow_errors=True)
        client.execute()
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    return nb.cells


def _stdout_of(cell):
    return "".join(o.get("text", "") for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def test_notebook_binds_kernels_and_shows_compile_errors():
    cells = _run_notebook([
        "%load_ext kiln",
        f"""
        %%kiln {ARCH_LINE}
        extern "C" __global__ void scale(float *x, float a) {{ x[threadIdx.x] *= a; }}
        """,
        "print(type(scale).__name__, scale.name)",
        f"""
        %%kiln {ARCH_LINE}
        extern "C" __global__ void broken(float *x) {{
          x[0] = undefined_name;
        }}
        """,
    ])
    assert not [o for o in cells[1].outputs if o.output_type == "error"], cells[1].outputs
    assert _stdout_of(cells[2]) == "Function scale\n"
    errors = [o for o in cells[3].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "CellCompileError"
    shown = "\n".join(errors[0].traceback)
    assert 'identifier "undefined_name" is undefined' in shown
    assert any(line.startswith(">") and "undefined_name;" in line
               for line in errors[0].traceback), shown
    assert "Traceback" not in shown and "run_cell_magic" not in shown


def test_notebook_c_output_shows_in_its_cell_in_order():
    # What the driver does with a kernel's printf, done by the C library: written to
    # descriptor 1 through stdio's buffer. No GPU needed to see where it lands.
    cells = _run_notebook([
        "%load_ext kiln\nimport ctypes\nlibc = ctypes.CDLL(None)",
        """
        print("before")
        libc.printf(b"from C %d\\n", 7)
        print("after")
        """,
        'libc.printf(b"last in its cell\\n")',
        'print("next cell")',
    ])
    for cell in cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    assert _stdout_of(cells[1]) == "before\nfrom C 7\nafter\n"
    assert _stdout_of(cells[2]) == "last in its cell\n"
    assert _stdout_of(cells[3]) == "next cell\n"


@pytest.mark.gpu
def test_notebook_printf_shows_in_its_cell_in_order():
    cells = _run_notebook([
        "%load_ext kiln\nimport kiln",
        """
        %%kiln
        #include <cstdio>
        extern "C" __global__ void hello(int n) {
          if (threadIdx.x == 0) printf("kernel says %d\\n", n);
        }
        """,
        """
        print("before")
        hello(7, block=32)
        kiln.synchronize()
        print("after")
        """,
        "hello(8, block=1)",  # no wait in the cell: the end of the cell waits
        'print("next cell")',
    ])
    for cell in cells:
        assert not [o for o in cell.outputs if o.output_type == "error"], cell.outputs
    assert _stdout_of(cells[2]) == "before\nkernel says 7\nafter\n"
    assert _stdout_of(cells[3]) == "kernel says 8\n"
    assert _stdout_of(cells[4]) == "next cell\n"
