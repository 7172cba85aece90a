"""Pickling kiln's objects, so that a Module, a Function or a DeviceArray can be sent to a Dask
or Ray worker, and where NVRTC is looked for in NVIDIA's wheels.

A Module pickles as its compiled code (CUBIN and PTX) and its kernels' names and signatures,
never its source: unpickling runs no NVRTC, and the code loads on the receiving process's GPU at
the first launch. A SourceModule comes back as a plain kiln.Module. A Function pickles as its
Module and its name. A DeviceArray pickles by value, as CuPy's arrays do: its contents are copied
to the host, and unpickling copies them to the receiver's current device.
"""
import copyreg
import glob
import os
import sys

from . import _kiln


def _module_from_bytes(data):
    return _kiln._module_deserialize(data)


def _reduce_module(module):
    return _module_from_bytes, (_kiln._module_serialize(module),)


def _function_from(module, name):
    return module.get_function(name)


def _reduce_function(function):
    # The kernel's own name, whatever a program set as its `name` attribute.
    name = _kiln.Function.name.__get__(function)
    return _function_from, (_kiln._function_module(function), name)


def _array_from_host(host):
    return _kiln.to_device(host)


def _reduce_array(array):
    return _array_from_host, (array.get(),)


def register():
    """Registers the reducers with copyreg; SourceModule needs its own entry since pickle looks
    a type up exactly."""
    copyreg.pickle(_kiln.Module, _reduce_module)
    copyreg.pickle(_kiln.SourceModule, _reduce_module)
    copyreg.pickle(_kiln.Function, _reduce_function)
    copyreg.pickle(_kiln.DeviceArray, _reduce_array)


def wheel_nvrtc_dirs(paths=None):
    """The lib folders of NVIDIA's nvidia-cuda-nvrtc wheels on sys.path (nvidia/cu13/lib for
    CUDA 13, nvidia/cuda_nvrtc/lib for CUDA 12), newest CUDA first. Only folders are looked at;
    nothing is opened or imported."""
    found = []
    for entry in sys.path if paths is None else paths:
        root = os.path.join(entry or ".", "nvidia")
        if not os.path.isdir(root):
            continue
        for lib in sorted(glob.glob(os.path.join(root, "*", "lib", "libnvrtc.so.1[0-9]")),
                          reverse=True):
            folder = os.path.dirname(os.path.abspath(lib))
            if folder not in found:
                found.append(folder)
    return found


def use_wheel_nvrtc():
    """Tells the engine about the wheels' NVRTC, which it tries after the loader path and
    before $CONDA_PREFIX and the toolkit folders (docs/install.md)."""
    dirs = wheel_nvrtc_dirs()
    if dirs:
        _kiln._nvrtc_set_search_path(":".join(dirs))


def use_compile_helper():
    """Tells the engine about kiln-nvrtc, the compile helper built beside the extension: a
    compile that can go through a precompiled header runs in it, so that the PCH serves later
    processes too (docs/cache.md). $KILN_NVRTC_HELPER rules over it in the engine."""
    helper = os.path.join(os.path.dirname(os.path.abspath(__file__)), "kiln-nvrtc")
    if os.access(helper, os.X_OK):
        _kiln._nvrtc_set_helper(helper)
