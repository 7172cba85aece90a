#!/usr/bin/env python3
"""PyCUDA for the comparison benchmark, on a GPU machine that reaches no package registry.

    python3 bench/peers.py fetch    # where a registry is reachable: sources and wheels to vendor/
    python3 bench/peers.py build    # on the GPU machine, offline: PyCUDA into build/peers/

fetch downloads the PyCUDA source distribution and the wheels of what its metadata lists
(pytools, platformdirs, mako and theirs) for the GPU machine's Python into vendor/, which git
ignores. build installs the wheels and compiles PyCUDA against the CUDA toolkit found there
($CUDA_HOME, else /usr/local/cuda) with the compiler jobs in parallel, then imports it; it
prints the folder to put on PYTHONPATH, or exits non-zero with the reason. bench/compare.py
runs it itself.
"""

import os
import shutil
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from common import ROOT

VENDOR = ROOT / "vendor"
PEERS = ROOT / "build" / "peers"
SITE = PEERS / "site"
DEPENDENCIES = ["pytools", "platformdirs", "mako", "markupsafe", "typing_extensions",
                "siphash24", "packaging"]
# The GPU machine's interpreter (docs: ../GPU.md of the project); wheels must match it.
TARGET_PYTHON = os.environ.get("KILN_PEERS_PYTHON", "3.12")


def pip(*args):
    command = [sys.executable, "-m", "pip", *args]
    print(" ".join(command), flush=True)
    return subprocess.run(command).returncode


def fetch():
    VENDOR.mkdir(exist_ok=True)
    if pip("download", "--no-deps", "--no-binary", "pycuda", "-d", str(VENDOR), "pycuda"):
        sys.exit("peers.py: could not download the PyCUDA sources")
    if pip("download", "--only-binary=:all:", "--python-version", TARGET_PYTHON,
           "--platform", "manylinux2014_x86_64", "--platform", "manylinux_2_17_x86_64",
           "--platform", "manylinux_2_28_x86_64", "-d", str(VENDOR), *DEPENDENCIES):
        sys.exit("peers.py: could not download PyCUDA's dependencies")
    print(f"peers.py: {len(list(VENDOR.iterdir()))} files in {VENDOR}")


def build():
    """Returns the folder with pycuda importable, or exits with why not."""
    sdists = sorted(VENDOR.glob("pycuda-*.tar.gz"))
    if not sdists:
        sys.exit(f"peers.py: no pycuda-*.tar.gz in {VENDOR}; run `python3 bench/peers.py "
                 "fetch` where a registry is reachable")
    cuda = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda"))
    if not (cuda / "bin" / "nvcc").exists():
        sys.exit(f"peers.py: PyCUDA needs the CUDA toolkit; no nvcc in {cuda}/bin")
    started = time.perf_counter()
    if SITE.exists() and subprocess.run([sys.executable, "-c", "import pycuda._driver"],
                                        env=env_with_site(), cwd="/").returncode == 0:
        print(f"peers.py: PyCUDA already built in {SITE}")
        return SITE
    shutil.rmtree(PEERS, ignore_errors=True)
    PEERS.mkdir(parents=True)
    if pip("install", "--no-index", "--find-links", str(VENDOR), "--target", str(SITE),
           "--quiet", *DEPENDENCIES):
        sys.exit("peers.py: installing PyCUDA's dependencies from vendor/ failed")
    with tarfile.open(sdists[-1]) as t:
        t.extractall(PEERS, filter="data")
    source = next(PEERS.glob("pycuda-*/"))
    env = {**os.environ, "PATH": f"{cuda / 'bin'}:{os.environ.get('PATH', '')}"}
    steps = [
        [sys.executable, "configure.py", f"--cuda-root={cuda}"],
        [sys.executable, "setup.py", "--quiet", "build_ext", "--inplace",
         f"--parallel={os.cpu_count() or 4}"],
    ]
    for step in steps:
        print(" ".join(step), flush=True)
        done = subprocess.run(step, cwd=source, env=env, capture_output=True, text=True)
        if done.returncode:
            tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-25:])
            sys.exit(f"peers.py: building PyCUDA failed at `{' '.join(step[1:])}`:\n{tail}")
    shutil.move(str(source / "pycuda"), str(SITE / "pycuda"))
    check = subprocess.run([sys.executable, "-c", "import pycuda, pycuda._driver; "
                            "print(pycuda.VERSION_TEXT)"], env=env_with_site(), cwd="/",
                           capture_output=True, text=True)
    if check.returncode:
        sys.exit(f"peers.py: PyCUDA built but does not import:\n{check.stderr.strip()}")
    print(f"peers.py: PyCUDA {check.stdout.strip()} built in "
          f"{time.perf_counter() - started:.0f} s; it is in {SITE}")
    return SITE


def env_with_site():
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": f"{SITE}:{path}" if path else str(SITE)}


def main():
    if len(sys.argv) != 2 or sys.argv[1] not in ("fetch", "build"):
        sys.exit(__doc__)
    fetch() if sys.argv[1] == "fetch" else build()


if __name__ == "__main__":
    main()
