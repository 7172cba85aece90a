"""PyCUDA's compiler module over kiln: `from kiln.compiler import SourceModule`.

kiln compiles with NVRTC, in the process, and keeps what it compiled in its cache
(docs/cache.md). SourceModule takes PyCUDA's arguments in PyCUDA's order; options spelled for
nvcc are translated (docs/sourcemodule.md says how), cache_dir names the cache folder (False:
none), keep=True writes the source, PTX and CUBIN to a folder it names.

DEFAULT_NVCC_FLAGS is PyCUDA's: the options of a SourceModule (or compile, or
DynamicSourceModule) given none, read at each call, so that appending to the list or
assigning another counts. It starts from $KILN_DEFAULT_NVCC_FLAGS, split at white space.
"""
import os
import sys
import types

from . import _kiln
from ._kiln import CompileError, SourceModule  # noqa: F401

DEFAULT_NVCC_FLAGS = os.environ.get("KILN_DEFAULT_NVCC_FLAGS", "").split()
_kiln._set_default_options(DEFAULT_NVCC_FLAGS)


class _CompilerModule(types.ModuleType):
    """This module, which hands a new DEFAULT_NVCC_FLAGS to the extension when it is assigned
    (the extension reads the list at each call, and sees appends by itself)."""

    def __setattr__(self, name, value):
        if name == "DEFAULT_NVCC_FLAGS":
            _kiln._set_default_options(value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name == "DEFAULT_NVCC_FLAGS":
            _kiln._set_default_options(None)
        super().__delattr__(name)


sys.modules[__name__].__class__ = _CompilerModule


class DynamicSourceModule(SourceModule):
    """A SourceModule whose kernels may launch kernels: compiled as relocatable device code
    (-rdc=true) and linked with the device runtime, libcudadevrt.a, found beside NVRTC (or in
    cuda_libdir)."""

    __slots__ = ()

    def __new__(cls, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False,
                arch=None, code=None, cache_dir=None, include_dirs=None, cuda_libdir=None,
                **kiln_options):
        if isinstance(options, (str, bytes)):
            raise TypeError("options must be a list of strings, not a single string")
        if options is None:
            options = globals().get("DEFAULT_NVCC_FLAGS") or ()
        options = [*(options or ()), "-rdc=true"]
        if cuda_libdir is not None:
            options.append("-L" + os.fspath(cuda_libdir))
        return super().__new__(cls, source, nvcc, options, keep, no_extern_c, arch, code,
                               cache_dir, include_dirs, **kiln_options)


def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None,
            code=None, cache_dir=None, include_dirs=None, target="cubin"):
    """What SourceModule(source, ...) compiles, as bytes: the CUBIN (target="cubin") or the PTX
    (target="ptx"). Nothing is loaded onto a GPU, and none is needed."""
    if target not in ("cubin", "ptx"):
        raise ValueError(f"target is 'cubin' or 'ptx' (NVRTC gives both), not {target!r}")
    module = SourceModule(source, nvcc, options, keep, no_extern_c, arch, code, cache_dir,
                          include_dirs)
    return module.cubin if target == "cubin" else module.ptx.encode()
