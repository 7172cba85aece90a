"""kiln.load(path): a module made from a .cu file that recompiles when the file, or a header it
includes, changes.

    mod = kiln.load("saxpy.cu", options=["-DTILE=64"])
    mod.saxpy(x, y, a, block=(256, 1, 1))   # edit saxpy.cu: the next call compiles it again

Each call of a kernel taken from it first compares the size and modification time of the file
and of the headers it reaches through #include (one os.stat each); `mod.reload()` does the same
on demand. When something changed the source is compiled again (through SourceModule and its
cache, so going back to an earlier version is a cache hit). A version that does not compile
leaves the last good code in place, and says so with a kiln.ReloadWarning that carries NVRTC's
message; the next change is tried again.
"""
import os
import re
import warnings

from . import _compile_error
from ._kiln import CompileError, SourceModule

_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*([<"])([^>"\n]+)[>"]', re.M)


class ReloadWarning(UserWarning):
    """A changed .cu file (or header) did not compile: the module keeps its last good code."""


def _stamp(path):
    try:
        st = os.stat(path)
    except OSError:
        return None  # gone: a change too
    return (st.st_mtime_ns, st.st_size)


def _includes(path, include_dirs):
    """path and every file it reaches through #include that exists on disk: quoted names
    beside the including file first, then in include_dirs; <names> in include_dirs. The
    toolkit's headers, found by NVRTC elsewhere, are not among them."""
    found, todo = [], [os.path.abspath(path)]
    while todo:
        p = todo.pop()
        if p in found:
            continue
        found.append(p)
        try:
            with open(p, encoding="utf-8", errors="replace") as f:
                text = f.read()
        except OSError:
            continue
        for kind, name in _INCLUDE.findall(text):
            dirs = ([os.path.dirname(p)] if kind == '"' else []) + list(include_dirs)
            for d in dirs:
                candidate = os.path.abspath(os.path.join(d, name))
                if os.path.isfile(candidate):
                    todo.append(candidate)
                    break
    return found


class _Kernel:
    """A kernel of a reloading module: checks the files, then calls the current code."""

    __slots__ = ("_owner", "_name", "_function", "_generation")

    def __init__(self, owner, name):
        self._owner = owner
        self._name = name
        self._function = owner.module.get_function(name)
        self._generation = owner.generation

    def _current(self):
        owner = self._owner
        if owner.check_on_call:
            owner.reload()
        if self._generation != owner.generation:
            self._function = owner.module.get_function(self._name)
            self._generation = owner.generation
        return self._function

    def __call__(self, *args, **kwargs):
        return self._current()(*args, **kwargs)

    def __getattr__(self, name):  # prepared_call, num_regs, ... of the current code
        return getattr(self._current(), name)

    def __repr__(self):
        return f"<kiln reloading kernel {self._name} of {self._owner.path}>"


class ReloadingModule:
    """What kiln.load returns: the kernels of a .cu file, kept up to date with it."""

    def __init__(self, path, options=None, include_dirs=None, arch=None, check_on_call=True,
                 **kwargs):
        self.path = os.path.abspath(os.fspath(path))
        self.options = list(options or [])
        self.include_dirs = [os.fspath(d) for d in include_dirs or []]
        self.arch = arch
        self.check_on_call = check_on_call
        self.kwargs = kwargs
        self.error = None  # the CompileError of the last version that failed, or None
        self.generation = 0
        self._kernels = {}
        self.module = self._compile()  # the first version must compile: nothing to keep

    def _compile(self):
        # Stamps first: a change made while NVRTC runs shows at the next check.
        files = _includes(self.path, [os.path.dirname(self.path)] + self.include_dirs)
        stamps = [(f, _stamp(f)) for f in files]
        with open(self.path, encoding="utf-8") as f:
            source = f.read()
        self._stamps = stamps
        try:
            return SourceModule(source, options=self.options, arch=self.arch,
                                include_dirs=[os.path.dirname(self.path)] + self.include_dirs,
                                **self.kwargs)
        except CompileError as e:
            # NVRTC calls the program kernel.cu; the user knows it by its file's name.
            text = str(e).replace("kernel.cu(", f"{self.path}(")
            raise _compile_error.again(CompileError, e, text) from None

    @property
    def files(self):
        """The file and the headers it includes, as last compiled."""
        return [f for f, _ in self._stamps]

    def changed(self):
        """Whether the file or one of its headers changed since the last compile."""
        return any(_stamp(f) != s for f, s in self._stamps)

    def reload(self, force=False):
        """Compiles again when a file changed (or force). True when new code is in place; False
        when nothing changed or the new version did not compile (a ReloadWarning says why, and
        self.error holds it)."""
        if not force and not self.changed():
            return False
        try:
            module = self._compile()
        except CompileError as e:
            self.error = e
            warnings.warn(f"{self.path} changed but does not compile; the last good code "
                          f"stays in use.\n{e}", ReloadWarning, stacklevel=3)
            return False
        self.error = None
        if module is not self.module:
            self.module = module
            self.generation += 1
            return True
        return False

    @property
    def kernels(self):
        return self.module.kernels

    def get_function(self, name):
        """The kernel `name` (as Module.get_function finds it), following reloads."""
        k = self._kernels.get(name)
        if k is None:
            k = self._kernels[name] = _Kernel(self, name)
        return k

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self.get_function(name)
        except (AttributeError, ValueError):
            raise AttributeError(f"{self.path} has no kernel {name!r}; its kernels: "
                                 f"{', '.join(self.module.kernels) or 'none'}") from None

    def __repr__(self):
        return f"<kiln.ReloadingModule {self.path} ({', '.join(self.module.kernels)})>"


def load(path, options=None, include_dirs=None, arch=None, check_on_call=True, **kwargs):
    """A module compiled from the .cu file at path that compiles again when the file or a header
    it includes changes: checked at each kernel call (check_on_call=False: only at reload()).
    The other arguments are SourceModule's."""
    return ReloadingModule(path, options=options, include_dirs=include_dirs, arch=arch,
                           check_on_call=check_on_call, **kwargs)
