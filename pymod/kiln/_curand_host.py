"""cuRAND's host tables for the Sobol generators: Joe and Kuo's direction vectors and the
scramble constants, from the toolkit's libcurand (opened on first use, through ctypes; no GPU
is needed to read them). Only these tables come from the library: the numbers themselves are
drawn on the device through curand_kernel.h, as for every other generator.

libcurand is looked for where kiln.compiler finds the toolkit's libraries (beside NVRTC, lib64/
under $CUDA_HOME, $CUDA_PATH, /usr/local/cuda), then in their lib/, $CONDA_PREFIX/lib and
NVIDIA's wheels, then by the loader.
"""
import ctypes
import ctypes.util
import functools
import glob
import os
import sys

import numpy as np

DIMENSIONS = 20000  # the dimensions of every cuRAND direction vector set
_SETS = {101: 32, 102: 32, 103: 64, 104: 64}  # curandDirectionVectorSet_t: bits of its points


def _candidates():
    # The toolkit's folders that the static libraries are found in, then their lib/ forms,
    # conda's and NVIDIA's wheels'.
    from .compiler import _library_folders
    folders = _library_folders()
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            folders.append(os.path.join(root, "lib"))
    if os.environ.get("CONDA_PREFIX"):
        folders.append(os.path.join(os.environ["CONDA_PREFIX"], "lib"))
    for site in sys.path:
        folders += glob.glob(os.path.join(site, "nvidia", "*", "lib"))
    found = []
    for folder in folders:
        found += sorted(glob.glob(os.path.join(folder, "libcurand.so*")), reverse=True)
    by_loader = ctypes.util.find_library("curand")
    return found + ([by_loader] if by_loader else []), folders


@functools.lru_cache(maxsize=None)
def library():
    """libcurand, opened once; RuntimeError saying where it was looked for when it is not."""
    paths, folders = _candidates()
    for path in paths:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, "curandGetDirectionVectors32"):
            return lib
    raise RuntimeError("the Sobol generators read their direction vectors from cuRAND's host "
                       "library, libcurand, which was found in none of "
                       f"{', '.join(dict.fromkeys(folders))} nor by the loader; install the "
                       "CUDA toolkit's cuRAND (or the nvidia-curand wheel)")


def _check(status, call):
    if status != 0:
        raise RuntimeError(f"{call} failed with curandStatus_t {status}")


def _repeat(table, count):
    """count rows of table, starting again from its first past its end (PyCUDA's rule)."""
    reps = -(-count // len(table)) if count else 0
    return np.ascontiguousarray(np.tile(table, (reps,) + (1,) * (table.ndim - 1))[:count])


def direction_vectors(count, direction):
    """A (count, bits) NumPy array of the direction vectors of set `direction`."""
    bits = _SETS.get(int(direction)) if isinstance(direction, (int, np.integer)) else None
    if bits is None:
        raise ValueError(f"direction is one of direction_vector_set's values "
                         f"({', '.join(map(str, _SETS))}), not {direction!r}")
    lib = library()
    c_type = ctypes.c_uint32 if bits == 32 else ctypes.c_uint64
    table = ctypes.POINTER(c_type)()
    call = "curandGetDirectionVectors32" if bits == 32 else "curandGetDirectionVectors64"
    _check(getattr(lib, call)(ctypes.byref(table), ctypes.c_int(int(direction))), call)
    return _repeat(np.ctypeslib.as_array(table, shape=(DIMENSIONS, bits)), count)


def scramble_constants(count, bits):
    """count scramble constants of `bits` (32 or 64) bits, as a NumPy array."""
    lib = library()
    c_type = ctypes.c_uint32 if bits == 32 else ctypes.c_uint64
    table = ctypes.POINTER(c_type)()
    call = f"curandGetScrambleConstants{bits}"
    _check(getattr(lib, call)(ctypes.byref(table)), call)
    return _repeat(np.ctypeslib.as_array(table, shape=(DIMENSIONS,)), count)
