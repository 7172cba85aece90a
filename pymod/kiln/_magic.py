"""kiln in IPython and Jupyter: `%load_ext kiln`, then a `%%kiln` cell of CUDA source.

    %%kiln -DN=256 -std=c++17
    __global__ void scale(float *x, float a) { x[threadIdx.x] *= a; }

compiles the cell (the magic line's words are compile options, as SourceModule's `options`) and
binds each kernel by its plain name in the notebook's namespace (`scale` above); `--module NAME`
binds the Module as well, and `--arch sm_80` names the arch (SourceModule's `arch=`). A cell run
again unchanged gives back the same Module and Functions. A cell that does not compile shows
NVRTC's log and the cell's lines it points at, with no Python traceback.

Loaded in a Jupyter kernel, the extension also brings kernels' printf into the notebook: the
driver writes it to the process's file descriptor 1 when a synchronizing call flushes the
device's buffer, which a kernel process does not show in the cell. While the extension is
loaded, descriptor 1 is a pipe; whatever came through it is written to sys.stdout before each
thing Python writes there and at the end of each cell, so it shows in the cell that ran the
kernel, in order with Python's own prints. Where sys.stdout is descriptor 1 itself (a terminal
IPython) nothing needs doing and nothing is changed.
"""
import codecs
import ctypes
import fcntl
import os
import select
import shlex
import sys
import threading

from . import _compile_error
from ._kiln import CompileError, SourceModule, _launch_count, synchronize
from ._kiln import Error as _KilnError

# Compiled cells by (source, options): an unchanged cell gives back its Module.
_CELL_CACHE_SIZE = 64


class CellCompileError(CompileError):
    """A %%kiln cell that did not compile. IPython shows it as the lines of its message alone:
    NVRTC's log and the cell's lines it names (the line numbers count the cell's source lines,
    the magic line not among them)."""

    def _render_traceback_(self):
        return str(self).splitlines()


def plain_name(entry):
    """The name a kernel was declared with, from its PTX entry name: 'scale' from 'scale' or
    from a C++ mangled '_Z5scalePff', the last part of a nested '_ZN2ns5scaleEPf'."""
    if not entry.startswith("_Z"):
        return entry
    i, nested = 2, entry.startswith("_ZN")
    if nested:
        i += 1
        while i < len(entry) and entry[i] in "rVKLO":  # qualifiers of a nested name
            i += 1
    last = None
    while i < len(entry) and entry[i].isdigit():
        j = i
        while j < len(entry) and entry[j].isdigit():
            j += 1
        n = int(entry[i:j])
        last, i = entry[j:j + n], j + n
        if not nested:
            break
        if i < len(entry) and entry[i] == "I":  # a template's arguments follow a name
            break
    return last or entry


def bind_kernels(module, namespace):
    """Puts each kernel of module into namespace under its plain name; a plain name that
    several kernels share (template instances, overloads) is left out. Returns the names
    bound, in the module's order."""
    seen = {}
    for entry in module.kernels:
        seen.setdefault(plain_name(entry), []).append(entry)
    bound = []
    for name, entries in seen.items():
        if len(entries) != 1 or not name.isidentifier():
            continue
        namespace[name] = module.get_function(entries[0])
        bound.append(name)
    return bound


def parse_line(line):
    """The magic line: (options for the compiler, the name to bind the Module to or None, the
    arch or None). `--module NAME` and `--arch NAME` are the magic's own words; an nvcc -arch
    among the options gives way to the device's, as in SourceModule."""
    words = shlex.split(line)
    options, own, i = [], {"--module": None, "--arch": None}, 0
    while i < len(words):
        w = words[i]
        word = w.split("=", 1)[0]
        if word in own:
            if w == word:
                if i + 1 >= len(words):
                    raise ValueError(f"%%kiln {word} takes a value: {word} {word[2:].upper()}")
                i += 1
                own[word] = words[i]
            else:
                own[word] = w.split("=", 1)[1]
        else:
            options.append(w)
        i += 1
    module_name = own["--module"]
    if module_name is not None and not module_name.isidentifier():
        raise ValueError(f"%%kiln --module {module_name!r}: not a Python name")
    return options, module_name, own["--arch"]


class _Fd1Capture:
    """Descriptor 1 made a pipe whose contents `drain` gives back, in order. A thread empties
    the pipe as it fills, so a kernel's long output never blocks the driver writing it."""

    def __init__(self):
        self._lock = threading.Lock()
        self._buf = bytearray()
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")
        self._libc = ctypes.CDLL(None)
        self._libc.fflush(None)  # what C code buffered so far belongs to the old descriptor
        self._saved = os.dup(1)
        read, write = os.pipe()
        os.set_blocking(read, False)
        # The thread that empties the pipe needs the GIL; a call that waits for the GPU without
        # releasing it would block on a full pipe. The device's printf buffer holds 1 MiB by
        # default, so a pipe of that size takes one flush whole (where Linux allows it).
        try:
            fcntl.fcntl(write, getattr(fcntl, "F_SETPIPE_SZ", 1031), 1 << 20)
        except OSError:
            pass
        os.dup2(write, 1)
        os.close(write)
        self._read = read
        self._wake_read, self._wake_write = os.pipe()
        self._thread = threading.Thread(target=self._pump, name="kiln-fd1", daemon=True)
        self._thread.start()

    def _take(self):
        while True:
            try:
                chunk = os.read(self._read, 1 << 16)
            except BlockingIOError:
                return
            if not chunk:
                return
            self._buf += chunk

    def _pump(self):
        while True:
            ready, _, _ = select.select([self._read, self._wake_read], [], [])
            if self._wake_read in ready:
                return
            with self._lock:
                self._take()

    def drain(self):
        """Everything written to descriptor 1 so far (C's stdio buffers flushed first)."""
        self._libc.fflush(None)
        with self._lock:
            self._take()  # a write to a pipe is whole once it returns: nothing is in flight
            data = bytes(self._buf)
            self._buf.clear()
        return self._decoder.decode(data) if data else ""

    def close(self):
        """Gives descriptor 1 back; returns what was still in the pipe."""
        rest = self.drain()
        os.dup2(self._saved, 1)
        os.close(self._saved)
        os.write(self._wake_write, b"x")
        self._thread.join()
        for fd in (self._read, self._wake_read, self._wake_write):
            os.close(fd)
        return rest + self._decoder.decode(b"", final=True)


class _OrderedStdout:
    """sys.stdout as it was, with what came through descriptor 1 written first at each write,
    so that output made before a print shows before it."""

    def __init__(self, stream, capture):
        self._stream = stream
        self._capture = capture

    def write(self, text):
        pending = self._capture.drain()
        if pending:
            self._stream.write(pending)
        return self._stream.write(text)

    def flush_pending(self):
        pending = self._capture.drain()
        if pending:
            self._stream.write(pending)
            self._stream.flush()

    def __getattr__(self, name):  # flush, set_parent, encoding, ... of the stream beneath
        return getattr(self._stream, name)


def _stdout_is_fd1():
    try:
        return sys.stdout.fileno() == 1
    except (AttributeError, OSError, ValueError):  # io.UnsupportedOperation is an OSError
        return False


class KilnMagics:
    """The %%kiln magic and the printf capture of one IPython shell."""

    def __init__(self, shell):
        self.shell = shell
        self.cells = {}
        self.capture = None
        self.stdout = None
        self.launches_at_start = 0

    # ---- %%kiln ------------------------------------------------------------------------------

    def cell_magic(self, line, cell):
        try:
            options, module_name, arch = parse_line(line)
        except ValueError as e:
            from IPython.core.error import UsageError
            raise UsageError(str(e)) from None
        key = (cell, tuple(options), arch)
        module = self.cells.get(key)
        if module is None:
            try:
                module = SourceModule(cell, options=options, arch=arch)
            except CompileError as e:
                raise _compile_error.again(CellCompileError, e, str(e)) from None
            if len(self.cells) >= _CELL_CACHE_SIZE:
                self.cells.pop(next(iter(self.cells)))
            self.cells[key] = module
        bind_kernels(module, self.shell.user_ns)
        if module_name:
            self.shell.user_ns[module_name] = module

    # ---- printf in the cell ------------------------------------------------------------------

    def start_capture(self):
        if self.capture is not None or _stdout_is_fd1():
            return
        self.capture = _Fd1Capture()
        self.stdout = _OrderedStdout(sys.stdout, self.capture)
        sys.stdout = self.stdout

    def stop_capture(self):
        if self.capture is None:
            return
        rest = self.capture.close()
        if sys.stdout is self.stdout:
            sys.stdout = self.stdout._stream
        if rest:
            sys.stdout.write(rest)
        self.capture = self.stdout = None

    def pre_run_cell(self, *args):
        self.launches_at_start = _launch_count()

    def post_run_cell(self, *args):
        if self.capture is None:
            return
        if _launch_count() != self.launches_at_start:
            # The cell's kernels may still run; their printf shows when they are waited for,
            # and this cell is where it belongs. A fault is sticky: the next call raises it,
            # naming the kernel, so here it only gets a line.
            try:
                synchronize()
            except _KilnError as e:
                print(f"kiln: a kernel this cell launched failed: {e}", file=sys.stderr)
        self.stdout.flush_pending()


_magics = {}


def load_ipython_extension(ipython):
    if id(ipython) in _magics:
        return
    m = KilnMagics(ipython)
    ipython.register_magic_function(m.cell_magic, magic_kind="cell", magic_name="kiln")
    ipython.events.register("pre_run_cell", m.pre_run_cell)
    ipython.events.register("post_run_cell", m.post_run_cell)
    m.start_capture()
    _magics[id(ipython)] = m


def unload_ipython_extension(ipython):
    m = _magics.pop(id(ipython), None)
    if m is None:
        return
    ipython.events.unregister("pre_run_cell", m.pre_run_cell)
    ipython.events.unregister("post_run_cell", m.post_run_cell)
    m.stop_capture()
    ipython.magics_manager.magics["cell"].pop("kiln", None)
