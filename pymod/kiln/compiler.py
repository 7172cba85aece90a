"""PyCUDA's compiler module over kiln: `from kiln.compiler import SourceModule`.

kiln compiles with NVRTC, in the process, and keeps what it compiled in its cache
(docs/cache.md). SourceModule takes PyCUDA's arguments in PyCUDA's order; options spelled for
nvcc are translated (docs/sourcemodule.md says how), cache_dir names the cache folder (False:
none), keep=True writes the source, PTX and CUBIN to a folder it names.
"""
import os

from ._kiln import CompileError, SourceModule  # noqa: F401


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
