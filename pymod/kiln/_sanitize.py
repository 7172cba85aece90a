"""`python -m kiln sanitize script.py`: a Python script run under NVIDIA's compute-sanitizer with
the settings that make its reports about kiln's kernels readable.

- Kernels carry line information (kiln's default; KILN_LINEINFO=1 is set in case the caller's
  environment turned it off), so a bad access is reported at its line of the source, which
  NVRTC names kernel.cu.
- A finding makes the run fail (--error-exitcode 1), so the command can gate a test run.
- The CUDA calls that fail on purpose (kiln asks the driver for entry points that an older one
  lacks, and reads attributes that may not exist) are not reported (--report-api-errors no):
  a failure that matters reaches Python as an exception anyway.
- PYTHONFAULTHANDLER=1, so a crash of the process prints the Python stack.

compute-sanitizer is looked for in $CUDA_HOME (or $CUDA_PATH) and /usr/local/cuda, then on PATH.
"""
import os
import shlex
import shutil
import subprocess
import sys

SETTINGS = {"KILN_LINEINFO": "1", "PYTHONFAULTHANDLER": "1"}
OPTIONS = ["--error-exitcode", "1", "--report-api-errors", "no"]


def find():
    """The compute-sanitizer to run, or None."""
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            for sub in ("compute-sanitizer/compute-sanitizer", "bin/compute-sanitizer"):
                path = os.path.join(root, sub)
                if os.access(path, os.X_OK):
                    return path
    return shutil.which("compute-sanitizer")


def command(sanitizer, script, args, tool="memcheck", extra=()):
    return [sanitizer, "--tool", tool, *OPTIONS, *extra, sys.executable, script, *args]


def run(script, args, tool="memcheck", extra=(), dry_run=False):
    """Runs script under compute-sanitizer; the exit status (2: no compute-sanitizer)."""
    sanitizer = find()
    if sanitizer is None:
        print("kiln sanitize: compute-sanitizer was not found in $CUDA_HOME, $CUDA_PATH, "
              "/usr/local/cuda or on PATH; it comes with the CUDA toolkit", file=sys.stderr)
        return 2
    cmd = command(sanitizer, script, args, tool, extra)
    # The script imports the kiln this command is, wherever it was found.
    here = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, **SETTINGS, "PYTHONPATH": here + (os.pathsep + path if path else "")}
    if dry_run:
        print(" ".join(f"{k}={v}" for k, v in SETTINGS.items()), shlex.join(cmd))
        return 0
    return subprocess.run(cmd, env=env).returncode
