"""PyCUDA's `pycuda.characterize`: what the platform and the current device can do, as its
tests and programs ask it (`from kiln.characterize import has_double_support`)."""
import re
import sys

from . import tools  # noqa: F401  (PyCUDA's characterize imports it: pycuda.tools after it)
from .driver import Context


def platform_bits():
    """64 on a 64-bit Python, else 32."""
    return 64 if sys.maxsize > 2**32 else 32


def has_stack():
    """Whether kernels have a call stack (every GPU CUDA 12 runs on has one)."""
    return Context.get_device().compute_capability() >= (2, 0)


def has_double_support():
    """Whether the current device computes in double precision (every GPU CUDA 12 runs on)."""
    return Context.get_device().compute_capability() >= (1, 3)


_SIZES = {}


def sizeof(type_name, preamble=""):
    """sizeof(type_name) in device code, with preamble (say, the struct's definition) before
    it. Read from the PTX of a kernel that takes the type by value inside a struct, whose
    parameter NVRTC declares as that many bytes: compiled (and cached), never launched, so no
    GPU is needed."""
    key = (type_name, preamble)
    if key not in _SIZES:
        from .elementwise import compile_source
        # An alias first, so that any type name is one: "int[3]", "void (*)(int)".
        module = compile_source(f"{preamble}\nusing kiln_sizeof_type = {type_name};\n"
                                "struct kiln_sizeof_holder { kiln_sizeof_type value; };\n"
                                "extern \"C\" __global__ void kiln_sizeof(kiln_sizeof_holder h) "
                                "{ (void)h; }\n")
        (param,) = module.get_function("kiln_sizeof").signature
        found = re.search(r"\[(\d+)\]", param)
        if not found:
            raise RuntimeError(f"cannot read the size of {type_name} from {param!r}")
        _SIZES[key] = int(found.group(1))
    return _SIZES[key]
