"""Builds kiln's extension module from the same source list as the Makefile.

`pip install .` reads pyproject.toml and calls this file inside an isolated build that has
NumPy; `make` runs it in place. The build needs NumPy's headers, the CUDA headers (cuda.h,
nvrtc.h: a toolkit under $CUDA_HOME, $CUDA_PATH or /usr/local/cuda, $CONDA_PREFIX, or NVIDIA's
wheels nvidia-cuda-runtime and nvidia-cuda-nvrtc) and libcrypto's headers and library.
"""
import glob
import os
import re
import shlex
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = os.path.dirname(os.path.abspath(__file__))


def engine_sources():
    """The .c files listed in engine/sources.mk, the Makefile's own list."""
    with open(os.path.join(HERE, "engine", "sources.mk")) as f:
        return re.findall(r"engine/src/\S+\.c", f.read())


def version():
    """The one version: KILN_VERSION_MAJOR/MINOR/PATCH in engine/include/kiln.h."""
    with open(os.path.join(HERE, "engine", "include", "kiln.h")) as f:
        text = f.read()
    parts = [re.search(rf"#define KILN_VERSION_{p} (\d+)", text).group(1)
             for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def cuda_include():
    """A folder with cuda.h and nvrtc.h: only their declarations are needed to build, since
    the engine opens libcuda and libnvrtc with dlopen at run time."""
    roots = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    candidates = [os.path.join(r, "include") for r in roots if r]
    if os.environ.get("CONDA_PREFIX"):
        prefix = os.environ["CONDA_PREFIX"]
        candidates += [os.path.join(prefix, "include"),
                       os.path.join(prefix, "targets", "x86_64-linux", "include")]
    for entry in sys.path:  # NVIDIA's wheels: nvidia/cu13/include, nvidia/cuda_runtime/include
        candidates += sorted(glob.glob(os.path.join(entry, "nvidia", "*", "include")))
    for c in candidates:
        if os.path.exists(os.path.join(c, "cuda.h")) and os.path.exists(os.path.join(c, "nvrtc.h")):
            return c
    return candidates[0]


def numpy_include():
    """NumPy's headers: a build requirement (pyproject.toml), asked for only by the commands
    that compile, so sdist and egg_info run without NumPy."""
    try:
        import numpy
    except ImportError:
        sys.exit("kiln's extension needs NumPy's headers to build: pip install numpy, or build "
                 "with pip, which installs it in the isolated build")
    return numpy.get_include()


pymod_sources = sorted(
    os.path.join("pymod", "_kiln", name)
    for name in os.listdir(os.path.join(HERE, "pymod", "_kiln"))
    if name.endswith(".c")
)
# The Makefile exports its warning flags; building straight from setup.py uses the same set.
warnings = shlex.split(
    os.environ.get(
        "KILN_WARNINGS",
        "-Wall -Wextra -Wshadow -Wmissing-prototypes -Wstrict-prototypes -Wpointer-arith "
        "-Wformat=2 -Wundef -Wcast-align -Wwrite-strings",
    )
)

building = any(c.startswith(("build", "bdist", "install", "develop", "editable"))
               for c in sys.argv[1:])
third_party = ["-isystem", cuda_include()]
if building:
    third_party += ["-isystem", numpy_include()]

extension = Extension(
    "kiln._kiln",
    sources=engine_sources() + pymod_sources,
    include_dirs=["engine/include"],
    # Third-party headers as system headers, so the warning flags judge kiln's code alone.
    # Hidden: only PyInit__kiln is the module's interface, so calls between its files are
    # direct rather than through the PLT (the launch path crosses several).
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-fvisibility=hidden"] + third_party
    + warnings,
    libraries=["crypto", "dl", "pthread"],
)

def helper_source():
    """The compile helper's main, named in engine/sources.mk."""
    with open(os.path.join(HERE, "engine", "sources.mk")) as f:
        return re.search(r"KILN_HELPER_SOURCE = (\S+)", f.read()).group(1)


class BuildWithHelper(build_ext):
    """The extension, then kiln-nvrtc beside it in the package: the compile helper, a program
    linked from the engine's objects just built (engine/src/remote.c says why it is one)."""

    def run(self):
        super().run()
        objects = self.compiler.object_filenames(engine_sources(), output_dir=self.build_temp)
        main = self.compiler.compile([helper_source()], output_dir=self.build_temp,
                                     include_dirs=extension.include_dirs,
                                     extra_postargs=extension.extra_compile_args)
        where = os.path.dirname(self.get_ext_fullpath(extension.name))
        # LDFLAGS as for the extension (a sanitizer's runtime, say): link_executable reads none.
        self.compiler.link_executable(main + objects, "kiln-nvrtc", output_dir=where,
                                      libraries=extension.libraries,
                                      extra_postargs=shlex.split(os.environ.get("LDFLAGS", "")))


setup(version=version(), ext_modules=[extension], cmdclass={"build_ext": BuildWithHelper})
