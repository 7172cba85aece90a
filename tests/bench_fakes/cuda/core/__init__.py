"""A stand-in for cuda.core (see ../../README.md)."""
import types

import numpy as np

import fakedevice


class Buffer:
    def __init__(self, nbytes):
        self.handle = fakedevice.alloc(nbytes)


class Device:
    def __init__(self, index):
        self.compute_capability = types.SimpleNamespace(major=9, minor=0)
        self.default_stream = object()

    def set_current(self):
        pass

    def allocate(self, nbytes, stream):
        return Buffer(nbytes)

    def sync(self):
        pass


class ProgramOptions:
    def __init__(self, arch):
        assert arch == "sm_90", arch


class Program:
    def __init__(self, source, kind, options):
        assert kind == "c++" and isinstance(options, ProgramOptions)
        self.source = source

    def compile(self, target):
        assert target == "cubin"
        return types.SimpleNamespace(get_kernel=lambda name: fakedevice.kernel(self.source, name))


class LaunchConfig:
    def __init__(self, grid, block):
        self.grid, self.block = grid, block


def launch(stream, config, kernel, buf, *ints):
    if not all(type(i) is np.int32 for i in ints):
        raise TypeError("cuda.core takes a Python int as a pointer; ints go as np.int32")
    kernel(buf.handle, *ints)
