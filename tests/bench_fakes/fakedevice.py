"""The device of the stand-ins: allocations as NumPy int32 arrays, the args<n> kernels, and the
4-byte variables of a module."""
import re

import numpy as np

memory = {}  # handle -> np.int32 array


class Allocation(int):
    pass


def alloc(nbytes):
    handle = 0x1000 * (len(memory) + 1)
    memory[handle] = np.zeros(max(nbytes, 4) // 4, np.int32)
    return handle


def kernel(source, name):
    """The args<n> kernel of source as a function (dest, *ints); refuses one it lacks."""
    m = re.search(r"\bvoid (args(\d+))\(", source[source.find(f"void {name}("):])
    if not m or m.group(1) != name:
        raise LookupError(f"the source defines no kernel {name}")
    count = int(m.group(2)) - 1

    def run(dest, *ints):
        if len(ints) != count or not all(isinstance(i, (int, np.int32)) for i in ints):
            raise TypeError(f"{name} takes a pointer and {count} ints, not {ints!r}")
        memory[int(dest)][:32] = sum(int(i) for i in ints)
    run.count = count
    return run


def check_types(types, run):
    """prepare()'s check, as kiln's: a pointer, then as many 4-byte ints as run takes."""
    if types != "P" + "i" * run.count:
        raise ValueError(f"prepare({types!r}) does not fit a pointer and {run.count} ints")


def variable(source, name, variables):
    """The 4-byte __constant__ or __device__ variable name of source, made on first use."""
    if not re.search(r"__(constant|device)__ \w+ %s;" % re.escape(name), source):
        raise LookupError(f"the source defines no variable {name}")
    if name not in variables:
        variables[name] = alloc(4)
    return variables[name]


def copy_in(dest, src):
    data = np.ascontiguousarray(src).reshape(-1).view(np.uint8)
    memory[int(dest)].view(np.uint8)[:data.size] = data


def copy_out(out, src):
    out.reshape(-1).view(np.uint8)[:] = memory[int(src)].view(np.uint8)[:out.nbytes]
