"""Precompiled headers: the #include lines a source begins with are precompiled and reused by
every later edit of the kernel below them, never when anything they depend on changed.

Two ways: in the process (no compile helper, KILN_NVRTC_HELPER=0), where the second compile
that begins with them makes the PCH and it serves that process alone; and through kiln-nvrtc,
the compile helper, whose PCH files (lasting files, "<key>.pch") are made by the first compile
and serve every later process. The tests of the first kind come first, with the helper off.

Each test has its own cache folder (PCH files live in its pch/ subfolder, and the folder is
part of a PCH's key) and sources of its own, so the in-process table never answers."""
import os
import re
import uuid

import pytest

import kiln
from helpers import ARCH, run_in_threads, run_python

HEAVY = "#include <cuda_fp16.h>\n"


def kernel(value, prefix=HEAVY, name="scale"):
    return prefix + (f'extern "C" __global__ void {name}(__half *x)\n'
                     f'{{ x[threadIdx.x] = __hmul(x[threadIdx.x], __float2half({value}f)); }}\n')


def code_of(ptx):
    """The PTX's instructions, without the comments that name the compiler's build."""
    return [line for line in ptx.splitlines() if not line.lstrip().startswith("//")]


def counts():
    s = kiln.cache_stats()
    return s["pch_created"], s["pch_used"]


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """A cache folder of the test's own, PCH files made in the process (no helper)."""
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    monkeypatch.delenv("KILN_PCH", raising=False)
    monkeypatch.setenv("KILN_NVRTC_HELPER", "0")
    return folder


def pch_files(folder):
    return sorted((folder / "pch").glob("*.pch"))


def fresh_value():
    # A constant no other test compiles, so neither the disk nor the in-process table answers.
    return 1.0 + (uuid.uuid4().int % 10**6) / 10**7


def make_pch(prefix=HEAVY, **kw):
    """Two kernels that begin with prefix: the first compile of a beginning makes no PCH, the
    second makes it."""
    created, used = counts()
    kw = {"arch": ARCH, **kw}
    kiln.SourceModule(kernel(fresh_value(), prefix=prefix), no_extern_c=True, **kw)
    assert counts() == (created, used)
    kiln.SourceModule(kernel(fresh_value(), prefix=prefix), no_extern_c=True, **kw)
    assert counts() == (created + 1, used)


def without_pch(src, **kw):
    """The same source compiled in a new process with precompiled headers off."""
    r = run_python(f"""
        import kiln, sys
        m = kiln.SourceModule({src!r}, arch={ARCH!r}, no_extern_c=True, **{kw!r})
        sys.stdout.write(m.ptx)
        """, env={"KILN_PCH": "0", "KILN_CACHE": "0"})
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_an_edited_kernel_reuses_the_pch_and_compiles_right(cache):
    created, used = counts()
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts() == (created, used)  # a first compile of a beginning writes no PCH
    assert pch_files(cache) == []
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts() == (created + 1, used)
    assert len(pch_files(cache)) == 1
    assert pch_files(cache)[0].name.startswith(f"{os.getpid()}-")
    edited = kernel(fresh_value())
    m = kiln.SourceModule(edited, arch=ARCH, no_extern_c=True)
    assert counts() == (created + 1, used + 1)
    assert code_of(m.ptx) == code_of(without_pch(edited))
    assert m.log == ""  # the PCH says nothing in the user's log


# Opens of PCH files for reading fail as if the file had gone (another process evicted it, or
# cache clear removed it, between kiln's plan and NVRTC's open); writes go through.
VANISH_SHIM = r"""
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static int gone(const char *path, int writes) {
  size_t n = path ? strlen(path) : 0;
  return !writes && n > 4 && !strcmp(path + n - 4, ".pch") && strstr(path, "/pch/");
}
static int writes_mode(const char *mode) { return strpbrk(mode, "wa+") != NULL; }

#define OPEN(name)                                                          \
  int name(const char *path, int flags, ...) {                               \
    va_list ap;                                                              \
    va_start(ap, flags);                                                     \
    int mode = va_arg(ap, int);                                              \
    va_end(ap);                                                              \
    if (gone(path, (flags & O_ACCMODE) != O_RDONLY)) return errno = ENOENT, -1; \
    int (*real)(const char *, int, ...) = dlsym(RTLD_NEXT, #name);           \
    return real(path, flags, mode);                                          \
  }
#define OPENAT(name)                                                        \
  int name(int dir, const char *path, int flags, ...) {                      \
    va_list ap;                                                              \
    va_start(ap, flags);                                                     \
    int mode = va_arg(ap, int);                                              \
    va_end(ap);                                                              \
    if (gone(path, (flags & O_ACCMODE) != O_RDONLY)) return errno = ENOENT, -1; \
    int (*real)(int, const char *, int, ...) = dlsym(RTLD_NEXT, #name);      \
    return real(dir, path, flags, mode);                                     \
  }
#define FOPEN(name)                                                         \
  FILE *name(const char *path, const char *mode) {                           \
    if (gone(path, writes_mode(mode))) return errno = ENOENT, NULL;          \
    FILE *(*real)(const char *, const char *) = dlsym(RTLD_NEXT, #name);     \
    return real(path, mode);                                                 \
  }
OPEN(open)
OPEN(open64)
OPENAT(openat)
OPENAT(openat64)
FOPEN(fopen)
FOPEN(fopen64)
"""


def test_a_pch_file_gone_before_nvrtc_opens_it_is_compiled_without(cache, tmp_path):
    """NVRTC stops with a catastrophic error when the PCH it is told to use cannot be opened;
    the source is not at fault, so kiln compiles it again without one."""
    import shutil
    import subprocess
    cc = os.environ.get("CC", "cc")
    if not shutil.which(cc):
        pytest.skip(f"needs a C compiler ({cc})")
    shim = tmp_path / "vanish.so"
    (tmp_path / "vanish.c").write_text(VANISH_SHIM)
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(tmp_path / "vanish.c"), "-ldl", "-o",
                    str(shim)], check=True)
    preload = " ".join(p for p in (os.environ.get("LD_PRELOAD"), str(shim)) if p)
    r = run_python(f"""
        import json, kiln, kiln._kiln
        kernels = [{kernel(fresh_value())!r}, {kernel(fresh_value())!r},
                   {kernel(fresh_value())!r}]
        reports = []
        for src in kernels:
            m = kiln.SourceModule(src, arch={ARCH!r}, no_extern_c=True)
            reports.append(kiln._kiln.last_compile_report()["pch"])
        print(json.dumps([reports, list(m.kernels), kiln.cache_stats()["pch_created"]]))
        """, env={"LD_PRELOAD": preload})
    assert r.returncode == 0, r.stderr
    reports, kernels, created = __import__("json").loads(r.stdout.splitlines()[-1])
    # The first makes none, the second makes one, the third is told to use it and cannot.
    assert reports == ["none", "made", "none"] and created == 1
    assert kernels == ["scale"]


def test_a_header_edit_invalidates_the_pch(cache, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "factor.h"
    header.write_text("#define FACTOR 3\n")
    prefix = HEAVY + '#include "factor.h"\n'
    body = 'extern "C" __global__ void f(int *x) { x[0] = FACTOR * %d; }\n'
    created, used = counts()
    for value in (1000, 1001, 1002):  # seen, made, used
        kiln.SourceModule(prefix + body % value, arch=ARCH, no_extern_c=True,
                          include_dirs=[str(inc)])
    assert counts() == (created + 1, used + 1)
    header.write_text("#define FACTOR 5\n")
    m = kiln.SourceModule(prefix + body % 1003, arch=ARCH, no_extern_c=True,
                          include_dirs=[str(inc)])
    assert counts() == (created + 2, used + 1)  # made again, not reused
    assert str(5 * 1003) in m.ptx and str(3 * 1003) not in m.ptx


@pytest.mark.parametrize("change", ["option", "arch", "prefix"])
def test_what_the_pch_depends_on_is_its_key(cache, change):
    make_pch(arch="sm_90", options=["-DA=1"])
    created, used = counts()
    kw = {"arch": "sm_90", "options": ["-DA=1"]}
    prefix = HEAVY
    if change == "option":
        kw["options"] = ["-DA=2"]
    elif change == "arch":
        kw["arch"] = "sm_80"
    else:
        prefix = HEAVY + "#define B 1\n"
    kiln.SourceModule(kernel(fresh_value(), prefix=prefix), no_extern_c=True, **kw)
    assert counts() == (created, used)  # not the PCH made above: another beginning, seen once
    kiln.SourceModule(kernel(fresh_value(), prefix=prefix), no_extern_c=True, **kw)
    assert counts() == (created + 1, used)


def test_a_changed_pch_file_is_refused(cache):
    make_pch()
    (path,) = pch_files(cache)
    with open(path, "r+b") as f:  # damage it: the same name, other bytes
        f.seek(4096)
        byte = f.read(1)
        f.seek(4096)
        f.write(bytes([byte[0] ^ 0xFF]))
    created, used = counts()
    edited = kernel(fresh_value())
    m = kiln.SourceModule(edited, arch=ARCH, no_extern_c=True)
    assert counts() == (created + 1, used)  # not used: a new one was made
    assert code_of(m.ptx) == code_of(without_pch(edited))


@pytest.mark.parametrize("prefix", [
    "",                                                   # no #include at all
    "#if 1\n#include <cuda_fp16.h>\n__device__ int unused;\n#endif\n",  # stop inside #if
])
def test_no_pch_where_it_cannot_be_keyed(cache, prefix):
    created, used = counts()
    for _ in range(3):
        src = prefix + 'extern "C" __global__ void g(float *x) { x[0] = %r; }\n' % fresh_value()
        kiln.SourceModule(src, arch=ARCH, no_extern_c=True)
    assert counts() == (created, used)
    assert pch_files(cache) == []


def test_pch_off_by_environment(cache, monkeypatch):
    monkeypatch.setenv("KILN_PCH", "0")
    created, used = counts()
    for _ in range(3):
        kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts() == (created, used) and pch_files(cache) == []


def test_cache_info_counts_pch_files_and_the_bound_holds_them(cache, monkeypatch):
    make_pch()
    info = kiln.cache_info()
    (path,) = pch_files(cache)
    assert info["pch_files"] == 1 and info["pch_bytes"] == path.stat().st_size > 0
    # A bound the PCH does not fit half of: the next store drops it.
    monkeypatch.setenv("KILN_CACHE_MAX_BYTES", str(path.stat().st_size))
    kiln.SourceModule(kernel(fresh_value(), prefix=HEAVY + "#include <cuda_bf16.h>\n"),
                      arch=ARCH, no_extern_c=True)
    info = kiln.cache_info()
    assert info["bytes"] + info["pch_bytes"] <= info["max_bytes"]
    assert not path.exists()


def test_a_new_process_keeps_its_own_and_leaves_none_behind(cache):
    r = run_python(f"""
        import kiln, pathlib
        kiln.SourceModule({kernel(fresh_value())!r}, arch={ARCH!r}, no_extern_c=True)
        kiln.SourceModule({kernel(fresh_value())!r}, arch={ARCH!r}, no_extern_c=True)
        print(len(list(pathlib.Path({str(cache)!r}, "pch").glob("*.pch"))),
              kiln.cache_stats()["pch_created"])
        """)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["1", "1"]
    assert pch_files(cache) == []  # removed when that process ended


def test_the_pch_files_of_dead_processes_are_swept(cache):
    make_pch()
    # A file a process that died left: a pid that cannot be running (above pid_max).
    dead = cache / "pch" / f"{2**22 + 7}-{'0' * 64}.pch"
    dead.write_bytes(b"x" * 100)
    assert kiln.cache_info()["pch_files"] == 2
    kiln.cache_clear()
    assert not dead.exists()
    assert len(pch_files(cache)) == 1  # this process's own stays: it is in use


def test_threads_compiling_edits_at_once_get_the_right_code(cache):
    make_pch()
    values = [fresh_value() for _ in range(4)]

    def work(i):
        m = kiln.SourceModule(kernel(values[i], name=f"scale{i}"), arch=ARCH, no_extern_c=True)
        if not re.search(rf"\.entry scale{i}\(", m.ptx):
            return f"scale{i} is not in its own PTX"
        return None

    assert run_in_threads(work, count=4) == []
    assert counts()[1] >= 4


def test_a_forked_child_leaves_its_parents_pch_alone(cache):
    make_pch()
    (path,) = pch_files(cache)
    pid = os.fork()
    if pid == 0:  # the child exits through the C library's exit, running its atexit handlers
        import ctypes
        ctypes.CDLL(None).exit(0)
    _, status = os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0
    assert path.exists()
    created, used = counts()
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts() == (created, used + 1)


# ---- Through the compile helper: PCH files that serve later processes ---------------------

HELPER = os.path.join(os.path.dirname(kiln.__file__), "kiln-nvrtc")


@pytest.fixture
def lasting(tmp_path, monkeypatch):
    """A cache folder of the test's own, compiles that can use a PCH going through kiln-nvrtc
    (told again, which also forgets a helper an earlier test broke)."""
    if not os.access(HELPER, os.X_OK):
        pytest.fail(f"{HELPER} was not built beside the extension")
    folder = tmp_path / "cache"
    monkeypatch.setenv("KILN_CACHE_DIR", str(folder))
    monkeypatch.delenv("KILN_CACHE_MAX_BYTES", raising=False)
    monkeypatch.delenv("KILN_PCH", raising=False)
    monkeypatch.delenv("KILN_NVRTC_HELPER", raising=False)
    monkeypatch.setenv("KILN_NVRTC_SERVER", "0")  # helpers of the process's own (conftest.py)
    kiln._kiln._nvrtc_set_helper(HELPER)
    yield folder
    kiln._kiln._nvrtc_set_helper(HELPER)


def lasting_files(folder):
    return sorted(p.name for p in (folder / "pch").glob("*.pch") if re.fullmatch(r"[0-9a-f]{64}\.pch", p.name))


def compile_in_new_process(src, **kw):
    """(pch_created, pch_used, ptx) of src compiled in a new Python (the environment's cache)."""
    r = run_python(f"""
        import json, kiln
        m = kiln.SourceModule({src!r}, arch={ARCH!r}, no_extern_c=True, **{kw!r})
        s = kiln.cache_stats()
        print(json.dumps([s["pch_created"], s["pch_used"], m.ptx]))
        """)
    assert r.returncode == 0, r.stderr
    import json
    return tuple(json.loads(r.stdout.strip().splitlines()[-1]))


def test_a_pch_made_in_one_process_serves_the_next(lasting):
    first = kernel(fresh_value())
    created, used, _ = compile_in_new_process(first)
    assert (created, used) == (1, 0)  # the first compile of a beginning makes it
    assert len(lasting_files(lasting)) == 1
    assert not [p for p in (lasting / "pch").iterdir() if "-" in p.name]  # no helper's own left
    edit = kernel(fresh_value())
    created, used, ptx = compile_in_new_process(edit)
    assert (created, used) == (0, 1)
    assert code_of(ptx) == code_of(without_pch(edit))


def test_in_this_process_too_an_edit_uses_the_lasting_pch(lasting):
    created, used = counts()
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts() == (created + 1, used)
    value = fresh_value()
    m = kiln.SourceModule(kernel(value), arch=ARCH, no_extern_c=True)
    assert counts() == (created + 1, used + 1)
    assert code_of(m.ptx) == code_of(without_pch(kernel(value)))
    assert len(lasting_files(lasting)) == 1


def test_a_header_edit_makes_another_lasting_pch(lasting, tmp_path):
    inc = tmp_path / "inc"
    inc.mkdir()
    header = inc / "scale_by.h"
    header.write_text("#define SCALE_BY 2.0f\n")
    prefix = HEAVY + '#include "scale_by.h"\n'
    src = prefix + ('extern "C" __global__ void k(float *x) { x[0] = SCALE_BY * %s; }\n')
    assert compile_in_new_process(src % fresh_value(), include_dirs=[str(inc)])[:2] == (1, 0)
    header.write_text("#define SCALE_BY 3.0f\n")
    created, used, ptx = compile_in_new_process(src % 1.5, include_dirs=[str(inc)])
    assert (created, used) == (1, 0)  # the old file is not taken: its header changed
    assert str(0x40900000) in ptx  # 3.0 * 1.5 = 4.5, folded into the store
    assert len(lasting_files(lasting)) == 2


def test_a_compile_error_through_the_helper_reads_as_in_the_process(lasting):
    src = HEAVY + 'extern "C" __global__ void k(float *x)\n{\n  x[0] = undefined_thing;\n}\n'
    with pytest.raises(kiln.CompileError) as info:
        kiln.SourceModule(src, arch=ARCH, no_extern_c=True)
    assert "undefined_thing" in info.value.log
    assert "kernel.cu(4): error" in str(info.value)


def test_name_expressions_come_back_from_the_helper(lasting):
    src = HEAVY + ("template <typename T> __global__ void axpy(T a, const T *x, T *y, int n)\n"
                   "{ int i = threadIdx.x; if (i < n) y[i] += a * x[i] + %s; }\n" % fresh_value())
    created, used = counts()
    mod = kiln.SourceModule(src, name_expressions=["axpy<float>", "axpy<double>"], arch=ARCH,
                            no_extern_c=True)
    assert counts()[0] == created + 1  # it went through the helper
    assert mod.get_function("axpy<float>").signature == ("f32", "b64", "b64", "b32")
    assert mod.get_function("axpy<double>").signature[0] == "f64"


def test_lasting_files_are_counted_bounded_and_cleared(lasting, monkeypatch):
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    (name,) = lasting_files(lasting)
    size = (lasting / "pch" / name).stat().st_size
    info = kiln.cache_info()
    assert info["pch_files"] == 1 and info["pch_bytes"] == size
    # A bound below two of them: the least recently used goes when the next is made.
    monkeypatch.setenv("KILN_CACHE_MAX_BYTES", str(3 * size))
    kiln.SourceModule(kernel(fresh_value(), prefix=HEAVY + "#include <cuda_bf16.h>\n"),
                      arch=ARCH, no_extern_c=True)
    kiln.SourceModule(kernel(fresh_value(), prefix="#include <cuda_bf16.h>\n" + HEAVY),
                      arch=ARCH, no_extern_c=True)
    info = kiln.cache_info()
    assert info["bytes"] + info["pch_bytes"] <= info["max_bytes"]
    assert name not in lasting_files(lasting)
    kiln.cache_clear()
    assert lasting_files(lasting) == []


@pytest.mark.parametrize("helper, why", [
    ("/nonexistent/kiln-nvrtc", "could not be started"),
    ("/bin/true", "ended without an answer"),
    ("/bin/false", "failed"),
])
def test_a_helper_that_fails_leaves_compiles_to_the_process(lasting, monkeypatch, helper, why):
    monkeypatch.setenv("KILN_NVRTC_HELPER", helper)
    value = fresh_value()
    with pytest.warns(kiln.CacheWarning, match=why):
        m = kiln.SourceModule(kernel(value), arch=ARCH, no_extern_c=True)
    assert code_of(m.ptx) == code_of(without_pch(kernel(value)))
    assert lasting_files(lasting) == []
    import warnings
    with warnings.catch_warnings():  # said once; the helper is not tried again
        warnings.simplefilter("error")
        kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)


def test_what_the_helper_compiled_is_stored_though_this_process_never_opened_nvrtc(lasting):
    code = """
        import json, kiln
        kiln.SourceModule({src!r}, arch={arch!r}, no_extern_c=True)
        print(json.dumps(kiln.cache_stats()))
        """
    def stats(src):
        r = run_python(code.format(src=src, arch=ARCH))
        assert r.returncode == 0, r.stderr
        import json
        return json.loads(r.stdout.strip().splitlines()[-1])
    stats(kernel(fresh_value()))  # leaves the note that names NVRTC without opening it
    src = kernel(fresh_value())
    first = stats(src)
    assert first["compiles"] == 1 and first["stores"] == 1 and first["pch_used"] == 1, first
    again = stats(src)
    assert again["disk_hits"] == 1 and again["compiles"] == 0, again


def test_a_helper_killed_while_compiling_is_a_compile_error_not_a_crash(lasting, tmp_path,
                                                                         monkeypatch):
    crashing = tmp_path / "crashing-helper"
    crashing.write_text("#!/bin/sh\nkill -KILL $$\n")  # no handler can catch it (ASan's would)
    crashing.chmod(0o755)
    monkeypatch.setenv("KILN_NVRTC_HELPER", str(crashing))
    with pytest.raises(kiln.CompileError, match=r"NVRTC crashed .*signal 9"):
        kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    monkeypatch.delenv("KILN_NVRTC_HELPER")  # the real helper again: nothing was given up
    created, used = counts()
    kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert counts()[0] + counts()[1] == created + used + 1


def test_a_helper_that_cannot_fix_its_layout_is_left_quietly(lasting, tmp_path, monkeypatch):
    """Where the helper cannot turn address randomisation off (here: told it tried already),
    its PCH files could serve no later run: the compile it made is used, no file is kept, and
    the process compiles itself from then on, without a word."""
    wrapper = tmp_path / "randomised-helper"
    wrapper.write_text(f'#!/bin/sh\nKILN__NVRTC_AGAIN=1 exec {HELPER} "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("KILN_NVRTC_HELPER", str(wrapper))
    import warnings
    value = fresh_value()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        m = kiln.SourceModule(kernel(value), arch=ARCH, no_extern_c=True)
        assert code_of(m.ptx) == code_of(without_pch(kernel(value)))
        for _ in range(2):  # in this process now: its second compile of the beginning makes one
            kiln.SourceModule(kernel(fresh_value()), arch=ARCH, no_extern_c=True)
    assert lasting_files(lasting) == []
    assert [p.name for p in (lasting / "pch").glob(f"{os.getpid()}-*.pch")]


# ---- The lasting compile helper of a cache folder ---------------------------------------------

def helper_report(src):
    """(helper, pch) of the last compile report of src compiled in a new Python."""
    r = run_python(f"""
        import json, kiln
        kiln.SourceModule({src!r}, arch={ARCH!r}, no_extern_c=True)
        r = kiln._kiln.last_compile_report()
        print(json.dumps([r["helper"], r["pch"]]))
        """)
    assert r.returncode == 0, r.stderr
    import json
    return tuple(json.loads(r.stdout.strip().splitlines()[-1]))


def server_pids(sock):
    """The processes serving on sock (by their command line)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read().split(b"\0")
        except OSError:
            continue
        if b"--serve" in args and str(sock).encode() in args:
            pids.append(int(entry))
    return pids


def wait_until(condition, seconds=10):
    import time
    end = time.monotonic() + seconds
    while not condition() and time.monotonic() < end:
        time.sleep(0.05)
    return condition()


@pytest.fixture
def served(lasting, monkeypatch):
    """The lasting fixture with the cache folder's lasting helper on; ended after the test."""
    monkeypatch.setenv("KILN_NVRTC_SERVER", "1")
    yield lasting
    socks = list((lasting / "pch").glob("nvrtc-*.sock"))
    kiln.cache_clear()  # removes the socket: the helper ends within a second
    for sock in socks:
        assert wait_until(lambda: not server_pids(sock)), f"the helper on {sock} did not end"


def test_the_lasting_helper_outlives_its_process_and_answers_the_next(served):
    """The first process starts it; the next process's edit is compiled there, with the PCH
    the first made, and the code is right."""
    assert helper_report(kernel(fresh_value())) == ("lasting", "made")
    (sock,) = (served / "pch").glob("nvrtc-*.sock")
    assert oct(sock.stat().st_mode & 0o777) == oct(0o700) and sock.is_socket()
    (pid,) = server_pids(sock)
    value = fresh_value()
    assert helper_report(kernel(value)) == ("lasting", "used")
    assert server_pids(sock) == [pid]  # the same one
    # what it compiled, read back from the cache by another process, is NVRTC's without a PCH
    ptx = compile_in_new_process(kernel(value))[2]
    assert code_of(ptx) == code_of(without_pch(kernel(value)))


def test_a_busy_lasting_helper_leaves_the_compile_to_the_process_own(served):
    """One connection at a time: while another process holds it, a compile goes to a helper of
    the process's own."""
    import socket
    assert helper_report(kernel(fresh_value()))[0] == "lasting"
    (sock,) = (served / "pch").glob("nvrtc-*.sock")
    holder = socket.socket(socket.AF_UNIX)
    holder.connect(str(sock))
    assert holder.recv(1) == b"k"  # greeted: the helper is ours now
    try:
        value = fresh_value()
        assert helper_report(kernel(value)) == ("own", "used")
    finally:
        holder.close()
    assert helper_report(kernel(fresh_value()))[0] == "lasting"


def test_a_lasting_helper_killed_is_replaced(served):
    import signal
    helper_report(kernel(fresh_value()))
    (sock,) = (served / "pch").glob("nvrtc-*.sock")
    (pid,) = server_pids(sock)
    os.kill(pid, signal.SIGKILL)
    assert wait_until(lambda: not server_pids(sock))
    assert sock.exists()  # left behind: refused connections say no one listens
    value = fresh_value()
    created, used, ptx = compile_in_new_process(kernel(value))
    assert (created, used) == (0, 1)
    assert code_of(ptx) == code_of(without_pch(kernel(value)))
    (again,) = server_pids(sock)
    assert again != pid


def test_the_lasting_helper_ends_with_cache_clear_and_is_off_by_environment(served, monkeypatch):
    helper_report(kernel(fresh_value()))
    (sock,) = (served / "pch").glob("nvrtc-*.sock")
    assert server_pids(sock)
    kiln.cache_clear()
    assert not sock.exists()
    assert wait_until(lambda: not server_pids(sock))
    monkeypatch.setenv("KILN_NVRTC_SERVER", "0")
    assert helper_report(kernel(fresh_value())) == ("own", "made")
    assert not list((served / "pch").glob("nvrtc-*.sock"))


def test_a_process_whose_environment_steers_nvrtc_otherwise_has_a_lasting_helper_of_its_own(
        served, monkeypatch):
    """Where NVRTC and the toolkit's headers are found is the lasting helper's environment: a
    process that would find them otherwise meets another one."""
    assert helper_report(kernel(fresh_value()))[0] == "lasting"
    monkeypatch.setenv("CUDA_HOME", "/nonexistent/cuda-home")
    assert helper_report(kernel(fresh_value()))[0] == "lasting"
    assert len(list((served / "pch").glob("nvrtc-*.sock"))) == 2


def test_a_lasting_helper_started_under_a_tmpdir_since_removed_still_compiles(
        served, tmp_path, monkeypatch):
    """The lasting helper has the environment of the process that started it, and NVRTC writes
    its temporary files in TMPDIR: once that folder is gone, the helper's compiles for the
    processes after it use the system's."""
    gone = tmp_path / "gone"
    gone.mkdir()
    monkeypatch.setenv("TMPDIR", str(gone))
    assert helper_report(kernel(fresh_value()))[0] == "lasting"
    monkeypatch.delenv("TMPDIR")
    gone.rmdir()
    value = fresh_value()
    assert helper_report(kernel(value)) == ("lasting", "used")
    ptx = compile_in_new_process(kernel(value))[2]
    assert code_of(ptx) == code_of(without_pch(kernel(value)))
