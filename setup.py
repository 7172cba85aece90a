"""Builds kiln's extension module from the same source list as the Makefile.

Use `make` (or `python setup.py build_ext --inplace`): the build needs NumPy's headers, the
CUDA toolkit's headers (cuda.h, nvrtc.h; $CUDA_HOME or /usr/local/cuda) and libcrypto.
"""
import os
import re
import shlex

import numpy
from setuptools import Extension, setup

HERE = os.path.dirname(os.path.abspath(__file__))


def engine_sources():
    """The .c files listed in engine/sources.mk, the Makefile's own list."""
    with open(os.path.join(HERE, "engine", "sources.mk")) as f:
        return re.findall(r"engine/src/\S+\.c", f.read())


cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
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

extension = Extension(
    "kiln._kiln",
    sources=engine_sources() + pymod_sources,
    include_dirs=["engine/include"],
    # Third-party headers as system headers, so the warning flags judge kiln's code alone.
    extra_compile_args=["-std=c11", "-D_GNU_SOURCE", "-isystem", numpy.get_include(),
                        "-isystem", os.path.join(cuda_home, "include")] + warnings,
    libraries=["crypto", "dl", "pthread"],
)

setup(
    name="kiln",
    version="0.1.0",
    description="Run-time compiled CUDA kernels: NVRTC, a kernel cache, PyCUDA's object model",
    package_dir={"": "pymod"},
    packages=["kiln"],
    # The extension's type stubs and the PEP 561 marker, so editors complete kiln's API.
    package_data={"kiln": ["py.typed", "*.pyi"]},
    ext_modules=[extension],
    python_requires=">=3.9",
    install_requires=["numpy"],
)
