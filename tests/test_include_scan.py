"""The include scanner against NVRTC's preprocessor: every header NVRTC can open must be one
the scan hashed, or an edit to it would be served stale from the cache. Checked by the forms
that once slipped through, and by a fuzzer that logs the files NVRTC opens (strace) and edits
each one."""
import json
import os
import pathlib
import random
import re
import shutil
import subprocess
import sys
import textwrap

import pytest

import kiln

PYMOD = pathlib.Path(kiln.__file__).resolve().parent.parent
BODY = 'extern "C" __global__ void k(int *p) { *p = K; }\n'


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """A fresh cache, and a working folder holding h.h and inc/h.h."""
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("KILN_CACHE_PATH", raising=False)
    monkeypatch.delenv("KILN_CACHE", raising=False)
    work = tmp_path / "work"
    (work / "inc").mkdir(parents=True)
    monkeypatch.chdir(work)
    return work


def set_k(work, value):
    for h in (work / "h.h", work / "inc" / "h.h"):
        h.write_text(f"#define K {value}\n")


# Each spelling once served the code of a header's old contents after an edit.
FORMS = {
    "comment between # and include": ('#/**/include "h.h"\n', []),
    "splice after #": ('# \\\ninclude "h.h"\n', []),
    "splice inside include": ('#inc\\\nlude "h.h"\n', []),
    "crlf splice": ('#\\\r\ninclude "h.h"\r\n', []),
    "digraph": ('%:include "h.h"\n', []),
    "trigraph": ('??=include "h.h"\n', ["-std=c++11"]),
    "trigraph splice": ('#inc??/\nlude "h.h"\n', ["-std=c++11"]),
    "directive after a comment over lines": ('__device__ int a; /*\n*/ #include "h.h"\n', []),
    "comment over lines before the name": ('#include /*\n*/ "h.h"\n', []),
    "string that holds a comment opener": ('__device__ const char *s = "/*";\n'
                                           '#include "h.h"\n// */\n', []),
    "digit separator": ("__device__ int n = 1'000; __device__ char c = '\"';\n"
                        '#include "h.h"\n', []),
    "-include=h.h": ("", ["-include=h.h"]),
    "-include h.h": ("", ["-include", "h.h"]),
    "--pre-include=h.h": ("", ["--pre-include=h.h"]),
    "--pre-include h.h": ("", ["--pre-include", "h.h"]),
    "-I=inc": ("#include <h.h>\n", ["-I=inc"]),
    "-I inc in one option": ("#include <h.h>\n", ["-I inc"]),
    "-I then inc": ("#include <h.h>\n", ["-I", "inc"]),
    "-Iinc": ("#include <h.h>\n", ["-Iinc"]),
    "--include-path=inc": ("#include <h.h>\n", ["--include-path=inc"]),
    "--include-path then inc": ("#include <h.h>\n", ["--include-path", "inc"]),
    "__has_include with a comment": ("#if __has_include /**/ (<h.h>)\n#endif\n#include <h.h>\n",
                                     ["-Iinc"]),
}


@pytest.mark.parametrize("form", list(FORMS))
def test_an_edited_header_is_seen_in_the_same_process(sandbox, form):
    pre, options = FORMS[form]
    set_k(sandbox, 101)
    a = kiln.SourceModule(pre + BODY, options=options, arch="sm_80")
    set_k(sandbox, 202)
    b = kiln.SourceModule(pre + BODY, options=options, arch="sm_80")
    assert ", 101;" in a.ptx and ", 202;" in b.ptx


CHILD = textwrap.dedent("""
    import json, os, kiln
    m = kiln.SourceModule(os.environ["SRC"], options=json.loads(os.environ["OPTIONS"]),
                          arch="sm_80")
    print(json.dumps({"ptx": m.ptx, "stats": kiln.cache_stats()}))
""")


def child(src, options, cwd):
    r = subprocess.run([sys.executable, "-c", CHILD], cwd=cwd, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(PYMOD), SRC=src,
                                             OPTIONS=json.dumps(options)))
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


@pytest.mark.parametrize("form", ["comment between # and include", "splice after #", "digraph",
                                  "trigraph", "-include=h.h", "-I=inc"])
def test_an_edited_header_is_seen_by_a_new_process(sandbox, form):
    pre, options = FORMS[form]
    set_k(sandbox, 303)
    first = child(pre + BODY, options, sandbox)
    assert ", 303;" in first["ptx"] and first["stats"]["stores"] == 1
    assert child(pre + BODY, options, sandbox)["stats"]["disk_hits"] == 1
    set_k(sandbox, 404)
    edited = child(pre + BODY, options, sandbox)
    assert ", 404;" in edited["ptx"] and edited["stats"]["compiles"] == 1


def test_a_splice_in_the_word_include_keys_by_the_working_folder(sandbox, tmp_path):
    # The source never spells "include", yet its header is found relative to the folder.
    src = '#inc\\\nlude "h.h"\n' + BODY
    other = tmp_path / "other"
    other.mkdir()
    (other / "h.h").write_text("#define K 9\n")
    set_k(sandbox, 8)
    assert ", 8;" in child(src, [], sandbox)["ptx"]
    assert ", 9;" in child(src, [], other)["ptx"]


# ---- the fuzzer ---------------------------------------------------------------------------

# Runs one compile under strace and prints the files NVRTC opened. kiln's own scan opens with
# O_NONBLOCK; NVRTC with plain O_RDONLY, which is how the two are told apart.
NAMES = ["h0.h", "h1.h", "h2.h", "sub/h3.h"]
SPELLINGS = ["#", "%:", "??=", "#/**/", "# \\\n", "#\\\r\n", "/* c\n */ #", "  #  ", "#inc\\\nlude"]


def include_line(rng, std11):
    hash_ = rng.choice(SPELLINGS if std11 else [s for s in SPELLINGS if "??" not in s])
    word = "" if hash_.endswith("lude") else rng.choice(["include", "inc\\\nlude"])
    sep = rng.choice([" ", "/**/", "\t", " /* a\n b */ ", "\\\n "])
    name = rng.choice(NAMES)
    name = f'"{name}"' if rng.random() < 0.5 else f"<{name}>"
    line = f"{hash_}{word}{sep}{name}\n"
    wrap = rng.choice(["{}", "#if 0\n{}#endif\n", "#ifdef NEVER_DEFINED\n{}#endif\n",
                       "#if __has_include(" + name + ")\n{}#endif\n"])
    return wrap.format(line)


def context_line(rng, std11, n):
    choices = ["", f'__device__ const char *s{n} = "/*";\n', "// a comment\n",
               "/* a block\n comment */\n", f'__device__ const char *r{n} = R"x(/* )x";\n',
               f"__device__ char c{n} = '\"';\n"]
    if not std11:
        choices.append(f"__device__ int d{n} = 1'000;\n")
    return rng.choice(choices)


def make_case(rng, root):
    std11 = rng.random() < 0.3
    for folder in (root, root / "inc"):
        for i, name in enumerate(NAMES):
            path = folder / name
            path.parent.mkdir(parents=True, exist_ok=True)
            nested = "".join(include_line(rng, std11) for _ in range(rng.randrange(2)))
            path.write_text(f"#pragma once\n{nested}#define H{i} {rng.randrange(1000)}\n")
    src = "".join(context_line(rng, std11, n) + include_line(rng, std11)
                  for n in range(rng.randrange(1, 4))) + 'extern "C" __global__ void k() {}\n'
    options = ["-std=c++11"] if std11 else []
    options += rng.choice([[], ["-I=inc"], ["-Iinc"], ["-I inc"], ["--include-path=inc"],
                           ["-I", "inc"]])
    options += rng.choice([[], [], ["-include=h0.h"], ["--pre-include=h1.h"],
                           ["-include", "inc/h2.h"]])
    return src, options


OPENS = re.compile(r'open(?:at)?\((?:AT_FDCWD, )?"([^"]+)", ([A-Z_|]+)[^)]*\)\s+= (\d+)')


def nvrtc_opened(src, options, root):
    """The files under root that NVRTC opened while kiln compiled src, by strace."""
    log = root.parent / "strace.log"
    code = ("import json, os, kiln\n"
            "try:\n"
            "    kiln.SourceModule(os.environ['SRC'], options=json.loads(os.environ['OPTIONS']),"
            " arch='sm_80')\n"
            "    print('compiled')\n"
            "except kiln.CompileError:\n"
            "    print('refused')\n")
    r = subprocess.run(["strace", "-f", "-qq", "-e", "trace=open,openat", "-o", str(log),
                        sys.executable, "-c", code], cwd=root, capture_output=True, text=True,
                       timeout=120, env=dict(os.environ, PYTHONPATH=str(PYMOD), SRC=src,
                                             OPTIONS=json.dumps(options), KILN_CACHE="0"))
    assert r.returncode == 0, r.stderr
    opened = set()
    for m in OPENS.finditer(log.read_text()):
        path, flags = m.group(1), m.group(2)
        if "O_NONBLOCK" in flags:
            continue  # kiln's own scan
        full = (root / path).resolve()
        if full.is_relative_to(root.resolve()) and full.is_file():
            opened.add(full)
    return r.stdout.strip() == "compiled", opened


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace to see what NVRTC opens")
def test_fuzz_every_header_nvrtc_opens_was_hashed(tmp_path, monkeypatch):
    """Random sources and options; for each file NVRTC opened, an edit to it must make the
    next SourceModule a compile. KILN_FUZZ_CASES sets how many (default 12)."""
    cases = int(os.environ.get("KILN_FUZZ_CASES", "12"))
    rng = random.Random(int(os.environ.get("KILN_FUZZ_SEED", "20261122")))
    checked = compiled = 0
    for case in range(cases):
        root = tmp_path / f"case{case}" / "work"
        root.mkdir(parents=True)
        src, options = make_case(rng, root)
        ok, opened = nvrtc_opened(src, options, root)
        if not ok:
            continue  # NVRTC refused it: nothing is cached to go stale
        compiled += 1
        monkeypatch.chdir(root)
        monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path / f"case{case}" / "cache"))
        kiln.SourceModule(src, options=options, arch="sm_80")
        for path in sorted(opened):
            before = kiln.cache_stats()["compiles"]
            with open(path, "a") as f:
                f.write("// edited\n")
            kiln.SourceModule(src, options=options, arch="sm_80")
            assert kiln.cache_stats()["compiles"] == before + 1, (
                f"case {case}: NVRTC opened {path.relative_to(root)} but an edit to it was not "
                f"seen\nsource:\n{src}\noptions: {options}")
            checked += 1
    assert compiled >= cases // 2, f"only {compiled} of {cases} cases compiled"
    print(f"fuzz: {cases} cases, {compiled} compiled, {checked} headers edited and seen")
