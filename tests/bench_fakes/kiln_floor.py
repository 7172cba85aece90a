"""A stand-in for the floor, bench/floor/floor.c (see README.md): its "CUBIN" is the source
text, and its launches take what the real one takes, positionally or with block= and grid=."""
import fakedevice

_kernels = []
_picked = []


def load(cubin, name):
    _kernels.append(fakedevice.kernel(cubin.decode(), name))
    _picked[:] = [len(_kernels) - 1]
    return len(_kernels) - 1


def select(kernel):
    _picked[:] = [kernel]


def launch_ints(p, *ints):
    _kernels[_picked[0]](p, *ints)


def launch_ints_kw(p, *ints, **keywords):
    if set(keywords) != {"block", "grid"}:
        raise TypeError(f"launch_ints_kw takes block= and grid=, not {sorted(keywords)}")
    _kernels[_picked[0]](p, *ints)


def synchronize():
    pass
