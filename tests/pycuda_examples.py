#!/usr/bin/env python3
"""PyCUDA's example programs, run against kiln: the scripts of its source distribution's
examples/ (and examples/from-wiki/), unchanged, each in a process of its own whose `pycuda`
imports are answered by kiln's modules of the same names.

    python3 tests/pycuda_examples.py [--timeout S] [name ...]        (make pycuda-examples)

A script passes when it exits with status 0. One that needs what this machine lacks (a
package that does not import, a display, a file it is handed) or uses what CUDA 12 removed is
reported as skipped with that reason, never as passed; every other outcome is a failure,
printed with its output's last lines. The source distribution comes from vendor/ as for tests/pycuda_suite.py.
"""
import argparse
import ast
import os
import subprocess
import sys
import tarfile
from pathlib import Path

import pycuda_suite

ROOT = pycuda_suite.ROOT
EXAMPLES = ROOT / "build" / "pycuda-examples"

# Scripts that cannot pass here whatever kiln does, each with its reason: they wait for a
# person, read files the examples do not ship, or use what CUDA 12 or today's Python and SciPy
# removed (so they fail on PyCUDA too).
SKIPPED = {
    "gl_interop.py": "draws in an OpenGL window (pycuda.gl, which kiln does not provide)",
    "mandelbrot_interactive.py": "a Tk window that waits for the mouse",
    "light_field_3d_viewer.py": "an Enthought Traits window over image files it is handed",
    "sparse_solve.py": "solves a Matrix Market file named on its command line, with "
                       "pycuda.sparse (which kiln does not provide)",
    "thrust_interop.py": "builds a Boost.Python extension with nvcc and a host compiler",
    "rotate.py": "reads through a texture reference (CUDA 12 removed them) an image file named "
                 "on its command line",
    "sobel_filter.py": "filters an image file named on its command line",
    "gpu_scalar_mult.py": "its first half binds texture references (CUDA 12 removed them)",
    "simple_rgb2gray.py": "reads Lenna.png, which the examples do not ship, with "
                          "scipy.misc.imread, which SciPy removed",
    "arithmetic_example.py": "launches a grid of 218.13 blocks (written for Python 2's "
                             "division; PyCUDA's launch refuses a float too)",
    "demo_cdpSimplePrint.py": "sets the device runtime's sync depth and synchronizes in device "
                              "code, which CUDA 12 removed",
}

# Parts of third-party packages that a script needs beyond importing them, each tried as a
# statement of its own: a package whose own modules fail here (numba's CUDA target, built for an
# older NumPy, fails as it loads) makes the script a skip, with that failure as its reason.
NEEDS = {
    "cai_numba.py": "import numba.cuda.cudaimpl",
}

# Scripts that run until stopped: each runs with its arguments for `seconds` and passes when it
# printed its line and no traceback by then.
UNTIL_STOPPED = {
    "game_of_life.py": (["64", "10"], "live cells after 10 iterations", 30),
}

# The runner: the alias, then the script as __main__ with its own folder first on sys.path.
RUNNER = pycuda_suite.ALIAS + '''
import runpy
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, __import__("os").path.dirname(__import__("os").path.abspath(script)))
runpy.run_path(script, run_name="__main__")
'''

def unpack(sdist, into=EXAMPLES):
    """The example scripts of sdist into `into` (from-wiki's beside the rest), with the
    runner; gives their file names."""
    into.mkdir(parents=True, exist_ok=True)
    for old in into.glob("*.py"):
        old.unlink()
    names = []
    with tarfile.open(sdist) as tar:
        for member in tar.getmembers():
            parts = Path(member.name).parts
            if member.isfile() and parts[-1].endswith(".py") and len(parts) in (3, 4) and \
                    parts[1] == "examples" and (len(parts) == 3 or parts[2] == "from-wiki"):
                (into / parts[-1]).write_bytes(tar.extractfile(member).read())
                names.append(parts[-1])
    (into / "_kiln_runner.py").write_text(RUNNER)
    return sorted(names)


def third_party_imports(path):
    """The top-level names of the modules a script imports that are neither the standard
    library's nor PyCUDA's."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
    return sorted(n for n in names if n.split(".")[0] not in sys.stdlib_module_names
                  and n.split(".")[0] != "pycuda" and n != "__future__")


def import_problem(statement, env, _seen={}):
    """None when `statement` (an import) runs in a fresh interpreter here, else its error's
    last line."""
    if statement not in _seen:
        done = subprocess.run([sys.executable, "-c", statement], env=env,
                              capture_output=True, text=True, timeout=120)
        _seen[statement] = None if done.returncode == 0 else (
            (done.stderr.strip().splitlines() or ["exit status %d" % done.returncode])[-1])
    return _seen[statement]


def outcome(name, rc, output):
    """("passed" | "failed", reason) for a script that ended with rc and output."""
    if rc == 0:
        return "passed", ""
    return "failed", "\n".join(output.strip().splitlines()[-12:])


def run(name, timeout, into=EXAMPLES):
    # Unbuffered, so that a script killed at its time limit has its output read.
    path = (str(ROOT / "pymod"), os.environ.get("PYTHONPATH"), str(pycuda_suite.SITE))
    env = {**os.environ, "MPLBACKEND": "Agg", "PYTHONUNBUFFERED": "1",
           "PYTHONPATH": os.pathsep.join(p for p in path if p)}
    env.pop("DISPLAY", None)
    if name in SKIPPED:
        return "skipped", SKIPPED[name]
    for module in third_party_imports(into / name):
        problem = import_problem(f"import {module}", env)
        if problem:
            return "skipped", f"needs {module}, which does not import here ({problem})"
    if name in NEEDS and import_problem(NEEDS[name], env):
        return "skipped", (f"needs `{NEEDS[name]}` to work, which fails here "
                           f"({import_problem(NEEDS[name], env)})")
    args, marker, seconds = UNTIL_STOPPED.get(name, ([], None, timeout))
    try:
        # A few Enters for the scripts that pause for one.
        done = subprocess.run([sys.executable, "_kiln_runner.py", name, *args], cwd=into,
                              env=env, input="\n" * 8, capture_output=True, text=True,
                              timeout=seconds)
    except subprocess.TimeoutExpired as e:
        out = (e.stdout or b"") + (e.stderr or b"")
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        if marker and marker in out and "Traceback" not in out:
            return "passed", ""
        return "failed", f"still running after {seconds} s\n" + "\n".join(
            out.strip().splitlines()[-6:])
    return outcome(name, done.returncode, done.stdout + done.stderr)


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=180)
    parser.add_argument("names", nargs="*")
    args = parser.parse_args(argv)
    names = unpack(pycuda_suite.sources())
    pycuda_suite.unpack_helpers()
    counts = {"passed": 0, "skipped": 0, "failed": 0}
    for name in names:
        if args.names and name not in args.names:
            continue
        result, why = run(name, args.timeout)
        counts[result] += 1
        print(f"{result:8} {name}" + (f": {why}" if result == "skipped" else ""), flush=True)
        if result == "failed":
            print("    " + why.replace("\n", "\n    "), flush=True)
    print(", ".join(f"{n} {k}" for k, n in counts.items()))
    return 1 if counts["failed"] else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
