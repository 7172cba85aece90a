"""What the tests share: where the kernels are, whether there is a GPU, the compile arch, and
helpers that run work in threads or in a new Python. conftest.py keeps the fixtures and hooks;
pytest.ini puts this folder on sys.path, so a test file says `from helpers import ...`."""
import io
import os
import pathlib
import subprocess
import sys
import tarfile
import textwrap
import threading

import numpy as np

import kiln

KERNELS = pathlib.Path(__file__).resolve().parent.parent / "kernels_src"


def _no_gpu_reason():
    try:
        n = kiln.Device.count()
    except kiln.NoDeviceError as e:
        return str(e)
    return None if n else "the driver found no CUDA device"


NO_GPU_REASON = _no_gpu_reason()  # None where there is a GPU
HAVE_GPU = NO_GPU_REASON is None

# A compile arch that works with or without a GPU: the device's own where there is one.
ARCH = None if HAVE_GPU else "sm_90"

# Every NumPy dtype a transfer must carry.
DTYPES = [np.bool_, np.int8, np.uint8, np.int16, np.uint16, np.int32, np.uint32, np.int64,
          np.uint64, np.float16, np.float32, np.float64, np.complex64, np.complex128]


def run_in_threads(work, count=8):
    """Runs work(0) ... work(count - 1) in count threads at once and gives back the errors: a
    work that finds something wrong returns a sentence saying what, and one that raises has
    its exception reported; each error names its thread."""
    errors = []

    def run(i):
        try:
            wrong = work(i)
            if wrong:
                errors.append(f"thread {i}: {wrong}")
        except Exception as e:  # reported to the test, with the thread that raised it
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=run, args=(i,)) for i in range(count)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors


def run_python(code, env=None, timeout=120):
    """Runs code (dedented) in a new Python with os.environ updated by env; the completed
    process, its output as text."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env={**os.environ, **(env or {})})


def write_sdist(path, files):
    """A source distribution (a .tar.gz) at path holding files, {member name: bytes}."""
    with tarfile.open(path, "w:gz") as tar:
        for name, data in files.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
