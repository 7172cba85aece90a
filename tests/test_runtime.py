"""Run-time resources under strain: the in-process table of modules and its bound, waits that
Ctrl-C and a timeout can end, stream handles that are checked before the driver sees them, and
pool memory that is not reused while another stream may still use it.

What needs no GPU runs everywhere: the table's bound with modules that are compiled and never
launched (loading waits for the first launch), the checks of stream= before the driver, the
checks of a timeout. The rest is marked gpu."""
import gc
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
from helpers import ARCH, HAVE_GPU, run_python


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
    assert out["default"][1] == 256
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
    import ctypes, gc, json, os
    import numpy as np
    import kiln
    src = lambda i: (f'extern "C" __global__ void k(int *p) {{ p[threadIdx.x] = {i}; }}\\n')
    x = kiln.zeros(32, np.int32)

    def run(first, count, batch=250):
        # Compiled a batch at a time on every core (the compiles are what takes long), then
        # each launched and let go.
        for start in range(first, first + count, batch):
            stop = min(start + batch, first + count)
            modules = kiln.compile_many([src(i) for i in range(start, stop)])
            for i in range(start, stop):
                f = modules[i - start].get_function("k")
                f(x, block=(32, 1, 1))
                assert int(x.get()[5]) == i
            del modules, f

    def used():
        kiln.Context.synchronize()
        # What glibc's allocator keeps of memory already freed (below its trim threshold, which
        # rises to 64 MiB once large blocks were freed) is given back first: compile_many's
        # threads, whose compiles go to compile helpers, leave tens of MiB free in it, which
        # is not memory anything holds.
        ctypes.CDLL(None).malloc_trim(0)
        with open("/proc/self/statm") as statm:
            rss = int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        free, total = kiln.mem_info()
        return rss, total - free

    run(0, 1000)          # the table is full (256) well before this
    gc.collect()          # what a batch left in reference cycles, as the collector would
    rss0, dev0 = used()
    run(1000, 9000)
    gc.collect()
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


# ---- Waits that Ctrl-C and a timeout end -----------------------------------------------------

def test_a_short_wait_returns_as_soon_as_the_work_is_done():
    for seconds in (0, 0.0005, 0.005, 0.05):
        t = time.monotonic()
        kiln._kiln._wait_until(seconds)
        took = time.monotonic() - t
        assert seconds <= took < seconds + 0.02, (seconds, took)


def test_a_wait_past_its_timeout_raises_timeout_error():
    t = time.monotonic()
    with pytest.raises(TimeoutError, match=r"did not finish within 0\.1 s; the work queued on "
                                           r"the GPU goes on running"):
        kiln._kiln._wait_until(10, timeout=0.1)
    assert 0.1 <= time.monotonic() - t < 0.2
    kiln._kiln._wait_until(0.01, timeout=1)   # done in time: no error
    with pytest.raises(TimeoutError):
        kiln._kiln._wait_until(1, timeout=0)


@pytest.mark.parametrize("bad, error, phrase", [
    (-1, ValueError, "0 seconds or more"), (float("nan"), ValueError, "0 seconds or more"),
    ("1", TypeError, "a number of seconds, not str"), ([], TypeError, "not list")])
def test_a_timeout_is_none_or_seconds(bad, error, phrase):
    with pytest.raises(error, match=phrase):
        kiln._kiln._wait_until(0, timeout=bad)
    with pytest.raises(error, match=phrase):
        kiln.synchronize(timeout=bad)           # read before the driver is touched
    with pytest.raises(error, match=phrase):
        kiln.Context.synchronize(timeout=bad)


# A child that waits, prints "waiting", and reports how the wait ended: the exception and the
# time.monotonic() it was raised at (the machine's clock, shared with the parent). Then it runs
# stop, which lets the GPU's work end, and reports whether a wait after it returned.
SIGINT_CHILD = """
import json, sys, time
import numpy as np
import kiln
{prelude}
print("waiting", flush=True)
report = {{"raised": None}}
try:
    {wait}
except KeyboardInterrupt as e:
    report = {{"raised": type(e).__name__, "message": str(e), "at": time.monotonic()}}
{stop}
print(json.dumps(report))
"""


def interrupt_child(wait, prelude="", stop="", after=0.3):
    """Runs a child that waits, sends it SIGINT `after` seconds after it says it is waiting,
    and gives back (the child's report, the monotonic time the signal was sent)."""
    code = SIGINT_CHILD.format(wait=wait, prelude=textwrap.dedent(prelude),
                               stop=textwrap.dedent(stop))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True, env=os.environ.copy())
    try:
        line = p.stdout.readline().strip()
        if line != "waiting":
            p.kill()
            raise AssertionError(f"the child did not start: {line} {p.stderr.read()}")
        time.sleep(after)
        sent = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=120)
    finally:
        p.kill()
    assert p.returncode == 0, err
    return json.loads(out.strip().splitlines()[-1]), sent


def test_ctrl_c_ends_a_wait_within_a_tenth_of_a_second():
    report, sent = interrupt_child("kiln._kiln._wait_until(3600)")
    assert report["raised"] == "KeyboardInterrupt"
    assert "goes on running" in report["message"]
    assert report["at"] - sent < 0.1


def test_the_wait_inside_a_call_with_in_out_returns_when_the_work_is_done():
    # The wait a call with In/Out makes inside the engine, with the GIL released around it.
    for seconds in (0, 0.005, 0.05):
        t = time.monotonic()
        kiln._kiln._wait_released_until(seconds)
        took = time.monotonic() - t
        assert seconds <= took < seconds + 0.02, (seconds, took)


def test_the_wait_inside_a_call_with_in_out_leaves_the_gil_to_other_threads():
    import threading
    waiter = threading.Thread(target=kiln._kiln._wait_released_until, args=(0.5,))
    waiter.start()
    time.sleep(0.05)
    ran, end = 0, time.monotonic() + 0.2
    while time.monotonic() < end:   # Python code, which needs the GIL the wait released
        ran += 1
    assert waiter.is_alive(), "the wait ended early"
    waiter.join()
    assert ran > 10_000, ran


def test_ctrl_c_ends_the_wait_inside_a_call_with_in_out():
    report, sent = interrupt_child("kiln._kiln._wait_released_until(3600)")
    assert report["raised"] == "KeyboardInterrupt"
    assert ("interrupted while waiting for the kernel (nothing is copied back into its Out and "
            "InOut arrays); the work queued on the GPU goes on running") in report["message"]
    assert report["at"] - sent < 0.1


# A kernel that spins until *flag is set (or about half a minute of clock cycles has gone, so
# that a broken test still ends), launched without waiting. stop sets the flag through a
# non-blocking stream, which the spinning kernel's stream does not hold up, then waits for all.
SPIN_PRELUDE = """
spin = kiln.SourceModule('''
extern "C" __global__ void spin(volatile int *flag, long long cycles)
{ long long start = clock64(); while (*flag == 0 && clock64() - start < cycles) {} }
''').get_function("spin")
flag = kiln.zeros(1, np.int32)
side = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
def launch(stream=None):
    spin(flag, np.int64(60_000_000_000), block=(1, 1, 1), stream=stream)
"""

SPIN_STOP = """
flag.set_async(np.ones(1, np.int32), stream=side)
side.synchronize(timeout=30)
kiln.synchronize(timeout=30)
report["stopped"] = True
"""

SPIN_WAITS = {
    "kiln.synchronize": ("launch()", "kiln.synchronize()", "the device"),
    "Context.synchronize": ("launch()", "kiln.Context.synchronize()", "the device"),
    "Stream.synchronize": ("s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING); launch(s)",
                           "s.synchronize()", "the stream"),
    "Event.synchronize": ("launch(); e = kiln.Event().record()", "e.synchronize()",
                          "the event"),
    "DeviceArray.get": ("launch()", "flag.get()", "the default stream"),
    "memcpy_dtoh": ("launch(); h = np.zeros(1, np.int32)", "kiln.memcpy_dtoh(h, flag.gpudata)",
                    "the default stream"),
    # The legacy default stream's copy also waits for a blocking kiln.Stream's work, which the
    # wait sees through an event recorded there.
    "get behind a blocking stream": ("b = kiln.Stream(); launch(b)", "flag.get()",
                                     "the default stream"),
    # Copies one after another skip the wait while kiln queues nothing between them; a launch
    # after them brings it back.
    "memcpy_htod after copies": (
        "h = np.zeros(4, np.int32); other = kiln.zeros(4, np.int32)\n"
        "for _ in range(3): kiln.memcpy_htod(other.gpudata, h)\n"
        "launch()", "kiln.memcpy_htod(other.gpudata, h)", "the default stream"),
    "set after sets": (
        "h = np.zeros(1 << 20, np.int32); other = kiln.empty(1 << 20, np.int32)\n"
        "for _ in range(3): other.set(h)\n"
        "launch()", "other.set(h)", "the default stream"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(SPIN_WAITS))
def test_ctrl_c_ends_a_wait_for_a_kernel_that_never_ends(name):
    start, wait, what = SPIN_WAITS[name]
    report, sent = interrupt_child(wait, prelude=SPIN_PRELUDE + start + "\n", stop=SPIN_STOP)
    assert report["raised"] == "KeyboardInterrupt", report
    assert f"waiting for {what}; the work queued on the GPU goes on running" in report["message"]
    assert report["at"] - sent < 0.1, f"{report['at'] - sent:.3f} s after the signal"
    assert report.get("stopped")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [4, 1 << 20])
def test_copies_and_launches_in_turn_see_each_other(n):
    # Values stay right through blocking copies that skip kiln's wait (after copies alone)
    # and launches between them; the Ctrl-C cases above see whether the wait itself is made.
    add1 = kiln.SourceModule("""extern "C" __global__ void add1(int *p, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) p[i] += 1; }""",
                             arch=ARCH).get_function("add1")
    d = kiln.zeros(n, np.int32)
    h = np.empty(n, np.int32)
    for k in range(4):
        kiln.memcpy_htod(d.gpudata, np.full(n, k, np.int32))
        kiln.memcpy_htod(d.gpudata, np.full(n, 10 * k, np.int32))
        add1(d, np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
        kiln.memcpy_dtoh(h, d.gpudata)
        assert (h == 10 * k + 1).all(), (k, h[:4])
        d.set(np.full(n, k, np.int32))
        d.set(np.full(n, 3 * k, np.int32))
        add1(d, np.int32(n), block=(256, 1, 1), grid=((n + 255) // 256, 1))
        assert (d.get() == 3 * k + 1).all(), k


@pytest.mark.gpu
def test_a_small_copy_to_the_host_after_an_interrupted_one_is_right():
    # The interrupted get left its copy queued into kiln's page-locked buffer: the next small
    # copies wait for it to be over or go the driver's way, and get their own bytes.
    stop = SPIN_STOP + """
x = kiln.to_device(np.arange(10, dtype=np.float32))
report["x"] = x.get().tolist()
report["flag"] = flag.get().tolist()
"""
    report, sent = interrupt_child("flag.get()", prelude=SPIN_PRELUDE + "launch()\n", stop=stop)
    assert report["raised"] == "KeyboardInterrupt", report
    assert report["x"] == list(range(10)) and report["flag"] == [1]


# A launch with In/Out waits for its kernel inside the call, to copy back: Ctrl-C ends that wait
# too. The kernel spins, then writes 7 into every element of out; interrupted, the call copies
# nothing back, then or ever, so out still holds zeros once the kernel has ended. A call after
# it (the kernel no longer spinning, flag being set) copies back as usual: the buffers the
# interrupted call left to the kernel are reused once it is over.
SPIN_OUT_PRELUDE = SPIN_PRELUDE + """
spin_out = kiln.SourceModule('''
extern "C" __global__ void spin_out(volatile int *flag, long long cycles, float *out, int n)
{ long long start = clock64(); while (*flag == 0 && clock64() - start < cycles) {}
  for (int i = 0; i < n; i++) out[i] = 7.0f; }
''').get_function("spin_out")
CYCLES = np.int64(60_000_000_000)
"""

SPIN_OUT_STOP = SPIN_STOP + """
report["untouched"] = bool((out == 0).all())
for n in (16, 1 << 20):      # the small buffers and the pooled path, both after the interruption
    again = np.zeros(n, np.float32)
    spin_out(flag, CYCLES, kiln.Out(again), np.int32(n), block=(1, 1, 1))
    report[f"again {n}"] = bool((again == 7).all())
"""

IN_OUT_WAITS = {
    # 64 bytes: through kiln's small pinned buffers, on the legacy default stream.
    "small Out": ("out = np.zeros(16, np.float32)",
                  "spin_out(flag, CYCLES, kiln.Out(out), np.int32(16), block=(1, 1, 1))"),
    # 4 MiB of pageable memory: device memory from the pool, copies staged.
    "large InOut": ("out = np.zeros(1 << 20, np.float32)",
                    "spin_out(flag, CYCLES, kiln.InOut(out), np.int32(1 << 20), "
                    "block=(1, 1, 1))"),
    # On a kiln.Stream a pageable output makes the driver wait for the kernel to copy back.
    "Out on a kiln.Stream": ("out = np.zeros(1 << 10, np.float32); s = kiln.Stream()",
                             "spin_out(flag, CYCLES, kiln.Out(out), np.int32(1 << 10), "
                             "block=(1, 1, 1), stream=s)"),
    # An int handle (the legacy stream's, 0): the call waits there, as on the default stream.
    "Out with stream=0": ("out = np.zeros(16, np.float32)",
                          "spin_out(flag, CYCLES, kiln.Out(out), np.int32(16), block=(1, 1, 1), "
                          "stream=0)"),
}


@pytest.mark.gpu
@pytest.mark.parametrize("name", sorted(IN_OUT_WAITS))
def test_ctrl_c_ends_a_launch_with_in_out_whose_kernel_never_ends(name):
    start, call = IN_OUT_WAITS[name]
    report, sent = interrupt_child(call, prelude=SPIN_OUT_PRELUDE + start + "\n",
                                   stop=SPIN_OUT_STOP)
    assert report["raised"] == "KeyboardInterrupt", report
    assert ("waiting for the kernel (nothing is copied back into its Out and InOut arrays); "
            "the work queued on the GPU goes on running") in report["message"]
    assert report["at"] - sent < 0.1, f"{report['at'] - sent:.3f} s after the signal"
    assert report.get("stopped")
    assert report["untouched"], "the interrupted call copied back after all"
    assert report["again 16"] and report[f"again {1 << 20}"], report


@pytest.mark.gpu
def test_ctrl_c_ends_a_timed_launch_whose_kernel_never_ends():
    report, sent = interrupt_child("spin(flag, np.int64(60_000_000_000), block=(1, 1, 1), "
                                   "time_kernel=True)", prelude=SPIN_PRELUDE, stop=SPIN_STOP)
    assert report["raised"] == "KeyboardInterrupt", report
    assert "waiting for the kernel (nothing is copied back" in report["message"]
    assert report["at"] - sent < 0.1, f"{report['at'] - sent:.3f} s after the signal"
    assert report.get("stopped")


TIMEOUT_CHILD = "import kiln\nimport numpy as np\n" + SPIN_PRELUDE + """
import json, time
out = {}
s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
launch(s)
e = kiln.Event().record(s)
for name, wait in [("stream", lambda: s.synchronize(timeout=0.2)),
                   ("event", lambda: e.synchronize(timeout=0.2)),
                   ("device", lambda: kiln.synchronize(timeout=0.2))]:
    t = time.monotonic()
    try:
        wait()
        out[name] = "returned"
    except TimeoutError as err:
        out[name] = [str(err), time.monotonic() - t]
out["busy"] = not s.query()
flag.set_async(np.ones(1, np.int32), stream=side)
s.synchronize(timeout=30)
kiln.synchronize(timeout=30)
out["done"] = s.query() and e.query()
print(json.dumps(out))
"""


@pytest.mark.gpu
def test_a_timeout_ends_a_wait_for_a_kernel_that_never_ends():
    out = run_child(TIMEOUT_CHILD, timeout=120)
    for name in ("stream", "event", "device"):
        message, took = out[name]
        assert f"the {name} did not finish within 0.2 s; the work queued on the GPU goes on " \
               "running" in message
        assert 0.2 <= took < 0.3
    assert out["busy"] and out["done"]


# ---- Stream handles ----------------------------------------------------------------------------

def _unmapped_high_page():
    """A page-aligned address near 0x7F0000001000 that nothing in this process maps now (that
    one itself can be, once enough libraries and arenas are loaded), read off /proc/self/maps."""
    spans = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            lo, hi = (int(x, 16) for x in line.split()[0].split("-"))
            spans.append((lo, hi))
    address = 0x7F0000001000
    while any(lo <= address < hi for lo, hi in spans):
        address += 4096
    return address


# Handles no stream can have: each is refused with why, before the driver could read it. None
# stands for _unmapped_high_page(), found when the test runs.
BAD_HANDLES = [
    (12345, "not an aligned address"),
    (3, "not an aligned address"),
    (None, "no readable memory is mapped there"),
    (4096, "no readable memory is mapped there"),
    (1 << 50, "above this process's address space"),
]


class Interface:
    """An object with a __cuda_array_interface__ (version 3) of four floats at ptr."""

    def __init__(self, ptr, stream=None):
        self.__cuda_array_interface__ = {"version": 3, "shape": (4,), "typestr": "<f4",
                                         "data": (ptr, False), "stream": stream}


def some_array():
    """A DeviceArray: real memory where there is a GPU, else a view that touches no driver."""
    if HAVE_GPU:
        return kiln.zeros(4, np.float32)
    return kiln.asarray(Interface(0x7F0000001000))


def tiny_kernel():
    return kiln.SourceModule('extern "C" __global__ void k(int n) {}\n',
                             arch=ARCH).get_function("k")


@pytest.mark.parametrize("handle, why", BAD_HANDLES)
def test_a_garbage_stream_handle_is_refused_everywhere(handle, why):
    if handle is None:
        handle = _unmapped_high_page()
    phrase = f"{hex(handle)} is not a CUstream handle: it is {why}" if "address" in why \
        else f"{hex(handle)} is not a CUstream handle: {why}"
    with pytest.raises(ValueError, match=phrase):
        kiln.Stream.from_handle(handle)
    with pytest.raises(ValueError, match="stream " + phrase):
        tiny_kernel()(np.int32(1), block=(1, 1, 1), stream=handle)   # before any launch
    with pytest.raises(ValueError, match="the 'stream' of its __cuda_array_interface__ "
                                         + phrase):
        kiln.asarray(Interface(0x7F0000001000, stream=handle))
    with pytest.raises(ValueError, match="stream " + phrase):
        some_array().__dlpack__(stream=handle)


class NamesHandle:
    """Another library's stream object, as PyTorch's: .cuda_stream is the handle."""

    def __init__(self, handle):
        self.cuda_stream = handle


def test_a_garbage_handle_in_a_stream_object_is_refused():
    with pytest.raises(ValueError, match="0x3039 is not a CUstream handle"):
        kiln.Stream.from_handle(NamesHandle(12345))


@pytest.mark.parametrize("handle", [0, 1, 2])
def test_the_default_streams_are_taken_as_they_are(handle):
    s = kiln.Stream.from_handle(handle)
    assert s.handle == handle and "borrowed" in repr(s)


def test_readable_host_memory_passes_the_check():
    # The check cannot tell a live stream of another library from any readable memory: what
    # it refuses is what would fault. A NumPy buffer is readable, so it passes (and is never
    # given to the driver here).
    buf = np.zeros(4, np.uint64)
    assert kiln.Stream.from_handle(buf.ctypes.data).handle == buf.ctypes.data


STALE_CHILD = """
    import gc, json
    import numpy as np
    import kiln
    out = {}
    k = kiln.SourceModule('extern "C" __global__ void k(int *p) { *p = 7; }').get_function("k")
    x = kiln.zeros(1, np.int32)
    s = kiln.Stream()
    out["same_object"] = kiln.Stream.from_handle(s) is s and \\
        kiln.Stream.from_handle(s.handle) is s
    # Another Stream over a live one keeps it: using it after the first name is gone works.
    b = kiln.Stream.from_handle(s.handle)
    h = s.handle
    del s
    k(x, block=(1, 1, 1), stream=b)
    b.synchronize()
    out["through_the_other_name"] = int(x.get()[0]) == 7
    del b
    gc.collect()
    errors = []
    for use in (lambda: k(x, block=(1, 1, 1), stream=h),
                lambda: kiln.Stream.from_handle(h),
                lambda: x.get_async(stream=h),
                lambda: kiln.Event().record(h),
                lambda: x.__dlpack__(stream=h),
                lambda: kiln.asarray(type("I", (), {"__cuda_array_interface__": dict(
                    x.__cuda_array_interface__, stream=h)})())):
        try:
            use()
            errors.append(None)
        except ValueError as e:
            errors.append(str(e))
    out["errors"] = errors
    out["handle"] = h
    s2 = kiln.Stream()           # the collected stream is handed to the next Stream
    out["reused"] = s2.handle == h
    k(x, block=(1, 1, 1), stream=h)
    s2.synchronize()
    out["works_again"] = True
    print(json.dumps(out))
"""


@pytest.mark.gpu
def test_the_handle_of_a_collected_stream_is_refused_not_crashed_on():
    out = run_child(STALE_CHILD, timeout=120)
    assert out["same_object"] and out["through_the_other_name"]
    for e in out["errors"]:
        assert e is not None and f"{hex(out['handle'])} is the handle of a kiln.Stream that " \
            "has been collected" in e, out["errors"]
    assert out["reused"] and out["works_again"]


# ---- Pool memory used on another stream ------------------------------------------------------

# Fills p[0:n] with value after about `cycles` clock cycles: a kernel still writing an array
# well after the array has been dropped.
LATE_FILL = """
extern "C" __global__ void late_fill(int *p, int value, long long cycles, int n)
{
    long long t = clock64();
    while (clock64() - t < cycles) {}
    for (int i = threadIdx.x; i < n; i += blockDim.x) p[i] = value;
}
"""
LATE = 600_000_000  # about 0.3 s of a GPU's clock


@pytest.fixture(scope="module")
def late_fill():
    return kiln.SourceModule(LATE_FILL, arch=ARCH).get_function("late_fill")


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1024, 4 << 20], ids=["kept-by-kiln", "driver-pool"])
def test_a_block_freed_while_another_stream_writes_it_is_not_reused_under_it(late_fill, n):
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)   # does not wait for the default stream
    a = kiln.zeros(n, np.int32)                        # ordered on the default stream
    late_fill(a, np.int32(7), np.int64(LATE), np.int32(n), block=(256, 1, 1), stream=s)
    ptr = a.ptr
    del a                                              # freed while s still writes to it
    b = kiln.zeros(n, np.int32)                        # the default stream again
    if n == 1024:
        assert b.ptr == ptr                            # the same block, kept by kiln
    s.synchronize()
    got = b.get()
    assert (got == 0).all(), f"{int((got == 7).sum())} elements written by the other stream"


@pytest.mark.gpu
def test_a_block_used_on_two_other_streams_waits_for_both(late_fill):
    n = 1024
    s1 = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    s2 = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    a = kiln.zeros(n, np.int32)
    late_fill(a, np.int32(7), np.int64(LATE), np.int32(n), block=(256, 1, 1), stream=s1)
    late_fill(a, np.int32(8), np.int64(1000), np.int32(n), block=(256, 1, 1), stream=s2)
    del a
    b = kiln.zeros(n, np.int32)
    s1.synchronize()
    s2.synchronize()
    got = b.get()
    assert (got == 0).all(), f"{int((got != 0).sum())} elements written by the other streams"


@pytest.mark.gpu
def test_a_block_waits_for_its_last_use_of_many_on_another_stream(late_fill):
    # Uses on a kiln.Stream are put into the event when the block is freed, not after each
    # call: the last, slow, call must still be waited for.
    n = 1024
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    a = kiln.zeros(n, np.int32)
    for _ in range(10):
        late_fill(a, np.int32(1), np.int64(1000), np.int32(n), block=(256, 1, 1), stream=s)
    late_fill(a, np.int32(7), np.int64(LATE), np.int32(n), block=(256, 1, 1), stream=s)
    del a
    b = kiln.zeros(n, np.int32)
    s.synchronize()
    got = b.get()
    assert (got == 0).all(), f"{int((got != 0).sum())} elements written by the other stream"


@pytest.mark.gpu
def test_a_block_used_on_a_stream_collected_before_it_waits_for_that_use(late_fill):
    n = 1024
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    a = kiln.zeros(n, np.int32)
    late_fill(a, np.int32(7), np.int64(LATE), np.int32(n), block=(256, 1, 1), stream=s)
    del s                                              # its handle is parked, still queued
    gc.collect()
    del a
    b = kiln.zeros(n, np.int32)
    kiln.synchronize()
    got = b.get()
    assert (got == 0).all(), f"{int((got != 0).sum())} elements written by the other stream"


@pytest.mark.gpu
def test_a_block_used_on_another_librarys_stream_waits_for_it(late_fill):
    torch = pytest.importorskip("torch")
    n = 1024
    t = torch.cuda.Stream()
    a = kiln.zeros(n, np.int32)
    late_fill(a, np.int32(7), np.int64(LATE), np.int32(n), block=(256, 1, 1), stream=t)
    del a
    b = kiln.zeros(n, np.int32)
    t.synchronize()
    got = b.get()
    assert (got == 0).all(), f"{int((got != 0).sum())} elements written by the other stream"


FOREIGN_HOME_CHILD = """
    import gc, json
    import numpy as np
    import cupy as cp
    import kiln
    cs = cp.cuda.Stream(non_blocking=True)
    a = kiln.zeros(1024, np.int32, stream=cs)          # small: a block kiln keeps when freed
    big = kiln.zeros(1 << 20, np.int32, stream=cs)
    del a, big
    cs.synchronize()
    del cs                                              # CuPy destroys the stream
    gc.collect()
    others = [cp.cuda.Stream(non_blocking=True) for _ in range(4)]
    kiln.pool_trim()                                    # frees every kept block
    b = kiln.zeros(1024, np.int32)
    print(json.dumps({"zeros": bool((b.get() == 0).all())}))
"""


@pytest.mark.gpu
def test_memory_made_on_a_stream_another_library_destroys_is_freed_safely():
    pytest.importorskip("cupy")
    assert run_child(FOREIGN_HOME_CHILD, timeout=120)["zeros"]


@pytest.mark.gpu
def test_a_block_used_by_a_queued_copy_on_another_stream_waits_for_it():
    n = 1 << 18
    s = kiln.Stream(flags=kiln.STREAM_NON_BLOCKING)
    spin = kiln.SourceModule(SPIN_KERNEL, arch=ARCH).get_function("spin_for")
    spin(np.int64(LATE), block=(1, 1, 1), stream=s)    # holds s for about 0.3 s
    a = kiln.zeros(n, np.int32)
    h = kiln.pagelocked_empty(n, np.int32)
    h[:] = 5
    a.set_async(h, stream=s)                           # queued behind the spin
    del a
    b = kiln.zeros(n, np.int32)
    s.synchronize()
    assert (b.get() == 0).all()


SPIN_KERNEL = """
extern "C" __global__ void spin_for(long long cycles)
{ long long t = clock64(); while (clock64() - t < cycles) {} }
"""


@pytest.mark.gpu
def test_pool_memory_on_its_own_stream_needs_no_event(late_fill):
    # The common case: made, used and freed on one stream; reused at once, no event made.
    s = kiln.Stream()
    a = kiln.zeros(1024, np.int32, stream=s)
    late_fill(a, np.int32(3), np.int64(1000), np.int32(1024), block=(256, 1, 1), stream=s)
    ptr = a.ptr
    del a
    b = kiln.zeros(1024, np.int32, stream=s)
    assert b.ptr == ptr
    s.synchronize()
    assert (b.get() == 0).all()


# ---- What a short wait costs -------------------------------------------------------------------

SHORT_WAIT_CHILD = """
    import ctypes, json, statistics, time
    import numpy as np
    import kiln
    k = kiln.SourceModule('extern "C" __global__ void tick(long long cycles)'
                          '{ long long t = clock64(); while (clock64() - t < cycles) {} }'
                          ).get_function("tick")
    cuda = ctypes.CDLL("libcuda.so.1")
    cuda.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    cuda.cuCtxSynchronize.argtypes = []
    s = kiln.Stream()
    cycles = np.int64(20_000)       # about 10 us of GPU clock
    waits = {
        "driver_stream": lambda: cuda.cuStreamSynchronize(ctypes.c_void_p(s.handle)),
        "stream": s.synchronize,
        "driver_device": lambda: cuda.cuCtxSynchronize(),
        "device": kiln.synchronize,
    }
    out = {}
    for name, wait in waits.items():
        times = []
        for i in range(3000):
            k(cycles, block=(1, 1, 1), stream=s)
            t = time.perf_counter()
            wait()
            if i >= 500:
                times.append(time.perf_counter() - t)
        out[name] = statistics.median(times) * 1e6
    print(json.dumps(out))
"""


@pytest.mark.gpu
def test_a_short_wait_costs_what_the_drivers_does():
    # The median wait for a kernel of about 10 us, in microseconds: kiln's polling against the
    # driver's own synchronize called through ctypes (whose call costs about a microsecond).
    out = run_child(SHORT_WAIT_CHILD, timeout=300)
    assert out["stream"] < out["driver_stream"] + 3, out
    # A whole device's wait records and polls an event, then makes the driver's call.
    assert out["device"] < out["driver_device"] + 5, out
