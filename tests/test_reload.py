"""kiln.load: modules made from .cu files that compile again when the file or a header it
includes changes, and keep their last good code when the change does not compile."""
import os
import textwrap

import pytest

import kiln
from helpers import ARCH

def _write(path, text):
    path.write_text(textwrap.dedent(text))
    # a later write within the file system's time resolution must still look changed
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 10_000_000 * _write.count))
    _write.count += 1


_write.count = 1


def test_load_recompiles_when_the_file_changes(tmp_path):
    cu = tmp_path / "k.cu"
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }\n')
    mod = kiln.load(cu, arch=ARCH, check_on_call=False)
    assert mod.kernels == ("k",) and not mod.changed()
    first = mod.module
    assert mod.reload() is False and mod.module is first
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = 2.0f; }\n'
               'extern "C" __global__ void k2(float *x) { x[1] = 3.0f; }\n')
    assert mod.changed()
    assert mod.reload() is True
    assert set(mod.kernels) == {"k", "k2"} and mod.module is not first
    assert mod.k2._current().name == "k2"


def test_load_follows_included_headers(tmp_path):
    (tmp_path / "inc").mkdir()
    hdr = tmp_path / "inc" / "value.h"
    _write(hdr, "#define VALUE 1.0f\n")
    local = tmp_path / "local.cuh"
    _write(local, '#include "value.h"\n')
    cu = tmp_path / "k.cu"
    _write(cu, '#include "local.cuh"\nextern "C" __global__ void k(float *x) { x[0] = VALUE; }\n')
    mod = kiln.load(cu, include_dirs=[tmp_path / "inc"], arch=ARCH, check_on_call=False)
    assert sorted(os.path.basename(f) for f in mod.files) == ["k.cu", "local.cuh", "value.h"]
    ptx_before = mod.module.ptx
    _write(hdr, "#define VALUE 5.0f\n")
    assert mod.reload() is True
    assert mod.module.ptx != ptx_before
    assert "1084227584" in mod.module.ptx  # 5.0f, as the bits of a u32


def test_a_reload_that_fails_keeps_the_last_good_code_and_says_so(tmp_path):
    cu = tmp_path / "k.cu"
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }\n')
    mod = kiln.load(cu, arch=ARCH, check_on_call=False)
    good = mod.module
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = nope; }\n')
    with pytest.warns(kiln.ReloadWarning, match='identifier "nope" is undefined') as w:
        assert mod.reload() is False
    assert str(cu) in str(w[0].message) and "last good code" in str(w[0].message)
    assert mod.module is good and isinstance(mod.error, kiln.CompileError)
    # not retried until the file changes again
    assert mod.reload() is False
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = 4.0f; }\n')
    assert mod.reload() is True and mod.error is None


def test_load_of_a_file_that_does_not_compile_raises_naming_the_file(tmp_path):
    cu = tmp_path / "bad.cu"
    _write(cu, "__global__ void k() { nope; }\n")
    with pytest.raises(kiln.CompileError, match="bad.cu") as info:
        kiln.load(cu, arch=ARCH)
    assert "nope" in info.value.log and info.value.stderr == info.value.log
    assert info.value.msg == str(info.value)
    assert info.value.command_line[0] == "nvrtc"
    assert info.value.command_line[1] == f"-arch={ARCH or kiln.SourceModule('__global__ void k() {}').arch}"
    with pytest.raises(FileNotFoundError):
        kiln.load(tmp_path / "missing.cu")


def test_unknown_kernel_of_a_loaded_module(tmp_path):
    cu = tmp_path / "k.cu"
    _write(cu, 'extern "C" __global__ void k(float *x) { x[0] = 1.0f; }\n')
    mod = kiln.load(cu, arch=ARCH)
    with pytest.raises(AttributeError, match="has no kernel 'nothere'; its kernels: k"):
        mod.nothere
