"""The memo behind a repeated SourceModule(src): the same str and arguments find the module
without the source being hashed, and never anything a compile of those arguments would not
give. NVRTC needs no GPU; the tests marked gpu launch what the memo gave."""
import gc
import logging
import os
import threading
import time

import numpy as np
import pytest

import kiln
from helpers import ARCH, run_in_threads

_serial = iter(range(10**9))


def fresh(body="*p = VALUE;", params="int *p"):
    """A source no other test compiles: its kernel k(params) runs body."""
    return (f"// memo test {os.getpid()} {time.time_ns()} {next(_serial)}\n"
            f'extern "C" __global__ void k({params}) {{ {body} }}\n')


def memory_hits():
    return kiln.cache_stats()["memory_hits"]


def test_a_repeated_source_is_a_memory_hit_each_time():
    src = fresh("*p = 1;")
    first = kiln.SourceModule(src, arch=ARCH)
    before = memory_hits()
    again = [kiln.SourceModule(src, arch=ARCH) for _ in range(5)]
    assert memory_hits() == before + 5
    assert all(m.ptx == first.ptx and m.kernels == first.kernels for m in again)
    # An equal str that is another object finds the same entry.
    copy = "".join(list(src))
    assert copy is not src
    before = memory_hits()
    assert kiln.SourceModule(copy, arch=ARCH).ptx == first.ptx
    assert memory_hits() == before + 1


@pytest.mark.parametrize("name, a, b", [
    ("options", {"options": ["-DVALUE=1"]}, {"options": ["-DVALUE=2"]}),
    ("options as a tuple", {"options": ("-DVALUE=1",)}, {"options": ("-DVALUE=2",)}),
    ("arch", {"arch": "sm_80", "options": ["-DVALUE=1"]},
     {"arch": "sm_90", "options": ["-DVALUE=1"]}),
    ("code", {"code": "sm_80", "options": ["-DVALUE=1"]},
     {"code": "sm_90", "options": ["-DVALUE=1"]}),
    ("headers", {"headers": {"v.h": "#define VALUE 1\n"}},
     {"headers": {"v.h": "#define VALUE 2\n"}}),
])
def test_different_arguments_never_share_an_entry(name, a, b):
    body = '*p = VALUE;'
    src = fresh(body)
    if name == "headers":
        src = '#include "v.h"\n' + src
    base = {"arch": ARCH} if "arch" not in a and "code" not in a else {}
    first = {k: kiln.SourceModule(src, **base, **kw) for k, kw in (("a", a), ("b", b))}
    assert first["a"].ptx != first["b"].ptx or first["a"].arch != first["b"].arch, name
    # Taking turns, many times: each answer stays the one its own arguments give.
    for _ in range(4):
        for k, kw in (("a", a), ("b", b)):
            m = kiln.SourceModule(src, **base, **kw)
            assert m.ptx == first[k].ptx and m.arch == first[k].arch, (name, k)


def test_name_expressions_never_share_an_entry():
    src = fresh("") + "template <int N> __global__ void t(int *p) { *p = N; }\n"
    one = kiln.SourceModule(src, arch=ARCH, name_expressions=["t<1>"])
    two = kiln.SourceModule(src, arch=ARCH, name_expressions=["t<2>"])
    for _ in range(3):
        a = kiln.SourceModule(src, arch=ARCH, name_expressions=["t<1>"])
        b = kiln.SourceModule(src, arch=ARCH, name_expressions=["t<2>"])
        assert a.get_function("t<1>").name == one.get_function("t<1>").name
        assert b.get_function("t<2>").name == two.get_function("t<2>").name
        with pytest.raises(AttributeError, match="no kernel .t<2>."):
            a.get_function("t<2>")
        with pytest.raises(AttributeError, match="no kernel .t<1>."):
            b.get_function("t<1>")


def test_a_str_subclass_cannot_pass_for_another_source():
    real = fresh("*p = 1;")
    other = fresh("*p = 2;")
    wanted = kiln.SourceModule(real, arch=ARCH)

    class Liar(str):
        """Says it is equal to anything, with the hash of the source already compiled."""

        def __hash__(self):
            return hash(real)

        def __eq__(self, other):
            return True

        def __ne__(self, other):
            return False

    got = kiln.SourceModule(Liar(other), arch=ARCH)
    assert got.ptx == kiln.SourceModule(other, arch=ARCH).ptx != wanted.ptx
    # Its own repeat is compiled honestly too (from the cache), and the real source still
    # gives its own module.
    assert kiln.SourceModule(Liar(other), arch=ARCH).ptx == got.ptx
    assert kiln.SourceModule(real, arch=ARCH).ptx == wanted.ptx

    class LiarOption(str):
        def __hash__(self):
            return hash("-DVALUE=1")

        def __eq__(self, other):
            return True

    src = fresh()
    v1 = kiln.SourceModule(src, arch=ARCH, options=["-DVALUE=1"])
    v7 = kiln.SourceModule(src, arch=ARCH, options=[LiarOption("-DVALUE=7")])
    assert v7.ptx != v1.ptx
    assert kiln.SourceModule(src, arch=ARCH, options=["-DVALUE=1"]).ptx == v1.ptx


def test_a_header_edited_on_disk_is_noticed_in_the_same_process(tmp_path):
    header = tmp_path / "value.h"
    header.write_text("#define VALUE 13\n")
    src = '#include "value.h"\n' + fresh()
    first = kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)])
    assert "13" in first.ptx
    before = memory_hits()
    assert kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)]).ptx == first.ptx
    assert memory_hits() == before + 1
    header.write_text("#define VALUE 14\n")  # the same size: the contents tell
    edited = kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)])
    assert "14" in edited.ptx and "13" not in edited.ptx.split(".entry")[1]
    header.write_text("#define VALUE 13\n")
    assert kiln.SourceModule(src, arch=ARCH, include_dirs=[str(tmp_path)]).ptx == first.ptx


def test_a_header_given_by_folder_of_the_working_directory(tmp_path, monkeypatch):
    # A quoted include found from the working folder: the memo must not skip the check.
    (tmp_path / "value.h").write_text("#define VALUE 21\n")
    monkeypatch.chdir(tmp_path)
    src = '#include "value.h"\n' + fresh()
    assert "21" in kiln.SourceModule(src, arch=ARCH, include_dirs=["."]).ptx
    (tmp_path / "value.h").write_text("#define VALUE 22\n")
    assert "22" in kiln.SourceModule(src, arch=ARCH, include_dirs=["."]).ptx


def test_what_the_compile_read_from_the_environment_is_read_again(monkeypatch):
    monkeypatch.delenv("KILN_ARCH", raising=False)
    monkeypatch.delenv("KILN_LINEINFO", raising=False)
    src = fresh("*p = 5;")
    default = kiln.SourceModule(src)
    other = "sm_80" if default.arch != "sm_80" else "sm_90"
    monkeypatch.setenv("KILN_ARCH", other)
    assert kiln.SourceModule(src).arch == other
    monkeypatch.delenv("KILN_ARCH")
    before = memory_hits()
    assert kiln.SourceModule(src).arch == default.arch
    assert memory_hits() == before + 1
    # -lineinfo, added unless KILN_LINEINFO=0: the PTX's line directives tell.
    assert ".loc" in default.ptx
    monkeypatch.setenv("KILN_LINEINFO", "0")
    assert ".loc" not in kiln.SourceModule(src).ptx
    monkeypatch.delenv("KILN_LINEINFO")
    assert ".loc" in kiln.SourceModule(src).ptx


def test_a_nul_is_read_as_nvcc_reads_it_even_for_a_source_the_memo_knows():
    src = fresh("*p = 1;")
    kiln.SourceModule(src, arch=ARCH)
    # white space in code, as nvcc takes it: each its own text, not a hit of src's
    for spaced in (src + "\0", src.replace("*p", "*\0p"), "\0" + src):
        assert kiln.SourceModule(spaced, arch=ARCH).kernels == ("k",)
    with pytest.raises(kiln.CompileError):  # a token cut in two: "=\0=" is "= =", not "=="
        kiln.SourceModule(src.replace("*p = 1", "*p =\0= 1"), arch=ARCH)
    with pytest.raises(ValueError, match="NUL"):
        kiln.SourceModule(src, arch=ARCH, options=["-DVALUE=1\0"])
    assert kiln.SourceModule(src, arch=ARCH).kernels == ("k",)


def test_the_module_table_bound_is_kept():
    before = kiln.module_table()[1]
    try:
        # Modules other tests' objects hold stay in the table whatever its bound.
        gc.collect()
        kiln.module_table(limit=0)
        held_elsewhere = kiln.module_table()[0]
        kiln.module_table(limit=2)
        sources = [fresh(f"*p = {i};") for i in range(6)]
        for _ in range(3):
            for src in sources:
                kiln.SourceModule(src, arch=ARCH)
                gc.collect()
                assert kiln.module_table()[0] <= held_elsewhere + 2
        # A module trimmed from the table comes back from the disk cache, not the memo.
        stats = kiln.cache_stats()
        kiln.SourceModule(sources[0], arch=ARCH)
        after = kiln.cache_stats()
        assert after["disk_hits"] == stats["disk_hits"] + 1
        assert after["memory_hits"] == stats["memory_hits"]
        # Held modules stay, and a held one is found by the memo.
        held = [kiln.SourceModule(src, arch=ARCH) for src in sources[:4]]
        assert 4 <= kiln.module_table()[0] <= held_elsewhere + 4
        stats = kiln.cache_stats()
        assert kiln.SourceModule(sources[1], arch=ARCH).ptx == held[1].ptx
        assert kiln.cache_stats()["memory_hits"] == stats["memory_hits"] + 1
        del held
        gc.collect()
        assert kiln.module_table()[0] <= held_elsewhere + 2
    finally:
        kiln.module_table(limit=before)


def test_threads_get_their_own_arguments_answer():
    sources = [fresh(f"*p = {i} + VALUE;") for i in range(4)]
    expected = {}
    for i, src in enumerate(sources):
        for v in (1, 2):
            expected[i, v] = kiln.SourceModule(src, arch=ARCH, options=[f"-DVALUE={v}"]).ptx
    start = threading.Barrier(8)

    def work(t):
        start.wait()
        for n in range(200):
            i, v = (t + n) % 4, 1 + (n + t // 4) % 2
            ptx = kiln.SourceModule(sources[i], arch=ARCH, options=[f"-DVALUE={v}"]).ptx
            if ptx != expected[i, v]:
                return f"source {i} with VALUE={v} gave another module's code"
        return None

    assert run_in_threads(work, 8) == []


def test_the_hook_is_skipped_only_while_the_logger_records_no_hits(caplog):
    logger = logging.getLogger("kiln")
    src = fresh("*p = 3;")
    held = kiln.SourceModule(src, arch=ARCH)  # held: the table keeps it, so hits are memory hits
    old = logger.level
    try:
        logger.setLevel(logging.WARNING)
        caplog.set_level(logging.WARNING, logger="kiln")
        kiln.SourceModule(src, arch=ARCH)
        kiln.SourceModule(src, arch=ARCH)
        assert not [r for r in caplog.records if r.name == "kiln"]
        # A level set afterwards is seen at once: logging empties its level cache.
        caplog.set_level(logging.DEBUG, logger="kiln")
        kiln.SourceModule(src, arch=ARCH)
        hits = [r for r in caplog.records if r.name == "kiln" and "hit" in r.getMessage()]
        assert len(hits) == 1 and hits[0].kiln["origin"] == "memory"
        logging.disable(logging.DEBUG)
        try:
            kiln.SourceModule(src, arch=ARCH)
        finally:
            logging.disable(logging.NOTSET)
        kiln.SourceModule(src, arch=ARCH)
        hits = [r for r in caplog.records if r.name == "kiln" and "hit" in r.getMessage()]
        assert len(hits) == 2
    finally:
        logger.setLevel(old)
    del held


def test_subclasses_and_keep_still_work(tmp_path, monkeypatch, capsys):
    src = fresh("*p = 4;")

    class Mine(kiln.SourceModule):
        pass

    a = Mine(src, arch=ARCH)
    b = Mine(src, arch=ARCH)
    assert type(a) is Mine and type(b) is Mine and a.ptx == b.ptx
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    kiln.SourceModule(src, arch=ARCH, keep=True)
    assert "compiler output in" in capsys.readouterr().out
    assert any(tmp_path.iterdir())


@pytest.mark.gpu
def test_gpu_a_recalled_module_launches():
    src = fresh("p[threadIdx.x] = VALUE * threadIdx.x;", "int *p")
    first = kiln.SourceModule(src, options=["-DVALUE=3"])
    for _ in range(3):
        m = kiln.SourceModule(src, options=["-DVALUE=3"])
        out = np.zeros(32, np.int32)
        m.get_function("k")(kiln.Out(out), block=(32, 1, 1))
        assert (out == 3 * np.arange(32)).all()
    other = kiln.SourceModule(src, options=["-DVALUE=5"])
    out = np.zeros(32, np.int32)
    other.get_function("k")(kiln.Out(out), block=(32, 1, 1))
    assert (out == 5 * np.arange(32)).all()
    del first


@pytest.mark.gpu
def test_gpu_a_header_edit_reaches_the_next_launch(tmp_path):
    header = tmp_path / "value.h"
    header.write_text("#define VALUE 7\n")
    src = '#include "value.h"\n' + fresh("*p = VALUE;")
    results = []
    for text in ("#define VALUE 7\n", "#define VALUE 8\n", "#define VALUE 7\n"):
        header.write_text(text)
        m = kiln.SourceModule(src, include_dirs=[str(tmp_path)])
        out = np.zeros(1, np.int32)
        m.get_function("k")(kiln.Out(out), block=(1, 1, 1))
        results.append(int(out[0]))
    assert results == [7, 8, 7]


@pytest.mark.gpu
def test_gpu_a_module_trimmed_from_the_table_is_loaded_again_and_launches():
    before = kiln.module_table()[1]
    src = fresh("*p = 11;")
    other = kiln.SourceModule(fresh("*p = 1;")).get_function("k")
    sink = kiln.zeros(1, np.int32)
    try:
        kiln.module_table(limit=0)
        for _ in range(16):
            other(sink, block=(1, 1, 1))
        kiln.synchronize()
        gc.collect()
        held = kiln.module_table()[0]  # other's, and any module another test still holds
        for _ in range(3):
            m = kiln.SourceModule(src)
            out = np.zeros(1, np.int32)
            m.get_function("k")(kiln.Out(out), block=(1, 1, 1))
            assert out[0] == 11
            del m
            # The notes a fault's message reads keep the last 8 launches' functions: other's
            # launches push m's out, and m's module goes from the table.
            for _ in range(16):
                other(sink, block=(1, 1, 1))
            kiln.synchronize()
            gc.collect()
            assert kiln.module_table()[0] == held  # m's module went from the table
    finally:
        kiln.module_table(limit=before)


def test_every_spelling_of_the_call_gives_the_same_module():
    """SourceModule(src) alone takes a path of its own (no argument tuple, no keyword parsing):
    it answers as the other spellings do, and bad arguments are refused alike."""
    src = fresh("*p = 3;")
    first = kiln.SourceModule(src, arch=ARCH)
    plain = kiln.SourceModule(src)  # the default arch may differ: compiled once more, or hit
    before = memory_hits()
    again = kiln.SourceModule(src)
    assert memory_hits() == before + 1
    assert type(again) is kiln.SourceModule and again.ptx == plain.ptx
    by_name = kiln.SourceModule(source=src)
    assert memory_hits() == before + 2 and by_name.ptx == plain.ptx
    assert kiln.SourceModule(src, arch=ARCH).ptx == first.ptx

    class Text(str):
        pass
    assert kiln.SourceModule(Text(src)).ptx == plain.ptx  # a str subclass: the general path
    with pytest.raises(TypeError, match="str"):
        kiln.SourceModule(5)
    with pytest.raises(TypeError):
        kiln.SourceModule()
    with pytest.raises(TypeError, match="unexpected|invalid keyword"):
        kiln.SourceModule(src, colour="blue")
