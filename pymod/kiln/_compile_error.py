"""The message of kiln.CompileError: NVRTC's log, then the source lines it points at."""
import re

# NVRTC names the program kernel.cu: "kernel.cu(12): error: identifier "x" is undefined"
_LOCATION = re.compile(r"^kernel\.cu\((\d+)\): (error|warning)", re.MULTILINE)

_CONTEXT = 1  # lines shown before and after each one the log points at

# A header of the toolkit that includes one of the host's C++ headers, which NVRTC lacks:
# "/usr/local/cuda/include/cccl/thrust/detail/memory_wrapper.h(39): catastrophic error: cannot
# open source file "memory"". The source's own line is not in the log.
_HOST_HEADER = re.compile(r'^(\S+)\(\d+\): catastrophic error: cannot open source file "([^"]+)"',
                          re.MULTILINE)


# A host function of a toolkit header (CUB's device-wide algorithms), which NVRTC refuses.
_HOST_FUNCTION = re.compile(r"^(\S+)\(\d+\): error: A function explicitly marked as a __host__ "
                            r"function is not allowed in JIT mode", re.MULTILINE)


def _host_header_hint(log):
    m = _HOST_HEADER.search(log)
    if m and m.group(1) != "kernel.cu" and "." not in m.group(2):
        where, needs = m.group(1), f"needs the host's <{m.group(2)}>, which NVRTC does not have"
    else:
        m = _HOST_FUNCTION.search(log)
        if not m or m.group(1) == "kernel.cu":
            return ""
        where, needs = m.group(1), "holds host code, which NVRTC does not compile"
    if "/thrust/" in where or "/cub/" in where:
        what = ("thrust's containers and algorithms and CUB's device-wide ones "
                "(<thrust/device_vector.h>, <thrust/sort.h>, <cub/cub.cuh>, <cub/device/...>) "
                "are host code; a kernel can use thrust's device-side headers "
                "(<thrust/functional.h>) and CUB's block and warp headers "
                "(<cub/block/block_reduce.cuh>)")
    else:
        what = "the header is meant for the host compiler"
    if "complex" in needs:  # <thrust/complex.h>, <complex>
        what += ("; complex numbers in a kernel come with <pycuda-complex.hpp> (pycuda::complex) "
                 "or <cuComplex.h>")
    return f"\n\nA header the source includes {needs}: {what} (docs/sourcemodule.md, C++ headers)."


# A one-argument static_assert is C++17's; headers written for nvcc use it under -std=c++14,
# which NVRTC refuses (in a process's first compile; it takes it in later ones).
_STATIC_ASSERT = "the one-argument version of static_assert is not enabled in this mode"


def _dialect_hint(log):
    if _STATIC_ASSERT not in log:
        return ""
    return ("\n\nA static_assert without a message is C++17's: compile with -std=c++17 (NVRTC's "
            "default), or give it a message (static_assert(x, \"...\")).")


def message(log, source):
    lines = source.splitlines()
    wanted = sorted({int(m.group(1)) for m in _LOCATION.finditer(log) if m.group(2) == "error"})
    text = ("NVRTC could not compile the source:\n" + log.rstrip() + _host_header_hint(log)
            + _dialect_hint(log))
    if not wanted or not lines:
        return text
    shown = set()
    for n in wanted:
        shown.update(range(max(1, n - _CONTEXT), min(len(lines), n + _CONTEXT) + 1))
    width = len(str(max(shown))) if shown else 1
    out, last = [], None
    for n in sorted(shown):
        if last is not None and n != last + 1:
            out.append("  " + "." * width)
        marker = ">" if n in wanted else " "
        out.append(f"{marker} {n:>{width}} | {lines[n - 1]}")
        last = n
    return text + "\n\nin the source:\n" + "\n".join(out)


def again(cls, error, text):
    """A CompileError of cls saying text, with error's log and PyCUDA's names for it (as the
    extension sets them: .stderr the log, .stdout '', .command_line error's, .msg the text)."""
    err = cls(text)
    err.log = err.stderr = error.log
    err.stdout, err.msg = "", text
    err.command_line = getattr(error, "command_line", None) or ["nvrtc"]
    return err


def init(self, msg, command_line=None, stdout=None, stderr=None):
    """CompileError(msg, command_line, stdout=None, stderr=None), PyCUDA's constructor, for a
    program or library that raises one of its own: each argument is kept as the attribute of its
    name, .log is stderr. kiln's own errors give the message alone and set the rest after (the
    extension, again above)."""
    Exception.__init__(self, msg)
    self.msg, self.command_line, self.stdout, self.stderr = msg, command_line, stdout, stderr
    self.log = stderr if isinstance(stderr, str) else ""
    self._given = (command_line, stdout, stderr)


def text(self):
    """str() of a CompileError: its message, then, as PyCUDA's adds them, the command line and
    what the compiler printed where the constructor was given them (kiln's own message holds
    NVRTC's log already)."""
    result = str(self.args[0]) if self.args else ""
    command, stdout, stderr = getattr(self, "_given", (None, None, None))
    if command:
        result += "\n[command: %s]" % (" ".join(command) if isinstance(command, (list, tuple))
                                       else command)
    if stdout:
        result += "\n[stdout:\n%s]" % stdout
    if stderr:
        result += "\n[stderr:\n%s]" % stderr
    return result
