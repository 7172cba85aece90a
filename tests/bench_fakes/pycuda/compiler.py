import numpy as np

import fakedevice


class Function:
    """args<n>: __call__ takes typed NumPy scalars, as PyCUDA's does; prepared_call takes ints
    after prepare, as PyCUDA's struct packing does."""

    def __init__(self, source, name):
        self.run, self.types = fakedevice.kernel(source, name), None

    def __call__(self, dest, *ints, block, grid):
        if not all(type(i) is np.int32 for i in ints):
            raise TypeError("PyCUDA's __call__ takes typed NumPy scalars")
        self.run(dest, *ints)

    def prepare(self, types):
        fakedevice.check_types(types, self.run)
        self.types = types
        return self

    def prepared_call(self, grid, block, dest, *ints):
        if self.types is None:
            raise AttributeError("prepared_call before prepare")
        self.run(dest, *ints)


class SourceModule:
    def __init__(self, source, no_extern_c, cache_dir):
        assert no_extern_c and cache_dir
        self.source = source
        self.variables = {}

    def get_function(self, name):
        return Function(self.source, name)

    def get_global(self, name):
        return fakedevice.variable(self.source, name, self.variables), 4
