"""SourceModule: compiling, what it exposes, and kernel lookup. NVRTC needs no GPU."""
import numpy as np
import pytest

import kiln
import kiln.driver
from helpers import ARCH, HAVE_GPU, run_python

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


def test_a_source_module_is_its_own_module_as_pycudas_has_one():
    # PyCUDA's SourceModule keeps the driver module it loaded as .module, and programs call
    # mod.module.get_global(...) and mod.module.get_function(...) through it.
    mod = kiln.SourceModule(MULTIPLY, arch="sm_90")
    assert mod.module is mod
    assert mod.module.get_function("multiply_them").name == "_Z13multiply_themPfPKfS1_i"


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
    # and in the words PyCUDA's error has from the driver, which programs look for
    with pytest.raises(kiln.driver.LogicError,
                       match="cuModuleGetFunction failed: named symbol not found"):
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
    # PyCUDA's attributes: nvcc's diagnostics are its .stderr, NVRTC's log is kiln's.
    assert info.value.stderr == info.value.log and info.value.stdout == ""
    assert info.value.msg == str(info.value)
    # PyCUDA's nvcc argument list, here NVRTC's: programs print " ".join(e.command_line)
    arch = f"-arch={ARCH or kiln.SourceModule('__global__ void k() {}').arch}"
    assert info.value.command_line == ["nvrtc", arch]
    with pytest.raises(kiln.CompileError) as info:
        kiln.SourceModule(src, arch=ARCH, options=["-DN=3", "--use_fast_math"])
    assert info.value.command_line == ["nvrtc", arch, "-DN=3", "--use_fast_math"]
    assert str(info.value) == info.value.msg  # str() adds a command line given by a program only
    message = str(info.value)
    assert "kernel.cu(3): error" in message
    assert "> 3 |   x[0] = undefined_thing;" in message
    assert "  2 | {" in message
    assert isinstance(info.value, kiln.Error)


def test_compile_error_takes_pycudas_constructor():
    """A program or library that raises a CompileError of its own builds it as PyCUDA does:
    CompileError(msg, command_line, stdout=None, stderr=None); str() adds the command line and
    the compiler's output, as PyCUDA's does."""
    e = kiln.CompileError("module compilation failed", ["nvcc", "-c", "k.cu"], stdout="",
                          stderr="k.cu(1): error: x is undefined")
    assert (e.msg, e.command_line, e.stdout) == ("module compilation failed",
                                                 ["nvcc", "-c", "k.cu"], "")
    assert e.stderr == e.log == "k.cu(1): error: x is undefined"
    assert str(e) == ("module compilation failed\n[command: nvcc -c k.cu]\n"
                      "[stderr:\nk.cu(1): error: x is undefined]")
    alone = kiln.CompileError("failed")
    assert (str(alone), alone.command_line, alone.stdout, alone.stderr, alone.log) == (
        "failed", None, None, None, "")
    with pytest.raises(kiln.CompileError, match="failed"):
        raise alone


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


# ---- NUL characters: C would end the string there, so every string argument but the source ----
# ---- refuses them; the source is read as nvcc reads it ------------------------------------------

NUL = "the value \0 and what follows"
TWO = ('extern "C" __global__ void first(int *p) {}\n'
       'extern "C" __global__ void second(int *p) {}\n')


@pytest.mark.parametrize("kwargs, what", [
    ({"options": ["-DX=1", "-DY=2\0-DZ=3"]}, r"options\[1\]"),
    ({"include_dirs": ["/tmp\0/etc"]}, r"include_dirs\[0\]"),
    ({"name_expressions": ["first\0"]}, r"name_expressions\[0\]"),
    ({"headers": {"a.h\0b.h": "int x;"}}, "a header's name"),
    ({"headers": {"a.h": "int x;\0int y"}}, "the text of header 'a.h'"),
    ({"arch": "sm_90\0sm_75"}, "arch"),
    ({"code": "sm_90\0"}, "code"),
    ({"cache_dir": "/tmp\0/x"}, "cache_dir"),
    ({"nvcc": "nvcc\0-other"}, "nvcc"),
], ids=["options", "include_dirs", "name_expressions", "header-name", "header-text",
        "arch", "code", "cache_dir", "nvcc"])
def test_a_nul_in_any_compile_string_is_refused(kwargs, what):
    kwargs = dict(kwargs)
    source = kwargs.pop("source", TWO)
    kwargs.setdefault("arch", ARCH)
    with pytest.raises(ValueError, match=what + r" holds a NUL character"):
        kiln.SourceModule(source, cache_dir=False, **kwargs) if "cache_dir" not in kwargs \
            else kiln.SourceModule(source, **kwargs)


# A NUL in a Python string that is not raw, as programs write `'\0'` in a comment or literal.
NUL_SOURCE = ('''__global__ void k(int *a) {
  // if (s[i] == '\0') stop;  /* \0 */
  const char *s = "a\0" "1";
  a[0] = s[1]; a[1] = s[2]; a[2] = sizeof("x\0y"); a[3] = '\0'; a[4] = '\0' + 5;
  int x\0= 3; a[5] = x;
}''')


def test_a_nul_in_the_source_is_read_as_nvcc_reads_it():
    # nvcc's preprocessor takes a NUL in code or a comment as white space, and keeps one in a
    # string or character literal; NVRTC, given C strings, would stop at the first.
    assert "\0" in NUL_SOURCE
    mod = kiln.SourceModule(NUL_SOURCE, no_extern_c=True, arch=ARCH, cache_dir=False)
    assert mod.kernels == ("_Z1kPi",)
    two = kiln.SourceModule(TWO.replace("\n", "\0", 1), arch=ARCH, cache_dir=False)
    assert two.kernels == ("first", "second")
    with pytest.raises(kiln.CompileError, match="xy"):  # two names, as nvcc reads them
        kiln.SourceModule("__global__ void k(int *a) { int x\0y = 3; a[0] = xy; }",
                          arch=ARCH, cache_dir=False)


@pytest.mark.parametrize("source, constants", [
    # a C++14 digit separator is no character literal: the string after it keeps its zero
    ("__device__ int w = 1'000; __device__ const char s[] = \"it's\0\";",
     ["w = 1000", "s[6] = {105, 116, 39, 115}"]),
    # a raw string has no escapes: kiln closes it round the zero and opens it again
    ('__device__ const char r[] = R"xy(a\0b)x)xy";', ["r[6] = {97, 0, 98, 41, 120}"]),
    # a raw string across lines holds what would open a comment
    ('__device__ const char r[] = R"(a\n/* )";\n__device__ const char s[] = "x\0y";\n'
     '__device__ int q = 3; // */', ["r[6] = {97, 10, 47, 42, 32}", "s[4] = {120, 0, 121}",
                                     "q = 3"]),
    # a backslash, a NUL and the line's end continue the line, as nvcc's preprocessor reads it
    ("#define V 1 + \\\0\n 2\n__device__ int a = V;", ["a = 3"]),
], ids=["digit-separator", "raw-string", "raw-string-lines", "line-continued"])
def test_the_constants_a_nul_makes_are_nvccs(source, constants):
    # What nvcc 13 gives for each source (its PTX's .global lines, read in the same way).
    ptx = kiln.compiler.compile(source, no_extern_c=True, arch=ARCH, target="ptx",
                                cache_dir=False).decode()
    got = [line.split(" ", 4)[-1].rstrip(";") for line in ptx.splitlines()
           if line.startswith(".global")]
    assert got == constants


def test_a_backslash_before_a_nul_in_a_literal_is_refused_as_nvcc_refuses_it():
    with pytest.raises(ValueError, match="a backslash before a NUL character"):
        kiln.SourceModule('__device__ const char s[] = "a\\\0b";', arch=ARCH, cache_dir=False)


@pytest.mark.gpu
def test_a_nul_in_a_literal_is_a_zero_character():
    f = kiln.SourceModule(NUL_SOURCE).get_function("k")
    out = np.full(6, -1, np.int32)
    f(kiln.Out(out), block=(1, 1, 1), grid=(1, 1))
    assert out.tolist() == [0, ord("1"), 4, 0, 5, 3]


def test_a_nul_in_a_path_object_is_refused(tmp_path):
    class Path:
        def __fspath__(self):
            return str(tmp_path) + "\0/etc"

    with pytest.raises(ValueError, match=r"include_dirs\[1\] holds a NUL character"):
        kiln.SourceModule(TWO, include_dirs=[tmp_path, Path()], arch=ARCH, cache_dir=False)
    with pytest.raises(ValueError, match=r"cache_dir holds a NUL character"):
        kiln.SourceModule(TWO, cache_dir=Path(), arch=ARCH)


def test_a_nul_in_a_lookup_is_refused_not_cut():
    mod = kiln.SourceModule(TWO + "__device__ int counter;\n", arch=ARCH)
    assert mod.kernels == ("first", "second")
    with pytest.raises(ValueError, match="the kernel's name holds a NUL character"):
        mod.get_function("first\0second")
    with pytest.raises(ValueError, match="the variable's name holds a NUL character"):
        mod.get_global("counter\0")
    assert mod.get_function("first").name == "first"  # the refusal cached nothing
    with pytest.raises(ValueError, match="the PTX holds a NUL character"):
        kiln.module_from_buffer(mod.ptx + "\0.entry junk")


# ---- Objects the compile reads stay owned while Python code or other threads run ----------------

def test_include_dirs_emptied_by_fspath_are_all_still_read(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    (tmp_path / "a" / "a.h").write_text("#define A 1\n")
    (tmp_path / "b" / "b.h").write_text("#define B 2\n")
    dirs = []

    class Emptying:
        def __fspath__(self):
            dirs.clear()  # the list the caller gave, emptied while it is read
            dirs.extend(object() for _ in range(8))
            return str(tmp_path / "a")

    dirs += [Emptying(), str(tmp_path / "b")]
    mod = kiln.SourceModule('#include "a.h"\n#include "b.h"\n'
                            'extern "C" __global__ void k(int *p) { p[0] = A + B; }\n',
                            include_dirs=dirs, arch=ARCH, cache_dir=False)
    assert mod.kernels == ("k",)


def test_fspath_returning_fresh_objects_is_kept(tmp_path):
    (tmp_path / "c.h").write_text("#define C 3\n")

    class Fresh:
        def __fspath__(self):
            return "".join([str(tmp_path)])  # a new str, held by nothing else

    mod = kiln.SourceModule('#include "c.h"\nextern "C" __global__ void k(int *p) { p[0] = C; }\n',
                            include_dirs=[Fresh(), Fresh()], cache_dir=Fresh(), arch=ARCH)
    assert mod.kernels == ("k",)


def test_options_replaced_during_fspath_are_the_ones_read(tmp_path):
    options = ["-DNAME=first"]

    class Replacing:
        def __fspath__(self):
            options[0] = "-DNAME=" + "".join(["sec", "ond"])
            return str(tmp_path)

    # options are read before include_dirs: the compile sees the list as it was then.
    mod = kiln.SourceModule('extern "C" __global__ void NAME(int *p) {}\n', options=options,
                            include_dirs=[Replacing()], arch=ARCH, cache_dir=False)
    assert mod.kernels == ("first",)


def test_headers_replaced_by_another_thread_during_compiles():
    import threading

    pad = "// " + "." * 3000 + "\n"  # past the small-object allocator: freed memory is reused
    headers = {"name.h": pad + "#define NAME first\n"}
    stop = threading.Event()

    def replace():
        n = 0
        while not stop.is_set():
            # Fresh strings, held only by the dict: the one replaced is freed at once, and
            # strings of its size that would not compile are made to land where it was.
            name = ("first", "second")[n % 2]
            headers["name.h"] = "".join([pad, "#define NAME ", name, "\n"])
            junk = ["".join([pad, "#error read after free %d\n" % k]) for k in range(4)]
            del junk
            n += 1

    thread = threading.Thread(target=replace)
    thread.start()
    try:
        for _ in range(16):
            mod = kiln.SourceModule('#include "name.h"\n'
                                    'extern "C" __global__ void NAME(int *p) {}\n',
                                    headers=headers, arch=ARCH, cache_dir=False)
            assert mod.kernels in (("first",), ("second",))
    finally:
        stop.set()
        thread.join()


# ---- The target: arch=, the device's, and every spelling of one in options --------------------

@pytest.mark.parametrize("arch, code, options, phrase", [
    ("sm_90", None, ["-gencode", "arch=compute_75,code=sm_75"], "given twice"),
    ("sm_90", None, ["--generate-code=arch=compute_75,code=sm_75"], "given twice"),
    ("sm_90", None, ["-arch=sm_75", "-code=sm_75"], "given twice, as 'sm_90' and 'sm_75'"),
    ("sm_90", None, ["-code=sm_75"], "code 'sm_75' is older than arch 'sm_90'"),
    ("sm_90", None, ["--gpu-code", "sm_75"], "code 'sm_75' is older than arch 'sm_90'"),
    ("sm_90", "sm_75", [], "code 'sm_75' is older than arch 'sm_90'"),
    (None, "sm_75", ["-arch=sm_90"], "code 'sm_75' is older than arch 'sm_90'"),
    (None, None, ["-arch=sm_90,sm_75"], "names several targets"),
], ids=["-gencode", "--generate-code", "-arch-code-pair", "-code", "--gpu-code", "code=",
        "code-arch", "several"])
def test_contradictory_targets_are_refused(arch, code, options, phrase):
    with pytest.raises(ValueError, match=phrase):
        kiln.SourceModule(TWO, arch=arch, code=code, options=options, cache_dir=False)


@pytest.mark.parametrize("options", [
    ["-arch=sm_75"], ["-arch", "sm_75"], ["--gpu-architecture=sm_75"],
    ["--gpu-architecture", "sm_75"], ["-arch=compute_75"], ["-arch=sm_90a"],
    ["-arch=sm_35"],  # an old GPU's, which NVRTC no longer builds
    ["-arch=sm_90", "-arch=sm_75"],
])
def test_an_arch_in_the_options_gives_way_to_the_one_pycuda_appends(options, monkeypatch):
    # PyCUDA hands nvcc the program's options, then -arch with arch= or the device's; nvcc
    # takes the last -arch. $KILN_ARCH stands for the device here, so this runs without one.
    assert kiln.SourceModule(TWO, arch="sm_90", options=options, cache_dir=False).arch == "sm_90"
    monkeypatch.setenv("KILN_ARCH", "sm_89")
    assert kiln.SourceModule(TWO, options=options, cache_dir=False).arch == "sm_89"


@pytest.mark.parametrize("arch, options, built", [
    ("sm_90", ["-arch=sm_90"], "sm_90"),
    ("sm_90", ["--gpu-architecture", "sm_90"], "sm_90"),
    ("sm_90", ["-arch=compute_90"], "sm_90"),
    ("compute_90", ["--gpu-architecture=sm_90"], "sm_90"),
    ("sm_90", ["-gencode", "arch=compute_90,code=sm_90"], "sm_90"),
    (None, ["-gencode", "arch=compute_75,code=sm_75"], "sm_75"),
    (None, ["-arch=sm_75", "-code=sm_80"], "sm_80"),
])
def test_agreeing_targets_compile_for_the_one_they_name(arch, options, built):
    mod = kiln.SourceModule(TWO, arch=arch, options=options, cache_dir=False)
    assert mod.arch == built


def test_an_arch_in_the_options_is_the_arch_where_none_follows_it(monkeypatch):
    # No arch=, no $KILN_ARCH and no GPU: nothing follows the options' -arch, so it is the
    # compile's (the last of several, as nvcc takes it); with a GPU the device's follows.
    monkeypatch.delenv("KILN_ARCH", raising=False)
    device = kiln.SourceModule(TWO, cache_dir=False).arch if HAVE_GPU else None
    for options in (["-arch=sm_80"], ["-arch=sm_75", "-arch", "sm_80"]):
        assert kiln.SourceModule(TWO, options=options, cache_dir=False).arch == (device or "sm_80")
    # The same call again once $KILN_ARCH is set: that arch, not the one recalled; and once it
    # is unset again, what the first call gave (the oldest arch, sm_75, is no stand-in).
    for env, built in (("sm_89", "sm_89"), ("sm_75", "sm_75"), (None, device or "sm_80")):
        if env:
            monkeypatch.setenv("KILN_ARCH", env)
        else:
            monkeypatch.delenv("KILN_ARCH")
        assert kiln.SourceModule(TWO, options=["-arch=sm_80"], cache_dir=False).arch == built


@pytest.mark.parametrize("call", ["pow(x, 2.0)", "pow(n, 2)", "pow(2.0, x)", "pow(u, x)",
                                  "pow(c, 3L)", "pow(x, 2.0f) + pow(d, n) + pow(x, n)"])
def test_pow_of_mixed_types_compiles_as_under_nvcc(call):
    # nvcc declares a device pow template promoting two arithmetic types as <cmath>'s pow does;
    # NVRTC alone finds pow(float, double) ambiguous.
    src = ("__global__ void k(float *out, float x, int n, unsigned u, char c, double d)\n"
           f"{{ out[0] = {call}; }}\n")
    assert kiln.SourceModule(src, arch=ARCH, cache_dir=False).get_function("k")


def test_pow_beside_libcudacxx_and_what_nvcc_refuses_too():
    # After `using namespace cuda::std;` libcu++'s pow template serves the mixed call, as it did
    # before kiln gave one of its own (nvcc finds the two ambiguous).
    kiln.SourceModule("#include <cuda/std/cmath>\nusing namespace cuda::std;\n"
                      "__global__ void k(float *x) { x[0] = pow(x[0], 2.0); }\n", arch=ARCH,
                      cache_dir=False)
    # Other math functions of mixed types are refused by nvcc too: kiln adds no overloads.
    with pytest.raises(kiln.CompileError, match='more than one instance of overloaded function '
                                                '"atan2"'):
        kiln.SourceModule("__global__ void k(float *x) { x[0] = atan2(x[0], 1.0); }",
                          arch=ARCH, cache_dir=False)
    # A pow of a type that is not arithmetic is not the template's.
    with pytest.raises(kiln.CompileError, match='"pow"'):
        kiln.SourceModule("struct S {};\n__global__ void k(float *x) { S s; x[0] = pow(s, 2); }",
                          arch=ARCH, cache_dir=False)


def test_sources_written_for_nvcc_and_pycuda_compile_as_they_did_there():
    # nvcc's implicit host headers give kernels uint, int32_t, M_PI...; PyCUDA's SourceModule
    # puts its pycuda-complex.hpp and pycuda-helpers.hpp on every include path.
    src = """
    #include <pycuda-complex.hpp>
    __global__ void k(pycuda::complex<float> *z, float *x, uint n, ushort s, ulong l,
                      const int32_t m, u_int8_t b)
    { uint i = threadIdx.x; if (i < n) { z[i] = pycuda::exp(z[i]) * (float)M_PI;
      x[i] = HUGE_VALF + s + l + pycuda::abs(z[i]) + m + b; } }
    """
    mod = kiln.SourceModule(src, arch=ARCH)
    assert mod.log == ""
    assert mod.get_function("k").signature == ("ptr", "ptr", "u32", "u16", "u64", "i32", "u8")
    # Its complex type's parts by the names PyCUDA's header gives them.
    parts = kiln.SourceModule("#include <pycuda-complex.hpp>\n"
                              "__global__ void r(pycuda::complex<double> *z, double t)\n"
                              "{ sincos(t, &z->_M_im, &z->_M_re); z->_M_re += z->re; }\n",
                              arch=ARCH)
    assert parts.get_function("r").signature == ("ptr", "f64")
    helpers = kiln.SourceModule('#include "pycuda-helpers.hpp"\n'
                                "__global__ void h(fp_tex_double *d, pycuda::complex<double> *z)"
                                "\n{ d[0].x = (int)z[0].real(); }\n", arch=ARCH)
    assert helpers.get_function("h").signature == ("ptr", "ptr")
    # Its complex type's out-of-line half, which some preambles include alone.
    impl = kiln.SourceModule("#include <pycuda-complex-impl.hpp>\n"
                             "__global__ void i(pycuda::complex<float> *z)"
                             "{ z[0] /= sqrt(abs(z[1])); }\n", arch=ARCH)
    assert impl.get_function("i").signature == ("ptr",)
    # A header of the caller's under the same name wins, as an include folder of its own would.
    own = kiln.SourceModule("#include <pycuda-complex.hpp>\n__global__ void k(int *p)"
                            "{ p[0] = MINE; }\n", arch=ARCH,
                            headers={"pycuda-complex.hpp": "#define MINE 7\n"})
    assert own.get_function("k").signature == ("ptr",)
    with pytest.raises(kiln.CompileError, match="pycuda::complex"):
        kiln.SourceModule("#include <pycuda-complex.hpp>\n__global__ void k(int *p)"
                          "{ pycuda::complex<float> z; p[0] = MINE; }\n", arch=ARCH,
                          headers={"pycuda-complex.hpp": "#define MINE 7\n"})


def test_pycudas_complex_through_volatile_as_its_header_has_it():
    # PyCUDA's header assigns to a volatile complex and adds and multiplies volatile ones, for
    # reductions through volatile shared memory; PyNX's reduction structs define volatile
    # operators of their own over these. The type stays trivially copyable, and assigning a
    # real number to a complex one is still unambiguous.
    mod = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    #include <type_traits>
    typedef pycuda::complex<float> complexf;
    static_assert(std::is_trivially_copyable<complexf>::value, "trivially copyable");
    struct complexf_2 {
      complexf v[2];
      __device__ volatile complexf_2 &operator=(const complexf_2 &o) volatile
      { v[0] = o.v[0]; v[1] = o.v[1]; return *this; }
    };
    __device__ complexf_2 add(const volatile complexf_2 &a, const volatile complexf_2 &b)
    { complexf_2 r; r.v[0] = a.v[0] + b.v[0]; r.v[1] = a.v[1] * b.v[1]; return r; }
    __global__ void k(complexf *z, pycuda::complex<double> *w, complexf_2 *s)
    { volatile complexf v[2]; v[0] = z[0]; v[1] = 2.0f; z[1] = v[0] + v[1]; z[2] = v[0] * v[1];
      z[3] = 1.0f; z[4] = 2; z[5] = 0.5; volatile pycuda::complex<double> d; d = z[0];
      w[0] = d + d; volatile complexf_2 t; t = s[0]; s[1] = add(t, s[0]); w[1] = d; z[6] = d;
      pycuda::complex<double> e; e = w[0]; e = z[0]; w[2] = e; }
    """, arch=ARCH)
    assert mod.get_function("k").signature == ("ptr", "ptr", "ptr")


def test_pycudas_headers_reach_through_other_headers_and_yield_to_the_callers_folders(tmp_path):
    uses = "__global__ void k(pycuda::complex<float> *z) { z[0] = pycuda::conj(z[0]); }\n"
    # Named by a header of headers=, by a header in an include folder, by -include.
    mod = kiln.SourceModule('#include "mine.h"\n' + uses, arch=ARCH,
                            headers={"mine.h": "#include <pycuda-complex.hpp>\n"})
    assert mod.get_function("k").signature == ("ptr",)
    (tmp_path / "wrap.h").write_text("#include <pycuda-complex.hpp>\n")
    mod = kiln.SourceModule('#include "wrap.h"\n' + uses, arch=ARCH,
                            include_dirs=[str(tmp_path)])
    assert mod.get_function("k").signature == ("ptr",)
    mod = kiln.SourceModule(uses, arch=ARCH, options=["-include", "pycuda-complex.hpp"])
    assert mod.get_function("k").signature == ("ptr",)
    # A pycuda-complex.hpp in the caller's include folder is the one included, as under
    # PyCUDA, whose own folder comes after the caller's; pycuda-helpers.hpp is still kiln's.
    own = tmp_path / "own"
    own.mkdir()
    (own / "pycuda-complex.hpp").write_text("#define FROM_THE_CALLERS_FOLDER 1\n")
    src = ("#include <pycuda-helpers.hpp>\n#if !FROM_THE_CALLERS_FOLDER\n#error kiln's header won"
           "\n#endif\n__global__ void k(fp_tex_double *d) { d[0].x = 1; }\n")
    for how in ({"include_dirs": [str(own)]}, {"options": ["-I" + str(own)]}):
        assert kiln.SourceModule(src, arch=ARCH, **how).get_function("k").signature == ("ptr",)


def test_pycudas_complex_pow_takes_a_real_or_an_int_exponent_as_its_header_does():
    # PyCUDA's header has pow(complex<T>, T) and pow(T, complex<T>) as plain functions, so that
    # an int or the other precision converts: the interactive Mandelbrot's pow(z, 2). nvcc
    # takes pow(complex<float>, double) in float and two complex types in the wider, where
    # NVRTC finds PyCUDA's own header ambiguous; kiln's header chooses as nvcc does.
    mod = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    template <typename A, typename B> struct same { enum { value = 0 }; };
    template <typename A> struct same<A, A> { enum { value = 1 }; };
    #define IS(x, T) static_assert(same<decltype(x), pycuda::complex<T>>::value, #x)
    __global__ void k(pycuda::complex<double> *z, pycuda::complex<float> *f, int n, double d)
    { z[0] = pow(z[0], 2); z[1] = pow(z[1], n); z[2] = pow(z[2], 2.0f); z[3] = pow(2.0, z[3]);
      z[4] = pycuda::pow(z[4], 0.5); z[5] = pow(z[5], z[6]);
      f[1] = pow(f[1], n); f[2] = pow(2, f[2]); f[3] = pow(f[3], 2.0f);
      IS(pow(f[0], d), float); IS(pow(d, f[0]), float); IS(pow(f[0], 2.0), float);
      IS(pow(f[0], 2u), float); IS(pow(z[0], 2LL), double); IS(pow(f[0], z[0]), double);
      IS(pow(z[0], f[0]), double); IS(pow(f[0], f[1]), float); IS(pow(z[0], 2.0f), double); }
    """, arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr", "i32", "f64")
    # PyCUDA's headers are not libcu++'s (whose <cuda/...> headers bring their own INFINITY and
    # pow): nvcc's bare INFINITY and mixed pow(float, double) stay, under either name.
    for name in ("pycuda-complex.hpp", "pycuda/pycuda-complex.hpp"):
        mod = kiln.SourceModule(f"#include <{name}>\n__global__ void k(float *y)"
                                "{ y[0] = INFINITY; y[1] = pow(y[2], 0.5); }\n",
                                arch=ARCH, cache_dir=False)
        assert mod.get_function("k").signature == ("ptr",)



@pytest.mark.parametrize("options", [[], ["-rdc=true"]], ids=["plain", "rdc"])
def test_programmatic_launchs_device_calls_need_no_include_as_under_nvcc(options):
    # cuda_runtime.h gives them every kernel under nvcc; NVRTC only with -rdc=true.
    src = """
    __global__ void k(float *out) {
    #if __CUDA_ARCH__ >= 900
        cudaGridDependencySynchronize();
    #endif
        out[threadIdx.x] = 1.f;
    #if __CUDA_ARCH__ >= 900
        cudaTriggerProgrammaticLaunchCompletion();
    #endif
    }"""
    for arch in ("sm_90", "sm_80"):
        mod = kiln.SourceModule(src, arch=arch, options=options, cache_dir=False)
        assert mod.get_function("k").signature == ("ptr",)


def test_floating_constants_that_fold_are_read_by_kernels_as_under_nvcc():
    # nvcc folds a namespace-scope constant made of others (raulperod's heat equation's
    # const float dt = dx * dx / 8); NVRTC refuses to initialize it on the device.
    mod = kiln.SourceModule("""
    #define L 1.0
    const float dx = L / 10; const int n = 8;
    const float dt = dx * dx / n;
    const float root = sqrtf(dx);  // not folded: no kernel may read it, as under nvcc
    __global__ void k(float *x) { x[0] = dt; }
    """, arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("ptr",)
    # through a macro of -D or of a header (M_PI), written in capitals as macros are
    mod = kiln.SourceModule("#include <math.h>\nconst double OMEGA = 2 * M_PI * FREQ;\n"
                            "const float B = 1.0 / OMEGA;\n"
                            "__global__ void k(float *x) { x[0] = B; }\n", arch=ARCH,
                            options=["-DFREQ=50.0"], cache_dir=False)
    assert mod.get_function("k").signature == ("ptr",)
    with pytest.raises(kiln.CompileError, match="dynamic initialization"):
        kiln.SourceModule("const float a = 0.5f;\nconst float c = sqrtf(a);\n"
                          "__global__ void k(float *x) { x[0] = c; }\n", arch=ARCH,
                          cache_dir=False)


def test_functions_a_program_adds_to_namespace_pycuda_are_found_for_its_complex():
    # skcuda's parray header adds templates to namespace pycuda and calls them unqualified: the
    # type is declared there, as PyCUDA's is, so argument-dependent lookup finds them.
    mod = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    extern "C++" { namespace pycuda { template <class T>
    __device__ T myabs2(const complex<T> &z) { return z._M_re * z._M_re + z._M_im * z._M_im; } } }
    __global__ void k(float *out, kiln::complex<double> *z)
    { pycuda::complex<float> a(1, 2); out[0] = myabs2(a); z[0] = myabs2(z[1]) + exp(z[2]); }
    """, arch=ARCH, cache_dir=False)
    assert mod.get_function("k").declaration == "k(float *, pycuda::complex<double> *)"


def test_algorithms_min_and_max_are_libcuxxs_for_kernels_as_under_relaxed_constexpr():
    # softmax kernels of torch extensions call std::max, which nvcc lets a kernel call under
    # --expt-relaxed-constexpr; the rest of <algorithm> stays host code (std::sort in main).
    mod = kiln.SourceModule("""
    #include <algorithm>
    __global__ void k(float *o, float a, float b, int i)
    { o[0] = std::max(a, b); o[1] = std::min(a, b); o[2] = std::clamp(a, 0.f, 1.f);
      o[3] = std::max({a, b, 3.f}) + std::max(i, 2); }
    int main() { int v[2] = {2, 1}; std::sort(v, v + 2); return 0; }
    """, arch=ARCH, options=["--expt-relaxed-constexpr"], cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "f32", "f32", "i32")

def test_pycudas_complex_lays_out_as_numpys_and_pycudas():
    # A struct of a NumPy record array with a complex field is read as NumPy wrote it: the type
    # is aligned as its parts are (complex64: 4 bytes), as PyCUDA's is.
    assert np.dtype([("w", "f4"), ("z", "c8")], align=True).itemsize == 12
    mod = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    struct sample { float w; pycuda::complex<float> z; };
    struct wide { double w; pycuda::complex<double> z; char c; };
    static_assert(sizeof(pycuda::complex<float>) == 8 && alignof(pycuda::complex<float>) == 4, "");
    static_assert(sizeof(pycuda::complex<double>) == 16 && alignof(pycuda::complex<double>) == 8,
                  "");
    static_assert(sizeof(sample) == 12 && sizeof(wide) == 32, "");
    __global__ void k(sample *s, pycuda::complex<float> z, float x)
    { s[0].z = z * x + INFINITY; s[1].z = pow(s[0].z, 2); }
    """, arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "struct[8]/4", "f32")  # 4-aligned


@pytest.mark.gpu
def test_a_record_array_with_complex_fields_reads_as_numpy_wrote_it():
    rec = np.dtype([("c", np.complex64), ("k", np.int32), ("d", np.complex128)], align=True)
    mod = kiln.SourceModule("""
    #include <pycuda-complex.hpp>
    struct rec { pycuda::complex<float> c; int k; pycuda::complex<double> d; };
    __global__ void k(const rec *r, double *o, int *size, int n)
    {
        int i = threadIdx.x;
        if (i < n) {
            o[4 * i] = r[i].c.real(); o[4 * i + 1] = r[i].c.imag();
            o[4 * i + 2] = r[i].k; o[4 * i + 3] = r[i].d.imag();
        }
        size[0] = sizeof(rec);
    }
    """, arch=ARCH, cache_dir=False)
    a = np.zeros(5, rec)
    a["c"] = np.arange(5) + 1j * np.arange(5, 10)
    a["k"] = np.arange(20, 25)
    a["d"] = 3 - 1j * np.arange(30, 35)
    o, size = np.zeros(20), np.zeros(1, np.int32)
    mod.get_function("k")(kiln.In(a), kiln.Out(o), kiln.Out(size), np.int32(5), block=(32, 1, 1))
    assert size[0] == rec.itemsize == 32
    want = np.stack([a["c"].real, a["c"].imag, a["k"], a["d"].imag], axis=1).ravel()
    np.testing.assert_array_equal(o, want)


def _a_pycuda_folder(path, impl=True):
    """A stand-in of PyCUDA's own pycuda-complex.hpp (its guard, its type, and its last line,
    which includes the out-of-line half), and of that half, which says it was read."""
    path.mkdir(parents=True)
    (path / "pycuda-complex.hpp").write_text(
        "#ifndef PYCUDA_COMPLEX_HPP_SEEN\n#define PYCUDA_COMPLEX_HPP_SEEN\n"
        "namespace pycuda { template <class T> struct complex { T _M_re, _M_im; }; }\n"
        "#include <pycuda-complex-impl.hpp>\n#endif\n")
    if impl:
        (path / "pycuda-complex-impl.hpp").write_text("#define PYCUDAS_OWN_IMPL 1\n")


def test_pycudas_own_complex_header_in_a_folder_takes_its_own_other_half(tmp_path):
    uses = ("__global__ void k(pycuda::complex<float> *z, int *p)\n"
            "{ z[0]._M_re = 1; p[0] = PYCUDAS_OWN_IMPL; }\n")
    # An older PyCUDA installed its headers in include/pycuda/, which programs name.
    _a_pycuda_folder(tmp_path / "include" / "pycuda")
    mod = kiln.SourceModule("#include <pycuda/pycuda-complex.hpp>\n" + uses, arch=ARCH,
                            include_dirs=[str(tmp_path / "include")], cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr")
    # Without such a folder, the name is kiln's complex type, as <pycuda-complex.hpp> is.
    mod = kiln.SourceModule("#include <pycuda/pycuda-complex.hpp>\n#include "
                            "<pycuda/pycuda-helpers.hpp>\n__global__ void k(pycuda::complex<float>"
                            " *z, fp_tex_double *d) { z[0] = pycuda::exp(z[0]); d[0].x = 1; }\n",
                            arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr")
    # A copy of PyCUDA's pycuda-complex.hpp alone: its other half is nowhere, and kiln's type
    # would clash with its own; the error says what to do.
    _a_pycuda_folder(tmp_path / "copy", impl=False)
    with pytest.raises(kiln.CompileError, match="needs its pycuda-complex-impl.hpp"):
        kiln.SourceModule("#include <pycuda-complex.hpp>\n" + uses, arch=ARCH,
                          include_dirs=[str(tmp_path / "copy")], cache_dir=False)


def test_a_toolkit_header_that_needs_the_host_says_so():
    # <thrust/device_vector.h> reaches the host's <memory>; the log names only thrust's file.
    with pytest.raises(kiln.CompileError, match=r"(?s)needs the host's <memory>.*"
                                                r"thrust/functional\.h"):
        kiln.SourceModule("#include <thrust/device_vector.h>\n__global__ void k(int *p) {}\n",
                          arch=ARCH, cache_dir=False)
    with pytest.raises(kiln.CompileError, match=r"(?s)needs the host's <complex>.*"
                                                r"pycuda-complex\.hpp"):
        kiln.SourceModule("#include <thrust/complex.h>\n__global__ void k(int *p) {}\n",
                          arch=ARCH, cache_dir=False)
    with pytest.raises(kiln.CompileError, match="holds host code, which NVRTC does not compile"):
        kiln.SourceModule("#include <cub/cub.cuh>\n__global__ void k(int *p) {}\n",
                          arch=ARCH, cache_dir=False)


def test_a_static_assert_without_a_message_before_cxx17_says_what_to_do():
    # FunFact's headers use it under -std=c++14. NVRTC refuses it in a process's first compile
    # only (after any other it takes it), so a new process compiles it.
    r = run_python(f'''
        import kiln
        src = "static_assert(sizeof(int) == 4);\\n__global__ void k(int *p) {{}}\\n"
        try:
            kiln.SourceModule(src, options=["-std=c++14"], no_extern_c=True, arch={ARCH!r},
                              cache_dir=False)
        except kiln.CompileError as e:
            print(e)
    ''')
    assert r.returncode == 0, r.stderr
    assert "not enabled in this mode" in r.stdout and "compile with -std=c++17" in r.stdout, \
        r.stdout


def test_a_subclass_with_an_init_of_its_own_is_compiled_by_sourcemodules_init(tmp_path):
    # neon's SourceModule subclass picks a cache folder in its __init__ and passes it on to
    # SourceModule.__init__, where PyCUDA compiles; kiln compiles there too for such a class.
    src = "__global__ void k(int *p) { p[0] = N; }"

    class Cached(kiln.SourceModule):
        def __init__(self, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False,
                     arch=None, code=None, cache_dir=None, include_dirs=[]):
            self.folder = tmp_path / "chosen"
            super().__init__(source, nvcc, options, keep, no_extern_c, arch, code,
                             str(self.folder), include_dirs)

    m = Cached(src, options=["-DN=3"], arch=ARCH)
    assert type(m) is Cached and m.kernels == ("_Z1kPi",)
    assert m.arch == ARCH if ARCH else m.arch.startswith("sm_")  # the device's own arch
    assert any(m.folder.iterdir())  # the folder the subclass chose holds the entry
    kiln.SourceModule.__init__(m, "no source: already compiled")  # a second call does nothing
    assert m.kernels == ("_Z1kPi",)
    with pytest.raises(kiln.CompileError, match="identifier \"N\" is undefined"):
        Cached(src, arch=ARCH)

    class Forgetful(kiln.SourceModule):
        def __init__(self, what):
            self.what = what

    f = Forgetful(5)
    assert repr(f) == "<Forgetful holding no code yet>"
    for read in (lambda: f.get_function("k"), lambda: f.get_global("g"), lambda: f.ptx,
                 lambda: f.cubin, lambda: f.log, lambda: f.arch, lambda: f.kernels,
                 lambda: f.globals):
        with pytest.raises(RuntimeError, match="must call SourceModule.__init__"):
            read()

    class Plain(kiln.SourceModule):  # no __init__: compiled by the constructor, as before
        pass

    assert Plain(src, options=["-DN=1"], arch=ARCH).kernels == ("_Z1kPi",)


@pytest.mark.parametrize("options", [["-O4"], ["-O", "3"], ["--optimize", "2"], ["-O0"], ["-O"],
                                     ["-Ofc=max"], ["-Ofast-compile", "max"]])
def test_the_host_compilers_optimization_level_is_dropped_at_any_number(options):
    # nvcc hands -O<n> to the host compiler, at any n and as one item or two (FunFact's -O4);
    # an item after a bare -O that is no number is read as itself, and NVRTC's own -Ofc kept.
    src = "__global__ void k(int *p) { p[0] = N; }"
    mod = kiln.SourceModule(src, arch="sm_90", options=options + ["-DN=4"], cache_dir=False)
    assert mod.arch == "sm_90"
    with pytest.raises(kiln.CompileError, match="unrecognized option -O3x"):
        kiln.SourceModule(src, arch="sm_90", options=["-DN=1", "-O3x"], cache_dir=False)


def test_type_traits_compiles_under_cxx14_as_the_hosts_does():
    src = ("#include <type_traits>\n"
           "template <class T> __device__ typename std::enable_if<std::is_integral<T>::value,"
           " T>::type twice(T x) { return 2 * x; }\n"
           "__global__ void k(int *p) { p[0] = twice(p[1]); }\n")
    assert kiln.SourceModule(src, arch="sm_90", options=["-std=c++14"], cache_dir=False).log == ""
    # What needs C++17 (<limits>), or C++14 under C++11, is compiled again as C++17, where nvcc
    # would have the host's headers of the older dialect.
    more = kiln.SourceModule("#include <type_traits>\n#include <limits>\n" + src, arch="sm_90",
                             options=["-std=c++14"], cache_dir=False)
    assert more.get_function("k").signature == ("ptr",)
    older = kiln.SourceModule(src, arch="sm_90", options=["-std=c++11"], cache_dir=False)
    assert older.get_function("k").signature == ("ptr",)


REGISTER_SWAP = """
#define ELEM_SWAP(a, b) { register float t = (a); (a) = (b); (b) = t; }
__global__ void k(float *a) { register int i = 2 * threadIdx.x; ELEM_SWAP(a[i], a[i + 1]); }
"""


def test_cs_register_compiles_as_nvcc_takes_it():
    # NVRTC refuses `register` under C++17; nvcc takes it, as GCC does (a median filter's swap).
    mod = kiln.SourceModule(REGISTER_SWAP, arch="sm_90", cache_dir=False)
    assert mod.get_function("k").signature == ("ptr",)
    # Another refusal in the same source is the one said, the register one gone.
    with pytest.raises(kiln.CompileError, match='identifier "oops" is undefined') as e:
        kiln.SourceModule(REGISTER_SWAP.replace("(b) = t;", "(b) = oops;"), arch="sm_90",
                          cache_dir=False)
    assert "storage class specifier" not in str(e.value)
    # Under C++14, where NVRTC takes it, nothing is compiled again.
    assert kiln.SourceModule(REGISTER_SWAP, arch="sm_90", options=["-std=c++14"],
                             cache_dir=False).log == ""


@pytest.mark.gpu
def test_cs_register_kernel_computes():
    a = np.arange(8, dtype=np.float32)
    kiln.SourceModule(REGISTER_SWAP).get_function("k")(kiln.InOut(a), block=(4, 1, 1))
    np.testing.assert_array_equal(a, [1, 0, 3, 2, 5, 4, 7, 6])


GNU_BUILTINS = """
__extension__ typedef unsigned long long u64;
__global__ void k(unsigned *u, float *x, u64 *w, unsigned __int128 big) {
  u[0] = __builtin_popcount(u[1]); u[1] = __builtin_clz(u[2]); u[2] = __builtin_ffs(u[3]);
  w[0] = __builtin_popcountll(w[1]); w[1] = (u64)(big >> 64);
  x[0] = __builtin_fabsf(x[1]) + __builtin_sqrtf(x[2]); x[3] = __builtin_inff();
}
"""


def test_gnu_builtins_int128_and_extension_compile_as_nvcc_takes_them():
    # nvcc takes GCC's builtins in device code, __int128 and __extension__; NVRTC refuses them
    # until told (--device-int128) or given the device functions they are.
    mod = kiln.SourceModule(GNU_BUILTINS, arch="sm_90", cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr", "ptr", "struct[16]/16")
    # What has no device function stays refused, with NVRTC's own message.
    with pytest.raises(kiln.CompileError, match='identifier "__builtin_ctz" is undefined'):
        kiln.SourceModule("__global__ void k(unsigned *u) { u[0] = __builtin_ctz(u[1]); }",
                          arch="sm_90", cache_dir=False)
    # Another refusal in the same source is the one said.
    with pytest.raises(kiln.CompileError, match='identifier "oops" is undefined') as e:
        kiln.SourceModule(GNU_BUILTINS.replace("x[3] = ", "x[3] = oops + "), arch="sm_90",
                          cache_dir=False)
    assert 'identifier "__builtin_popcount"' not in str(e.value)


GNU_KEYWORDS = r"""
extern int printf (__const char *__restrict __format, ...);
__global__ void k(__const__ float *x, __signed__ char *c, float *y) {
  __volatile int w = 3; __signed char q = c[0]; __const float z = x[0];
  unsigned lane; __asm__ __volatile__("mov.u32 %0, %%laneid;" : "=r"(lane));
  unsigned warp; __asm volatile("mov.u32 %0, %%warpid;" : "=r"(warp));
  y[0] = z + q + w + lane + (warp & 0u);
  if (y[0] < 0) printf("%f\n", y[0]);
}
"""


def test_gnu_alternate_keywords_compile_as_nvcc_takes_them():
    # GCC's __const, __volatile, __signed__, __asm__ (Sailfish's kernels declare glibc's printf
    # with them); NVRTC knows none of them.
    mod = kiln.SourceModule(GNU_KEYWORDS, arch="sm_90", cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr", "ptr")


@pytest.mark.gpu
def test_gnu_alternate_keywords_compute_as_gccs_do():
    x = np.array([1.5], np.float32)
    c = np.array([-2], np.int8)
    y = np.zeros(1, np.float32)
    kiln.SourceModule(GNU_KEYWORDS).get_function("k")(kiln.In(x), kiln.In(c), kiln.Out(y),
                                                      block=(1, 1, 1))
    assert y[0] == 1.5 - 2 + 3


@pytest.mark.gpu
def test_gnu_builtins_compute_as_gccs_do():
    u = np.array([0, 0xF0F0, 0x00010000, 0b101000], np.uint32)
    x = np.array([0, -2.5, 16, 0], np.float32)
    w = np.array([0, (1 << 40) | 7], np.uint64)
    big = np.zeros(1, dtype=np.dtype([("lo", np.uint64), ("hi", np.uint64)], align=True))
    big["hi"] = 12345
    f = kiln.SourceModule(GNU_BUILTINS).get_function("k")
    f(kiln.InOut(u), kiln.InOut(x), kiln.InOut(w), big[0], block=(1, 1, 1))
    assert list(u[:3]) == [8, 15, 4]
    assert list(w) == [4, 12345]
    assert x[0] == 6.5 and np.isinf(x[3]) and x[3] > 0


ZERO_ARRAYS = """
__global__ void k(int n[0], int *out) {
  extern __shared__ int sh[0];
  sh[threadIdx.x] = n[threadIdx.x];
  __syncthreads();
  out[threadIdx.x] = sh[blockDim.x - 1 - threadIdx.x];
}
"""


def test_arrays_of_no_elements_compile_as_nvcc_takes_them():
    # A GNU extension nvcc takes: an array parameter of no elements is a pointer, and so is
    # extern __shared__ memory of no elements; NVRTC refuses both.
    mod = kiln.SourceModule(ZERO_ARRAYS, arch="sm_90", cache_dir=False)
    assert mod.get_function("k").signature == ("ptr", "ptr")
    with pytest.raises(kiln.CompileError, match="the size of an array must be greater than zero"):
        kiln.SourceModule("struct S { int n; float d[0]; };\n"
                          "__global__ void k(S *s, float *o) { o[0] = s->d[1]; }",
                          arch="sm_90", cache_dir=False)


@pytest.mark.gpu
def test_arrays_of_no_elements_compute():
    n = np.arange(8, dtype=np.int32)
    out = np.zeros(8, np.int32)
    kiln.SourceModule(ZERO_ARRAYS).get_function("k")(kiln.In(n), kiln.Out(out), block=(8, 1, 1),
                                                     shared=32)
    np.testing.assert_array_equal(out, n[::-1])


def test_thrusts_random_engines_compile_in_device_code():
    # Their headers declare stream operators, for which kiln's <iostream> declares the stream
    # templates (and nothing a kernel could call).
    src = ("#include <thrust/random.h>\n"
           "extern \"C\" __global__ void k(double *a) { thrust::default_random_engine rng;\n"
           "  thrust::uniform_real_distribution<float> u(0, 1); a[threadIdx.x] = u(rng); }\n")
    mod = kiln.SourceModule(src, no_extern_c=True, arch="sm_90", cache_dir=False)
    assert mod.get_function("k").signature == ("b64",)


def test_modules_and_functions_keep_what_a_program_sets_on_them():
    # PyCUDA's objects take attributes (neurodriver keeps a kernel's block and grid on it).
    import gc
    import weakref
    mod = kiln.SourceModule(TWO, arch="sm_90", cache_dir=False)
    f = mod.get_function(mod.kernels[0])
    f.block, f.grid, mod.update = (128, 1, 1), (4, 1), f
    assert (f.block, f.grid, mod.update) == ((128, 1, 1), (4, 1), f)
    assert f.__dict__ == {"block": (128, 1, 1), "grid": (4, 1)} and "update" in mod.__dict__
    # PyCUDA's Function has no attribute of kiln's (they come from __getattr__), so a program's
    # own of the same name is its own there (neon names its kernels); kiln goes on by its own.
    import pickle
    name, signature = f.name, f.signature
    f.name, f.signature, f.arg_format, f.num_regs = "lut_bprop", "x", "PPI", 3
    assert (f.name, f.signature, f.arg_format, f.num_regs) == ("lut_bprop", "x", "PPI", 3)
    assert pickle.loads(pickle.dumps(f)).name == name
    del f.name, f.signature, f.arg_format, f.num_regs
    assert (f.name, f.signature, f.arg_format) == (name, signature, None)
    with pytest.raises(AttributeError, match="no attribute 'name' set"):
        del f.name
    class Sentinel:
        pass

    f.me, mod.me, f.sentinel = f, mod, Sentinel()  # cycles through the dicts are collected
    gone = weakref.ref(f.sentinel)
    del f, mod
    gc.collect()
    assert gone() is None


def test_restrict_is_dropped_so_that_it_cannot_hold_for_later_compiles():
    # NVRTC 13 keeps --restrict on for every compile after one that asked for it; a kernel
    # called in place would then read through the read-only cache what it has just written.
    src = ("__global__ void shift_add(float *in, float *out, int n)\n"
           "{ for (int i = 0; i < n; i++) out[i + 1] = in[i] + 1.0f; }\n")
    for options in (["--restrict"], ["-restrict"], None):
        m = kiln.SourceModule(src + f"// {options}\n", options=options, arch=ARCH,
                              cache_dir=False)
        assert "ld.global.nc" not in m.ptx, options


def test_a_float_constant_initialized_in_its_class_compiles_as_under_nvcc():
    # montblanc's abstraction.cuh: nvcc takes it as a GNU extension; NVRTC wants constexpr.
    mod = kiln.SourceModule("""
    #include <math_constants.h>
    struct Policy { const static float cuda_pi = CUDART_PI_F; static const double half = 0.5; };
    __global__ void k(float *o) { o[0] = Policy::cuda_pi * (float)Policy::half; }
    """, arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("ptr",)
