"""Run-time resources under strain: the in-process table of modules and its bound, waits that
Ctrl-C and a timeout can end, stream handles that are checked before the driver sees them, and
pool memory that is not reused while another stream may still use it.

What needs no GPU runs everywhere: the table's bound with modules that are compiled and never
launched (loading waits for the first launch), the checks of stream= before the driver, the
checks of a timeout. The rest is marked gpu."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

import kiln
from helpers import ARCH, run_python


def run_child(code, env=None, timeout=600):
    """Runs code in a new Python (a table of its own) and gives back the JSON it printed last."""
    r = run_python(code, env={"ARCH": ARCH or "", **(env or {})}, timeout=timeout)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


# ---- The table of modules -------------------------------------------------------------------

TABLE_CHILD = """
    import json, os
    import kiln
    arch = os.environ["ARCH"] or None
    src = lambda i: f'extern "C" __global__ void k(int *p) {{ *p = {i}; }}\\n'
    out = {"default": kiln.module_table()}
    kiln.module_table(limit=4)
    held = kiln.SourceModule(src(0), arch=arch)
    for i in range(1, 12):
        kiln.SourceModule(src(i), arch=arch)
    out["after"] = kiln.module_table()
    hits = kiln.cache_stats()["memory_hits"]
    out["held_again"] = kiln.SourceModule(src(0), arch=arch).ptx == held.ptx
    out["held_hit"] = kiln.cache_stats()["memory_hits"] - hits
    kiln.SourceModule(src(11), arch=arch)   # used last: kept
    out["last_hit"] = kiln.cache_stats()["memory_hits"] - hits
    kiln.SourceModule(src(1), arch=arch)    # the oldest: freed, so compiled again
    out["oldest_hit"] = kiln.cache_stats()["memory_hits"] - hits
    kiln.module_table(limit=0)
    out["zero_held"] = kiln.module_table()
    del held
    out["zero"] = kiln.module_table()
    print(json.dumps(out))
"""


def test_the_module_table_keeps_at_most_its_limit_of_unheld_modules():
    out = run_child(TABLE_CHILD)
    assert out["default"] == [0, 256]
    assert out["after"] == [4, 4]
    assert out["held_again"] and out["held_hit"] == 1
    assert out["last_hit"] == 2
    assert out["oldest_hit"] == 2
    assert out["zero_held"] == [1, 0]   # held: kept, over the limit
    assert out["zero"] == [0, 0]        # let go over the limit: freed at once


@pytest.mark.parametrize("bad", [-1, 1.5, "8", None.__class__])
def test_the_module_table_limit_is_a_count(bad):
    with pytest.raises((ValueError, TypeError), match="limit must be a number of modules"):
        kiln.module_table(limit=bad)


FLAT_CHILD = """
    import json, os
    import numpy as np
    import kiln
    src = lambda i: (f'extern "C" __global__ void k(int *p) {{ p[threadIdx.x] = {i}; }}\\n')
    x = kiln.zeros(32, np.int32)

    def run(first, count):
        for i in range(first, first + count):
            f = kiln.SourceModule(src(i)).get_function("k")
            f(x, block=(32, 1, 1))
            assert int(x.get()[5]) == i

    def used():
        kiln.Context.synchronize()
        with open("/proc/self/statm") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        free, total = kiln.mem_info()
        return rss, total - free

    run(0, 1000)          # the table is full (256) well before this
    rss0, dev0 = used()
    run(1000, 9000)
    rss1, dev1 = used()
    print(json.dumps({"rss": rss1 - rss0, "device": dev1 - dev0,
                      "table": kiln.module_table()}))
"""


@pytest.mark.gpu
def test_ten_thousand_modules_keep_host_and_device_memory_flat():
    # Each module is compiled, loaded, launched and dropped, as a notebook does at every edit.
    out = run_child(FLAT_CHILD, env={"KILN_CACHE": "0"}, timeout=1800)
    assert out["table"][0] <= 256
    assert out["rss"] < 32 << 20, f"RSS grew by {out['rss'] / 2**20:.1f} MiB over 9000 modules"
    assert out["device"] < 8 << 20, f"device memory grew by {out['device'] / 2**20:.1f} MiB"
