"""Wrong arguments to every public callable and method: an exception, never a crash.

bad_arguments.py calls each of kiln's public functions, classes and methods with values of
every wrong kind (None, negative and huge ints, NaN, strings, host arrays, strided views,
device arrays of other dtypes, impossible shapes) and a few keywords of the calls programs make
most with each of them. Each group runs in a process of its own; when one ends by a signal,
the test records the call that ended it and goes on from the next in a new process. Without a
GPU the calls stop at the checks made before the device is needed; with one, past them."""
import os
import pathlib
import subprocess
import sys

import pytest

from bad_arguments import GROUPS
from helpers import HAVE_GPU

SCRIPT = pathlib.Path(__file__).with_name("bad_arguments.py")


def run_group(group, timeout=300):
    """The calls of group that went wrong, one line each, and how many calls were made."""
    env = dict(os.environ, CUDA_LAUNCH_BLOCKING="1", PYTHONPATH=os.pathsep.join(sys.path))
    wrong, made, start = [], 0, 0
    while start is not None:
        try:
            p = subprocess.run([sys.executable, str(SCRIPT), group, str(start)], env=env,
                               capture_output=True, text=True, timeout=timeout)
            lines, rc, how = p.stdout.splitlines(), p.returncode, p.stderr[-300:]
        except subprocess.TimeoutExpired as e:
            out = e.stdout or b""
            lines = (out.decode(errors="replace") if isinstance(out, bytes) else out).splitlines()
            rc, how = None, f"no answer in {timeout} s"
        if HAVE_GPU:
            assert not any(line.startswith("NO GPU") for line in lines), lines[:1]
        calls = [line for line in lines if line.startswith("CALL ")]
        wrong += [line for line in lines if line.startswith(("SYSTEMERROR", "FAULT"))]
        made += sum(int(line.split()[2]) for line in lines if line.startswith("DONE "))
        start = None
        if rc != 0:  # a fault (3, recorded above), a signal, or no answer
            made += len(calls)
            if rc != 3:
                last = calls[-1] if calls else "before the first call"
                wrong.append(f"{last}: the process ended ({rc}): {how}")
            if calls:
                start = int(calls[-1].split()[1]) + 1
    return wrong, made


# The keywords' calls are made on device arrays, so without a device there are none.
@pytest.mark.parametrize("group", [pytest.param(g, marks=pytest.mark.gpu) if g == "keywords"
                                   else g for g in GROUPS])
def test_wrong_arguments_raise_and_never_crash(group):
    wrong, made = run_group(group)
    assert made > 100, made
    assert not wrong, "\n".join(wrong[:20])
