"""The message of kiln.CompileError: NVRTC's log, then the source lines it points at."""
import re

# NVRTC names the program kernel.cu: "kernel.cu(12): error: identifier "x" is undefined"
_LOCATION = re.compile(r"^kernel\.cu\((\d+)\): (error|warning)", re.MULTILINE)

_CONTEXT = 1  # lines shown before and after each one the log points at


def message(log, source):
    lines = source.splitlines()
    wanted = sorted({int(m.group(1)) for m in _LOCATION.finditer(log) if m.group(2) == "error"})
    text = "NVRTC could not compile the source:\n" + log.rstrip()
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
    extension sets them: .stderr the log, .stdout '', .command_line None, .msg the text)."""
    err = cls(text)
    err.log = err.stderr = error.log
    err.stdout, err.command_line, err.msg = "", None, text
    return err
