"""A stand-in for kiln (see ../README.md)."""
import numpy as np

import fakedevice


class DeviceArray:
    def __init__(self, n, dtype):
        assert np.dtype(dtype) == np.int32
        self.handle, self.n = fakedevice.alloc(4 * n), n

    def get(self):
        return fakedevice.memory[self.handle][:self.n].copy()


def zeros(n, dtype):
    return DeviceArray(n, dtype)


class Function:
    """args<n>: called as kiln's kernels are, or prepared as PyCUDA's."""

    def __init__(self, source, name):
        self.run, self.types = fakedevice.kernel(source, name), None

    def __call__(self, dest, *ints, block, grid):
        self.run(dest.handle if isinstance(dest, DeviceArray) else dest, *ints)

    def prepare(self, types):
        fakedevice.check_types(types, self.run)
        self.types = types
        return self

    def prepared_call(self, grid, block, dest, *ints):
        assert self.types, "prepared_call before prepare"
        self.run(dest, *ints)


class SourceModule:
    def __init__(self, source):
        self.source = source
        self.variables = {}

    def get_function(self, name):
        return Function(self.source, name)

    def get_global(self, name):
        return fakedevice.variable(self.source, name, self.variables), 4


def synchronize():
    pass


def cache_stats():
    return {"disk_hits": 1, "compiles": 0}


def mem_alloc(nbytes):
    return fakedevice.Allocation(fakedevice.alloc(nbytes))


def memcpy_htod(dest, src):
    fakedevice.copy_in(dest, src)


def memcpy_dtoh(out, handle):
    fakedevice.copy_out(out, handle)
