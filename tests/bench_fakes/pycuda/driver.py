import types

import fakedevice

Allocation = fakedevice.Allocation


def init():
    pass


class _Context:
    def push(self):
        pass

    def pop(self):
        pass

    @staticmethod
    def synchronize():
        pass


Context = _Context


def Device(index):
    return types.SimpleNamespace(retain_primary_context=_Context)


def mem_alloc(nbytes):
    return Allocation(fakedevice.alloc(nbytes))


def memset_d32(dest, value, count):
    fakedevice.memory[dest][:count] = value


def memcpy_htod(dest, src):
    fakedevice.copy_in(dest, src)


def memcpy_dtoh(out, src):
    fakedevice.copy_out(out, src)
