"""PyCUDA's surface: kiln.driver, kiln.compiler, kiln.tools and kiln.autoinit. What needs no GPU
runs everywhere: the names, the enumerations against cuda.h, the error classes, every argument
check (raised before the GPU is touched), the compile keywords and the headers. What needs a GPU
is at the end of this file, and PyCUDA's documented programs are in test_pycuda_ports.py."""
import os
import re
import shutil
import threading
import warnings
from pathlib import Path

import numpy as np
import pytest

import kiln
import kiln.compiler
import kiln.driver as drv
import kiln.gpuarray
import kiln.tools
from helpers import ARCH, HAVE_GPU, run_python

CUDA_H = Path(os.environ.get("CUDA_HOME", "/usr/local/cuda")) / "include" / "cuda.h"

# ---- Every name of the surface -------------------------------------------------------------------

DRIVER_NAMES = """
init get_version get_driver_version Device Context Stream Event
mem_alloc mem_alloc_like mem_alloc_pitch mem_get_info to_device from_device from_device_like
memcpy_htod memcpy_dtoh memcpy_dtod memcpy_htod_async memcpy_dtoh_async memcpy_dtod_async
memset_d8 memset_d16 memset_d32 memset_d8_async memset_d16_async memset_d32_async
pagelocked_empty pagelocked_zeros pagelocked_empty_like pagelocked_zeros_like
aligned_empty aligned_zeros aligned_empty_like aligned_zeros_like AlignedHostAllocation
managed_empty managed_zeros managed_empty_like managed_zeros_like ManagedAllocation mem_attach_flags
memset_d2d8 memset_d2d16 memset_d2d32 memset_d2d8_async memset_d2d16_async memset_d2d32_async
start_profiler stop_profiler initialize_profiler Memcpy2D Memcpy3D
register_host_memory RegisteredHostMemory PointerHolderBase In Out InOut DeviceAllocation
Function Module module_from_buffer module_from_file synchronize
Error LogicError LaunchError MemoryError RuntimeError CompileError
device_attribute function_attribute func_cache shared_config limit ctx_flags event_flags
host_alloc_flags mem_host_register_flags compute_mode jit_input_type
mem_get_address_range mem_get_ipc_handle IPCMemoryHandle ipc_mem_flags memcpy_peer memcpy_peer_async Memcpy3DPeer
Array ArrayDescriptor ArrayDescriptor3D array_format array3d_flags array_cubemap_face
dtype_to_array_format matrix_to_array np_to_array gpuarray_to_array make_multichannel_2d_array
memcpy_htoa memcpy_atoh memcpy_dtoa memcpy_atod memcpy_atoa bind_array_to_texref matrix_to_texref
""".split()

DEVICE_METHODS = ("count get_attribute get_attributes name compute_capability total_memory "
                  "pci_bus_id make_context retain_primary_context can_access_peer").split()
CONTEXT_METHODS = ("get_current get_device synchronize push pop detach attach get_limit set_limit "
                   "get_cache_config set_cache_config get_shared_config set_shared_config "
                   "get_api_version enable_peer_access disable_peer_access").split()
FUNCTION_NAMES = ("prepare prepared_call prepared_async_call prepared_timed_call get_attribute "
                  "set_attribute set_cache_config num_regs shared_size_bytes local_size_bytes "
                  "const_size_bytes max_threads_per_block attributes").split()
TOOLS_NAMES = ("DeviceMemoryPool DebugMemoryPool PageLockedMemoryPool PageLockedAllocator make_default_context "
               "clear_context_caches dtype_to_ctype get_default_device DeviceData "
               "OccupancyRecord context_dependent_memoize bitlog2 mark_cuda_test "
               "init_cuda_context_fixture register_dtype get_or_register_dtype").split()


def test_every_name_of_the_surface_exists():
    missing = [n for n in DRIVER_NAMES if not hasattr(drv, n)]
    missing += [f"Device.{n}" for n in DEVICE_METHODS if not hasattr(drv.Device, n)]
    missing += [f"Context.{n}" for n in CONTEXT_METHODS if not hasattr(drv.Context, n)]
    missing += [f"Function.{n}" for n in FUNCTION_NAMES if not hasattr(drv.Function, n)]
    missing += [f"Module.{n}" for n in ("get_function", "get_global", "get_texref",
                                        "get_surfref") if not hasattr(drv.Module, n)]
    missing += [f"Event.{n}" for n in ("record", "synchronize", "query", "time_since",
                                       "time_till", "ipc_handle", "from_ipc_handle")
                if not hasattr(drv.Event, n)]
    missing += [f"IPCMemoryHandle.{n}" for n in ("close", "__int__", "__index__")
                if not hasattr(drv.IPCMemoryHandle, n)]
    missing += [f"Memcpy3DPeer.{n}" for n in ("set_src_context", "set_dst_context",
                                              "set_src_device", "set_dst_host", "depth")
                if not hasattr(drv.Memcpy3DPeer(), n)]
    missing += [f"Stream.{n}" for n in ("synchronize", "is_done", "wait_for_event")
                if not hasattr(drv.Stream, n)]
    missing += [f"compiler.{n}" for n in ("SourceModule", "DynamicSourceModule", "compile",
                                          "DynamicModule", "DEFAULT_NVCC_FLAGS")
                if not hasattr(kiln.compiler, n)]
    missing += [f"tools.{n}" for n in TOOLS_NAMES if not hasattr(kiln.tools, n)]
    assert not missing, missing
    assert kiln.compiler.SourceModule is kiln.SourceModule


def test_the_error_classes_map_onto_kilns():
    assert drv.Error is kiln.Error
    assert drv.CompileError is kiln.CompileError
    assert drv.LaunchError is kiln.LaunchError
    assert drv.LogicError is kiln.LogicError and issubclass(drv.LogicError, kiln.CudaError)
    assert drv.MemoryError is kiln.OutOfMemoryError
    assert issubclass(drv.MemoryError, MemoryError) and issubclass(drv.MemoryError, kiln.Error)
    assert drv.RuntimeError is kiln.CudaError
    for cls in (drv.LogicError, drv.LaunchError, drv.MemoryError, drv.CompileError):
        assert issubclass(cls, drv.Error)


@pytest.mark.parametrize("name", ["autoinit", "autoprimaryctx"])
def test_the_autoinit_of_a_machine_without_a_gpu_fails_as_pycudas_does(name):
    done = run_python(f"""
        import kiln
        try:
            import kiln.{name} as auto
        except kiln.NoDeviceError as e:
            print("NoDeviceError:", e)
        else:
            print("device", auto.device.name(), auto.context)
            import kiln.autoinit
            print("same", auto.context is kiln.autoinit.context)
        import kiln.driver as drv
        print("still", drv.get_version())
    """)
    assert done.returncode == 0, done.stderr
    if HAVE_GPU:
        assert "device " in done.stdout and "kiln.Context" in done.stdout
        assert "same True" in done.stdout
    else:
        assert "NoDeviceError: " in done.stdout
    assert "still (" in done.stdout


def test_the_version_names_are_the_pycuda_release_kiln_gives():
    # Programs choose PyCUDA's newer calls by comparing VERSION with its releases
    # (`if pycuda.VERSION >= (2013, 1)`); kiln gives the surface of the release its tests read.
    import test_pycuda_surface
    assert kiln.VERSION == (2026, 1) and kiln.VERSION_STATUS == ""
    assert kiln.VERSION_TEXT == "2026.1"
    assert test_pycuda_surface.SDIST.name == f"pycuda-{kiln.VERSION_TEXT}.tar.gz"
    assert kiln.__version__ != kiln.VERSION_TEXT  # kiln's own


@pytest.mark.parametrize("alignment", [1, 3, 8, 64, 4096, 8192, 1 << 16, 1 << 21])
@pytest.mark.parametrize("order", ["C", "F"])
def test_aligned_arrays_start_on_the_alignment(alignment, order):
    a = drv.aligned_empty((5, 7), np.float64, order, alignment)
    assert a.ctypes.data % alignment == 0 and a.shape == (5, 7) and a.dtype == np.float64
    assert a.flags.c_contiguous if order == "C" else a.flags.f_contiguous
    assert isinstance(a.base, drv.AlignedHostAllocation) and a.flags.writeable
    a[...] = np.arange(35).reshape(5, 7)
    assert a.sum() == 595
    z = drv.aligned_zeros(1000, np.int16, alignment=alignment)
    assert z.ctypes.data % alignment == 0 and z.shape == (1000,) and not z.any()


def test_aligned_arrays_like_others_and_of_nothing():
    like = drv.aligned_zeros_like(np.ones((3, 4), np.complex64, order="F"), alignment=256)
    assert like.dtype == np.complex64 and like.shape == (3, 4) and like.flags.f_contiguous
    assert not like.any() and like.ctypes.data % 256 == 0
    e = drv.aligned_empty_like(np.ones(10, np.uint8))
    assert e.shape == (10,) and e.ctypes.data % 4096 == 0
    assert drv.aligned_empty((0, 3), np.float32).shape == (0, 3)
    assert drv.aligned_empty(np.array(3), np.float32).shape == (3,)  # as numpy.empty takes it
    # The memory stays while an array over it does, and goes with the last.
    a = drv.aligned_empty(8, np.float32)
    a[:] = 2
    view = a[2:]
    del a
    assert view.sum() == 12


@pytest.mark.parametrize("alignment", [0, -4096, 2.5, True, "4096"])
def test_aligned_arrays_refuse_a_bad_alignment(alignment):
    with pytest.raises(ValueError, match="alignment is a number of bytes > 0"):
        drv.aligned_empty(4, np.float32, alignment=alignment)



@pytest.mark.parametrize("shape, dtype, error, match", [
    (-1, np.float32, ValueError, "negative dimensions"),   # numpy's buffer read it as "all"
    (-1, [], ValueError, "negative dimensions"),            # a dtype of no bytes: numpy's SIGFPE
    ((3, -2), np.int8, ValueError, "negative dimensions"),
    (2.5, np.float32, TypeError, "shape is an int or a sequence of ints"),
    ((2, "3"), np.float32, TypeError, "shape is an int or a sequence of ints"),
    ((2**40, 2**40), np.float32, ValueError, "larger than an address can reach"),
    ((2**30, 2**30), np.float32, MemoryError, "cannot allocate 4611686018427387904 bytes"),
])
def test_aligned_arrays_refuse_a_bad_shape(shape, dtype, error, match):
    with pytest.raises(error, match=match):
        drv.aligned_empty(shape, dtype)
    with pytest.raises(error, match=match):
        drv.aligned_zeros(shape, dtype)

@pytest.mark.skipif(not CUDA_H.exists(), reason=f"no {CUDA_H} to compare with")
def test_the_enumerations_are_ints_of_any_value_as_pycudas():
    # Boost.Python's enumerations are ints: called with nothing they are 0 (cuda-sim's
    # `opts = jit_option()`), and a value no member has (a newer driver's) is an int too.
    assert drv.jit_option() is drv.jit_option.MAX_REGISTERS and drv.ctx_flags() == 0
    unnamed = drv.device_attribute()
    assert unnamed == 0 and type(unnamed) is drv.device_attribute and str(unnamed) == "0"
    assert drv.device_attribute(1) is drv.device_attribute.MAX_THREADS_PER_BLOCK
    newer = drv.array_format(0x77)
    assert newer == 0x77 and f"{newer}" == "119" and f"{newer:x}" == "77"
    assert repr(newer) == "<array_format: 119>" and str(drv.array_format.FLOAT) == "FLOAT"
    for bad in ("FLOAT", 1.5, None):
        with pytest.raises(ValueError, match="is not a valid array_format"):
            drv.array_format(bad)
    assert 0x77 not in [int(m) for m in drv.array_format]  # not made a member


def test_the_enumerations_are_cuda_hs():
    # cudaProfiler.h, beside it, has the profiler's output modes.
    text = CUDA_H.read_text() + CUDA_H.with_name("cudaProfiler.h").read_text()
    prefixes = {drv.device_attribute: "CU_DEVICE_ATTRIBUTE_",
                drv.function_attribute: "CU_FUNC_ATTRIBUTE_", drv.func_cache: "CU_FUNC_CACHE_",
                drv.shared_config: "CU_SHARED_MEM_CONFIG_", drv.limit: "CU_LIMIT_",
                drv.ctx_flags: "CU_CTX_", drv.event_flags: "CU_EVENT_",
                drv.compute_mode: "CU_COMPUTEMODE_", drv.host_alloc_flags: "CU_MEMHOSTALLOC_",
                drv.mem_host_register_flags: "CU_MEMHOSTREGISTER_",
                drv.jit_input_type: "CU_JIT_INPUT_", drv.mem_attach_flags: "CU_MEM_ATTACH_",
                drv.memory_type: "CU_MEMORYTYPE_", drv.pointer_attribute: "CU_POINTER_ATTRIBUTE_",
                drv.jit_option: "CU_JIT_", drv.jit_target: "CU_TARGET_",
                drv.jit_fallback: "CU_", drv.profiler_output_mode: "CU_OUT_",
                drv.graphics_register_flags: "CU_GRAPHICS_REGISTER_FLAGS_",
                drv.address_mode: "CU_TR_ADDRESS_MODE_", drv.filter_mode: "CU_TR_FILTER_MODE_",
                drv.ipc_mem_flags: "CU_IPC_MEM_",
                drv.array_format: "CU_AD_FORMAT_", drv.array3d_flags: "CUDA_ARRAY3D_",
                drv.array_cubemap_face: "CU_CUBEMAP_FACE_"}
    for enum, prefix in prefixes.items():
        for name, member in enum.__members__.items():
            name = name.removeprefix("ARRAY3D_")  # PyCUDA's longer names of two flags
            m = re.search(r"\b%s%s\s*=\s*(0x[0-9a-fA-F]+|\d+)" % (prefix, name), text) or \
                re.search(r"#define\s+%s%s\s+(0x[0-9a-fA-F]+|\d+)" % (prefix, name), text)
            if m:
                assert int(m.group(1), 0) == member, f"{enum.__name__}.{name}"
            else:  # a member counted from the one before it in the enum
                assert re.search(r"\b%s%s\s*(/\*.*?\*/\s*)?[,}=]" % (prefix, name), text, re.S), \
                    f"{prefix}{name} is not in {CUDA_H}"
    assert drv.device_attribute.MAX_THREADS_PER_BLOCK == 1
    # Members cuda.h writes as sums or counts, and its #defines.
    assert drv.jit_target.COMPUTE_90A == int(re.search(
        r"#define\s+CU_COMPUTE_ACCELERATED_TARGET_BASE\s+(0x[0-9a-fA-F]+)", text).group(1), 0) + 90
    attributes = re.search(r"typedef enum CUfunction_attribute_enum \{(.*?)\}", text, re.S)
    counted = re.findall(r"^\s*CU_FUNC_ATTRIBUTE_(\w+)", attributes.group(1), re.M)
    assert counted[-1] == "MAX" and drv.function_attribute.MAX == len(set(counted)) - 1
    for name in ("TRSA_OVERRIDE_FORMAT", "TRSF_READ_AS_INTEGER", "TRSF_NORMALIZED_COORDINATES"):
        assert int(re.search(r"#define\s+CU_%s\s+(0x[0-9a-fA-F]+)" % name, text).group(1), 0) \
            == getattr(drv, name)
    assert drv.TR_DEFAULT == int(re.search(r"#define\s+CU_PARAM_TR_DEFAULT\s+(-1)", text).group(1))
    assert drv.function_attribute.NUM_REGS == 4 and drv.limit.MALLOC_HEAP_SIZE == 2
    assert str(drv.device_attribute.WARP_SIZE) == "WARP_SIZE"
    assert f"{drv.func_cache.PREFER_L1}: {drv.func_cache.PREFER_L1:d}" == "PREFER_L1: 2"
    assert drv.ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS == 1
    assert drv.array_format.FLOAT == 0x20 and drv.array_format.HALF == 0x10
    assert drv.array3d_flags["2DARRAY"] is drv.array3d_flags.LAYERED
    assert getattr(drv.array3d_flags, "2DARRAY") == drv.array3d_flags.ARRAY3D_LAYERED == 1
    assert str(drv.array3d_flags.ARRAY3D_2DARRAY) == "LAYERED"
    assert drv.array3d_flags.SURFACE_LDST == 2 and drv.array3d_flags.CUBEMAP == 4
    assert drv.array_cubemap_face.NEGATIVE_Z == 5


# ---- Arguments checked before the GPU ------------------------------------------------------------

SOURCE = r"""
struct pair { int a; float b; };
__constant__ float coeffs[16];
__device__ int counter;
__global__ void k(float *out, const float *in, int n, float s) {
  int i = threadIdx.x; if (i < n) out[i] = in[i] * s + coeffs[i % 16];
}
__global__ void v(float4 q, pair p, double *out) { out[0] = q.x + q.w + p.a + p.b; }
extern "C" __global__ void c_style(int *p, unsigned n, long long w) { p[0] = n + (int)w; }
"""


@pytest.fixture(scope="module")
def module():
    return kiln.SourceModule(SOURCE, arch=ARCH)


@pytest.mark.parametrize("types, fmt", [
    ("PPif", "PPif"), (" P P i f ", " P P i f "), ("@PPif", "@PPif"), ("2Pif", "2Pif"),
    (["P", "P", "i", "f"], "PPif"), ([np.intp, np.uintp, np.int32, np.float32], "lLif"),
    (("PP", np.dtype(np.int32), "f"), "PPif"),
    # anything but a format, a dtype or a NumPy scalar type is a pointer, as in PyCUDA
    ([kiln.gpuarray.GPUArray, drv.DeviceAllocation, np.int32, "f"], "PPif"),
    ([None, object(), "i", np.float32], "PPif")])
def test_prepare_takes_pycudas_spellings(module, types, fmt):
    f = module.get_function("k")
    assert f.prepare(types) is f
    assert f.arg_format == fmt  # PyCUDA's: one struct format, a dtype by its character


def test_prepare_spells_a_struct_dtype_as_its_size_in_bytes(module):
    pair = np.dtype([("a", np.int32), ("b", np.float32)])
    f = module.get_function("v")
    assert f.prepare([np.dtype((np.float32, 4)), pair, np.intp]).arg_format == "16s8sl"


def test_prepare_takes_structs_and_vectors_as_one_type(module):
    f = module.get_function("v")
    pair = np.dtype([("a", np.int32), ("b", np.float32)])
    assert f.prepare("16s8sP") is f
    assert f.prepare([np.dtype((np.float32, 4)), pair, np.intp]) is f
    g = module.get_function("c_style")
    assert g.prepare("PIq") is g and g.prepare("PiQ") is g


@pytest.mark.parametrize("types, phrase", [
    ("PPiP", r"parameter 3 of kernel k\(float \*, const float \*, int, float\) is f32, 4 bytes, "
             r"but the types give it 'P', 8 bytes \(its parameters: ptr, ptr, i32, f32\)"),
    ("PPi", r"takes 4 parameters \(ptr, ptr, i32, f32\) and the types name 3"),
    ("PPiff", "and the types name 5"),
])
def test_types_that_do_not_fit_the_kernel_are_refused_by_its_prepared_calls(module, types,
                                                                           phrase):
    # PyCUDA's prepare takes any types (a tutorial prepares 'PPP' for a kernel of four
    # parameters and never calls it); its prepared calls are refused, before the GPU.
    f = module.get_function("k")
    assert f.prepare(types) is f and f.arg_format == types
    host = np.zeros(4, np.float32)
    with pytest.raises(ValueError, match=phrase):
        f.prepared_call((1, 1), (4, 1, 1), host, host, 4, 1.0)
    with pytest.raises(ValueError, match=phrase):
        f.prepared_async_call((1, 1), (4, 1, 1), None, host, host, 4, 1.0)
    with pytest.raises(ValueError, match=phrase):
        f.prepared_timed_call((1, 1), (4, 1, 1), host, host, 4, 1.0)
    f.prepare("PPif")   # types that fit: the calls go on (to the host array, refused)
    with pytest.raises(TypeError, match="a numpy array lives in host memory"):
        f.prepared_call((1, 1), (4, 1, 1), host, host, 4, 1.0)


@pytest.mark.parametrize("types, error, phrase", [
    ("PPiz", ValueError, "'z' is not a struct format character"),
    (">PPif", ValueError, "big-endian"),
    ("PPis", ValueError, "needs its size in bytes before it, as '16s'"),
    ("PPi4", ValueError, "end in a count without a character"),
    (3, TypeError, "struct format string"),
])
def test_prepare_refuses_what_does_not_fit_the_kernel(module, types, error, phrase):
    with pytest.raises(error, match=phrase):
        module.get_function("k").prepare(types)


def test_prepare_refuses_texture_references(module):
    with pytest.raises(NotImplementedError, match="texture references were removed in CUDA 12"):
        module.get_function("k").prepare("PPif", texrefs=[object()])
    assert module.get_function("k").prepare("PPif", texrefs=[]).arg_format == "PPif"
    # Today's PyCUDA has prepare(arg_types, texrefs=[]): a list second is texrefs, where an
    # int is older PyCUDA's shared, and a tuple its block before CUDA 4.
    f = module.get_function("k")
    assert f.prepare("PPif", []) is f and f.prepare("PPif", 64) is f
    with pytest.raises(NotImplementedError, match="texture references were removed"):
        f.prepare("PPif", [object()])
    with pytest.raises(TypeError, match="give it to prepared_call"):
        f.prepare("PPif", (32, 1, 1))


def test_a_call_takes_pycudas_texrefs_when_there_are_none(module):
    # PyCUDA's call documents texrefs=[]; with none to bind, the call goes on (here to the
    # host array, refused before the GPU is touched).
    f = module.get_function("k")
    host = np.zeros(4, np.float32)
    for none in ([], None, ()):
        with pytest.raises(TypeError, match="a numpy array lives in host memory"):
            f(host, host, 4, 1.0, block=(4, 1, 1), texrefs=none)
    with pytest.raises(NotImplementedError, match="texture references were removed in CUDA 12"):
        f(host, host, 4, 1.0, block=(4, 1, 1), texrefs=[object()])


def test_prepared_calls_check_their_arguments_first(module):
    f = module.get_function("k").prepare("PPif")
    with pytest.raises(TypeError, match=r"prepared_call\(grid, block, \*args\): k\(float \*, "
                                        r"const float \*, int, float\) takes 4 arguments \(3 given\)"):
        f.prepared_call((1, 1), (32, 1, 1), 0, 0, 1)
    with pytest.raises(TypeError, match=r"prepared_async_call\(grid, block, stream, \*args\)"):
        f.prepared_async_call((1, 1), (32, 1, 1), None, 0, 0, 1)
    with pytest.raises(ValueError, match="block must be an int or a tuple of 1 to 3 ints"):
        f.prepared_call((1, 1), "x", 0, 0, 1, 2.0)
    with pytest.raises(TypeError, match="unexpected keyword argument 'shared'; it takes "
                                        "shared_size"):
        f.prepared_call((1, 1), (32, 1, 1), 0, 0, 1, 2.0, shared=4)
    with pytest.raises(ValueError, match="shared_size must be a number of bytes"):
        f.prepared_call((1, 1), (32, 1, 1), 0, 0, 1, 2.0, shared_size=-1)
    with pytest.raises(TypeError, match=r"argument 2 of k\(float \*, const float \*, int, "
                                        r"float\) \(a i32 parameter\): "
                                        r"expected an int, got float"):
        f.prepared_call((1, 1), (32, 1, 1), 0, 0, 1.5, 2.0)
    with pytest.raises(TypeError, match="stream must be None"):
        f.prepared_async_call((1, 1), (32, 1, 1), "s", 0, 0, 1, 2.0)


def test_a_pointer_holder_passes_as_a_pointer(module):
    class Holder(drv.PointerHolderBase):
        def get_pointer(self):
            return 0x1000

    f = module.get_function("k")
    assert int(Holder()) == 0x1000
    with pytest.raises(NotImplementedError, match="must define get_pointer"):
        int(drv.PointerHolderBase())
    if HAVE_GPU:
        return  # what a launch with this address does is no test of packing
    # Packed without complaint: the failure is the missing device, after packing.
    with pytest.raises(kiln.NoDeviceError):
        f.prepared_call((1, 1), (32, 1, 1), Holder(), Holder(), 4, np.float32(2))
    with pytest.raises(kiln.NoDeviceError):
        f(Holder(), Holder(), 4, 2.0, block=(32, 1, 1))


def test_texture_and_surface_references_say_cuda_12_removed_them(module):
    for call in (module.get_texref, module.get_surfref):
        with pytest.raises(NotImplementedError, match=r"removed in CUDA 12, which kiln needs; "
                                                      r"create a texture or surface object"):
            call("tex")


def test_get_global_finds_the_name_before_the_gpu(module):
    assert module.globals == ("coeffs", "counter")
    with pytest.raises(AttributeError, match="no variable 'coefs' in the module; it has "
                                             "coeffs, counter"):
        module.get_global("coefs")
    with pytest.raises(TypeError, match="get_global.. takes a str"):
        module.get_global(3)
    # name by keyword too, as PyCUDA's get_function and get_global take it
    with pytest.raises(AttributeError, match="no variable 'coefs'"):
        module.get_global(name="coefs")
    with pytest.raises(drv.LogicError, match="no kernel 'nothere'"):
        module.get_function(name="nothere")
    for call in (module.get_function, module.get_global):
        for args, kwargs in (((), {}), (("a", "b"), {}), ((), {"nam": "a"}),
                             (("a",), {"name": "a"})):
            with pytest.raises(TypeError, match="takes one argument, name"):
                call(*args, **kwargs)


def test_a_missing_kernel_or_variable_is_pycudas_logic_error_and_an_attribute_error(module):
    # PyCUDA's driver reports the missing symbol as a LogicError, which programs catch (an
    # unknown scheme named by the user); getattr and hasattr see an AttributeError.
    for find, name in ((module.get_function, "nothere"), (module.get_global, "nothere")):
        with pytest.raises(drv.LogicError, match="no (kernel|variable) 'nothere'") as info:
            find(name)
        assert isinstance(info.value, AttributeError) and isinstance(info.value, kiln.Error)
        assert type(info.value) is kiln.NotFoundError
    assert getattr(module, "nothere", None) is None


def test_there_is_no_opengl_interop_and_the_driver_says_so():
    assert drv.have_gl_ext() is False
    with pytest.raises(ImportError):
        import kiln.gl  # noqa: F401


def test_a_library_may_derive_its_device_from_device():
    # reikna's Device(cuda.Device): its __init__ calls Device.__init__ and notes the name over
    # the method's.
    class Mine(drv.Device):
        def __init__(self, ordinal):
            drv.Device.__init__(self, ordinal)
            self.name = self.name()

    class Platformed(drv.Device):  # a constructor of its own: the device is __init__'s
        def __init__(self, platform, ordinal):
            drv.Device.__init__(self, ordinal)
            self.platform = platform

    class Plain(drv.Device):
        pass

    with pytest.raises(TypeError, match="takes at most 1 argument"):
        drv.Device("cuda", 0)
    if not HAVE_GPU:
        for make in (lambda: Mine(0), lambda: Platformed("cuda", 0), lambda: Plain(0)):
            with pytest.raises(kiln.NoDeviceError):
                make()
        return
    d = Mine(0)
    assert isinstance(d.name, str) and d.name == drv.Device(0).name()
    assert d == drv.Device(0) and drv.Device(0) == d and hash(d) == hash(drv.Device(0))
    assert d.compute_capability() == drv.Device(0).compute_capability()
    last = drv.Device.count() - 1
    p = Platformed("cuda", last)
    assert p.platform == "cuda" and p == drv.Device(last) and Plain(last) == drv.Device(last)
    with pytest.raises(ValueError, match="does not exist"):
        Platformed("cuda", last + 1)


def test_an_event_subclass_takes_arguments_of_its_own_and_its_flags_from_init():
    # cuburn's DurationEvent(prior) calls super().__init__(); chainer's IPC event passes its
    # flags there. A plain Event takes flags only.
    class Duration(drv.Event):
        def __init__(self, prior):
            super().__init__()
            self.prior = prior

    class Shared(drv.Event):
        def __init__(self, tag=None):
            super().__init__(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
            self.tag = tag

    for args, kwargs in (((0, 5), {}), ((), {"flags": 2, "x": 1})):
        with pytest.raises(TypeError, match="Event.. takes one argument, flags"):
            drv.Event(*args, **kwargs)
    if not HAVE_GPU:
        for make in (lambda: Duration(None), lambda: Shared(tag="x"), lambda: drv.Event(2)):
            with pytest.raises(kiln.NoDeviceError):
                make()
        return
    first = drv.Event().record()
    later = Duration(first)
    assert later.prior is first
    later.record().synchronize()
    assert later.time_since(first) >= 0
    shared = Shared(tag="x")
    assert shared.tag == "x" and len(shared.ipc_handle()) == 64  # made INTERPROCESS


@pytest.mark.gpu
def test_event_timings_refuse_what_is_not_an_event():
    # The other event may be any object; its type must not be read as one of kiln's.
    first = drv.Event().record()
    later = drv.Event().record().synchronize()
    for bad in ("x", None, 3, np.zeros(2), drv.Stream(), object()):
        for timing in (later.time_since, first.time_till, first.elapsed):
            with pytest.raises(TypeError, match="expected a kiln.Event"):
                timing(bad)
    assert later.time_since(first) == first.time_till(later) == first.elapsed(later) >= 0


def test_the_memory_pools_are_in_the_driver_module_too():
    # PyCUDA's extension exports them, and its driver module everything the extension has.
    import kiln._driver
    for name in ("DeviceMemoryPool", "PageLockedMemoryPool", "PooledDeviceAllocation",
                 "PooledHostAllocation", "bitlog2"):
        assert getattr(drv, name) is getattr(kiln.tools, name)
        assert getattr(kiln._driver, name) is getattr(kiln.tools, name)
        assert name in dir(drv)
    assert drv.bitlog2(1024) == 10
    with pytest.raises(AttributeError, match="has no attribute 'NoSuchPool'"):
        drv.NoSuchPool  # noqa: B018
    # in a star import too, whichever module a program imported first
    for first in ("kiln.tools", "kiln.driver", "kiln._driver"):
        done = run_python(f"import {first}\nfrom kiln.driver import *\n"
                          "print(DeviceMemoryPool.__module__, bitlog2(8))")
        assert done.stdout.split() == ["kiln.tools", "3"], (first, done.stderr)


def test_pycudas_extension_module_is_the_driver():
    # pycuda._driver, which programs name for its errors; importing the driver makes it.
    import kiln._driver
    assert kiln._driver.LogicError is drv.LogicError and kiln._driver.Context is drv.Context
    assert kiln._driver.device_attribute is drv.device_attribute
    done = run_python("import kiln.driver, kiln; print(kiln._driver.Error is kiln.Error)")
    assert done.stdout.strip() == "True", done.stderr


@pytest.mark.parametrize("call, error, phrase", [
    (lambda: drv.memset_d32(0x1002, 0, 4), ValueError, "aligned to 4 bytes"),
    (lambda: drv.memset_d16(0x1000, 1 << 16, 4), ValueError, "does not fit 16 bits"),
    (lambda: drv.memset_d8(0x1000, 1.5, 4), TypeError, "data must be an int"),
    (lambda: drv.memset_d8(0x1000, 0, -1), ValueError, "count must not be negative"),
    (lambda: drv.memset_d8(0x1000, 0, 4, size=4), TypeError, "count of values once"),
    (lambda: drv.memset_d8_async(0x1000, 0), TypeError, "count of values once"),
    (lambda: drv.memset_d16(0x1000, 0, size=-1), ValueError, "size must not be negative"),
    (lambda: drv.memset_d16(0x1000, 0, None, size=-1), ValueError, "size must not be negative"),
    (lambda: drv.memset_d32(0x1000, 0, count=None, size=None), TypeError, "count of values once"),
    (lambda: drv.memset_d32_async(0x1000, 0, 4, stream="x"), TypeError, "stream must be None"),
    (lambda: drv.memcpy_htod(0x1000, [1, 2]), TypeError, "must be a numpy array or another "
                                                         "contiguous buffer"),
    (lambda: drv.memcpy_htod("x", np.zeros(4)), TypeError, "must be a kiln.DeviceAllocation, "
                                                           "an int address"),
    (lambda: drv.memcpy_dtoh(b"abcd", 0x1000), ValueError, "the destination is read-only"),
    (lambda: drv.memcpy_dtoh(np.zeros((4, 4))[:, ::2], 0x1000), ValueError, "not contiguous"),
    (lambda: drv.memcpy_htod(0x1000, np.zeros(4), stream=None), TypeError,
     "unexpected keyword argument 'stream'"),
    (lambda: drv.memcpy_dtod(0x1000, 0x2000, -4), ValueError, "size must not be negative"),
    (lambda: drv.mem_alloc_pitch(64, 8, 3), ValueError, "4, 8 or 16 bytes, not 3"),
    (lambda: drv.mem_alloc_pitch(0, 8, 4), ValueError, "positive width and height"),
    (lambda: drv.register_host_memory([1]), TypeError, "takes a numpy array"),
    (lambda: drv.register_host_memory(np.zeros(0)), ValueError, "at least one byte"),
    (lambda: drv.register_host_memory(np.zeros(8), flags=4), ValueError, "0x4 has others"),
    (lambda: drv.pagelocked_empty(4, np.float32, order="X"), ValueError, "order must be 'C' "
                                                                         "or 'F'"),
    (lambda: drv.pagelocked_empty(4, np.float32, mem_flags=8), ValueError, "0x8 has others"),
    (lambda: drv.Event(flags="x"), ValueError, "flags must be a sum of kiln.driver.event_flags"),
    (lambda: drv.Event(flags=drv.event_flags.INTERPROCESS), ValueError, "cannot time"),
    (lambda: drv.init(flags=1), ValueError, "flags=0, the only value cuInit knows"),
    (lambda: drv.Device(-3), ValueError, "device -3 does not exist"),
    (lambda: drv.Device(1.5), TypeError, "an ordinal .int. or a PCI bus id .str."),
    (lambda: drv.Context(3), TypeError, "takes a kiln.Device"),
    (lambda: drv.Context.get_limit(99), ValueError, "limit 99 is not a CUlimit"),
    (lambda: drv.Context.set_cache_config(9), ValueError, "not a CUfunc_cache"),
    # PyCUDA's LogicError, which clean-up code popping what is left catches
    (lambda: in_new_thread(drv.Context.pop), drv.LogicError, "no context is pushed on this thread"),
    (lambda: drv.IPCMemoryHandle(5), TypeError, "an IPC memory handle is the 64 bytes "
                                                "mem_get_ipc_handle.. gives .bytes or bytearray"),
    (lambda: drv.IPCMemoryHandle("x" * 64), TypeError, "not str"),
    (lambda: drv.IPCMemoryHandle(b"x" * 63), ValueError, "an IPC memory handle is 64 bytes .* "
                                                         "not 63"),
    (lambda: drv.IPCMemoryHandle(bytearray(65)), ValueError, "not 65"),
    (lambda: drv.IPCMemoryHandle(bytes(64), flags=2), ValueError, "flags are 0 or "
                                                                  "ipc_mem_flags.LAZY_ENABLE"),
    (lambda: drv.IPCMemoryHandle(bytes(64), flags=-1), ValueError, "flags are 0 or"),
    (lambda: drv.IPCMemoryHandle(bytes(64), flags="1"), ValueError, "flags are 0 or"),
    (lambda: drv.Event.from_ipc_handle(12), TypeError, "an IPC event handle is the 64 bytes "
                                                       "Event.ipc_handle.. gives"),
    (lambda: drv.Event.from_ipc_handle(bytearray(3)), ValueError, "64 bytes .* not 3"),
    (lambda: drv.mem_get_ipc_handle("x"), TypeError, "the memory to share must be a "
                                                     "kiln.DeviceAllocation"),
    (lambda: drv.mem_get_ipc_handle(0), ValueError, "address 0 is no allocation to share"),
    (lambda: drv.memcpy_peer(0x1000, 0x2000, -4), ValueError, "size must not be negative"),
    (lambda: drv.memcpy_peer(0x1000, 0x2000, 1.5), TypeError, "size must be an int"),
    (lambda: drv.memcpy_peer(0x1000, 0x2000, 4, dest_context=0), TypeError,
     "dest_context must be a kiln.Context or kiln.Device, or None"),
    (lambda: drv.memcpy_peer(0x1000, 0x2000, 4, src_context="ctx"), TypeError, "src_context"),
    (lambda: drv.memcpy_peer("a", 0x2000, 4), TypeError, "the destination must be a "
                                                        "kiln.DeviceAllocation"),
    (lambda: drv.memcpy_peer(0x1000, 0x2000, 4, stream=None), TypeError,
     "'stream' is an invalid keyword|unexpected keyword argument 'stream'"),
    (lambda: drv.memcpy_peer_async(0x1000, 0x2000, 4, stream="x"), TypeError,
     "stream must be None"),
    (lambda: drv.Context.enable_peer_access(1), TypeError, "peer must be a kiln.Context or "
                                                          "kiln.Device, not int"),
    (lambda: drv.Context.disable_peer_access(None), TypeError, "peer must be a kiln.Context"),
])
def test_driver_calls_refuse_bad_arguments_before_the_gpu(call, error, phrase):
    with pytest.raises(error, match=phrase):
        call()


def in_new_thread(fn):
    """fn() on a thread of its own, whose context stack is empty whatever this one pushed
    (kiln.autoinit, imported by an earlier test, pushes one); its result, or its exception
    raised here."""
    out = {}

    def run():
        try:
            out["result"] = fn()
        except Exception as e:  # handed to the caller
            out["error"] = e
    t = threading.Thread(target=run)
    t.start()
    t.join()
    if "error" in out:
        raise out["error"]
    return out.get("result")


def test_the_driver_calls_that_need_no_device():
    major, minor, patch = drv.get_version()
    assert major >= 12 and patch == 0
    if HAVE_GPU:
        assert drv.get_driver_version() >= 12000
        drv.init()
    else:
        with pytest.raises(kiln.NoDeviceError):
            drv.init()
        assert drv.Context.get_current() is None


# ---- Compiling: SourceModule's keywords, compile(), the headers -------------------------------

TINY = "__global__ void tiny(int *p) { p[threadIdx.x] = N; }\n"


def unique(text):
    """text no earlier compile has seen (the in-process table and the cache would answer)."""
    unique.n = getattr(unique, "n", 0) + 1
    return f"{text}// {os.getpid()} {unique.n} {id(text)}\n"


def cache_entries(folder):
    return [p for p in Path(folder).rglob("*")
            if p.is_file() and len(p.name) == 62 and p.parent.name != folder]


def test_pycudas_positional_order(tmp_path):
    m = kiln.SourceModule(unique(TINY), "nvcc", ["-DN=1"], False, True, "sm_80", None,
                          str(tmp_path), [str(tmp_path)])
    assert m.arch == "sm_80" and len(cache_entries(tmp_path)) == 1


def _stored_value(module):
    """The float the kernel k below stores, read from its PTX."""
    import struct
    (bits,) = re.findall(r"mov\.u32\s+%r\d+, (\d+);", module.ptx)
    return struct.unpack("<f", struct.pack("<I", int(bits)))[0]


def test_default_nvcc_flags_are_the_options_of_a_call_without_any(monkeypatch):
    src = "__global__ void k(float *x) { x[0] = FLAG; }"
    try:
        assert kiln.compiler.DEFAULT_NVCC_FLAGS == []
        with pytest.raises(kiln.CompileError, match="FLAG"):
            kiln.SourceModule(src, arch=ARCH)
        kiln.compiler.DEFAULT_NVCC_FLAGS.append("-DFLAG=3")  # appended: read at each call
        assert _stored_value(kiln.SourceModule(src)) == 3.0
        kiln.compiler.DEFAULT_NVCC_FLAGS = ["-DFLAG=5"]  # assigned: the new list
        assert _stored_value(kiln.compiler.SourceModule(src, arch=ARCH)) == 5.0
        assert _stored_value(kiln.SourceModule(src)) == 5.0  # the one-argument call too
        assert kiln.compiler.compile(src, arch=ARCH, target="ptx").count(b"1084227584") == 1
        # Options given are the call's own, as in PyCUDA.
        assert _stored_value(kiln.SourceModule(src, options=["-DFLAG=7"])) == 7.0
        with pytest.raises(kiln.CompileError, match="FLAG"):
            kiln.SourceModule(src, options=[])
        with pytest.raises(TypeError, match="DEFAULT_NVCC_FLAGS must be a list"):
            kiln.compiler.DEFAULT_NVCC_FLAGS = "-DFLAG=1"
        del kiln.compiler.DEFAULT_NVCC_FLAGS
        with pytest.raises(kiln.CompileError, match="FLAG"):
            kiln.SourceModule(src)
    finally:
        kiln.compiler.DEFAULT_NVCC_FLAGS = []


def test_default_nvcc_flags_start_from_the_environment():
    done = run_python("""
        import kiln, kiln.compiler
        print(kiln.compiler.DEFAULT_NVCC_FLAGS)
        m = kiln.SourceModule("__global__ void k(float *x) { x[0] = FLAG; }")
        print("compiled", "1091567616" in m.ptx)
    """, env={"KILN_DEFAULT_NVCC_FLAGS": " -DFLAG=9   -lineinfo "})
    assert done.returncode == 0, done.stderr
    assert "['-DFLAG=9', '-lineinfo']" in done.stdout and "compiled True" in done.stdout


def test_nvcc_is_accepted_and_another_compiler_is_named():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kiln.SourceModule(unique(TINY), nvcc="nvcc", options=["-DN=1"], arch=ARCH)
        kiln.SourceModule(unique(TINY), nvcc="/usr/local/cuda/bin/nvcc", options=["-DN=1"],
                          arch=ARCH)
    with pytest.warns(UserWarning, match="nvcc='/opt/llvm/bin/clang' is not used: kiln "
                                         "compiles with NVRTC"):
        kiln.SourceModule(unique(TINY), nvcc="/opt/llvm/bin/clang", options=["-DN=1"], arch=ARCH)


def test_options_spelled_for_nvcc(tmp_path):
    (tmp_path / "scale.h").write_text("#define SCALE 3\n")
    src = unique('#include "scale.h"\nconstexpr int twice(int x) { return 2 * x; }\n'
                 "__global__ void k(int *p) { p[threadIdx.x] = twice(N) * SCALE; }\n")
    m = kiln.SourceModule(src, options=["-O3", "-D", "N=4", "-I", str(tmp_path), "-Xptxas", "-v",
                                        "--expt-relaxed-constexpr", "-lineinfo",
                                        "-use_fast_math", "-arch", "sm_80", "-m64", "-g",
                                        "-Xcompiler", "-fPIC", "--keep", "-std=c++17"])
    # Every option was read (an unknown one is refused, below); the arch came from -arch
    # where no device's follows it, as on PyCUDA's nvcc command line.
    device = kiln.SourceModule(unique(TINY), options=["-DN=1"]).arch if HAVE_GPU else None
    assert m.arch == (device or "sm_80") and m.get_function("k")
    assert kiln.SourceModule(unique(TINY), options=["-DN=1", "-arch=sm_80"],
                             arch="sm_90").arch == "sm_90"
    with pytest.raises(kiln.CompileError, match="--no-such-option"):
        kiln.SourceModule(unique(TINY), options=["--no-such-option"], arch=ARCH)


def test_a_source_that_is_not_a_str_is_its_str():
    # codepy's cgen Module renders its C with str(), which PyCUDA writes into nvcc's file.
    class Rendered:
        def __str__(self):
            return TINY

    for m in (kiln.SourceModule(Rendered(), options=["-DN=1"], arch=ARCH),
              kiln.SourceModule(source=Rendered(), options=["-DN=1"], arch=ARCH)):
        assert m.get_function("tiny")
    assert kiln.compiler.compile(Rendered(), options=["-DN=1"], arch=ARCH)
    with pytest.raises(TypeError, match="takes the source as a str, not bytes; decode it"):
        kiln.SourceModule(TINY.encode(), options=["-DN=1"], arch=ARCH)


WHOLE_PROGRAM = r"""#include <stdio.h>
#include <cuda_runtime.h>
__global__ void vectorAdd(const float *A, const float *B, float *C, int numElements)
{
    int i = blockDim.x * blockIdx.x + threadIdx.x;
    if (i < numElements) C[i] = A[i] + B[i];
}

/**
 * Host main routine
 */
int
main(void)
{
    int numElements = 15;
    size_t size = numElements * sizeof(float);
    float a[numElements], b[numElements];
    float *a_gpu, *b_gpu, *c_gpu;
    cudaMalloc((void **)&a_gpu, size);
    cudaMemcpy(a_gpu, a, size, cudaMemcpyHostToDevice);
    vectorAdd<<<1, 256>>>(a_gpu, b_gpu, c_gpu, numElements);
    cudaFree(a_gpu);
    return 0;
}
"""


def test_a_whole_program_compiles_without_its_host_code():
    # A tutorial hands its .cu file, main and all, to SourceModule; nvcc leaves main out of the
    # CUBIN, and so does kiln, where NVRTC refused it.
    f = kiln.SourceModule(WHOLE_PROGRAM, arch=ARCH, cache_dir=False).get_function("vectorAdd")
    if HAVE_GPU:
        a = np.arange(15, dtype=np.float32)
        c = np.zeros_like(a)
        f(kiln.In(a), kiln.In(a), kiln.Out(c), np.int32(15), block=(256, 1, 1))
        assert (c == 2 * a).all()
    with pytest.raises(kiln.CompileError, match=r'kernel.cu\(2\).*"cudaMalloc" is undefined'):
        kiln.SourceModule("void h(float **p) {\n  cudaMalloc((void **)p, 4);\n}\n"
                          "__global__ void k(float **p) { h(p); }\n", arch=ARCH,
                          cache_dir=False)


PROJECT_HEADER = """#ifndef UTIL_H
#define UTIL_H
#define SCALE 3
inline void check(cudaError_t e) {
    if (e != cudaSuccess) {
        fprintf(stderr, "CUDA error: %s\\n", cudaGetErrorString(e));
        exit(1);
    }
}
inline void check_last() { check(cudaGetLastError()); }
__device__ int scaled(int x) { return SCALE * x; }
#endif
"""


def test_a_project_headers_host_helpers_are_left_out(tmp_path, monkeypatch):
    # A header shared with the host program (a k-means port's kmeans.h) defines its error
    # checks, which nvcc compiles for the host and NVRTC refuses: they are left out of the
    # compile, as the source's own are, and the file on disk is untouched.
    folder = tmp_path / "inc"
    folder.mkdir()
    (folder / "util.h").write_text(PROJECT_HEADER)
    body = "__global__ void k(int *p) { p[threadIdx.x] = scaled(threadIdx.x); }\n"
    for src, kw in (('#include "util.h"\n' + body, {"include_dirs": [str(folder)]}),
                    ("#include <util.h>\n" + body, {"options": [f"-I{folder}"]})):
        f = kiln.SourceModule(src, arch=ARCH, cache_dir=False, **kw).get_function("k")
        if HAVE_GPU:
            out = np.zeros(4, np.int32)
            f(kiln.Out(out), block=(4, 1, 1))
            assert out.tolist() == [0, 3, 6, 9]
    monkeypatch.chdir(folder)  # a quoted include found beside the source
    assert kiln.SourceModule('#include "util.h"\n' + body, arch=ARCH, cache_dir=False)
    assert (folder / "util.h").read_text() == PROJECT_HEADER
    # ... and where another header of the project includes it.
    (folder / "common.cuh").write_text('#pragma once\n#include "util.h"\n')
    assert kiln.SourceModule('#include <common.cuh>\n' + body, arch=ARCH, cache_dir=False,
                             include_dirs=[str(folder)]).get_function("k")
    # A kernel that calls a host helper is refused, as nvcc refuses it.
    with pytest.raises(kiln.CompileError, match='util.h.*"fprintf" is undefined'):
        kiln.SourceModule('#include "util.h"\n__global__ void k() { check_last(); }\n',
                          arch=ARCH, cache_dir=False)


def test_ptxas_options_quoted_as_for_a_shell():
    # nvcc hands -Xptxas's words to ptxas through a shell, which takes the double quotes off
    # (a WMMA tutorial passes '-Xptxas="-v"'); blanks part words as commas do.
    # NVRTC keeps what ptxas made in the user's compute cache, keyed by the PTX, and leaves
    # ptxas's log empty when it answers from there: N, a number of this run's, makes it new.
    for options in (['-Xptxas="-v"'], ["--ptxas-options", '"-v" -O2'], ["-Xptxas", "-O1 -v"]):
        n = int.from_bytes(os.urandom(3), "little")
        m = kiln.SourceModule(unique(TINY), options=[f"-DN={n}", *options], arch=ARCH)
        assert "Used" in m.log and m.get_function("tiny")
    with pytest.raises(ValueError, match="open a \" they do not close"):
        kiln.SourceModule(unique(TINY), options=["-DN=1", '-Xptxas="-v'], arch=ARCH)


def test_macros_given_to_the_host_compiler_reach_the_kernels(tmp_path):
    # nvcc preprocesses device code with the host compiler, so its -D, -U and -I apply to the
    # kernels too (a ray tracer passes --compiler-options "-DPHYSICS=2 -DTRACKPOINTS=8"); its
    # other options are the host compiler's alone.
    (tmp_path / "three.h").write_text("#define THREE 3\n")
    src = unique('#include "three.h"\n#ifdef GONE\n#error GONE is defined\n#endif\n'
                 "__global__ void k(int *p) { int t[N]; t[0] = M * THREE; p[0] = t[0]; }\n")
    for options in (["--compiler-options", "-DN=2 -DM=5,-fPIC", "-Xcompiler", f"-I{tmp_path}"],
                    ["-Xcompiler", f'-D,N=2,"-DM=5",-Wall,-I,{tmp_path},-DGONE,-UGONE'],
                    [f"-Xcompiler=-DN=2 -DM=5 -O2 -I {tmp_path}"]):
        m = kiln.SourceModule(src, options=options, arch=ARCH, cache_dir=False)
        f = m.get_function("k")
        if HAVE_GPU:
            out = np.zeros(1, np.int32)
            f(kiln.Out(out), block=(1, 1, 1))
            assert out[0] == 15
    with pytest.raises(kiln.CompileError, match="identifier \"M\" is undefined"):
        kiln.SourceModule(src, options=["-DN=1", f"-I{tmp_path}", "-Xcompiler", "-fPIC"],
                          arch=ARCH, cache_dir=False)
    with pytest.raises(ValueError, match="the host compiler options '-fPIC -D' end in -D with "
                                         "no value"):
        kiln.SourceModule(src, options=["-Xcompiler", "-fPIC -D"], arch=ARCH, cache_dir=False)


def test_arch_and_code():
    assert kiln.SourceModule(unique(TINY), options=["-DN=1"], code="sm_86").arch == "sm_86"
    assert kiln.SourceModule(unique(TINY), options=["-DN=1"], arch="compute_80",
                             code="sm_90").arch == "sm_90"
    with pytest.raises(ValueError, match="code 'sm_80' is older than arch 'compute_90'"):
        kiln.SourceModule(unique(TINY), options=["-DN=1"], arch="compute_90", code="sm_80")
    with pytest.raises(ValueError, match="names several targets; kiln compiles one"):
        kiln.SourceModule(unique(TINY), options=["-DN=1"], code="sm_80,sm_90")
    with pytest.raises(ValueError, match="arch 'sm_12' is not one NVRTC"):
        kiln.SourceModule(unique(TINY), options=["-DN=1"], code="sm_12")


def test_cache_dir_gets_the_entry_and_false_keeps_none(tmp_path):
    own = tmp_path / "own"
    kiln.SourceModule(unique(TINY), options=["-DN=1"], arch=ARCH, cache_dir=own)
    assert len(cache_entries(own)) == 1
    usual = Path(os.environ["KILN_CACHE_DIR"])
    before_usual = len(cache_entries(usual))
    stats = kiln.cache_stats()
    kiln.SourceModule(unique(TINY), options=["-DN=2"], arch=ARCH, cache_dir=False)
    after = kiln.cache_stats()
    assert after["compiles"] == stats["compiles"] + 1 and after["stores"] == stats["stores"]
    assert len(cache_entries(usual)) == before_usual and len(cache_entries(own)) == 1


def test_keep_writes_the_files_and_names_the_folder(capsys):
    src = unique(TINY)
    kiln.SourceModule(src, options=["-DN=1"], arch=ARCH, keep=True)
    out = capsys.readouterr().out
    m = re.search(r"^\*\*\* compiler output in (\S+)$", out, re.M)
    assert m, out
    folder = Path(m.group(1))
    assert (folder / "kernel.cu").read_text() == src
    assert ".entry" in (folder / "kernel.ptx").read_text()
    assert (folder / "kernel.cubin").read_bytes()[:4] == b"\x7fELF"
    assert (folder / "kernel.log").exists()
    # A compile that fails keeps what there is: the source and NVRTC's log.
    with pytest.raises(kiln.CompileError):
        kiln.SourceModule(unique("__global__ void k() { nope; }\n"), arch=ARCH, keep=True)
    folder = Path(re.search(r"compiler output in (\S+)", capsys.readouterr().out).group(1))
    assert "nope" in (folder / "kernel.log").read_text()


def test_compile_returns_the_cubin():
    cubin = kiln.compiler.compile(unique(TINY), options=["-DN=1"], arch=ARCH)
    assert cubin[:4] == b"\x7fELF"
    assert b".entry" in kiln.compiler.compile(unique(TINY), options=["-DN=1"], arch=ARCH,
                                              target="ptx")
    with pytest.raises(ValueError, match="target is 'cubin' or 'ptx'"):
        kiln.compiler.compile(TINY, options=["-DN=1"], arch=ARCH, target="fatbin")


def test_compile_does_not_call_a_programs_own_source_module(monkeypatch):
    # A program may rebind compiler.SourceModule to a wrapper of its own that calls compile();
    # compile() goes on with kiln's, not back into the wrapper (which would never end).
    calls = []

    def wrapper(source, *args, **kwargs):
        calls.append(source)
        return kiln.compiler.compile(source, *args, **kwargs)

    monkeypatch.setattr(kiln.compiler, "SourceModule", wrapper)
    cubin = kiln.compiler.SourceModule(unique(TINY), options=["-DN=1"], arch=ARCH)
    assert cubin[:4] == b"\x7fELF" and len(calls) == 1


def test_compile_plain_takes_the_source_as_it_is():
    # PyCUDA's inner compile: no extern "C" is added, so a C++ kernel keeps its mangled name.
    src = unique("__global__ void plain(float *a) { a[0] = 1; }")
    cubin = kiln.compiler.compile_plain(src, ["-arch", ARCH or "sm_90"], False, "nvcc", None)
    assert cubin[:4] == b"\x7fELF" and b"_Z5plainPf" in cubin
    ptx = kiln.compiler.compile_plain(src, [], False, "nvcc", False, target="ptx")
    assert b".entry _Z5plainPf" in ptx


def test_get_nvcc_version_is_what_nvcc_prints_or_a_warning(tmp_path):
    fake = tmp_path / "nvcc"
    fake.write_text("#!/bin/sh\necho 'Cuda compilation tools, release 13.0'\n")
    fake.chmod(0o755)
    assert kiln.compiler.get_nvcc_version(str(fake)) == "Cuda compilation tools, release 13.0\n"
    with pytest.warns(UserWarning, match="NVCC version could not be determined"):
        assert kiln.compiler.get_nvcc_version(str(tmp_path / "none")) == "nvcc unknown version"


def test_preprocess_source_runs_nvccs_preprocessor_as_pycudas_does(tmp_path):
    # A stand-in nvcc that prints its arguments, then the file it was given, as preprocessed
    # text; and one that fails, as nvcc does on an #error.
    fake = tmp_path / "nvcc"
    fake.write_text('#!/bin/sh\necho "$@"\nfor a; do case "$a" in *.cu) cat "$a";; esac; done\n')
    fake.chmod(0o755)
    out = kiln.compiler.preprocess_source("int kiln_marker;\n", ["-DX=1"], str(fake))
    args, text = out.split("\n", 1)
    assert args.split()[:2] == ["--preprocess", "-DX=1"]
    assert args.split()[-2:] == ["--compiler-options", "-P"]
    assert text == "int kiln_marker;\n" and ".cu" not in out  # the temporary name left out
    failing = tmp_path / "failing-nvcc"
    failing.write_text("#!/bin/sh\necho 'source.cu:1: error: boom' >&2\nexit 1\n")
    failing.chmod(0o755)
    with pytest.raises(kiln.CompileError, match="nvcc preprocessing failed") as failed:
        kiln.compiler.preprocess_source("#error boom\n", [], str(failing))
    assert b"boom" in failed.value.stderr and failed.value.command_line[0] == str(failing)
    with pytest.raises(kiln.CompileError, match="could not run"):
        kiln.compiler.preprocess_source("", [], str(tmp_path / "none"))


def test_preprocess_source_with_the_toolkits_nvcc():
    # "nvcc" off PATH is the toolkit's beside NVRTC's headers, as PyCUDA's health checks call it.
    nvcc = kiln.compiler._nvcc_command("nvcc")
    if not shutil.which(nvcc):
        pytest.skip("the CUDA toolkit here has no nvcc")
    out = kiln.compiler.preprocess_source(
        "#define N 4\n__global__ void kiln_k(float *x) { x[0] = N; }\n", [], "nvcc")
    assert "void kiln_k(float *x) { x[0] = 4; }" in out


HEADERS = ["stdio.h", "stdlib.h", "math.h", "stdint.h", "assert.h", "limits.h", "float.h",
           "stddef.h", "string.h", "cstdio", "cstdlib", "cmath", "cstdint", "cassert", "climits",
           "cfloat", "cstddef", "cstring", "inttypes.h", "cinttypes", "time.h", "ctime"]


def test_the_headers_pycuda_kernels_include_compile():
    src = "".join(f"#include <{h}>\n" for h in HEADERS) + r"""
    __constant__ float inf = INFINITY;
    __global__ void k(float *p, double *d, int *q) {
      int32_t a = INT32_MAX; std::uint64_t b = UINT64_MAX;
      p[0] = std::sin(p[1]) + sinf(p[2]) + (float)M_PI + FLT_MAX + NAN + HUGE_VALF + inf;
      d[0] = std::pow(d[1], 2.0) + HUGE_VAL + DBL_EPSILON + fabs(d[2]);
      q[0] = std::isnan(p[0]) + INT_MAX + CHAR_BIT + (int)a + (int)b + std::abs(q[1]);
      assert(q[0] > 0); printf("%d\n", q[0]);
      printf("%" PRId64 " %" PRIu32 " %" PRIxPTR "\n", (int64_t)b, (uint32_t)a, (uintptr_t)q);
      int *m = (int *)malloc(16); free(m); memcpy(q, q + 1, 4);
      q[2] = (int)offsetof(float2, y) + EXIT_SUCCESS;
      clock_t t0 = std::clock(); time_t t1 = CLOCKS_PER_SEC; q[3] = (int)(clock() - t0 + t1);
    }
    """
    for std in (None, "-std=c++11", "-std=c++17"):
        m = kiln.SourceModule(src, arch=ARCH, options=[std] if std else None)
        assert m.log == "", m.log
        assert "__assertfail" in m.ptx and "vprintf" in m.ptx
    # <ctime> beside libcu++'s, which CUB and <chrono> bring: time_t is one type in both.
    for order in ("<ctime>\n#include <cuda/std/chrono>", "<cuda/std/chrono>\n#include <time.h>"):
        m = kiln.SourceModule(f"#include {order}\n__global__ void k(long long *p) "
                              "{ time_t t = p[1]; cuda::std::time_t u = t; p[0] = u; }\n",
                              arch=ARCH)
        assert m.log == "", m.log
    # The toolkit's own headers compile beside them as they did, without a warning.
    m = kiln.SourceModule("#include <stdint.h>\n#include <cuda/std/cstdint>\n#include <cuda_fp16.h>"
                          "\n#include <cooperative_groups.h>\n#include <math.h>\n"
                          "__global__ void k(uint32_t *p, __half h) { p[0] = __half2float(h); }\n",
                          arch=ARCH)
    assert m.log == "", m.log


def test_dynamic_source_module_links_the_device_runtime():
    src = ("__global__ void child(int *p) { p[threadIdx.x] = threadIdx.x; }\n"
           "__global__ void parent(int *p) { child<<<1, 32>>>(p); }\n")
    m = kiln.compiler.DynamicSourceModule(src, arch=ARCH)
    assert isinstance(m, kiln.SourceModule) and m.cubin[16] == 2  # ET_EXEC: linked
    assert m.get_function("parent").signature == ("ptr",)
    with pytest.raises(kiln.CompileError, match="device-side kernel launch"):
        kiln.SourceModule(src, arch=ARCH)
    with pytest.raises(ValueError, match="neither libcudadevrt.a nor a folder holding it"):
        kiln.compiler.DynamicSourceModule(unique(src), arch=ARCH, cuda_libdir="/nonexistent")


# PyCUDA's own test of DynamicModule (test_jit_link_module): two sources, the device runtime.
OUTER = """#include <cstdio>
__global__ void test_kernel(int *p) {
    extern __global__ void test_kernel_inner(int *p);
    printf("Hello outer world!\\n");
    test_kernel_inner<<<2, 1>>>(p);
}"""
INNER = """#include <cstdio>
__global__ void test_kernel_inner(int *p) { p[blockIdx.x] = 40 + blockIdx.x; }"""


def _dynamic(arch=ARCH, **kwargs):
    mod = kiln.compiler.DynamicModule(arch=arch, **kwargs)
    flags = ["-rdc=true", "-lcudadevrt", *kiln.compiler.DEFAULT_NVCC_FLAGS]
    mod.add_source(OUTER, nvcc_options=flags).add_source(INNER, nvcc_options=flags)
    return mod.add_stdlib("cudadevrt")


def test_dynamic_module_compiles_and_links_without_a_gpu():
    mod = _dynamic()
    kinds = [kind for kind, _, _, _ in mod._inputs]
    assert kinds == [drv.jit_input_type.CUBIN] * 2 + [drv.jit_input_type.LIBRARY]
    assert mod._inputs[2][2].endswith("libcudadevrt.a")
    # Each source compiled as relocatable code left unlinked (ET_REL), through the cache.
    rel = kiln.SourceModule(INNER, options=["-rdc=true", "-dc"], arch=ARCH)
    assert rel.cubin[16] == 1 and mod._inputs[1][1] == rel.cubin
    linked = kiln._kiln._link(mod._inputs, mod._link_arch)
    assert linked[:4] == b"\x7fELF" and linked[16] == 2  # ET_EXEC: one module, linked
    if not HAVE_GPU:
        with pytest.raises(kiln.NoDeviceError):
            mod.link()  # loading the module needs the driver; linking did not


def test_compile_gives_c_names_as_pycudas_and_links_with_code_that_calls_them_so():
    # PyCUDA's compile() puts the source inside extern "C" unless no_extern_c: PsyNeuLink links
    # its own PTX against device functions compiled so, by name, in a DynamicModule.
    src = "__global__ void k(float *p) { p[0] = 1; }\n"
    assert b".entry k(" in kiln.compiler.compile(src, arch=ARCH, target="ptx")
    assert b".entry _Z1kPf(" in kiln.compiler.compile(src, arch=ARCH, target="ptx",
                                                      no_extern_c=True)
    with pytest.raises(ValueError, match="kiln makes no fatbin, and a CUBIN loads"):
        kiln.compiler.compile(src, arch=ARCH, target="fatbin")
    builtins = "__device__ double twice_it(double x) { return 2 * x; }\n"
    caller = kiln.compiler.compile(
        'extern "C" __device__ double twice_it(double);\n'
        'extern "C" __global__ void use(double *p) { p[0] = twice_it(p[0]); }\n',
        options=["-rdc=true"], arch=ARCH, target="ptx", no_extern_c=True)
    assert b"twice_it" in caller and b"_Z8twice_itd" not in caller
    mod = kiln.compiler.DynamicModule(arch=ARCH)
    mod.add_data(kiln.compiler.compile(builtins, options=["-dc"], arch=ARCH),
                 drv.jit_input_type.CUBIN, "builtins.cubin")
    mod.add_data(caller, drv.jit_input_type.PTX, "caller.ptx")
    assert kiln._kiln._link(mod._inputs, mod._link_arch or mod.arch)[:4] == b"\x7fELF"
    if HAVE_GPU:
        mod.link()
        p = drv.to_device(np.array([21.0]))
        mod.get_function("use")(p, block=(1, 1, 1), grid=(1, 1))
        assert drv.from_device(p, (1,), np.float64)[0] == 42.0
    # C++ declarations cannot have C linkage: the error says to pass no_extern_c=True.
    with pytest.raises(kiln.CompileError, match="no_extern_c=True") as e:
        kiln.compiler.compile("template <typename T> __device__ T one() { return T(1); }\n"
                              + src, arch=ARCH)
    assert "linkage" in e.value.log
    with pytest.raises(kiln.CompileError, match="no_extern_c=True"):  # CUDA's own max, in C
        kiln.compiler.compile("__device__ float max(float a, float b) { return a; }\n" + src,
                              arch=ARCH)
    with pytest.raises(kiln.CompileError) as e:  # an error of another kind: no word of it
        kiln.compiler.compile(src + "__global__ void j() { undefined_here(); }\n", arch=ARCH)
    assert "no_extern_c" not in str(e.value)
    assert kiln.compiler.compile("template <typename T> __device__ T one() { return T(1); }\n"
                                 + src, arch=ARCH, no_extern_c=True)[:4] == b"\x7fELF"
    # The C headers kiln gives NVRTC hold inside the extern "C" block, as the host's do.
    for header in ("stdint.h", "cstdint", "limits.h", "climits", "inttypes.h", "stdio.h",
                   "math.h", "assert.h", "pycuda-complex.hpp"):
        assert kiln.compiler.compile(f"#include <{header}>\n{src}", arch=ARCH)[:4] == b"\x7fELF"


def test_compile_with_rdc_gives_relocatable_code_unlinked_as_nvccs():
    # PyCUDA's compile(options=["-rdc=true"]) is nvcc --cubin -rdc=true: relocatable code with
    # a call left for a link of several, not the device runtime linked in (which would find
    # that call undefined).
    src = "extern __device__ float twice(float);\n__global__ void k(float *a) { a[0] = twice(a[0]); }"
    for options in (["-rdc=true"], ["-rdc", "true"], ["--relocatable-device-code=true"]):
        assert kiln.compiler.compile(src, options=options, arch=ARCH)[:4] == b"\x7fELF"
        assert b".extern .func" in kiln.compiler.compile(src, options=options, arch=ARCH,
                                                         target="ptx")
    assert b".extern .func" in kiln.compiler.compile_plain(src, ["-rdc=true"], False, "nvcc",
                                                           None, target="ptx")
    # The last -rdc decides, as nvcc reads them: whole-program code, whose call ptxas finds
    # nowhere, where -rdc=false comes last.
    with pytest.raises(kiln.CompileError, match="Unresolved extern function"):
        kiln.compiler.compile(src, options=["-rdc=true", "-rdc=false"], arch=ARCH)
    assert b".extern .func" in kiln.compiler.compile(src, options=["-rdc=false", "-rdc=true"],
                                                     arch=ARCH, target="ptx")


def test_linker_links_a_module_as_pycudas():
    # PyCUDA's driver.Linker, under its own DynamicModule: add_data, add_file, link_module.
    seen = []
    builtins = "__device__ double twice_it(double x) { return 2 * x; }\n"
    caller = kiln.compiler.compile(
        'extern "C" __device__ double twice_it(double);\n'
        'extern "C" __global__ void use(double *p) { p[0] = twice_it(p[0]); }\n',
        options=["-rdc=true"], arch=ARCH, target="ptx", no_extern_c=True)
    alone = drv.Linker(message_handler=lambda *a: seen.append(a))
    alone.add_data(caller, drv.jit_input_type.PTX, "caller.ptx")
    with pytest.raises(kiln.CompileError):  # twice_it is nowhere
        alone.link_module()
    assert seen and seen[0][0] is False and seen[0][2]
    # The driver's JIT options are the driver linker's, as PyCUDA's; refused before it is reached
    # where the driver would not take them.
    bad = drv.Linker(options=[(drv.jit_option.INFO_LOG_BUFFER, 0)])
    bad.add_data(caller, drv.jit_input_type.PTX)
    with pytest.raises(ValueError, match="link option 3 .* the log buffers are kiln's own"):
        bad.link_module()
    with pytest.raises(TypeError, match="the link's option 0 must be a \\(jit_option, value\\) pair"):
        bad = drv.Linker(options=[5])
        bad.add_data(caller, drv.jit_input_type.PTX)
        bad.link_module()
    if HAVE_GPU:  # the arch kiln compiles for is the device's
        linker = drv.Linker(message_handler=lambda *a: seen.append(a))
        linker.add_data(kiln.compiler.compile(builtins, options=["-rdc", "true"]),
                        drv.jit_input_type.CUBIN, "builtins.cubin")
        linker.add_data(caller, drv.jit_input_type.PTX)
        mod = linker.link_module()
        assert seen[-1] == (True, "", "")
        p = drv.to_device(np.array([21.0]))
        mod.get_function("use")(p, block=(1, 1, 1), grid=(1, 1))
        assert drv.from_device(p, (1,), np.float64)[0] == 42.0


HEAVY = r"""
extern "C" __global__ void heavy(double *p) {
  double v[24];
#pragma unroll
  for (int i = 0; i < 24; i++) v[i] = p[i * blockDim.x + threadIdx.x];
  double s = 0;
#pragma unroll
  for (int i = 0; i < 24; i++)
#pragma unroll
    for (int j = 0; j < 24; j++) s += v[i] * v[j] * (i + j);
  p[threadIdx.x] = s;
}
"""


@pytest.mark.gpu
@pytest.mark.parametrize("through", ["DynamicModule", "Linker"])
def test_link_options_are_the_driver_linkers_jit_options(through):
    # PsyNeuLink links its PTX with link_options=[(jit_option.MAX_REGISTERS, n)]: the limit holds
    # in the linked code, which computes as without it.
    ptx = kiln.compiler.compile(HEAVY, arch=ARCH, target="ptx", no_extern_c=True)
    h = np.random.default_rng(3).standard_normal(24 * 32)
    want = None
    regs = {}
    for limit in (None, 32):
        options = [(drv.jit_option.MAX_REGISTERS, limit)] if limit else None
        if through == "Linker":
            linker = drv.Linker(options=options)
            linker.add_data(ptx, drv.jit_input_type.PTX, "heavy.ptx")
            mod = linker.link_module()
        else:
            mod = kiln.compiler.DynamicModule(link_options=options)
            mod.add_data(ptx, drv.jit_input_type.PTX, "heavy.ptx").link()
        f = mod.get_function("heavy")
        regs[limit] = f.num_regs
        p = drv.to_device(h)
        f(p, block=(32, 1, 1), grid=(1, 1))
        got = drv.from_device(p, (32,), np.float64)
        want = got if want is None else want
        np.testing.assert_allclose(got, want, rtol=1e-12)
    assert regs[None] > 32 >= regs[32], regs


def test_options_and_inputs_a_program_changes_while_they_are_read_do_not_crash():
    # Reading a (jit_option, value) pair of the program's own type, or an input's path, runs its
    # code, which may empty the list given: what is read is a copy taken first.
    options = []

    class Pair:
        def __iter__(self):
            options.clear()
            return iter((drv.jit_option.MAX_REGISTERS, 32))

    options[:] = [Pair()] + [(drv.jit_option.MAX_REGISTERS, 32)] * 40
    with pytest.raises(kiln.Error):  # no driver to link with here; a GPU's refuses the bytes
        kiln._kiln._link([(drv.jit_input_type.PTX, b"x", None, None)], "sm_90", options)
    options[:] = [Pair()] + [(drv.jit_option.MAX_REGISTERS, 32)] * 40
    with pytest.raises(ValueError, match="no CUBIN"):
        drv.module_from_buffer(b"\x7fELF not a cubin", options=options)
    assert options == []  # the pair's own code ran, and emptied the list read
    inputs = []

    class Path:
        def __fspath__(self):
            inputs.clear()
            return "/nonexistent/x.a"

    inputs[:] = [(drv.jit_input_type.LIBRARY, None, Path(), None)] + \
        [(drv.jit_input_type.LIBRARY, None, "/nonexistent/y.a", f"n{i}") for i in range(40)]
    with pytest.raises(kiln.Error):
        kiln._kiln._link(inputs, "sm_90")


def test_dynamic_module_errors():
    seen = []
    mod = kiln.compiler.DynamicModule(arch=ARCH, message_handler=lambda *a: seen.append(a))
    mod.add_source(OUTER)
    with pytest.raises(kiln.CompileError, match="Undefined reference to '_Z17test_kernel_innerPi'"):
        mod.link()
    assert seen and seen[0][0] is False and "Undefined reference" in seen[0][2]
    with pytest.raises(RuntimeError, match="call link"):
        mod.get_function("test_kernel")
    with pytest.raises(ValueError, match="link option 0 has the value -1"):
        kiln.compiler.DynamicModule(link_options=[(drv.jit_option.MAX_REGISTERS, -1)]) \
            .add_source(INNER).link()
    with pytest.raises(OSError, match="libnothing.a not found in /nonexistent"):
        kiln.compiler.DynamicModule(cuda_libdir="/nonexistent").add_stdlib("nothing")
    with pytest.raises(TypeError, match="nvcc_options must be a list"):
        kiln.compiler.DynamicModule().add_source(INNER, nvcc_options="-O3")
    other = kiln.compiler.DynamicModule()
    other.add_source(INNER, nvcc_options=["-gencode=arch=compute_80,code=sm_80"])
    with pytest.raises(ValueError, match="compiled for sm_90, an earlier one for sm_80"):
        other.add_source(OUTER, nvcc_options=["-gencode=arch=compute_90,code=sm_90"])
    with pytest.raises(ValueError, match="kind 9, not a jit_input_type"):
        kiln._kiln._link([(9, b"x", None, None)])
    with pytest.raises(ValueError, match="neither data nor a path"):
        kiln._kiln._link([(0, None, None, None)])
    with pytest.raises(ValueError, match="nothing to link"):
        kiln._kiln._link([])
    with pytest.raises(ValueError, match="a real GPU's, such as sm_90, not 'compute_90'"):
        kiln._kiln._link([(1, b".version 8.0", None, None)], "compute_90")
    with pytest.raises(kiln.CompileError, match="nvJitLink"):
        kiln._kiln._link([(drv.jit_input_type.LIBRARY, None, "/nonexistent/lib.a", None)],
                         "sm_90")


@pytest.mark.gpu
def test_dynamic_module_runs_kernels_that_launch_kernels(capfd):
    mod = _dynamic(arch=None).link()
    out = drv.mem_alloc(8)
    drv.memset_d32(out, 0, 2)
    mod.get_function("test_kernel")(out, grid=(2, 1), block=(1, 1, 1))
    drv.Context.synchronize()
    assert drv.from_device(out, (2,), np.int32).tolist() == [40, 41]
    assert capfd.readouterr().out.count("Hello outer world!") == 2
    with pytest.raises(RuntimeError, match="linked already"):
        mod.add_source(INNER)


def test_dynamic_source_module_without_nvjitlink_needs_the_driver():
    done = run_python("""
        import kiln, kiln.compiler
        try:
            kiln.compiler.DynamicSourceModule(
                "__global__ void c(int *p) {}\\n__global__ void p(int *q) { c<<<1, 1>>>(q); }\\n",
                arch="sm_90")
        except kiln.NoDeviceError as e:
            print("NoDeviceError:", e)
    """, env={"KILN_NVJITLINK_PATH": "/nonexistent/libnvJitLink.so",
              "KILN_CUDA_PATH": "/nonexistent/libcuda.so.1", "KILN_CACHE": "0"})
    assert done.returncode == 0, done.stderr
    assert "NoDeviceError: no CUDA driver could be loaded" in done.stdout
    assert ("linking relocatable device code needs nvJitLink or the CUDA driver, and nvJitLink "
            "could not be opened (tried KILN_NVJITLINK_PATH=/nonexistent/libnvJitLink.so)"
            in done.stdout)


# ---- kiln.tools ----------------------------------------------------------------------------------


def test_bitlog2_and_the_default_device(monkeypatch):
    assert [kiln.tools.bitlog2(v) for v in (1, 2, 3, 1024, 1025)] == [0, 1, 1, 10, 10]
    with pytest.raises(ValueError, match="positive int"):
        kiln.tools.bitlog2(0)
    monkeypatch.setenv("CUDA_DEVICE", "first")
    with pytest.raises(ValueError, match="CUDA_DEVICE must hold a device number, not 'first'"), \
            pytest.warns(DeprecationWarning, match="use make_default_context"):
        kiln.tools.get_default_device()
    with pytest.raises(ValueError, match="CUDA_DEVICE must hold a device number"):
        kiln.tools.make_default_context() if HAVE_GPU else kiln.tools._chosen_ordinal()
    monkeypatch.delenv("CUDA_DEVICE")
    monkeypatch.setenv("HOME", "/nonexistent")
    # Where no device's context can be made, PyCUDA's raises RuntimeError, and where there is
    # no device at all (kiln's NoDeviceError) too; kiln's are also its own errors.
    assert issubclass(kiln.NoDeviceError, RuntimeError)
    assert issubclass(kiln.NoDeviceError, drv.RuntimeError)
    if HAVE_GPU:
        def refuse(dev):
            raise drv.LogicError("refused")
        with pytest.raises(RuntimeError, match="could make a context on none of the") as e:
            kiln.tools.make_default_context(refuse)
        assert isinstance(e.value, drv.LogicError) and e.value.code is e.value.name is None
    assert drv.PageLockedAllocator is kiln.tools.PageLockedAllocator


def test_the_pools_number_their_bins_as_pycudas_do():
    import random
    rng = random.Random(3)
    for pool in (kiln.tools.DeviceMemoryPool(), kiln.tools.PageLockedMemoryPool()):
        for _ in range(3000):  # PyCUDA's test_mempool_2
            s = rng.randrange(1 << 31) >> rng.randrange(32)
            b = pool.bin_number(s)
            size = pool.alloc_size(b)
            assert size >= s and pool.bin_number(size) == b and size <= max(256, s * 5 // 4)
        assert [pool.alloc_size(pool.bin_number(n)) for n in (0, 256, 257, 1000, 1 << 30)] == \
            [256, 256, 320, 1024, 1 << 30]
        with pytest.raises(ValueError, match="no pool bin is numbered 3"):
            pool.alloc_size(3)


@pytest.fixture
def freed_blocks(monkeypatch):
    """kiln.tools' mem_alloc made to give DeviceAllocations as the pools use them, without a
    device; the sizes of those freed, in order."""
    freed = []

    class Block:
        def __init__(self, size):
            self.size = size

        def __int__(self):
            return 0x1000

        def free(self):
            freed.append(self.size)

    monkeypatch.setattr(kiln.tools, "mem_alloc", Block)
    return freed


def test_the_debug_pool_logs_each_allocation_as_pycudas(monkeypatch, freed_blocks):
    import io

    monkeypatch.setattr(kiln._kiln, "mem_info", lambda: (7000, 9000))
    log = io.StringIO()
    pool = kiln.tools.DebugMemoryPool(interactive=False, logfile=log)
    assert isinstance(pool, kiln.tools.DeviceMemoryPool) and pool.last_free == 7000

    def place():
        return pool.allocate(1000)

    a, b = place(), place()
    lines = log.getvalue().splitlines()
    assert lines[1] == ("  Allocation of size 1000 occurring (mem: last_free:7000, free: 7000, "
                        "total:9000) (pool: held:0, active:0):")
    assert lines[2].startswith("      at: ") and lines[2].endswith("|place|allocate")
    assert lines[-1] == "   (1000 bytes): 1x"  # the live blocks, by size and place
    assert len(pool.blocks) == 2 and pool.active_blocks == 2
    del a
    import gc
    gc.collect()
    assert len(pool.blocks) == 1 and pool.held_blocks == 1
    answers = iter(["", "here", ""])  # [Enter] for the stack, a name, then Enter to go on
    monkeypatch.setattr("builtins.input", lambda prompt="": next(answers))
    asking = kiln.tools.DebugMemoryPool(logfile=log)
    asking.allocate(10)
    assert list(asking.stacktrace_mnemonics.values()) == ["here"]
    assert "      at: here" in log.getvalue()


def test_the_device_pool_counts_active_and_managed_bytes(freed_blocks):
    freed = freed_blocks
    pool = kiln.tools.DeviceMemoryPool()
    a, b = pool.allocate(1000), pool.allocate(100)
    assert (pool.active_bytes, pool.managed_bytes, pool.active_blocks) == (1100, 1024 + 256, 2)
    a.free()
    assert (pool.active_bytes, pool.managed_bytes, pool.held_blocks) == (100, 1280, 1)
    c = pool.allocate(900)  # the kept block of 1024 again: nothing new is managed
    assert (pool.active_bytes, pool.managed_bytes, pool.held_blocks) == (1000, 1280, 0)
    del b
    pool.free_held()
    assert (pool.active_bytes, pool.managed_bytes, freed) == (900, 1024, [256])
    pool.stop_holding()
    c.free()
    assert (pool.active_bytes, pool.managed_bytes, freed) == (0, 0, [256, 1024])
    host = kiln.tools.PageLockedMemoryPool(lambda n: np.zeros(n, np.uint8))  # no device
    x = host.allocate((10, 10), np.float32)
    y = host.allocate(3, np.float64)
    assert (host.active_bytes, host.managed_bytes) == (424, 448 + 256)
    del x
    assert (host.active_bytes, host.managed_bytes, host.held_blocks) == (24, 704, 1)
    host.free_held()
    assert (host.active_bytes, host.managed_bytes) == (24, 256)
    del y
    assert (host.active_bytes, host.managed_bytes) == (0, 256)


def test_context_dependent_memoize_caches_per_context():
    calls = []

    @kiln.tools.context_dependent_memoize
    def build(n, scale=1):
        calls.append(n)
        return n * scale

    assert build(3) == 3 and build(3) == 3 and build(3, scale=2) == 6
    assert calls == [3, 3]
    kiln.tools.clear_context_caches()
    assert build(3) == 3 and calls == [3, 3, 3]


def test_characterize_without_a_gpu():
    import kiln.characterize as characterize
    assert characterize.platform_bits() == 64
    # Read from the PTX of a kernel never launched: NVRTC alone.
    assert [characterize.sizeof(t) for t in ("char", "int", "double", "float3", "size_t")] == \
        [1, 4, 8, 12, 8]
    assert characterize.sizeof("S", "struct S { double a; char b; };") == 16
    assert characterize.sizeof("kiln_pair", "typedef int2 kiln_pair;") == 8
    # Any type name, as PyCUDA's sizeof(%s) takes it: arrays and pointers to functions too.
    assert [characterize.sizeof(t) for t in ("int[3]", "double[2][5]", "void (*)(int)", "int&")] \
        == [12, 80, 8, 4]
    assert characterize.sizeof("x", "__device__ double x[7];") == 56  # an expression too
    if not HAVE_GPU:
        with pytest.raises(kiln.NoDeviceError):
            characterize.has_double_support()


@pytest.mark.gpu
def test_characterize_on_the_gpu():
    import kiln.characterize as characterize
    assert characterize.has_double_support() is True and characterize.has_stack() is True


def test_set_debugging_compiles_for_the_debugger_and_back(tmp_path):
    src = "__global__ void dbg(float *x) { x[threadIdx.x] *= 2; }"
    plain = kiln.SourceModule(src, arch="sm_90")
    assert ".debug_info" not in plain.ptx
    try:
        drv.set_debugging()
        assert drv.CUDA_DEBUGGING is True
        debug = kiln.SourceModule(src, arch="sm_90")
        # Given -G already: the same build.
        assert kiln.SourceModule(src, arch="sm_90", options=["-G"]).ptx == debug.ptx
    finally:
        drv.set_debugging(False)
    assert ".debug_info" in debug.ptx and debug.ptx != plain.ptx
    assert drv.CUDA_DEBUGGING is False
    assert kiln.SourceModule(src, arch="sm_90").ptx == plain.ptx  # not the debug build
    # python -m kiln.debug runs a script so, its arguments given to it.
    script = tmp_path / "script.py"
    script.write_text("import sys, kiln, kiln.driver as drv\n"
                      "m = kiln.SourceModule('__global__ void s(int *p) { *p = 1; }', "
                      "arch='sm_90')\n"
                      "print(drv.CUDA_DEBUGGING, '.debug_info' in m.ptx, sys.argv[1:])\n")
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(Path(kiln.__file__).parent.parent), os.environ.get("PYTHONPATH", "")]))
    import subprocess
    import sys
    r = subprocess.run([sys.executable, "-m", "kiln.debug", str(script), "-x", "1"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "True True ['-x', '1']"
    r = subprocess.run([sys.executable, "-m", "kiln.debug", str(tmp_path / "missing.py")],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 2 and "does not exist" in r.stderr


def test_tools_parses_c_arguments_as_pycuda():
    import kiln.tools as tools
    x = tools.parse_c_arg("const float *x")
    assert isinstance(x, tools.VectorArg) and isinstance(x, tools.Argument)
    assert x.dtype == np.float32 and x.name == "x" and x.declarator() == "float *x"
    n = tools.parse_c_arg("unsigned int n")
    assert isinstance(n, tools.ScalarArg) and n.dtype == np.uint32
    assert tools.get_arg_type("double a") == "d" and tools.get_arg_type("int *p") == "P"
    from kiln.elementwise import ElementwiseKernel
    k = ElementwiseKernel([tools.VectorArg(np.float32, "y"), tools.ScalarArg(np.float32, "a")],
                          "y[i] *= a", "scale")
    assert [a.name for a in k.arguments] == ["y", "a"]


def test_register_dtype_names_a_struct_for_generated_kernels():
    pair = np.dtype([("lo", np.float32), ("hi", np.float32)])
    kiln.tools.register_dtype(pair, "kiln_test_pair")
    assert kiln.tools.dtype_to_ctype(pair) == "kiln_test_pair"
    assert kiln.tools.get_or_register_dtype("kiln_test_pair") == pair
    with pytest.raises(RuntimeError, match="already the C type 'kiln_test_pair'; pass alias_ok"):
        kiln.tools.register_dtype(pair, "kiln_other_pair")
    kiln.tools.register_dtype(pair, ["kiln_other_pair", "kiln_third_pair"], alias_ok=True)
    assert kiln.tools.dtype_to_ctype(pair) == "kiln_test_pair"  # the first name stays
    assert kiln.tools.get_or_register_dtype(["kiln_third_pair"]) == pair
    triple = np.dtype([("a", np.int32), ("b", np.int32), ("c", np.int32)])
    assert kiln.tools.get_or_register_dtype(["kiln_triple", "kiln_triple_t"], triple) == triple
    assert kiln.tools.dtype_to_ctype(triple) == "kiln_triple"
    assert kiln.tools.get_or_register_dtype("unsigned int") == np.uint32
    with pytest.raises(TypeError, match="no dtype is known for the C type 'kiln_nothing'"):
        kiln.tools.get_or_register_dtype("kiln_nothing")
    # PyCUDA's registry raises KeyError there (compyte documents TypeNameNotKnown, a
    # RuntimeError), and a name registered to another dtype is a RuntimeError.
    from kiln.compyte.dtypes import TypeNameNotKnown
    for error in (KeyError, RuntimeError, TypeNameNotKnown):
        with pytest.raises(error):
            kiln.tools.get_or_register_dtype("kiln_nothing")
    with pytest.raises(RuntimeError, match="name 'kiln_triple' already registered to different"):
        kiln.tools.get_or_register_dtype("kiln_triple", pair)
    with pytest.raises(RuntimeError, match="name 'float' already registered to different"):
        kiln.tools.register_dtype(np.float64, "float", alias_ok=True)
    assert kiln.tools.get_or_register_dtype("kiln_triple_t", triple) == triple  # the same again
    with pytest.raises(TypeError, match="c_names is a C type's name or a list"):
        kiln.tools.register_dtype(triple, [])
    # An equal dtype made again gives back the object registered first, as PyCUDA's registry
    # does: programs compare with `is` and read its isalignedstruct.
    again = np.dtype([("a", np.int32), ("b", np.int32), ("c", np.int32)])
    assert again is not triple
    assert kiln.tools.get_or_register_dtype("kiln_triple_t", again) is triple
    assert kiln.tools.get_or_register_dtype(["kiln_triple_u"], again) is triple
    assert kiln.tools.get_or_register_dtype("kiln_triple_u") is triple
    float3 = np.dtype([("x", np.float32), ("y", np.float32), ("z", np.float32)], align=True)
    assert kiln.tools.get_or_register_dtype("float3", float3) is kiln.gpuarray.vec.float3
    assert kiln.tools.get_or_register_dtype("float3") is kiln.gpuarray.vec.float3


def test_compyte_dtypes_is_the_same_registry():
    # pycuda.compyte.dtypes, which programs import dtype_to_ctype and TYPE_REGISTRY from.
    from kiln.compyte import dtypes
    from kiln.elementwise import ScalarArg, VectorArg
    assert dtypes.dtype_to_ctype(np.complex64) == "pycuda::complex<float>"
    quad = np.dtype([("a", np.float64), ("b", np.float64)])
    assert dtypes.get_or_register_dtype("kiln_compyte_quad", quad) == quad
    assert kiln.tools.dtype_to_ctype(quad) == "kiln_compyte_quad"
    assert dtypes.TYPE_REGISTRY.dtype_to_name[quad] == "kiln_compyte_quad"
    assert dtypes.TYPE_REGISTRY.name_to_dtype["kiln_compyte_quad"] == quad
    assert dtypes.TYPE_REGISTRY.dtype_to_ctype(np.uint16) == "unsigned short"
    arg = dtypes.parse_c_arg_backend("const float *__restrict__ x", ScalarArg, VectorArg)
    assert isinstance(arg, VectorArg) and (arg.dtype, arg.name) == (np.float32, "x")
    arg = dtypes.parse_c_arg_backend("unsigned int n[4]", ScalarArg, VectorArg)
    assert isinstance(arg, VectorArg) and arg.dtype == np.uint32
    assert dtypes.parse_c_arg_backend("double s", ScalarArg, VectorArg).dtype == np.float64
    with pytest.raises(ValueError, match="unknown type 'mystery'"):
        dtypes.parse_c_arg_backend("mystery m", ScalarArg, VectorArg)


@pytest.mark.parametrize("shape", [(3, 4, 5), (0, 2), (1,), (2, 1, 3), ()])
def test_compyte_array_strides_are_numpys(shape):
    from kiln.compyte import array
    c = np.zeros(shape, np.float32)
    f = np.asfortranarray(c) if shape else c
    assert array.is_c_contiguous_strides(c.strides, 4, shape)
    assert array.is_f_contiguous_strides(f.strides, 4, shape)
    if 0 not in shape:
        assert array.c_contiguous_strides(4, shape) == c.strides
        assert array.f_contiguous_strides(4, shape) == f.strides
    flags = array.ArrayFlags(c)
    assert (flags.c_contiguous, flags.forc) == (True, True)


def test_compyte_array_flags_and_common_dtype():
    from kiln.compyte import array
    assert not array.ArrayFlags(np.zeros((3, 4))[:, ::2]).forc
    t = array.ArrayFlags(np.zeros((3, 4)).T)
    assert (t.c_contiguous, t.f_contiguous) == (False, True)
    f32 = np.zeros(2, np.float32)
    assert array.get_common_dtype(f32, 2.0, True) == np.float32
    assert array.get_common_dtype(f32, np.zeros(1, np.int32), True) == np.float64
    assert array.get_common_dtype(f32, np.zeros(1, np.int32), False) == np.float32
    assert array.get_common_dtype(f32, 1j, False) == np.complex64


def test_init_cuda_context_fixture_is_a_generator():
    body = kiln.tools.init_cuda_context_fixture()
    if not HAVE_GPU:
        with pytest.raises(kiln.NoDeviceError):
            next(body)
        return
    next(body)
    assert drv.Context.get_current() is not None
    with pytest.raises(StopIteration):
        next(body)


def test_mark_cuda_test_marks_and_wraps():
    def check_something():
        """doc"""
        return 42

    marked = kiln.tools.mark_cuda_test(check_something)
    assert marked.__doc__ == "doc" and marked.__name__ == "check_something"
    assert any(m.name == "cuda" for m in getattr(marked, "pytestmark", []))


class FakeDeviceData:
    """An H100's numbers (sm_90), without one."""
    max_threads, warp_size, warps_per_mp, thread_blocks_per_mp = 1024, 32, 64, 32
    registers, registers_per_mp, shared_memory_per_mp, smem_alloc_granularity = (
        65536, 65536, 233472, 128)
    reserved_shared_memory = 1024


def test_device_data_coalesces_whole_warps():
    coalesce = kiln.tools.DeviceData.coalesce
    assert [coalesce(FakeDeviceData(), n) for n in (1, 32, 33, 100)] == [32, 32, 64, 128]
    if HAVE_GPU:
        data = kiln.tools.DeviceData()
        assert data.register_allocation_unit == "warp" and data.coalesce(17) == 32


@pytest.mark.parametrize("threads, shared, regs, tb, limited_by, occupancy", [
    (256, 0, 0, 8, "warps", 1.0),
    (32, 0, 0, 32, "device", 0.5),
    (256, 0, 64, 4, "regs", 0.5),
    (128, 100 * 1024, 0, 2, "smem", 0.125),
    (128, 16 * 1024, 0, 13, "smem", 0.8125),  # 17 KiB a block with the driver's reserve
    (256, 0, 32, 8, "regs", 1.0),  # regs and warps tie: PyCUDA's min() of the pairs
])
def test_occupancy_records(threads, shared, regs, tb, limited_by, occupancy):
    r = kiln.tools.OccupancyRecord(FakeDeviceData(), threads, shared, regs)
    assert (r.tb_per_mp, r.limited_by, r.occupancy) == (tb, limited_by, occupancy)
    # PyCUDA's list of every limit, which programs print or check the record against.
    assert min(r.tb_per_mp_limits) == (r.tb_per_mp, r.limited_by)
    assert [name for _, name in r.tb_per_mp_limits] == (
        ["device", "warps"] + ["regs"] * bool(regs) + ["smem"] * bool(shared))


@pytest.mark.gpu
@pytest.mark.parametrize("threads, shared", [(128, 16 * 1024), (256, 40 * 1024), (64, 3000)])
def test_occupancy_records_agree_with_the_drivers(threads, shared):
    from kiln.compiler import SourceModule
    f = SourceModule(f"__global__ void k(float *p) {{ __shared__ float s[{shared // 4}];\n"
                     "s[threadIdx.x] = p[threadIdx.x]; __syncthreads();\n"
                     "p[threadIdx.x] = s[blockDim.x - 1 - threadIdx.x]; }\n").get_function("k")
    r = kiln.tools.OccupancyRecord(kiln.tools.DeviceData(), threads, f.shared_size_bytes,
                                   f.num_regs)
    assert r.tb_per_mp == f.max_active_blocks(threads)


class PyCUDAsDeviceData:
    """A devdata a program builds with the attributes PyCUDA's DeviceData has, and no more."""
    max_threads, warp_size, warps_per_mp, thread_blocks_per_mp = 1024, 32, 64, 32
    registers, shared_memory, smem_alloc_granularity = 65536, 49152, 128  # a block's most
    register_allocation_unit = "warp"


def test_occupancy_records_of_a_devdata_with_pycudas_attributes_only():
    r = kiln.tools.OccupancyRecord(PyCUDAsDeviceData(), 256, 16 * 1024, 64)
    assert r.tb_per_mp_limits == [(32, "device"), (8, "warps"), (4, "regs"), (3, "smem")]
    assert (r.tb_per_mp, r.limited_by, r.occupancy) == (3, "smem", 0.375)


def test_occupancy_of_a_block_that_cannot_run_is_refused_as_pycuda_refuses_it():
    with pytest.raises(ValueError, match="threads must be 1 to 1024"):
        kiln.tools.OccupancyRecord(FakeDeviceData(), 2048)
    with pytest.raises(ValueError, match="too many registers"):
        kiln.tools.OccupancyRecord(FakeDeviceData(), 1024, registers=255)
    with pytest.raises(ValueError, match="too much smem"):
        kiln.tools.OccupancyRecord(FakeDeviceData(), 32, shared_mem=300 * 1024)
    with pytest.raises(ValueError, match="counts of 0 or more"):
        kiln.tools.OccupancyRecord(FakeDeviceData(), 32, shared_mem=-1)


def test_the_page_locked_pool_reuses_blocks():
    made = []

    def allocator(nbytes):  # plain host memory stands in for page-locked memory
        made.append(nbytes)
        return np.zeros(nbytes, np.uint8)

    pool = kiln.tools.PageLockedMemoryPool(allocator)
    a = pool.allocate((100, 3), np.float32, order="F")
    assert a.shape == (100, 3) and a.dtype == np.float32 and a.flags.f_contiguous
    assert isinstance(a.base, kiln.tools.PooledHostAllocation) and len(a.base) == 1200
    a[:] = 7
    assert pool.active_blocks == 1 and pool.held_blocks == 0
    del a
    assert pool.active_blocks == 0 and pool.held_blocks == 1
    b = pool.allocate(290, np.float32)  # 1160 bytes: the same bin, the same block
    assert made == [1280] and b.shape == (290,) and pool.held_blocks == 0
    c = pool.allocate(10, np.dtype([("x", np.int32), ("y", np.float64)]))
    assert c.dtype.names == ("x", "y") and len(made) == 2
    del b, c
    pool.stop_holding()
    assert pool.held_blocks == 0
    d = pool.allocate(4, np.int8)
    del d
    assert pool.held_blocks == 0 and pool.active_blocks == 0
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        pool.allocate(4, np.int8, order="K")


# ---- On the GPU ----------------------------------------------------------------------------------


@pytest.mark.gpu
def test_device_attributes_and_the_context():
    dev = drv.Device(0)
    attrs = dev.get_attributes()
    assert attrs[drv.device_attribute.MAX_THREADS_PER_BLOCK] == dev.max_threads_per_block == \
        dev.get_attribute(drv.device_attribute.MAX_THREADS_PER_BLOCK) == 1024
    assert dev.warp_size == 32 and dev.compute_capability() == (
        dev.compute_capability_major, dev.compute_capability_minor)
    assert drv.Device(dev.pci_bus_id()) == dev and hash(drv.Device(0)) == hash(dev)
    with pytest.raises(AttributeError, match="no_such_attribute"):
        dev.no_such_attribute
    # PyCUDA upper-cases the name, so the attribute's own spelling works too (GPU-BLonD's
    # grid=(2 * dev.MULTIPROCESSOR_COUNT, 1, 1)).
    assert dev.MULTIPROCESSOR_COUNT == dev.multiprocessor_count > 0
    with pytest.raises(AttributeError, match="NO_SUCH_ATTRIBUTE"):
        dev.NO_SUCH_ATTRIBUTE
    ctx = dev.make_context()
    try:
        assert drv.Context.get_current() == ctx and ctx.get_device() == dev
        # The stack size may change at any time; the printf FIFO and malloc heap only before a
        # kernel that uses them has run, which an earlier test may have launched.
        drv.Context.set_limit(drv.limit.STACK_SIZE, 4096)
        assert drv.Context.get_limit(drv.limit.STACK_SIZE) >= 4096
        # CUDA 12's device runtime has no device-side synchronize, so no depth to set for it:
        # the driver's refusal, a LogicError as under PyCUDA (whose cdpSimplePrint demo sets it).
        with pytest.raises(drv.LogicError,
                           match=r"\(DEV_RUNTIME_SYNC_DEPTH\).*removed in CUDA 12") as refused:
            ctx.set_limit(drv.limit.DEV_RUNTIME_SYNC_DEPTH, 2)
        assert refused.value.name == "CUDA_ERROR_UNSUPPORTED_LIMIT"
        drv.Context.set_cache_config(drv.func_cache.PREFER_SHARED)
        assert drv.Context.get_cache_config() == drv.func_cache.PREFER_SHARED
        drv.Context.set_cache_config(drv.func_cache.PREFER_NONE)
        assert ctx.get_api_version() >= 3020
        drv.Context.synchronize()
        # attach(): the current context, as PyTorch's is taken; its detach() pops nothing.
        attached = drv.Context.attach()
        assert attached == ctx and attached.handle == ctx.handle
        attached.detach()
        assert drv.Context.get_current() == ctx
    finally:
        ctx.pop()
    with pytest.raises(drv.LogicError, match="no context is pushed") as refused:
        in_new_thread(drv.Context.pop)
    assert refused.value.name == "CUDA_ERROR_INVALID_CONTEXT"
    # Pushes nest per thread: one pushed on a thread of its own is popped there.
    assert in_new_thread(lambda: (dev.make_context(), drv.Context.pop())) == (ctx, None)


@pytest.mark.gpu
def test_function_attributes(module):
    f = module.get_function("k")
    assert 0 < f.num_regs <= 255 and f.max_threads_per_block <= 1024
    assert f.shared_size_bytes == 0 and f.local_size_bytes >= 0 and f.const_size_bytes >= 0
    assert f.get_attribute(drv.function_attribute.NUM_REGS) == f.num_regs
    # PyCUDA upper-cases the name: linop_cuda_codegen reads func.MAX_THREADS_PER_BLOCK.
    assert f.NUM_REGS == f.Num_Regs == f.num_regs
    assert f.MAX_THREADS_PER_BLOCK == f.max_threads_per_block
    with pytest.raises(AttributeError, match="NO_SUCH_ATTRIBUTE"):
        f.NO_SUCH_ATTRIBUTE
    assert f.attributes["num_regs"] == f.num_regs and len(f.attributes) == 10
    assert f.binary_version >= 75 and f.ptx_version >= 75
    f.set_attribute(drv.function_attribute.MAX_DYNAMIC_SHARED_SIZE_BYTES, 64 << 10)
    assert f.max_dynamic_shared_size_bytes == 64 << 10
    f.set_cache_config(drv.func_cache.PREFER_L1)
    with pytest.raises(ValueError, match="function attribute 4 is read-only"):
        f.set_attribute(drv.function_attribute.NUM_REGS, 8)


@pytest.mark.skipif(HAVE_GPU, reason="what is refused for want of a driver (the GPU machine "
                    "reads the values in test_function_attributes)")
def test_upper_case_function_attributes_and_attach_reach_the_driver():
    f = kiln.SourceModule("__global__ void k(int *p) {}", arch=ARCH).get_function("k")
    for read in (lambda: f.MAX_THREADS_PER_BLOCK, lambda: f.Num_Regs, drv.Context.attach):
        with pytest.raises(kiln.NoDeviceError):
            read()
    with pytest.raises(AttributeError, match="NO_SUCH_ATTRIBUTE"):
        f.NO_SUCH_ATTRIBUTE
    with pytest.raises(TypeError, match="cannot be interpreted as an integer"):
        drv.Context.attach(flags="x")


def test_managed_memory_2d_memsets_and_the_profiler_check_arguments_first():
    with pytest.raises(ValueError, match="made attached GLOBAL .1. or HOST .2., not 4"):
        drv.managed_empty(3, np.float32, mem_flags=drv.mem_attach_flags.SINGLE)
    with pytest.raises(ValueError, match="order must be 'C' or 'F'"):
        drv.managed_zeros((2, 2), np.float32, order="K")
    with pytest.raises(ValueError, match="data is an int of 1 bytes, signed or not, not 256"):
        drv.memset_d2d8(0x1000, 4, 256, 1, 1)
    with pytest.raises(ValueError, match="data is an int of 4 bytes"):
        drv.memset_d2d32_async(0x1000, 4, 1.5, 1, 1)
    with pytest.raises(ValueError, match="data is an int of 2 bytes"):  # PyCUDA's keywords
        drv.memset_d2d16(dest=0x1000, pitch=4, data=1 << 16, width=1, height=1)
    with pytest.raises(TypeError, match="dest is device memory"):
        drv.memset_d2d16("here", 4, 1, 1, 1)
    with pytest.raises(ValueError, match="pitch, width and height are counts >= 0"):
        drv.memset_d2d16(0x1000, -4, 1, 1, 1)
    with pytest.raises(TypeError):
        drv.memset_d2d8(0x1000, 4, 1, 1, 1, None)  # the blocking form takes no stream
    with pytest.raises(NotImplementedError, match="CUDA 12 removed cuProfilerInitialize"):
        drv.initialize_profiler("config", "out.csv", 0)


@pytest.mark.gpu
def test_mem_get_address_range_gives_the_allocation_an_address_lies_in():
    a = drv.mem_alloc(1000)
    base, size = drv.mem_get_address_range(int(a) + 100)
    assert base == int(a) and size >= 1000
    assert drv.mem_get_address_range(a) == (base, size)
    arr = kiln.gpuarray.zeros(50, np.float32)  # kiln's pool: the array's own block
    base, size = drv.mem_get_address_range(arr.gpudata)
    assert base <= int(arr.gpudata) and base + size >= int(arr.gpudata) + arr.nbytes
    with pytest.raises(drv.LogicError, match="is not device memory of the current context"):
        drv.mem_get_address_range(8)
    with pytest.raises(TypeError, match="ptr must be"):
        drv.mem_get_address_range("a")


@pytest.mark.gpu
def test_managed_memory_no_machine_could_hold_is_refused():
    # The driver grants it (pages are made when touched); zeroing it would end the process.
    for make in (drv.managed_empty, drv.managed_zeros):
        with pytest.raises(MemoryError, match="more than the device's .* and the host's"):
            make((2**40, 1, 1), np.float64)
    small = drv.managed_zeros((3, 5), np.float32)
    assert small.shape == (3, 5) and not small.any()


@pytest.mark.gpu
def test_managed_arrays_pass_to_kernels_as_they_are():
    # PyCUDA's example of managed memory, word for word but for the imports.
    a = drv.managed_empty(shape=10, dtype=np.float32, mem_flags=drv.mem_attach_flags.GLOBAL)
    a[:] = np.linspace(0, 9, len(a))
    doublify = kiln.SourceModule("""
    __global__ void doublify(float *a) { a[threadIdx.x] *= 2; }
    """).get_function("doublify")
    doublify(a, grid=(1, 1), block=(len(a), 1, 1))
    drv.Context.synchronize()
    assert np.median(a) == 9.0 and a.tolist() == [2.0 * i for i in range(10)]
    assert isinstance(a.base, drv.ManagedAllocation)
    assert a.base.get_device_pointer() == a.ctypes.data == int(a.base)
    assert a.base.size == 40
    # A view of it passes too when contiguous; a strided one is refused.
    doublify(a[5:], grid=(1, 1), block=(5, 1, 1))
    drv.Context.synchronize()
    assert a[5:].tolist() == [4.0 * i for i in range(5, 10)]
    with pytest.raises(ValueError, match="strided view of a managed array"):
        doublify(a[::2], grid=(1, 1), block=(5, 1, 1))
    z = drv.managed_zeros((4, 3), np.int32, order="F")
    assert z.flags.f_contiguous and not z.any()
    like = drv.managed_zeros_like(np.ones((2, 5), np.float64))
    assert like.shape == (2, 5) and like.dtype == np.float64 and not like.any()
    assert drv.managed_empty_like(z).flags.f_contiguous
    host_only = drv.managed_empty(8, np.uint8, mem_flags=drv.mem_attach_flags.HOST)
    host_only[:] = 3
    s = drv.Stream()
    host_only.base.attach(drv.mem_attach_flags.SINGLE, stream=s)
    drv.memset_d8_async(host_only.base, 9, 8, stream=s)
    s.synchronize()
    assert host_only.tolist() == [9] * 8
    host_only.base.attach(drv.mem_attach_flags.GLOBAL)
    drv.Context.synchronize()


@pytest.mark.gpu
def test_a_handler_class_of_the_programs_own_passes_its_device_memory():
    # reikna's CUDA buffers: a class derived from ArgumentHandler that holds an allocation and
    # gives it from get_device_alloc, passed to kernels as the memory. The base, made with an
    # array, allocates memory its size. A class that copies in pre_call or post_call is refused:
    # kiln's launch would not call them.
    class Buffer(drv.ArgumentHandler):
        def __init__(self, size):
            self._buffer = drv.mem_alloc(size)
            self.size = size

        def __int__(self):
            return int(self._buffer)

        def get_device_alloc(self):
            return self._buffer

    fill = kiln.SourceModule("""
    __global__ void fill(float *x, int n) { int i = threadIdx.x; if (i < n) x[i] = i + 0.5f; }
    """).get_function("fill")
    b = Buffer(64 * 4)
    fill(b, np.int32(64), block=(64, 1, 1), grid=(1, 1))
    got = np.empty(64, np.float32)
    drv.memcpy_dtoh(got, b.get_device_alloc())
    np.testing.assert_array_equal(got, np.arange(64, dtype=np.float32) + 0.5)
    base = drv.ArgumentHandler(np.zeros(16, np.float32))
    fill(base, np.int32(16), block=(64, 1, 1), grid=(1, 1))
    assert base.dev_alloc is base.get_device_alloc() and base.dev_alloc.size == 64
    drv.memcpy_dtoh(got[:16], base.dev_alloc)
    np.testing.assert_array_equal(got[:16], np.arange(16, dtype=np.float32) + 0.5)

    class Copying(drv.ArgumentHandler):
        def post_call(self, stream):
            drv.memcpy_dtoh(self.array, self.get_device_alloc())

    with pytest.raises(TypeError, match="argument 0 of fill.*defines pre_call or post_call"):
        fill(Copying(np.zeros(4, np.float32)), np.int32(4), block=(64, 1, 1), grid=(1, 1))
    with pytest.raises(TypeError, match="could not determine the size of 'int'"):
        fill(drv.ArgumentHandler(3), np.int32(4), block=(64, 1, 1), grid=(1, 1))


def test_host_memory_names_pycuda_programs_test_for():
    assert drv.HostAllocation is drv.PagelockedHostAllocation
    for host in (drv.PagelockedHostAllocation, drv.RegisteredHostMemory,
                 drv.AlignedHostAllocation):
        assert issubclass(host, drv.HostPointer)
    assert not issubclass(drv.DeviceAllocation, drv.HostPointer)
    assert isinstance(drv.In(np.ones(2)), drv.ArgumentHandler)
    assert isinstance(drv.InOut(np.ones(2)), drv.ArgumentHandler)
    assert not isinstance(np.ones(2), drv.ArgumentHandler)
    a = drv.aligned_zeros(16, np.float32)
    assert a.base.free() is None and a.sum() == 0  # the memory stays the array's

    class Holder(drv.PointerHolderBase):
        def get_pointer(self):
            return 4096

    with pytest.raises(ValueError, match="offset must be >= 0"):
        Holder().as_buffer(4, offset=-1)
    with pytest.raises(ValueError, match="size must be >= 0"):
        Holder().as_buffer(-4)


@pytest.mark.gpu
def test_mapped_and_managed_memory_as_pycuda_programs_reach_it():
    twice = kiln.SourceModule("""
    __global__ void twice(float *a, int n) { int i = threadIdx.x; if (i < n) a[i] *= 2; }
    """).get_function("twice")
    # Page-locked memory mapped for the device: a kernel writes the host's array through it.
    a = drv.pagelocked_zeros(32, np.float32, mem_flags=drv.host_alloc_flags.DEVICEMAP)
    a[:] = np.arange(32)
    assert isinstance(a.base, drv.PagelockedHostAllocation) and a.base.size == 128
    flags = a.base.get_flags()
    assert flags & drv.host_alloc_flags.DEVICEMAP and flags & drv.host_alloc_flags.PORTABLE
    twice(np.intp(a.base.get_device_pointer()), np.int32(32), block=(32, 1, 1))
    drv.Context.synchronize()
    assert a.tolist() == [2.0 * i for i in range(32)]
    # Not mapped: no device address, said.
    plain = drv.pagelocked_empty(8, np.float32)
    # With unified addressing the driver maps all page-locked memory, and says DEVICEMAP.
    assert plain.base.get_flags() & drv.host_alloc_flags.PORTABLE
    assert plain.base.free() is None
    plain[:] = 1  # still the array's memory
    # Registered memory mapped for the device.
    host = drv.aligned_zeros(1024, np.float32)
    host[:] = 3
    reg = drv.register_host_memory(host, drv.mem_host_register_flags.DEVICEMAP)
    twice(np.intp(reg.base.get_device_pointer()), np.int32(64), block=(64, 1, 1))
    drv.Context.synchronize()
    assert (reg[:64] == 6).all() and (reg[64:] == 3).all()
    reg.base.unregister()
    with pytest.raises(ValueError, match="unregistered"):
        reg.base.get_device_pointer()

    # as_buffer: managed memory through a program's pointer holder, read and written by the host.
    m = drv.managed_zeros(16, np.int32)

    class Holder(drv.PointerHolderBase):
        def get_pointer(self):
            return m.base.get_device_pointer()

    buf = Holder().as_buffer(32, offset=8)
    view = np.frombuffer(buf, np.int32)
    view[:] = 7
    assert m.tolist() == [0, 0] + [7] * 8 + [0] * 6
    with pytest.raises(ValueError, match="run past their allocation"):
        Holder().as_buffer(64, offset=8)
    assert m.base.free() is None and m.sum() == 56
    # Mapped page-locked memory too, by its device address.
    holder = Holder()
    holder.get_pointer = lambda: a.base.get_device_pointer()
    assert np.frombuffer(holder.as_buffer(128), np.float32).tolist() == a.tolist()
    # Plain device memory: the host cannot reach it, said before anything is read.
    d = drv.mem_alloc(64)
    with pytest.raises(ValueError, match="device memory, which the host cannot read"):
        d.as_buffer(16)
    with pytest.raises(ValueError, match="does not fit"):
        d.as_buffer(16, offset=60)
    d.free()
    with pytest.raises(ValueError, match="freed"):
        d.as_buffer(16)


def test_host_views_check_their_address_and_keep_no_reference():
    import sys
    from kiln import _kiln
    owner = object()
    u8 = np.dtype(np.uint8)
    before = sys.getrefcount(u8)
    for _ in range(200):
        assert len(_kiln._host_view(owner, 0, 0)) == 0
    assert sys.getrefcount(u8) - before < 10  # a leak would hold 200 more
    for address in (2 ** 64 + 4096, -4096):
        with pytest.raises(ValueError, match="not one of 64 bits"):
            _kiln._host_view(owner, address, 4)
    assert "as_buffer" in dir(drv.ManagedAllocation) and "as_buffer" in dir(drv.DeviceAllocation)


def test_a_message_handler_leaves_the_load_failure_as_it_was():
    import subprocess
    import sys
    code = """if True:
        import kiln, kiln.driver as drv
        ptx = kiln.SourceModule("__global__ void k(int *p) { *p = 1; }", arch="sm_80").ptx
        def load(handler):
            try:
                drv.module_from_buffer(ptx, [(drv.jit_option.MAX_REGISTERS, 32)],
                                       message_handler=handler)
            except drv.Error as e:
                return type(e).__name__ + ": " + str(e)
        heard = []
        def busy(ok, info, error):  # kiln calls that fail and succeed in between
            heard.append(ok)
            try:
                kiln.Device.count()
            except drv.Error:
                pass
            kiln._kiln.default_arch()
        quiet = load(None)
        print(quiet == load(busy), heard == [False], "no CUDA driver" in quiet)
    """
    env = dict(os.environ, KILN_CUDA_PATH="/nonexistent/libcuda.so.1",
               PYTHONPATH=os.pathsep.join([str(Path(kiln.__file__).parent.parent),
                                           os.environ.get("PYTHONPATH", "")]))
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "True", "True"], r.stdout


def test_2d_and_3d_copies_check_their_shape_before_the_device(monkeypatch):
    host = np.zeros((4, 8), np.float32)
    c = drv.Memcpy2D()
    assert (c.src_x_in_bytes, c.src_y, c.dst_x_in_bytes, c.dst_y) == (0, 0, 0, 0)
    with pytest.raises(ValueError, match="no source was set"):
        c()
    c.set_src_host(host)
    c.set_dst_device(0x1000)
    c.src_pitch, c.dst_pitch, c.width_in_bytes, c.height = 32, 16, 32, 4
    with pytest.raises(ValueError, match="destination's pitch .16 bytes.* less than its rows' 32"):
        c()
    c.dst_pitch, c.height = 64, 5
    with pytest.raises(ValueError, match="reaches 160 bytes into its source, which has 128"):
        c()
    c.set_dst_host(b"read-only" * 100)
    c.height = 4
    with pytest.raises(ValueError, match="destination is read-only"):
        c()
    c.src_y = -1
    with pytest.raises(ValueError, match="not negative"):
        c()
    c.src_y = 1.5
    with pytest.raises(TypeError, match="source's x_in_bytes, y, z, pitch and height are ints"):
        c()
    c.src_y = 0
    c.set_dst_host(np.zeros(1024, np.uint8))
    c.set_src_host(np.zeros((4, 8), np.float32)[:, ::-1])
    with pytest.raises(ValueError, match="source array has a negative stride"):
        c()
    c.set_src_host(np.zeros((5, 16), np.float32)[1:, 2:10])  # a window: 4 rows of 64 bytes
    c.src_pitch, c.height = 64, 5
    with pytest.raises(ValueError, match="reaches 288 bytes into its source, which has 224"):
        c()
    c.set_dst_array(None)
    with pytest.raises(TypeError, match="destination must be a kiln.driver.Array, not NoneType"):
        c()
    c.set_src_array(np.zeros(4))
    with pytest.raises(TypeError, match="source must be a kiln.driver.Array, not numpy.ndarray"):
        c()
    calls = []  # which form each call takes, PyCUDA's way: an int is `aligned`, not a stream
    c.set_src_host(np.zeros(64, np.uint8))
    c.src_pitch, c.height = 32, 1
    with monkeypatch.context() as m:
        m.setattr(kiln._kiln, "_memcpy_3d", lambda *args: calls.append(args[5:]))
        c()
        c(0)
        c(aligned=False)
        c(stream_or_aligned=True, aligned=False)
        c(stream := object())
    assert calls == [(False, False, None), (True, False, None), (True, False, None),
                     (True, False, None), (False, True, stream)]
    d = drv.Memcpy3D()
    d.set_src_host(np.zeros(64, np.uint8))
    d.set_dst_host(np.zeros(64, np.uint8))
    d.width_in_bytes, d.height, d.depth, d.src_pitch, d.dst_pitch = 8, 2, 2, 8, 8
    d.src_y, d.src_height = 1, 2  # rows 1 and 2 of slices of 2: the driver refuses it too
    with pytest.raises(ValueError, match="source's slices hold 2 rows; the copy needs 3"):
        d()
    d.src_y = 0
    assert d.src_lod == d.dst_lod == 0  # PyCUDA's attributes; the driver takes 0 only
    d.dst_lod = 1
    with pytest.raises(ValueError, match="src_lod and dst_lod must be 0"):
        d()
    d.dst_lod = 0
    d.src_height = d.dst_height = 4
    d.src_z = 7
    with pytest.raises(ValueError, match="reaches 272 bytes into its source, which has 64"):
        d()


@pytest.mark.gpu
def test_a_2d_copys_host_pitch_left_unset_is_the_width():
    # PyCUDA's Memcpy2D leaves a host side's pitch 0 unless it is set; the driver reads that as
    # the width, and programs upload and download whole pitched arrays so (a finite-volume
    # simulator's stream copies).
    host = np.arange(5 * 48, dtype=np.float32).reshape(5, 48)
    alloc, pitch = drv.mem_alloc_pitch(48 * 4, 5, 4)
    up = drv.Memcpy2D()
    up.set_src_host(host)
    up.set_dst_device(alloc)
    up.dst_pitch, up.width_in_bytes, up.height = pitch, 48 * 4, 5
    s = drv.Stream()
    up(s)
    back = np.zeros_like(host)
    down = drv.Memcpy2D()
    down.set_src_device(alloc)
    down.set_dst_host(back)
    down.src_pitch, down.width_in_bytes, down.height = pitch, 48 * 4, 5
    down(s)
    s.synchronize()
    np.testing.assert_array_equal(back, host)
    down.height = 6  # a sixth row of the width would run past the host array
    with pytest.raises(ValueError, match="reaches 1152 bytes into its destination, which has 960"):
        down()


@pytest.mark.gpu
def test_a_3d_copys_pitch_and_height_left_unset_lie_packed():
    # PyCUDA's Memcpy3D passes a pitch or height the program never set as 0, which the driver
    # reads as the width and as the rows the copy reaches (y + height): slices packed.
    host = np.arange(2 * 3 * 16, dtype=np.uint8).reshape(2, 3, 16)
    alloc = drv.mem_alloc(host.nbytes)
    up = drv.Memcpy3D()
    up.set_src_host(host)
    up.set_dst_device(alloc)
    up.width_in_bytes, up.height, up.depth = 16, 3, 2
    up()
    np.testing.assert_array_equal(drv.from_device(alloc, host.shape, np.uint8), host)
    back = np.zeros((2, 2, 16), np.uint8)  # rows 1 and 2 of each slice, y = 1 and height 0
    down = drv.Memcpy3D()
    down.set_src_device(alloc)
    down.set_dst_host(back)
    down.src_y, down.src_pitch, down.src_height = 1, 16, 3
    down.width_in_bytes, down.height, down.depth = 16, 2, 2
    down()
    np.testing.assert_array_equal(back, host[:, 1:])
    whole = np.zeros((2, 4, 16), np.uint8)  # slices of y + height = 4 rows, the first left
    down.set_dst_host(whole)
    down.dst_y, down.dst_pitch = 2, 0
    down()
    np.testing.assert_array_equal(whole[:, 2:], host[:, 1:])
    assert not whole[:, :2].any()


@pytest.mark.gpu
def test_2d_and_3d_copies_on_the_gpu():
    rng = np.random.default_rng(5)
    host = rng.integers(0, 255, (6, 40), dtype=np.uint8)
    alloc, pitch = drv.mem_alloc_pitch(40, 6, 4)
    up = drv.Memcpy2D()
    up.set_src_host(host)
    up.set_dst_device(alloc)
    up.src_pitch, up.dst_pitch, up.width_in_bytes, up.height = 40, pitch, 40, 6
    up()
    rows = drv.from_device(alloc, (6, pitch), np.uint8)
    np.testing.assert_array_equal(rows[:, :40], host)
    # A window back, into the middle of a larger host array, queued on a stream.
    back = drv.pagelocked_zeros((8, 64), np.uint8)
    down = drv.Memcpy2D()
    down.set_src_device(int(alloc))
    down.set_dst_host(back)
    down.src_x_in_bytes, down.src_y, down.src_pitch = 3, 1, pitch
    down.dst_x_in_bytes, down.dst_y, down.dst_pitch = 10, 2, 64
    down.width_in_bytes, down.height = 20, 4
    s = drv.Stream()
    down(s)
    s.synchronize()
    np.testing.assert_array_equal(back[2:6, 10:30], host[1:5, 3:23])
    assert not back[:2].any() and not back[6:].any() and not back[:, :10].any()
    # A window of a larger host array as the source: its rows are the big array's pitch apart.
    big = rng.integers(0, 255, (10, 100), dtype=np.uint8)
    up.set_src_host(big[2:8, 30:70])
    up.src_pitch = 100
    up()
    np.testing.assert_array_equal(drv.from_device(alloc, (6, pitch), np.uint8)[:, :40],
                                  big[2:8, 30:70])
    # Device to device, with a pitch mem_alloc_pitch did not give: aligned=False.
    other = drv.mem_alloc(33 * 6)
    dd = drv.Memcpy2D()
    dd.set_src_device(alloc)
    dd.set_dst_device(other)
    dd.src_pitch, dd.dst_pitch, dd.width_in_bytes, dd.height = pitch, 33, 33, 6
    dd(aligned=False)
    # alloc holds the window of big copied last.
    np.testing.assert_array_equal(drv.from_device(other, (6, 33), np.uint8), big[2:8, 30:63])
    # A DeviceArray's memory, and a managed array as unified memory.
    import kiln.gpuarray
    arr = kiln.gpuarray.zeros((6, 40), np.uint8)
    dd.set_dst_device(arr.gpudata)
    dd.dst_pitch, dd.width_in_bytes = 40, 40
    dd(False)
    np.testing.assert_array_equal(arr.get(), big[2:8, 30:70])
    managed = drv.managed_zeros((6, 40), np.uint8)
    dd.set_dst_unified(managed)
    dd(aligned=False)
    drv.Context.synchronize()
    np.testing.assert_array_equal(managed, big[2:8, 30:70])
    # A device side past its allocation is refused before the driver sees it.
    up.height, up.dst_pitch = 6, pitch * 2
    with pytest.raises(ValueError, match="runs past its allocation"):
        up()
    # 3D: a 2 x 3 x 5 block from the middle of a 4 x 5 x 8 volume, there and back.
    vol = rng.random((4, 5, 8)).astype(np.float32)
    dev, dpitch = drv.mem_alloc_pitch(8 * 4, 5 * 4, 4)  # 4 slices of 5 rows
    c3 = drv.Memcpy3D()
    c3.set_src_host(vol)
    c3.set_dst_device(dev)
    c3.src_pitch, c3.src_height, c3.dst_pitch, c3.dst_height = 32, 5, dpitch, 5
    c3.width_in_bytes, c3.height, c3.depth = 32, 5, 4
    c3()
    out = np.zeros((2, 3, 5), np.float32)
    c3 = drv.Memcpy3D()
    c3.set_src_device(dev)
    c3.set_dst_host(out)
    c3.src_pitch, c3.src_height, c3.dst_pitch, c3.dst_height = dpitch, 5, 20, 3
    c3.src_x_in_bytes, c3.src_y, c3.src_z = 8, 1, 1
    c3.width_in_bytes, c3.height, c3.depth = 20, 3, 2
    c3(drv.Stream())
    np.testing.assert_array_equal(out, vol[1:3, 1:4, 2:7])


# ---- CUDA arrays ---------------------------------------------------------------------------------

def test_array_descriptors_are_plain_attributes():
    d = drv.ArrayDescriptor()
    assert (d.width, d.height, d.format, d.num_channels) == (0, 0, 0, 0)
    d.width, d.height, d.format, d.num_channels = 64, 32, drv.array_format.FLOAT, 4
    assert d == drv.ArrayDescriptor(64, 32, drv.array_format.FLOAT, 4)
    assert d != drv.ArrayDescriptor(64, 32, drv.array_format.FLOAT, 2)
    assert repr(d) == "ArrayDescriptor(width=64, height=32, format=<array_format.FLOAT: 32>, " \
                      "num_channels=4)"
    d3 = drv.ArrayDescriptor3D()
    assert (d3.depth, d3.flags) == (0, 0)
    d3.flags |= drv.array3d_flags.ARRAY3D_LAYERED
    d3.flags |= drv.array3d_flags.SURFACE_LDST
    assert d3.flags == 3 and d3 != drv.ArrayDescriptor()
    with pytest.raises(ValueError, match="has no depth; ArrayDescriptor3D takes depth=4"):
        d.depth = 4  # a 2D descriptor has no depth: an error, not a silent attribute
    # cuda-sim's create_2D_array sets flags = 0 on a 2D descriptor, as PyCUDA lets it; other
    # attributes of a program's own are kept and reach nothing.
    d.flags = 0
    d.note = "mine"
    assert d.note == "mine" and d == drv.ArrayDescriptor(64, 32, drv.array_format.FLOAT, 4)
    with pytest.raises(AttributeError, match="ArrayDescriptor3D has"):
        d.flags


def test_dtypes_and_their_array_formats():
    f = drv.dtype_to_array_format
    assert f(np.uint8) == drv.array_format.UNSIGNED_INT8 and f("int16") == 0x09
    assert f(np.float16) == drv.array_format.HALF and f(np.float32) == drv.array_format.FLOAT
    assert f(np.dtype(np.uint32)) == drv.array_format.UNSIGNED_INT32
    for bad in (np.float64, np.complex64, np.int64, "not a dtype"):
        with pytest.raises(TypeError, match="cannot convert dtype .* to array format"):
            f(bad)


def test_arrays_check_their_descriptor_before_the_device():
    def make(**fields):
        d = drv.ArrayDescriptor3D(width=16, height=8, format=drv.array_format.FLOAT,
                                  num_channels=1)
        for name, value in fields.items():
            setattr(d, name, value)
        return drv.Array(d)
    with pytest.raises(ValueError, match="format is one of UNSIGNED_INT8 .*, not 0x4"):
        make(format=4)
    with pytest.raises(ValueError, match="elements have 1, 2 or 4 channels, not 3"):
        make(num_channels=3)
    with pytest.raises(ValueError, match="width is at least 1 element, not 0"):
        make(width=0)
    with pytest.raises(ValueError, match="TEXTURE_GATHER .8., not 0x10"):
        make(flags=0x10)
    with pytest.raises(ValueError, match="a 1D array .height 0. has no depth, not 4"):
        make(height=0, depth=4)
    with pytest.raises(ValueError, match="CUBEMAP array is square"):
        make(depth=6, flags=drv.array3d_flags.CUBEMAP)
    with pytest.raises(ValueError, match="descriptor's width is an int from 0 to"):
        make(width=-1)
    with pytest.raises(ValueError, match="descriptor's num_channels is an int"):
        make(num_channels=1.5)
    with pytest.raises(TypeError, match="ArrayDescriptor or ArrayDescriptor3D; int has no width"):
        drv.Array(3)
    with pytest.raises(ValueError, match="1, 2 or 4 channels, not 3"):
        drv.Array(drv.ArrayDescriptor(4, 4, drv.array_format.UNSIGNED_INT8, 3))
    assert issubclass(drv.Array, kiln._kiln.Array)


def test_array_helpers_and_copies_check_their_arguments_before_the_device():
    m = np.zeros((3, 4), np.float32)
    for call in (lambda o: drv.matrix_to_array(m, o), lambda o: drv.np_to_array(m, o),
                 lambda o: drv.make_multichannel_2d_array(m[None], o)):
        with pytest.raises(drv.LogicError, match="order must be either F or C, not 'K'"):
            call("K")
    with pytest.raises(drv.LogicError, match="matrix_to_array takes a 2D array"):
        drv.matrix_to_array(np.zeros(4, np.float32), "C")
    with pytest.raises(drv.LogicError, match="np_to_array makes a 2D or 3D CUDA array.*"
                                            r"not of shape \(2, 2, 2, 2\)"):
        drv.np_to_array(np.zeros((2, 2, 2, 2), np.float32), "C")
    with pytest.raises(TypeError, match="cannot convert dtype 'int64'"):
        drv.np_to_array(np.zeros((2, 2), np.int64), "C")
    with pytest.raises(ValueError, match="elements have 1, 2 or 4 channels, not 3"):
        drv.make_multichannel_2d_array(np.zeros((5, 6, 3), np.float32), "C")
    with pytest.raises(ValueError, match="elements have 1, 2 or 4 channels, not 5"):
        drv.make_multichannel_2d_array(np.zeros((5, 6, 2), np.float32), "F")
    strided = kiln.gpuarray.GPUArray((4, 6), np.float32, gpudata=0x1000)[:, ::2]
    with pytest.raises(ValueError, match="contiguous in order 'C'; this one of shape .4, 3."):
        drv.gpuarray_to_array(strided, "C")
    with pytest.raises(ValueError, match="contiguous in order 'F'"):
        drv.gpuarray_to_array(kiln.gpuarray.GPUArray((4, 6), np.float32, gpudata=0x1000), "F")
    for call in (lambda: drv.memcpy_htoa(None, 0, m), lambda: drv.memcpy_atoh(m, "x", 0),
                 lambda: drv.memcpy_dtoa(m, 0, 0x1000, 4), lambda: drv.memcpy_atod(0x1000, 1, 0, 4),
                 lambda: drv.memcpy_atoa(None, 0, None, 0, 4)):
        with pytest.raises(TypeError, match="must be a kiln.driver.Array, not"):
            call()
    with pytest.raises(ValueError, match="index is a number of bytes >= 0, not -8"):
        drv.memcpy_htoa(None, -8, m)
    with pytest.raises(ValueError, match="len is a number of bytes >= 0"):
        drv.memcpy_atod(0x1000, None, 0, -1)
    with pytest.raises(TypeError):
        drv.memcpy_htoa(ary=None, index=0)  # src is PyCUDA's third argument, and needed
    with pytest.raises(NotImplementedError, match="bind_array_to_texref: texture references"):
        drv.bind_array_to_texref(None, None)
    with pytest.raises(NotImplementedError, match="texture references were removed in CUDA 12"):
        drv.matrix_to_texref(m, None, "C")
    dev = kiln.gpuarray.GPUArray((4,), np.float32, gpudata=0x1000)
    with pytest.raises(NotImplementedError, match="GPUArray.bind_to_texref: texture references"):
        dev.bind_to_texref(None)
    with pytest.raises(NotImplementedError, match="bind_to_texref_ext: texture references"):
        dev.bind_to_texref_ext(None, channels=2, allow_double_hack=True)


def _read_array(ary, dtype, shape):
    """The whole of ary as a numpy array of dtype and shape (C order), through Memcpy3D."""
    out = np.zeros(shape, dtype)
    d = ary.get_descriptor_3d()
    row = out.nbytes // (max(d.height, 1) * max(d.depth, 1))
    c = drv.Memcpy3D()
    c.set_src_array(ary)
    c.set_dst_host(out)
    c.width_in_bytes = c.dst_pitch = row
    c.height = c.dst_height = max(d.height, 1)
    c.depth = max(d.depth, 1)
    c()
    return out


FORMATS = [(np.uint8, "UNSIGNED_INT8"), (np.int8, "SIGNED_INT8"), (np.uint16, "UNSIGNED_INT16"),
           (np.int16, "SIGNED_INT16"), (np.uint32, "UNSIGNED_INT32"), (np.int32, "SIGNED_INT32"),
           (np.float16, "HALF"), (np.float32, "FLOAT")]


@pytest.mark.gpu
@pytest.mark.parametrize("channels", [1, 2, 4])
@pytest.mark.parametrize("dtype,fmt", FORMATS)
def test_arrays_round_trip_through_the_host(dtype, fmt, channels):
    rng = np.random.default_rng(channels)
    host = rng.integers(1, 100, (5, 7 * channels)).astype(dtype)
    ary = drv.Array(drv.ArrayDescriptor(7, 5, drv.array_format[fmt], channels))
    assert isinstance(ary.handle, int) and ary.handle != 0
    assert ary.get_descriptor() == drv.ArrayDescriptor(7, 5, drv.array_format[fmt], channels)
    assert ary.get_descriptor_3d().depth == 0 and "7 x 5 x 0" in repr(ary)
    up = drv.Memcpy2D()
    up.set_src_host(host)
    up.set_dst_array(ary)
    up.width_in_bytes = up.src_pitch = host.strides[0]
    up.height = 5
    up()
    back = np.zeros_like(host)
    down = drv.Memcpy2D()
    down.set_src_array(ary)
    down.set_dst_host(back)
    down.width_in_bytes = down.dst_pitch = host.strides[0]
    down.height = 5
    down(aligned=False)
    np.testing.assert_array_equal(back, host)
    # 3D: 3 slices of 4 rows of 6 elements, there and back.
    vol = rng.integers(1, 100, (3, 4, 6 * channels)).astype(dtype)
    ary3 = drv.Array(drv.ArrayDescriptor3D(6, 4, 3, drv.array_format[fmt], channels))
    c = drv.Memcpy3D()
    c.set_src_host(vol)
    c.set_dst_array(ary3)
    c.width_in_bytes = c.src_pitch = vol.strides[1]
    c.height = c.src_height = 4
    c.depth = 3
    c()
    np.testing.assert_array_equal(_read_array(ary3, dtype, vol.shape), vol)
    with pytest.raises(ValueError, match="has a depth of 3.*get_descriptor_3d"):
        ary3.get_descriptor()


@pytest.mark.gpu
def test_array_windows_device_sides_and_array_to_array():
    rng = np.random.default_rng(7)
    host = rng.random((6, 10)).astype(np.float32)
    ary = drv.matrix_to_array(host, "C")  # 10 wide, 6 high
    assert ary.get_descriptor() == drv.ArrayDescriptor(10, 6, drv.array_format.FLOAT, 1)
    np.testing.assert_array_equal(_read_array(ary, np.float32, (6, 10)), host)
    # A window of the array (elements 2 to 6 of rows 1 to 4) into the middle of a host array.
    out = np.zeros((8, 12), np.float32)
    c = drv.Memcpy2D()
    c.set_src_array(ary)
    c.set_dst_host(out)
    c.src_x_in_bytes, c.src_y = 2 * 4, 1
    c.dst_x_in_bytes, c.dst_y, c.dst_pitch = 3 * 4, 2, 12 * 4
    c.width_in_bytes, c.height = 5 * 4, 4
    s = drv.Stream()
    c(s)
    s.synchronize()
    np.testing.assert_array_equal(out[2:6, 3:8], host[1:5, 2:7])
    assert not out[:2].any() and not out[6:].any() and not out[:, :3].any()
    # Past the array's rows, or its row's end: refused before the driver.
    c.height = 6
    with pytest.raises(ValueError, match="reaches row 7 of the source array, which has 6"):
        c()
    c.height, c.src_x_in_bytes = 4, 6 * 4
    with pytest.raises(ValueError, match="rows reach 44 bytes into the source array's rows of 40"):
        c()
    c.src_x_in_bytes = 2
    with pytest.raises(ValueError, match="whole elements of 4 bytes"):
        c()
    # Device to array and back to device, from a GPUArray (pitches of 40 bytes, which
    # mem_alloc_pitch did not give: aligned=False, as CUDA asks of copies inside the device).
    dev = kiln.gpuarray.to_gpu(host[::-1].copy())
    up = drv.Memcpy2D()
    up.set_src_device(dev)
    up.set_dst_array(ary)
    up.width_in_bytes = up.src_pitch = 40
    up.height = 6
    up(aligned=False)
    back = kiln.gpuarray.zeros((6, 10), np.float32)
    down = drv.Memcpy2D()
    down.set_src_array(ary)
    down.set_dst_device(back.gpudata)
    down.width_in_bytes = down.dst_pitch = 40
    down.height = 6
    down(aligned=False)
    np.testing.assert_array_equal(back.get(), host[::-1])
    # Array to array: rows 0 to 2 of ary into rows 3 to 5, 4 elements in, of a wider one.
    wide = drv.Array(drv.ArrayDescriptor(16, 6, drv.array_format.FLOAT, 1))
    aa = drv.Memcpy2D()
    aa.set_src_array(ary)
    aa.set_dst_array(wide)
    aa.dst_x_in_bytes, aa.dst_y = 16, 3
    aa.width_in_bytes, aa.height = 40, 3
    aa(aligned=False)
    np.testing.assert_array_equal(_read_array(wide, np.float32, (6, 16))[3:, 4:14], host[::-1][:3])
    # A window of a 3D array: slices 1 and 2, rows 1 to 2, through Memcpy3D.
    vol = rng.random((3, 4, 5)).astype(np.float32)
    ary3 = drv.np_to_array(vol, "C")
    got = np.zeros((2, 2, 5), np.float32)
    c3 = drv.Memcpy3D()
    c3.set_src_array(ary3)
    c3.set_dst_host(got)
    c3.src_y, c3.src_z = 1, 1
    c3.width_in_bytes, c3.height, c3.depth = 20, 2, 2
    c3.dst_pitch, c3.dst_height = 20, 2
    c3()
    np.testing.assert_array_equal(got, vol[1:3, 1:3])
    c3.src_z = 2
    with pytest.raises(ValueError, match="reaches slice 4 of the source array, which has 3"):
        c3()


@pytest.mark.gpu
def test_an_array_freed_by_the_copy_using_it_goes_when_the_copy_ends():
    f = np.arange(16, dtype=np.float32)
    dev = drv.to_device(f)
    line = drv.Array(drv.ArrayDescriptor(16, 0, drv.array_format.FLOAT, 1))

    class Freeing(drv.PointerHolderBase):  # Python code run inside the copy
        def get_pointer(self):
            line.free()
            return int(dev)

    drv.memcpy_dtoa(line, 0, Freeing(), 64)  # the copy completes on the leased array
    with pytest.raises(ValueError, match="freed"):
        drv.memcpy_atoh(np.zeros(16, np.float32), line, 0)
    line.free()  # a second free: nothing
    back = drv.Array(drv.ArrayDescriptor(16, 0, drv.array_format.FLOAT, 1))
    other = drv.Array(drv.ArrayDescriptor(16, 0, drv.array_format.FLOAT, 1))

    class FreeingOther(drv.PointerHolderBase):
        def get_pointer(self):
            other.free()
            return int(dev)

    drv.memcpy_htoa(other, 0, f)
    drv.memcpy_atod(FreeingOther(), other, 0, 64)  # from the array freed meanwhile
    np.testing.assert_array_equal(drv.from_device(dev, (16,), np.float32), f)
    del back


@pytest.mark.gpu
def test_array_one_dimensional_copies_with_pycudas_arguments():
    f = np.arange(1, 65, dtype=np.float32)
    line = drv.Array(drv.ArrayDescriptor(64, 0, drv.array_format.FLOAT, 1))
    other = drv.Array(drv.ArrayDescriptor3D(64, 0, 0, drv.array_format.FLOAT, 1))
    drv.memcpy_htoa(line, 0, f)
    drv.memcpy_htoa(ary=other, index=0, src=np.zeros(64, np.float32))
    drv.memcpy_atoa(other, 16, line, 0, 128)  # bytes: floats 4 to 35 of other are f[:32]
    back = np.zeros(64, np.float32)
    drv.memcpy_atoh(back, other, 0)
    assert back[:4].tolist() == [0] * 4 and back[4:36].tolist() == f[:32].tolist()
    assert not back[36:].any()
    dev = drv.mem_alloc(256)
    drv.memcpy_atod(dev, other, 0, 256)
    np.testing.assert_array_equal(drv.from_device(dev, (64,), np.float32), back)
    drv.memcpy_dtoa(line, 8, dev, 128)  # floats 2 to 33 of line: other's 0 to 31
    whole = np.zeros(64, np.float32)
    drv.memcpy_atoh(whole, line, 0)
    assert whole[:2].tolist() == f[:2].tolist() and not whole[2:6].any()
    assert whole[6:34].tolist() == f[:28].tolist() and whole[34:].tolist() == f[34:].tolist()
    part = np.zeros(10, np.float32)
    drv.memcpy_atoh(dest=part, ary=line, index=4 * 30)  # floats 30 to 39
    assert part.tolist() == f[24:28].tolist() + f[34:40].tolist()
    # Past the end, a device side past its allocation, a host buffer that is not contiguous.
    with pytest.raises(ValueError, match="copying 256 bytes from byte 4 runs past the end of the "
                                         "destination array"):
        drv.memcpy_htoa(line, 4, f)
    with pytest.raises(ValueError, match="copying 8 bytes from byte 256 runs past the end of the "
                                         "source array"):
        drv.memcpy_atoh(np.zeros(2, np.float32), line, 256)
    with pytest.raises(ValueError, match="runs past its allocation"):
        drv.memcpy_dtoa(line, 0, int(dev) + 192, 128)
    with pytest.raises(ValueError, match="copying 512 bytes, but the destination allocation"):
        drv.memcpy_atod(dev, line, 0, 512)
    with pytest.raises(ValueError, match="destination array is not contiguous"):
        drv.memcpy_atoh(np.zeros(20, np.float32)[::2], line, 0)
    with pytest.raises(ValueError, match="copying 128 bytes from byte 200 runs past the end"):
        drv.memcpy_atoa(line, 0, other, 200, 128)
    # After free(): a ValueError, never the driver given a dead handle; a second free is nothing.
    line.free()
    line.free()
    with pytest.raises(ValueError, match="the Array was freed"):
        line.handle
    with pytest.raises(ValueError, match="the source Array was freed"):
        drv.memcpy_atoh(back, line, 0)
    c = drv.Memcpy2D()
    c.set_src_host(f)
    c.set_dst_array(line)
    c.width_in_bytes, c.height = 256, 1
    with pytest.raises(ValueError, match="the destination Array was freed"):
        c()
    assert "(freed)" in repr(line)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
def test_matrix_to_array_reads_the_matrix_in_its_order(order):
    m = np.random.default_rng(3).random((5, 7)).astype(np.float32)
    ary = drv.matrix_to_array(m, order)
    if order == "C":  # tex2D(x, y) is m[y, x]: rows of 7
        assert ary.get_descriptor() == drv.ArrayDescriptor(7, 5, drv.array_format.FLOAT, 1)
        np.testing.assert_array_equal(_read_array(ary, np.float32, (5, 7)), m)
    else:  # tex2D(x, y) is m[x, y]: rows of 5, the columns
        assert ary.get_descriptor() == drv.ArrayDescriptor(5, 7, drv.array_format.FLOAT, 1)
        np.testing.assert_array_equal(_read_array(ary, np.float32, (7, 5)), m.T)
    d = np.random.default_rng(4).random((3, 4))
    hack = drv.matrix_to_array(d, order, allow_double_hack=True)
    assert hack.get_descriptor().format == drv.array_format.SIGNED_INT32
    assert hack.get_descriptor().num_channels == 2
    want = d if order == "C" else d.T
    np.testing.assert_array_equal(_read_array(hack, np.float64, want.shape), want)


@pytest.mark.gpu
@pytest.mark.parametrize("order", ["C", "F"])
def test_np_to_array_and_gpuarray_to_array_in_2d_and_3d(order):
    rng = np.random.default_rng(11)
    for dtype, fmt, channels in [(np.float32, "FLOAT", 1), (np.int16, "SIGNED_INT16", 1),
                                 (np.float64, "SIGNED_INT32", 2), (np.complex64, "SIGNED_INT32", 2),
                                 (np.complex128, "SIGNED_INT32", 4), (np.float16, "HALF", 1)]:
        a2 = (rng.random((4, 6)) * 50).astype(dtype)
        a3 = (rng.random((3, 4, 5)) * 50).astype(dtype)
        # In the order's reading: C rows are the last axis, F rows the first.
        rows2, rows3 = (a2, a3) if order == "C" else (a2.T, a3.transpose(2, 1, 0))
        for ary, want, depth in ((drv.np_to_array(a2, order), rows2, 0),
                                 (drv.np_to_array(a3, order), rows3, rows3.shape[0]),
                                 (drv.gpuarray_to_array(kiln.gpuarray.to_gpu(
                                     np.asarray(a2, order=order)), order), rows2, 0),
                                 (drv.gpuarray_to_array(kiln.gpuarray.to_gpu(
                                     np.asarray(a3, order=order)), order), rows3, rows3.shape[0])):
            d = ary.get_descriptor_3d()
            assert (d.width, d.height, d.depth) == (want.shape[-1], want.shape[-2], depth)
            assert d.format == drv.array_format[fmt] and d.num_channels == channels
            np.testing.assert_array_equal(_read_array(ary, dtype, want.shape),
                                          np.ascontiguousarray(want))
        surf = drv.np_to_array(a2, order, allowSurfaceBind=True)  # one layer of a layered array
        d = surf.get_descriptor_3d()
        assert d.depth == 1
        assert d.flags == drv.array3d_flags.LAYERED | drv.array3d_flags.SURFACE_LDST
        np.testing.assert_array_equal(_read_array(surf, dtype, rows2.shape),
                                      np.ascontiguousarray(rows2))
        surf3 = drv.gpuarray_to_array(kiln.gpuarray.to_gpu(np.asarray(a3, order=order)), order,
                                      allowSurfaceBind=True)
        assert surf3.get_descriptor_3d().flags == drv.array3d_flags.SURFACE_LDST


@pytest.mark.gpu
def test_make_multichannel_2d_array_in_both_orders():
    rng = np.random.default_rng(2)
    c = rng.random((5, 6, 4)).astype(np.float32)  # height, width, channels
    ary = drv.make_multichannel_2d_array(c, "C")
    assert ary.get_descriptor() == drv.ArrayDescriptor(6, 5, drv.array_format.FLOAT, 4)
    np.testing.assert_array_equal(_read_array(ary, np.float32, (5, 6, 4)), c)
    # PyCUDA's own test's layout: channels, width, height in F order.
    f = np.asarray(rng.random((2, 6, 5)), dtype=np.float32, order="F")
    ary = drv.make_multichannel_2d_array(f, "F")
    assert ary.get_descriptor() == drv.ArrayDescriptor(6, 5, drv.array_format.FLOAT, 2)
    np.testing.assert_array_equal(_read_array(ary, np.float32, (5, 6, 2)), f.transpose(2, 1, 0))


@pytest.mark.gpu
def test_2d_memsets_and_the_profiler_on_the_gpu():
    alloc, pitch = drv.mem_alloc_pitch(64, 4, 4)
    drv.memset_d8(alloc, 0, pitch * 4)
    drv.memset_d2d8(alloc, pitch, 0xAB, 10, 3)
    drv.memset_d2d16(int(alloc) + 16, pitch, -1, 4, 2)
    drv.memset_d2d32_async(int(alloc) + 32, pitch, 0x01020304, 2, 4, stream=drv.Stream())
    drv.Context.synchronize()
    got = drv.from_device(alloc, (4, pitch), np.uint8)
    assert got[:3, :10].tolist() == [[0xAB] * 10] * 3 and not got[3, :10].any()
    assert got[:2, 16:24].tolist() == [[0xFF] * 8] * 2 and not got[2:, 16:24].any()
    assert got[:, 32:40].view(np.uint32).tolist() == [[0x01020304] * 2] * 4
    with pytest.raises(ValueError, match="runs past its allocation"):
        drv.memset_d2d8(alloc, pitch, 1, 10, 5)
    drv.start_profiler()
    drv.stop_profiler()


@pytest.mark.gpu
def test_memory_calls_on_the_gpu():
    a = drv.mem_alloc(64)
    drv.memset_d8(a, 0x5A, 64)
    drv.memset_d16(a, 0x1234, 8)
    drv.memset_d32_async(int(a) + 16, 0xDEADBEEF, 4)
    drv.memset_d16_async(int(a) + 32, -1, 2, stream=drv.Stream())
    drv.memset_d8(dest=int(a) + 48, data=7, size=2)  # the keywords of PyCUDA's binding
    drv.memset_d32_async(int(a) + 52, data=0x01010101, count=1)  # those of its pages
    b = drv.mem_alloc_like(np.zeros(16, np.float32))
    drv.memcpy_dtod(b, a, 64)
    got = drv.from_device(b, (64,), np.uint8)
    assert got[:2].view(np.uint16)[0] == 0x1234
    assert got[16:20].view(np.uint32)[0] == 0xDEADBEEF
    assert got[32:36].view(np.uint16).tolist() == [0xFFFF, 0xFFFF] and got[36] == 0x5A
    assert got[47:57].tolist() == [0x5A, 7, 7, 0x5A, 0x5A, 1, 1, 1, 1, 0x5A]
    like = drv.from_device_like(b, np.zeros((4, 4), np.float32, order="F"))
    assert like.flags.f_contiguous and like.shape == (4, 4)
    with pytest.raises(ValueError, match="runs past its allocation"):
        drv.memset_d32(int(a) + 60, 0, 2)
    # An array is not an address (its __index__ is NumPy's, of a one-element array): its
    # gpudata is, as in PyCUDA, whose copies refuse a GPUArray too.
    arr = kiln.to_device(np.arange(16, dtype=np.int32))
    for call in (lambda: drv.memcpy_dtod(b, arr, 64), lambda: drv.memcpy_dtod(arr, b, 64),
                 lambda: drv.memcpy_htod(arr, np.zeros(16, np.int32)),
                 lambda: drv.memset_d32(arr, 0, 16)):
        with pytest.raises(TypeError, match=r"DeviceArray; pass its \.gpudata"):
            call()
    drv.memcpy_dtod(b, arr.gpudata, 64)
    assert drv.from_device(b, (16,), np.int32).tolist() == list(range(16))
    alloc, pitch = drv.mem_alloc_pitch(100, 8, 4)
    assert pitch >= 100 and alloc.size == pitch * 8
    free, total = drv.mem_get_info()
    assert 0 < free <= total
    # Page-locked arrays, registered memory, asynchronous copies on a stream.
    h = drv.pagelocked_zeros((4, 16), np.float32, order="F",
                             mem_flags=drv.host_alloc_flags.DEVICEMAP)
    assert h.flags.f_contiguous and not h.any()
    buf = np.empty(4096 + 4096, np.uint8)  # registered memory page-aligned, as PyCUDA asks
    offset = -buf.ctypes.data % 4096
    src = buf[offset:offset + 4096].view(np.float32)
    src[:] = np.arange(1024, dtype=np.float32)
    registered = drv.register_host_memory(src)
    assert registered.base.base is src and np.shares_memory(registered, src)
    d = drv.to_device(registered)
    s = drv.Stream()
    back = drv.pagelocked_empty_like(src)
    drv.memcpy_dtoh_async(back, d, s)
    s.synchronize()
    assert s.is_done() and np.array_equal(back, src)
    registered.base.unregister()
    del registered
    # PyCUDA's own test: an aligned array page-locked in place, copied on a stream.
    aligned = drv.aligned_empty((2**20,), np.float64)
    aligned[:] = np.arange(2**20)
    pinned = drv.register_host_memory(aligned)
    on_gpu = drv.mem_alloc_like(aligned)
    drv.memcpy_htod_async(on_gpu, pinned, s)
    drv.Context.synchronize()
    assert np.array_equal(drv.from_device_like(on_gpu, aligned), aligned)
    with pytest.raises(MemoryError, match="CUDA_ERROR_OUT_OF_MEMORY"):
        drv.mem_alloc(1 << 45)


# ---- IPC handles and peer access -------------------------------------------------------------


def test_memcpy_3d_peer_checks_its_shape_and_contexts_before_the_device(monkeypatch):
    c = drv.Memcpy3DPeer()
    c.set_src_host(np.zeros(64, np.uint8))
    c.set_dst_device(0x1000)
    c.width_in_bytes, c.height, c.depth, c.src_pitch, c.dst_pitch = 16, 2, 1, 16, 8
    with pytest.raises(ValueError, match="destination's pitch .8 bytes.* less than its rows' 16"):
        c()
    c.dst_pitch, c.height = 16, 5
    with pytest.raises(ValueError, match="reaches 80 bytes into its source, which has 64"):
        c()
    c.height = 2
    c.set_src_context(3)
    with pytest.raises(TypeError, match="the source's context must be a kiln.Context or "
                                        "kiln.Device, or None"):
        c()
    c.set_src_context(None)
    c.set_dst_context("x")
    with pytest.raises(TypeError, match="the destination's context must be"):
        c()
    # The contexts travel with the copy; Memcpy3D's own copy takes none.
    calls = []
    src_ctx, dst_ctx, stream = object(), object(), object()
    c.set_src_context(src_ctx)
    c.set_dst_context(dst_ctx)
    with monkeypatch.context() as m:
        m.setattr(kiln._kiln, "_memcpy_3d", lambda *args: calls.append(args[6:]))
        c()
        c(stream)
        d = drv.Memcpy3D()
        d.set_src_host(np.zeros(64, np.uint8))
        d.set_dst_host(np.zeros(64, np.uint8))
        d()
    assert calls == [(False, None, src_ctx, dst_ctx), (True, stream, src_ctx, dst_ctx),
                     (False, None)]


@pytest.mark.skipif(HAVE_GPU, reason="where there is a GPU the handle reaches the driver")
@pytest.mark.parametrize("handle", [bytes(64), bytearray(64), memoryview(bytes(128))[::2],
                                    memoryview(bytes(64)), np.zeros(8, np.int64)])
def test_ipc_handles_are_any_64_bytes_and_then_need_the_driver(handle):
    if isinstance(handle, memoryview) and not handle.c_contiguous:
        with pytest.raises(TypeError, match="an IPC memory handle is the 64 bytes"):
            drv.IPCMemoryHandle(handle)
        return
    with pytest.raises(kiln.NoDeviceError):
        drv.IPCMemoryHandle(handle, flags=drv.ipc_mem_flags.LAZY_ENABLE_PEER_ACCESS)
    with pytest.raises(kiln.NoDeviceError):
        drv.Event.from_ipc_handle(handle)


IPC_CHILD = r"""
import pickle, sys
import numpy as np
import kiln, kiln.driver as drv

mem_handle = pickle.loads(bytes.fromhex(sys.stdin.readline()))
event_handle = pickle.loads(bytes.fromhex(sys.stdin.readline()))
n = int(sys.stdin.readline())
h = drv.IPCMemoryHandle(mem_handle)
assert h.size >= n * 4, h.size
# Read what the parent wrote, through each way kiln takes an address.
got = drv.from_device(h, (n,), np.float32)
assert np.array_equal(got, np.arange(n, dtype=np.float32)), got[:8]
same = np.empty(n, np.float32)
drv.memcpy_dtoh(same, int(h))
assert np.array_equal(same, got)
print("read", float(got.sum()), flush=True)
# A slow kernel writes 2x+1 into the parent's memory; the parent's interprocess event is
# recorded after it, here.
mod = kiln.SourceModule(r'''
extern "C" __global__ void slow_update(float *x, int n, long long cycles) {
  long long start = clock64();
  while (clock64() - start < cycles) {}
  for (int i = threadIdx.x; i < n; i += blockDim.x) x[i] = 2 * x[i] + 1;
}''')
s = drv.Stream()
event = drv.Event.from_ipc_handle(event_handle)
assert isinstance(event, drv.Event)
mod.get_function("slow_update")(h, np.int32(n), np.int64(400_000_000), block=(256, 1, 1),
                                stream=s)
event.record(s)
print("recorded", flush=True)
assert sys.stdin.readline().strip() == "seen"
s.synchronize()
h.close()
try:
    int(h)
except ValueError as e:
    print("closed:", e, flush=True)
try:
    h.close()
except ValueError as e:
    print("twice:", e, flush=True)
"""


@pytest.mark.gpu
def test_ipc_memory_and_event_across_processes():
    import pickle
    import subprocess
    import sys
    n = 4096
    a = drv.mem_alloc(n * 4)
    drv.memcpy_htod(a, np.arange(n, dtype=np.float32))
    handle = drv.mem_get_ipc_handle(a)
    assert isinstance(handle, bytes) and len(handle) == 64
    assert drv.mem_get_ipc_handle(int(a)) == handle  # the same allocation, however named
    event = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    event_handle = event.ipc_handle()
    assert isinstance(event_handle, bytes) and len(event_handle) == 64
    child = subprocess.Popen([sys.executable, "-c", IPC_CHILD], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        for line in (pickle.dumps(handle).hex(), pickle.dumps(event_handle).hex(), str(n)):
            child.stdin.write(line + "\n")
        child.stdin.flush()
        assert child.stdout.readline().split() == ["read", str(float(n * (n - 1) // 2))]
        assert child.stdout.readline().strip() == "recorded"
        # The child's kernel spins for a while before it writes: only waiting for the event
        # the child recorded makes the copy below see its writes.
        s = drv.Stream()
        s.wait_for_event(event)
        back = drv.pagelocked_empty(n, np.float32)
        drv.memcpy_dtoh_async(back, a, s)
        s.synchronize()
        assert event.query()
        np.testing.assert_array_equal(back, 2 * np.arange(n, dtype=np.float32) + 1)
        child.stdin.write("seen\n")
        child.stdin.flush()
        out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
    assert child.returncode == 0, err
    assert "closed: the IPCMemoryHandle was closed" in out
    assert "twice: the IPCMemoryHandle is closed already" in out


@pytest.mark.gpu
def test_ipc_handles_refused_where_cuda_cannot_share():
    a = drv.mem_alloc(1024)
    handle = drv.mem_get_ipc_handle(a)
    # CUDA opens a handle only in another process than the one that made it.
    with pytest.raises(drv.LogicError, match="made in this process") as raised:
        drv.IPCMemoryHandle(handle)
    assert raised.value.name == "CUDA_ERROR_INVALID_CONTEXT"
    # A handle names a whole allocation: an address inside one is refused, not shared wrong.
    with pytest.raises(ValueError, match="is 256 bytes into its allocation"):
        drv.mem_get_ipc_handle(int(a) + 256)
    # kiln's arrays come from the stream-ordered pool, which has no IPC handle; an array made
    # with mem_alloc as its allocator has one.
    import kiln.gpuarray
    if drv.Context.get_device().get_attribute(drv.device_attribute.MEMORY_POOLS_SUPPORTED):
        with pytest.raises(ValueError, match="stream-ordered pool"):
            drv.mem_get_ipc_handle(kiln.gpuarray.zeros(256, np.float32).gpudata)
    shared = kiln.gpuarray.zeros(256, np.float32, allocator=drv.mem_alloc)
    assert len(drv.mem_get_ipc_handle(shared.gpudata)) == 64
    with pytest.raises(ValueError, match="not device memory of the current context"):
        drv.mem_get_ipc_handle(0x10)
    # Events: only one made to be shared, and without timing.
    for flags in (0, drv.event_flags.DISABLE_TIMING, drv.event_flags.BLOCKING_SYNC):
        with pytest.raises(ValueError, match=re.escape("INTERPROCESS | event_flags.DISABLE")):
            drv.Event(flags).ipc_handle()
    shareable = drv.Event(drv.event_flags.INTERPROCESS | drv.event_flags.DISABLE_TIMING)
    assert len(shareable.record().synchronize().ipc_handle()) == 64
    # Bytes the driver never made are its refusal, named (in a process of its own, should the
    # driver take them worse than that).
    done = run_python("""
        import kiln, kiln.driver as drv
        try:
            drv.IPCMemoryHandle(bytes(range(64)))
        except kiln.CudaError as e:
            print("refused:", e)
    """)
    assert done.returncode == 0, done.stderr
    assert "refused: cuIpcOpenMemHandle failed with CUDA_ERROR_" in done.stdout


@pytest.mark.gpu
def test_peer_access_and_peer_copies_on_one_gpu():
    dev = drv.Context.get_device()
    ctx = drv.Context(dev)
    assert dev.can_access_peer(dev) is False  # a device is not its own peer
    with pytest.raises(ValueError, match="not its own peer"):
        drv.Context.enable_peer_access(ctx)
    with pytest.raises(ValueError, match="not its own peer"):
        drv.Context.disable_peer_access(dev)
    with pytest.raises(ValueError, match="flags 0"):
        drv.Context.enable_peer_access(ctx, flags=1)
    n = 1 << 16
    data = np.random.default_rng(3).integers(0, 255, n, dtype=np.uint8)
    a, b = drv.to_device(data), drv.mem_alloc(n)
    drv.memset_d8(b, 0, n)
    drv.memcpy_peer(b, a, n)  # both in the current context
    np.testing.assert_array_equal(drv.from_device(b, (n,), np.uint8), data)
    drv.memset_d8(b, 0, n)
    drv.memcpy_peer(int(b) + 16, a, 1024, dest_context=ctx, src_context=dev)
    got = drv.from_device(b, (n,), np.uint8)
    np.testing.assert_array_equal(got[16:1040], data[:1024])
    assert not got[:16].any() and not got[1040:].any()
    s = drv.Stream()
    drv.memcpy_peer_async(b, int(a) + 100, 4096, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(drv.from_device(b, (4096,), np.uint8), data[100:4196])
    with pytest.raises(ValueError, match="copying 65537 bytes, but the destination allocation"):
        drv.memcpy_peer(b, a, n + 1)
    with pytest.raises(ValueError, match="runs past its allocation"):
        drv.memcpy_peer(int(b) + 8, a, n)
    with pytest.raises(ValueError, match="source 0x10 is not device memory"):
        drv.memcpy_peer(b, 0x10, 16)
    # Memcpy3DPeer within the device: 8 rows of 32 bytes, from a pitch of 128 to one of 64.
    drv.memset_d8(b, 0, n)
    c = drv.Memcpy3DPeer()
    c.set_src_device(a)
    c.set_dst_device(b)
    c.set_src_context(ctx)
    c.set_dst_context(ctx)
    c.src_x_in_bytes, c.src_pitch, c.dst_pitch = 5, 128, 64
    c.width_in_bytes, c.height, c.depth = 32, 8, 1
    c()
    rows = drv.from_device(b, (n // 64, 64), np.uint8)
    np.testing.assert_array_equal(rows[:8, :32], data[:1024].reshape(8, 128)[:, 5:37])
    assert not rows[:8, 32:].any() and not rows[8:].any()
    c.dst_pitch = n // 4  # 8 rows n/4 bytes apart run past the destination
    with pytest.raises(ValueError, match="runs past its allocation"):
        c()


@pytest.mark.gpu
@pytest.mark.gpus2
def test_peer_access_and_copies_between_two_gpus():
    d0, d1 = drv.Device(0), drv.Device(1)
    c0, c1 = drv.Context(d0), drv.Context(d1)
    n = 1 << 20
    data = np.random.default_rng(4).integers(0, 255, n, dtype=np.uint8)
    with d0:
        a = drv.to_device(data)
    with d1:
        b = drv.mem_alloc(n)
        drv.memset_d8(b, 0, n)
    # A copy between devices needs no peer access; each side is checked on its own device.
    with d0:
        drv.memcpy_peer(b, a, n, dest_context=c1, src_context=c0)
        with pytest.raises(ValueError, match="runs past its allocation"):
            drv.memcpy_peer(int(b) + 1, a, n, dest_context=c1, src_context=c0)
    with d1:
        np.testing.assert_array_equal(drv.from_device(b, (n,), np.uint8), data)
        s = drv.Stream()
        drv.memset_d8(b, 0, n)
        drv.memcpy_peer_async(b, a, 4096, dest_context=d1, src_context=d0, stream=s)
        s.synchronize()
        np.testing.assert_array_equal(drv.from_device(b, (4096,), np.uint8), data[:4096])
        # Memcpy3DPeer from device 0 to device 1: 4 rows of 64 bytes, pitch 256 to pitch 64.
        drv.memset_d8(b, 0, n)
        c = drv.Memcpy3DPeer()
        c.set_src_device(a)
        c.set_src_context(c0)
        c.set_dst_device(b)
        c.set_dst_context(c1)
        c.src_pitch, c.dst_pitch, c.width_in_bytes, c.height, c.depth = 256, 64, 64, 4, 1
        c()
        got = drv.from_device(b, (4, 64), np.uint8)
        np.testing.assert_array_equal(got, data[:1024].reshape(4, 256)[:, :64])
    # Peer access: a kernel on device 0 reads device 1's memory once it is enabled.
    assert isinstance(d0.can_access_peer(d1), bool)
    with d0:
        if not d0.can_access_peer(d1):
            with pytest.raises(ValueError, match="cannot be given access to device 1"):
                drv.Context.enable_peer_access(c1)
            return
        drv.Context.enable_peer_access(c1)
        try:
            with pytest.raises(kiln.CudaError, match="has access to device 1's memory already") \
                    as raised:
                drv.Context.enable_peer_access(c1)
            assert raised.value.name == "CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED"
            assert isinstance(raised.value, drv.LogicError)  # as PyCUDA's programs catch it
            mod = kiln.SourceModule(r"""
            extern "C" __global__ void add_peer(int *out, const unsigned char *peer, int n) {
              int i = blockIdx.x * blockDim.x + threadIdx.x;
              if (i < n) out[i] = peer[i] + 1;
            }""")
            out = drv.mem_alloc(1024 * 4)
            mod.get_function("add_peer")(out, b, np.int32(1024), block=(256, 1, 1), grid=(4, 1))
            np.testing.assert_array_equal(drv.from_device(out, (1024,), np.int32)[:64],
                                          data[:64].astype(np.int32) + 1)
        finally:
            drv.Context.disable_peer_access(c1)
        with pytest.raises(kiln.CudaError, match="was not given access to device 1's memory") \
                as raised:
            drv.Context.disable_peer_access(c1)
        assert raised.value.name == "CUDA_ERROR_PEER_ACCESS_NOT_ENABLED"


def test_memcpy_between_host_and_device_takes_pycudas_keywords_and_refuses_others():
    # PyCUDA's dest, src and stream by keyword (PyNX writes memcpy_htod_async(dest=, src=));
    # what cannot be a call of PyCUDA's is refused before the device is needed.
    a = np.zeros(4, np.float32)
    refusals = [
        (lambda: drv.memcpy_htod(src=a), "missing required argument 'dest'"),
        (lambda: drv.memcpy_dtoh(a), "missing required argument 'src'"),
        (lambda: drv.memcpy_htod(0, a, 0), r"takes at most 2 arguments \(3 given\)"),
        (lambda: drv.memcpy_htod_async(0, a, dest=0), "multiple values for argument 'dest'"),
        (lambda: drv.memcpy_dtoh(a, src=0, stream=None), "unexpected keyword argument 'stream'"),
        (lambda: drv.memcpy_dtoh_async(a, 0, None, None), r"at most 3 arguments \(4 given\)"),
    ]
    for call, message in refusals:
        with pytest.raises(TypeError, match=message):
            call()


@pytest.mark.gpu
def test_gpu_memcpy_between_host_and_device_by_keyword():
    a = np.arange(16, dtype=np.float32)
    d = drv.mem_alloc(a.nbytes)
    back = np.empty_like(a)
    drv.memcpy_htod(dest=d, src=a)
    drv.memcpy_dtoh(src=d, dest=back)
    np.testing.assert_array_equal(back, a)
    s = drv.Stream()
    twice = drv.pagelocked_empty(16, np.float32)
    twice[:] = 2 * a
    drv.memcpy_htod_async(dest=d, src=twice, stream=s)
    drv.memcpy_dtoh_async(back, src=d, stream=s)
    s.synchronize()
    np.testing.assert_array_equal(back, 2 * a)


AT_EXIT = r'''
import os, sys
import kiln
f = kiln.SourceModule("__global__ void k(int *p) {}").get_function("k")
if os.environ["QUEUE"] == "1":
    f(kiln.mem_alloc(4), block=(1, 1, 1))
    pid = os.fork()
    if pid == 0:  # a fork's child cannot use the parent's contexts: it does not wait on them
        sys.stderr.write("CHILD-END\n")
        sys.stderr.flush()
        sys.exit(0)
    os.waitpid(pid, 0)
sys.stderr.write("END\n")
sys.stderr.flush()
'''


def test_the_programs_end_waits_for_the_work_kiln_queued(fake_driver):
    # PyCUDA's context is destroyed at the program's end, which waits for the kernels still
    # queued (their printf output appears); kiln's primary context stays, so kiln waits then.
    # The fake driver says each wait on stderr.
    env = {"KILN_CUDA_PATH": str(fake_driver), "FAKECUDA_SAY_SYNCHRONIZE": "1"}
    r = run_python(AT_EXIT, env={**env, "QUEUE": "1"})
    assert r.returncode == 0, r.stderr
    lines = [line for line in r.stderr.splitlines() if line]
    assert lines[-3:] == ["CHILD-END", "END", "fakecuda: cuCtxSynchronize"], r.stderr
    r = run_python(AT_EXIT, env={**env, "QUEUE": "0"})  # nothing queued: no wait, no device
    assert r.returncode == 0, r.stderr
    assert [line for line in r.stderr.splitlines() if line][-1] == "END", r.stderr


def test_the_compute_mode_attribute_is_a_compute_mode_member_as_pycudas(fake_driver):
    # PyCUDA's get_attribute gives COMPUTE_MODE as its enumeration, so a program printing
    # get_attributes() reads COMPUTE_MODE: DEFAULT, not 0. The fake driver's mode is DEFAULT.
    r = run_python("""
        import kiln.driver as drv
        d = drv.Device(0)
        mode = d.get_attribute(drv.device_attribute.COMPUTE_MODE)
        assert mode is drv.compute_mode.DEFAULT and d.compute_mode is mode, repr(mode)
        attrs = d.get_attributes()
        assert attrs[drv.device_attribute.COMPUTE_MODE] is mode
        assert type(attrs[drv.device_attribute.WARP_SIZE]) is int
        print(f"COMPUTE_MODE: {mode}")
        """, env={"KILN_CUDA_PATH": str(fake_driver)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "COMPUTE_MODE: DEFAULT"


def test_to_device_copies_in_c_order_as_pycudas(fake_driver):
    # PyCUDA's to_device copies memoryview(a).tobytes(): a Fortran-ordered array arrives row by
    # row, and a strided one is taken (kiln copied the Fortran array's memory as it lies, and
    # refused the strided one).
    r = run_python("""
        import numpy as np
        import kiln.driver as drv
        a = np.arange(12.0).reshape(3, 4)
        for h in (a, np.asfortranarray(a), a[:, ::2], a.T, memoryview(a)[::2], bytearray(b"xy")):
            want = np.frombuffer(memoryview(h).tobytes(), np.uint8)
            got = np.empty(want.size, np.uint8)
            drv.memcpy_dtoh(got, drv.to_device(h))
            assert np.array_equal(got, want), type(h)
        print("ok")
        """, env={"KILN_CUDA_PATH": str(fake_driver)})
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().splitlines()[-1] == "ok"


def test_compact_strides_keep_a_host_arrays_order_as_pycudas():
    # A program's own to_gpu: GPUArray(ary.shape, ary.dtype, strides=_compact_strides(ary)).
    a = np.zeros((3, 4, 5), np.float32)
    assert kiln.gpuarray._compact_strides(a) == [80, 20, 4]
    assert kiln.gpuarray._compact_strides(np.asfortranarray(a)) == [4, 12, 48]
    assert kiln.gpuarray._compact_strides(a[:, ::2, :]) == [40, 20, 4]
    assert kiln.gpuarray._compact_strides(a.transpose(2, 0, 1)) == [4, 80, 20]  # as a lies
    assert kiln.gpuarray._compact_strides(np.zeros((), np.int8)) == []
