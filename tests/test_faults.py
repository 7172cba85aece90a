"""Faults that say where: the launch notes behind a fault's message, the kernel and launch line
an asynchronous fault names, line information by default, and `python -m kiln sanitize`."""
import os
import subprocess
import sys
import textwrap

import pytest

import kiln
from helpers import ARCH, run_python

# ---- Launch records ----------------------------------------------------------------------------


def test_launch_is_recorded_with_its_line_before_the_gpu_is_needed():
    # The note is written before the launch, so it is there whether or not a GPU took it.
    # Its body is empty: where there is a GPU, the launch runs and leaves nothing wrong.
    f = kiln.SourceModule('extern "C" __global__ void noted(int *p) { }',
                          arch=ARCH).get_function("noted")
    count = kiln._kiln._launch_count()
    line = sys._getframe().f_lineno + 2
    try:
        f(0, block=1)
    except kiln.CudaError as e:  # no device here; the note was still made
        # an error that is not a fault in a kernel names none
        assert e.kernel is None and e.launch is None
    assert kiln._kiln._launch_count() == count + 1
    name, file, at = kiln._kiln._launches()[0]
    assert (name, file, at) == ("noted", __file__, line)


def test_lineinfo_is_on_by_default_and_off_on_request():
    src = 'extern "C" __global__ void k(float *x) { x[threadIdx.x] = 1.0f; }'
    assert ".loc" in kiln.SourceModule(src, arch=ARCH).ptx
    off = run_python(f"""
        import kiln
        print(kiln.SourceModule({src!r}, arch={ARCH!r}).ptx)
    """, env={"KILN_LINEINFO": "0"})
    assert ".entry k(" in off.stdout, off.stderr
    assert ".loc" not in off.stdout
    # asking for it, or for device debugging, is not doubled or fought
    assert ".loc" in kiln.SourceModule(src, arch=ARCH, options=["-lineinfo"]).ptx


# ---- python -m kiln sanitize -------------------------------------------------------------------


def test_sanitize_command_line(tmp_path):
    fake = tmp_path / "cuda" / "bin"
    fake.mkdir(parents=True)
    tool = fake / "compute-sanitizer"
    tool.write_text("#!/bin/sh\necho sanitizer \"$@\"\n")
    tool.chmod(0o755)
    env = {**os.environ, "CUDA_HOME": str(tmp_path / "cuda")}
    run = subprocess.run([sys.executable, "-m", "kiln", "sanitize", "--print-command",
                          "script.py", "a", "--b"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("KILN_LINEINFO=1 PYTHONFAULTHANDLER=1 " + str(tool))
    assert "--tool memcheck --error-exitcode 1" in run.stdout
    assert run.stdout.rstrip().endswith(f"{sys.executable} script.py a --b")
    # run for real through the stand-in: the script and its arguments reach it
    run = subprocess.run([sys.executable, "-m", "kiln", "sanitize", "--tool", "racecheck",
                          "s.py"], capture_output=True, text=True, env=env)
    assert run.returncode == 0 and "sanitizer --tool racecheck" in run.stdout, run.stderr


def test_sanitize_without_compute_sanitizer_says_where_it_looked(tmp_path):
    env = {**os.environ, "CUDA_HOME": str(tmp_path), "CUDA_PATH": str(tmp_path),
           "PATH": str(tmp_path)}
    if os.access("/usr/local/cuda/compute-sanitizer/compute-sanitizer", os.X_OK) or \
            os.access("/usr/local/cuda/bin/compute-sanitizer", os.X_OK):
        pytest.skip("/usr/local/cuda has a compute-sanitizer, which the command would find")
    run = subprocess.run([sys.executable, "-m", "kiln", "sanitize", "s.py"],
                         capture_output=True, text=True, env=env)
    assert run.returncode == 2 and "compute-sanitizer was not found" in run.stderr


# ---- Faults that say where ---------------------------------------------------------------------

FAULTS = """
#include <cassert>
extern "C" __global__ void fine(float *x) { x[threadIdx.x] = 1.0f; }
extern "C" __global__ void poke(int *p) { p[threadIdx.x] = 1; }
extern "C" __global__ void check(int n) { assert(n == 0); }
extern "C" __global__ void stop() { __trap(); }
"""


def _fault_script(tmp_path, body):
    """Writes a script that compiles FAULTS, runs body and prints what the fault carried; the
    script and the line of its `# launch` marker. A fault loses the context for the process,
    so each runs in its own. Body runs inside the try: a launch after the fault may be the call
    that reports it."""
    script = tmp_path / "fault.py"
    script.write_text(textwrap.dedent(f"""\
        import kiln
        mod = kiln.SourceModule({FAULTS!r})
        fine, poke, check, stop = (mod.get_function(n) for n in ("fine", "poke", "check", "stop"))
        x = kiln.zeros(64, "float32")
        fine(x, block=64)
        kiln.synchronize()
        try:
        """) + textwrap.indent(textwrap.dedent(body), "    ") + textwrap.dedent("""\
            kiln.synchronize()
            print("no fault")
        except kiln.CudaError as e:
            print("name", e.name)
            print("kernel", e.kernel)
            print("launch", e.launch)
            print("message", str(e).replace("\\n", " | "))
        """))
    lines = script.read_text().splitlines()
    marker = next(i + 1 for i, line in enumerate(lines) if line.endswith("# launch"))
    return script, marker


def _run(script):
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                          timeout=120)


@pytest.mark.gpu
@pytest.mark.parametrize("launch, name", [
    ("poke(16, block=32)", "CUDA_ERROR_ILLEGAL_ADDRESS"),
    ("check(3, block=1)", "CUDA_ERROR_ASSERT"),
    ("stop(block=1)", "CUDA_ERROR_LAUNCH_FAILED"),
])
def test_fault_names_its_kernel_and_launch_line(tmp_path, launch, name):
    script, line = _fault_script(tmp_path, f"{launch}  # launch\n")
    run = _run(script)
    kernel = launch.split("(")[0]
    assert f"name {name}\n" in run.stdout, run.stdout + run.stderr
    assert f"kernel {kernel}\n" in run.stdout, run.stdout + run.stderr
    assert f"launch ('{script}', {line})\n" in run.stdout, run.stdout + run.stderr
    assert f"kernel {kernel} faulted; it was launched at {script}:{line}" in run.stdout


@pytest.mark.gpu
def test_fault_among_several_launches_lists_them_newest_first(tmp_path):
    script, line = _fault_script(tmp_path, """\
        poke(16, block=32)  # launch
        fine(x, block=64)
        """)
    run = _run(script)
    assert "name CUDA_ERROR_ILLEGAL_ADDRESS\n" in run.stdout, run.stdout + run.stderr
    assert "kernel None\n" in run.stdout and "launch None\n" in run.stdout
    message = next(m for m in run.stdout.splitlines() if m.startswith("message"))
    assert "one of these launches" in message
    assert message.index(f"fine, launched at {script}:{line + 1}") < \
        message.index(f"poke, launched at {script}:{line}")
    # the launch that finished before the wait is not among them
    assert message.count("fine, launched") == 1


@pytest.mark.gpu
def test_fault_in_an_elementwise_kernel_names_it_and_its_line(tmp_path):
    script = tmp_path / "elementwise_fault.py"
    script.write_text(textwrap.dedent("""\
        import numpy as np
        import kiln
        from kiln.elementwise import ElementwiseKernel
        k = ElementwiseKernel("float *x", "x[i + 100000000000LL] = 1.0f", "far_write")
        x = kiln.zeros(16, np.float32)
        kiln.synchronize()
        try:
            k(x)  # launch
            kiln.synchronize()
            print("no fault")
        except kiln.CudaError as e:
            print("name", e.name)
            print("kernel", e.kernel)
            print("launch", e.launch)
        """))
    run = _run(script)
    assert "name CUDA_ERROR_ILLEGAL_ADDRESS\n" in run.stdout, run.stdout + run.stderr
    kernel = next(m for m in run.stdout.splitlines() if m.startswith("kernel "))
    assert "far_write" in kernel, run.stdout
    # a contiguous array takes the C launcher: the note's frame is the script's
    assert f"launch ('{script}', 8)\n" in run.stdout, run.stdout


# ---- The sanitizer, for real -------------------------------------------------------------------


@pytest.mark.gpu
def test_sanitize_reports_an_out_of_bounds_write_at_its_source_line(tmp_path):
    from kiln import _sanitize

    if _sanitize.find() is None:
        if os.environ.get("KILN_REQUIRE_GPU") == "1":
            pytest.fail("KILN_REQUIRE_GPU=1 but compute-sanitizer is not in the CUDA toolkit "
                        "here (nor on PATH)")
        pytest.skip("compute-sanitizer not found in $CUDA_HOME, /usr/local/cuda or on PATH")
    script = tmp_path / "oob.py"
    script.write_text(textwrap.dedent("""\
        import kiln
        src = '''extern "C" __global__ void past_end(float *x, int n) {
          x[threadIdx.x + n] = 1.0f;
        }'''
        f = kiln.SourceModule(src).get_function("past_end")
        x = kiln.mem_alloc(64 * 4)
        f(x, 1 << 24, block=32)  # 64 MiB past the end: outside any allocation
        kiln.synchronize()
        print("script finished")
        """))
    run = subprocess.run([sys.executable, "-m", "kiln", "sanitize", str(script)],
                         capture_output=True, text=True, timeout=300)
    shown = run.stdout + run.stderr
    assert run.returncode != 0, shown
    assert "Invalid __global__ write of size 4" in shown, shown
    assert "past_end" in shown
    assert "kernel.cu:2" in shown  # line information, on by default
