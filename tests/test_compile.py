"""SourceModule: compiling, what it exposes, and kernel lookup. NVRTC needs no GPU."""
import pytest

import kiln
from helpers import ARCH

MULTIPLY = """
__global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{ int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i]; }
"""


def test_compile_gives_ptx_cubin_log_and_kernels():
    mod = kiln.SourceModule(MULTIPLY, arch="sm_90")
    assert ".entry _Z13multiply_themPfPKfS1_i" in mod.ptx
    assert mod.cubin[:4] == b"\x7fELF"
    assert mod.arch == "sm_90"
    assert mod.log == ""
    assert mod.kernels == ("_Z13multiply_themPfPKfS1_i",)


def test_signature_from_ptx_and_mangled_name():
    f = kiln.SourceModule(MULTIPLY, arch=ARCH).get_function("multiply_them")
    assert f.signature == ("ptr", "ptr", "ptr", "i32")
    assert f.name == "_Z13multiply_themPfPKfS1_i"
    assert "multiply_them" in repr(f)


def test_every_parameter_class():
    src = """
    struct S { char c; double d; int i; };
    __global__ void k(int a, unsigned b, char c, unsigned char uc, short s, unsigned short us,
                      bool bo, long l, unsigned long long ul, float f, double d, float *p,
                      int4 v, S st) {}
    extern "C" __global__ void kc(int a, float *p, int4 v) {}
    """
    mod = kiln.SourceModule(src, arch=ARCH)
    assert mod.get_function("k").signature == (
        "i32", "u32", "i8", "u8", "i16", "u16", "u8", "i64", "u64", "f32", "f64", "ptr",
        "struct[16]/16", "struct[24]/8")
    # extern "C" leaves PTX alone to speak: no sign, and pointer or int unknown.
    assert mod.get_function("kc").signature == ("b32", "b64", "struct[16]/16")


def test_same_source_twice_is_not_recompiled():
    a = kiln.SourceModule(MULTIPLY, arch="sm_80", options=["-DX=1"])
    b = kiln.SourceModule(MULTIPLY, arch="sm_80", options=["-DX=1"])
    c = kiln.SourceModule(MULTIPLY, arch="sm_80", options=["-DX=2"])
    # The engine hands back the same compiled code: the PTX is one string, the same object
    # underneath; compare the content and that a different option gives a new compile.
    assert a.ptx == b.ptx
    assert a.cubin == b.cubin
    assert c.arch == "sm_80"


def test_toolkit_headers_are_on_the_path():
    mod = kiln.SourceModule("#include <cuda_fp16.h>\n#include <cuda/std/cstdint>\n"
                            "__global__ void h(__half *x, cuda::std::uint32_t n)\n"
                            "{ x[0] = __float2half(1.0f * n); }\n",
                            arch=ARCH)
    assert mod.get_function("h").signature == ("ptr", "u32")


def test_include_dirs_and_options(tmp_path):
    (tmp_path / "scale.h").write_text("#define SCALE 3.0f\n")
    mod = kiln.SourceModule('#include "scale.h"\n'
                            "__global__ void s(float *x) { x[0] *= SCALE * FACTOR; }\n",
                            include_dirs=[tmp_path], options=["-DFACTOR=2.0f"], arch=ARCH)
    assert "s" in mod.get_function("s").name


def test_no_extern_c_is_accepted():
    mod = kiln.SourceModule(MULTIPLY, no_extern_c=True, arch=ARCH)
    assert mod.get_function("multiply_them").signature[3] == "i32"


def test_lookup_extern_c_mangled_and_namespaced():
    mod = kiln.SourceModule("""
    extern "C" __global__ void plain(int *p) { *p = 1; }
    __global__ void cpp(int *p, unsigned n) { *p = n; }
    namespace ns { __global__ void inner(double *p) { *p = 2; } }
    """, arch=ARCH)
    assert mod.get_function("plain").name == "plain"
    assert mod.get_function("cpp").name == "_Z3cppPij"
    assert mod.get_function("_Z3cppPij") is mod.get_function("cpp")
    assert mod.get_function("ns::inner").name == mod.get_function("inner").name


def test_lookup_unknown_lists_the_kernels():
    mod = kiln.SourceModule(MULTIPLY, arch=ARCH)
    with pytest.raises(AttributeError, match="no kernel 'multiply'.*multiply_them"):
        mod.get_function("multiply")


def test_lookup_overloads_list_them():
    mod = kiln.SourceModule("__global__ void k(int *p) {}\n__global__ void k(float *p) {}\n",
                            arch=ARCH)
    with pytest.raises(ValueError, match=r"matches 2 kernels.*_Z1kPi.*_Z1kPf"):
        mod.get_function("k")
    assert mod.get_function("_Z1kPf").signature == ("ptr",)


def test_name_expressions_for_templates():
    mod = kiln.SourceModule("""
    template <typename T> __global__ void axpy(T a, const T *x, T *y, int n)
    { int i = threadIdx.x; if (i < n) y[i] += a * x[i]; }
    """, name_expressions=["axpy<float>", "axpy<double>"], arch=ARCH)
    assert mod.get_function("axpy<float>").signature == ("f32", "b64", "b64", "b32")
    assert mod.get_function("axpy<double>").signature[0] == "f64"


def test_compile_error_has_log_and_source_lines():
    src = "__global__ void k(float *x)\n{\n  x[0] = undefined_thing;\n}\n"
    with pytest.raises(kiln.CompileError) as info:
        kiln.SourceModule(src, arch=ARCH)
    assert "undefined_thing" in info.value.log
    message = str(info.value)
    assert "kernel.cu(3): error" in message
    assert "> 3 |   x[0] = undefined_thing;" in message
    assert "  2 | {" in message
    assert isinstance(info.value, kiln.Error)


@pytest.mark.parametrize("kwargs, error, phrase", [
    ({"arch": "sm_12"}, ValueError, "arch 'sm_12' is not one NVRTC"),
    ({"arch": 90}, TypeError, "arch must be a str"),
    ({"options": "-O3"}, TypeError, "options must be a list of strings"),
    ({"options": [3]}, TypeError, r"options\[0\] must be a str"),
    ({"include_dirs": [None]}, TypeError, r"include_dirs\[0\] must be a str or path"),
    ({"code": 90}, TypeError, "code must be a str"),
    ({"cache_dir": True}, TypeError, "cache_dir is a folder, None"),
    ({"cache_dir": 3}, TypeError, "cache_dir must be a str or path"),
    ({"headers_": {}}, TypeError, "unexpected keyword|invalid keyword"),
])
def test_bad_compile_arguments(kwargs, error, phrase):
    with pytest.raises(error, match=phrase):
        kiln.SourceModule(MULTIPLY, **kwargs)


def test_source_must_be_str():
    with pytest.raises(TypeError):
        kiln.SourceModule(b"__global__ void k() {}")
