#!/usr/bin/env python3
"""kiln's C files against .clang-format, with the clang-format the Makefile pins.

    python3 tools/format.py check VERSION   # a count of the files that differ, and a diff
    python3 tools/format.py fix VERSION     # rewrites them in place

VERSION is the pinned clang-format (the PyPI package `clang-format`, which `make lint-tools`
installs); a different one is refused, so that everyone formats alike. check runs it with
--dry-run -Werror on each file, then shows the first lines of what it would change.
"""
import difflib
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ("engine", "pymod/_kiln", "tests/c", "tests/fuzz", "bench/c", "bench/floor",
           "bench/fakecuda")
SHOWN = 60  # diff lines shown


def files(root=ROOT):
    return sorted(p for folder in FOLDERS for p in (root / folder).rglob("*")
                  if p.suffix in (".c", ".h") and p.is_file())


def executable(version):
    """The pinned clang-format binary; exits saying why when it is missing or another one."""
    try:
        import clang_format
    except ImportError:
        sys.exit(f"format: clang-format {version} from PyPI is not installed; make lint-tools "
                 "installs it")
    binary = clang_format.get_executable("clang-format")
    got = subprocess.run([binary, "--version"], capture_output=True, text=True).stdout
    if f"version {version}" not in got:
        sys.exit(f"format: want clang-format {version}, found {got.strip() or binary}; make "
                 "lint-tools installs the pinned one")
    return binary


def check(binary, paths, root=ROOT):
    """Prints what differs; the number of files that do."""
    differ = [p for p in paths
              if subprocess.run([binary, "--dry-run", "-Werror", "--ferror-limit=1", str(p)],
                                capture_output=True).returncode != 0]
    if not differ:
        print(f"format: the {len(paths)} C files match .clang-format")
        return 0
    lines = []
    for p in differ:
        name = str(p.relative_to(root))
        formatted = subprocess.run([binary, str(p)], capture_output=True, text=True,
                                   check=True).stdout
        lines += difflib.unified_diff(p.read_text().splitlines(), formatted.splitlines(),
                                      f"a/{name}", f"b/{name}", lineterm="")
    names = [str(p.relative_to(root)) for p in differ]
    more = f" and {len(names) - 8} more" if len(names) > 8 else ""
    print(f"format: {len(differ)} of {len(paths)} C files differ from .clang-format "
          f"(`make format` rewrites them): {', '.join(names[:8])}{more}")
    print("\n".join(lines[:SHOWN]))
    if len(lines) > SHOWN:
        print(f"... and {len(lines) - SHOWN} more diff lines")
    return len(differ)


def main(argv):
    if len(argv) != 3 or argv[1] not in ("check", "fix"):
        sys.exit(__doc__)
    binary = executable(argv[2])
    paths = files()
    if argv[1] == "fix":
        subprocess.run([binary, "-i", *map(str, paths)], check=True)
        print(f"format: {len(paths)} C files formatted")
        return 0
    return 1 if check(binary, paths) else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
