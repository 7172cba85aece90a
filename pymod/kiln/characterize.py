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
    it. Read from the PTX of a kernel that takes a struct of that many bytes by value, whose
    parameter NVRTC declares with its size: compiled (and cached), never launched, so no GPU
    is needed."""
    key = (type_name, preamble)
    if key not in _SIZES:
        from .elementwise import compile_source
        # sizeof(type_name) as PyCUDA writes it, so that any type name ("int[3]", "int&") or
        # expression is one; the holder is that many bytes.
        module = compile_source(f"{preamble}\nstruct kiln_sizeof_holder {{ "
                                f"char value[sizeof({type_name})]; }};\n"
                                "extern \"C\" __global__ void kiln_sizeof(kiln_sizeof_holder h) "
                                "{ (void)h; }\n")
        (param,) = module.get_function("kiln_sizeof").signature
        found = re.search(r"\[(\d+)\]", param)
        if not found:
            raise RuntimeError(f"cannot read the size of {type_name} from {param!r}")
        _SIZES[key] = int(found.group(1))
    return _SIZES[key]
