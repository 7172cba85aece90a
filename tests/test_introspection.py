"""help(), inspect.signature and repr on kiln's API; kernels named as their source declares
them in reprs and messages; the type stubs editors read."""
import ast
import inspect
import os
import pathlib
import subprocess
import sys
import types

import pytest

import kiln
import kiln._kiln
from helpers import ARCH

PACKAGE = pathlib.Path(kiln.__file__).resolve().parent   # the kiln imported (make sanitize's copy)
ROOT = pathlib.Path(__file__).resolve().parent.parent     # the source tree

SOURCE = r"""
struct S { int x; float y; };
__global__ void cpp(float *a, const float *b, int c, int d, double e) {}
namespace ns { __global__ void inner(S s, const S *p, unsigned long long n, const S *q,
                                     char **c) {} }
template <typename T, int N> __global__ void axpy(T a, const T *x, T *y) {}
template __global__ void axpy<float, 128>(float, const float *, float *);
extern "C" __global__ void plain(float *x, int n) {}
__global__ void grid(float cells[][6][6], const int (*rows)[3], float *(*ptrs)[2], int n) {}
__global__ void opaque(const void *a, int n, unsigned u, void **p) {}
"""


@pytest.fixture(scope="module")
def module():
    return kiln.SourceModule(SOURCE, arch=ARCH, name_expressions=["axpy<float, 128>"])


def public_callables():
    for name in kiln.__all__:
        obj = getattr(kiln, name)
        if isinstance(obj, type):
            if issubclass(obj, BaseException):
                continue
            yield name, obj
            for attr, value in vars(obj).items():
                if attr.startswith("_"):
                    continue
                if isinstance(value, (types.MethodDescriptorType, types.ClassMethodDescriptorType,
                                      types.FunctionType, classmethod, staticmethod)):
                    yield f"{name}.{attr}", getattr(obj, attr)
        elif callable(obj):
            yield name, obj


@pytest.mark.parametrize("name, obj", list(public_callables()), ids=lambda x: str(x)[:40])
def test_every_public_callable_has_a_signature_and_help(name, obj):
    if obj is kiln.Function:  # made by get_function only; its instances have the signature
        assert "A kernel: f(*args, block" in __import__("pydoc").render_doc(obj)
        return
    sig = inspect.signature(obj)  # raises ValueError where the text signature is missing
    doc = inspect.getdoc(obj)
    assert doc and doc.strip(), f"{name} has no docstring"
    text = subprocess.run([sys.executable, "-c", f"import kiln; help(kiln.{name})"],
                          capture_output=True, text=True, timeout=60,
                          env={**os.environ, "PYTHONPATH": str(PACKAGE.parent),
                               "PAGER": "cat", "TERM": "dumb"}).stdout if name == "SourceModule" \
        else None
    if text is not None:
        assert "SourceModule(source, nvcc='nvcc'" in text
    assert "$" not in str(sig)


def test_signatures_read_as_documented():
    assert str(inspect.signature(kiln.cache_prune)) == "(max_bytes=None)"
    assert list(inspect.signature(kiln.SourceModule).parameters)[:3] == [
        "source", "nvcc", "options"]
    assert inspect.signature(kiln.empty).parameters["dtype"].default == "float64"
    assert str(inspect.signature(kiln.DeviceArray([4], "f4").get if False else
                                 kiln.DeviceArray.get)).startswith("(self, /, ary=None")


@pytest.mark.parametrize("entry, declaration", [
    ("_Z3cppPfPKfiid", "cpp(float *, const float *, int, int, double)"),
    ("_ZN2ns5innerE1SPKS0_yS2_PPc",
     "ns::inner(S, const S *, unsigned long long, const S *, char **)"),
    ("_Z4axpyIfLi128EEvT_PKS0_PS0_", "axpy<float, 128>(float, const float *, float *)"),
    ("plain", "plain"),
    # arrays in parameters are pointers to arrays, written as the source would declare them
    ("_Z4gridPA6_A6_fPA3_KiPA2_Pfi",
     "grid(float (*)[6][6], const int (*)[3], float *(*)[2], int)"),
])
def test_kernels_are_named_as_declared(module, entry, declaration):
    f = module.get_function(entry)
    assert f.declaration == declaration
    assert repr(f).startswith(f"<kiln.Function {declaration} (")


def test_a_void_pointer_leaves_the_other_parameters_typed(module):
    # The classes come from the C++ signature, not PTX's b32 and b64, whatever points to void.
    f = module.get_function("opaque")
    assert f.declaration == "opaque(const void *, int, unsigned int, void **)"
    assert f.signature == ("ptr", "i32", "u32", "ptr")
    with pytest.raises(ValueError, match="unsigned"):
        f(0, 1, -1, 0, block=(1, 1, 1))


def test_messages_name_the_kernel_as_declared_not_mangled(module):
    f = module.get_function("cpp")
    with pytest.raises(TypeError) as e:
        f(kiln.In(__import__("numpy").zeros(1, "f4")), 1.5, 1, 2, 3.0, block=(1, 1, 1))
    assert "argument 1 of cpp(float *, const float *, int, int, double)" in str(e.value)
    assert "_Z3cpp" not in str(e.value)
    with pytest.raises(TypeError, match=r"cpp\(float \*, const float \*, int, int, double\) "
                                        r"takes 5 arguments"):
        f(1, block=(1, 1, 1))


def test_the_log_names_kernels_as_they_are_written(tmp_path, monkeypatch, caplog):
    import logging
    monkeypatch.setenv("KILN_CACHE_DIR", str(tmp_path))
    caplog.set_level(logging.INFO, logger="kiln")
    kiln.SourceModule("__global__ void logged_cpp(float *x, int n) {}\n", arch=ARCH)
    (record,) = [r for r in caplog.records if r.name == "kiln"]
    assert "compiled logged_cpp(float *, int) for" in record.getMessage()


@pytest.mark.gpu
def test_repr_shows_registers_and_shared_memory():
    m = kiln.SourceModule("__global__ void sh(float *x) { __shared__ float t[64]; "
                          "t[threadIdx.x] = x[threadIdx.x]; __syncthreads(); "
                          "x[threadIdx.x] = t[63 - threadIdx.x]; }\n")
    f = m.get_function("sh")
    r = repr(f)
    assert r.startswith("<kiln.Function sh(float *) (ptr): ")
    assert f"{f.num_regs} registers, {f.shared_size_bytes} B shared>" in r
    assert f.shared_size_bytes == 256


def test_the_stubs_cover_the_extension_and_ship():
    stub = (PACKAGE / "_kiln.pyi").read_text()
    tree = ast.parse(stub)
    defined = {n.name for n in tree.body if isinstance(n, (ast.ClassDef, ast.FunctionDef))}
    defined |= {t.target.id for t in tree.body if isinstance(t, ast.AnnAssign)}
    public = {n for n in dir(kiln._kiln) if not n.startswith("__")}
    assert public - defined == set(), "run: PYTHONPATH=pymod python3 tools/stubs.py"
    assert (PACKAGE / "py.typed").exists()
    project = (ROOT / "pyproject.toml").read_text()
    assert '"py.typed"' in project and '"*.pyi"' in project


def test_the_stubs_are_what_the_generator_writes(tmp_path):
    out = tmp_path / "_kiln.pyi"
    r = subprocess.run([sys.executable, str(ROOT / "tools" / "stubs.py"), str(out)],
                       capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PYTHONPATH": str(PACKAGE.parent)})
    assert r.returncode == 0, r.stderr
    assert out.read_text() == (PACKAGE / "_kiln.pyi").read_text(), \
        "the stubs are stale: PYTHONPATH=pymod python3 tools/stubs.py"


def test_a_kernel_has_a_call_signature(module):
    sig = inspect.signature(module.get_function("cpp"))
    params = list(sig.parameters.values())
    assert [p.annotation for p in params[:5]] == ["float *", "const float *", "int", "int",
                                                  "double"]
    assert all(p.kind is p.POSITIONAL_ONLY for p in params[:5])
    assert [p.name for p in params[5:]] == ["block", "grid", "shared", "stream", "time_kernel"]
    assert sig.parameters["grid"].default == (1, 1)
    templ = inspect.signature(module.get_function("axpy<float, 128>"))
    assert [p.annotation for p in list(templ.parameters.values())[:3]] == [
        "float", "const float *", "float *"]
    plain = inspect.signature(module.get_function("plain"))
    assert [p.annotation for p in list(plain.parameters.values())[:2]] == ["b64", "b32"]
