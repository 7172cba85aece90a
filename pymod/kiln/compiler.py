"""PyCUDA's compiler module over kiln: `from kiln.compiler import SourceModule`.

kiln compiles with NVRTC, in the process, and keeps what it compiled in its cache
(docs/cache.md). SourceModule takes PyCUDA's arguments in PyCUDA's order; options spelled for
nvcc are translated (docs/sourcemodule.md says how), cache_dir names the cache folder (False:
none), keep=True writes the source, PTX and CUBIN to a folder it names.

CudaModule is PyCUDA's base class of the modules this module makes: SourceModule (kiln's own
type, registered under it), DynamicSourceModule and DynamicModule are CudaModules.

DEFAULT_NVCC_FLAGS is PyCUDA's: the options of a SourceModule (or compile, or
DynamicSourceModule) given none, read at each call, so that appending to the list or
assigning another counts. It starts from $KILN_DEFAULT_NVCC_FLAGS, split at white space.
"""
import abc
import os
import sys
import types

from . import _compile_error, _driver_enums, _kiln
from ._kiln import CompileError, SourceModule  # noqa: F401

# kiln's own, for the functions below: a program may rebind this module's SourceModule to a
# wrapper of its own that calls compile(), which must not call the wrapper back.
_SourceModule = SourceModule

DEFAULT_NVCC_FLAGS = os.environ.get("KILN_DEFAULT_NVCC_FLAGS", "").split()
_kiln._set_default_options(DEFAULT_NVCC_FLAGS)


class _CompilerModule(types.ModuleType):
    """This module, which hands a new DEFAULT_NVCC_FLAGS to the extension when it is assigned
    (the extension reads the list at each call, and sees appends by itself)."""

    def __setattr__(self, name, value):
        if name == "DEFAULT_NVCC_FLAGS":
            _kiln._set_default_options(value)
        super().__setattr__(name, value)

    def __delattr__(self, name):
        if name == "DEFAULT_NVCC_FLAGS":
            _kiln._set_default_options(None)
        super().__delattr__(name)


sys.modules[__name__].__class__ = _CompilerModule


def _default_options():
    """DEFAULT_NVCC_FLAGS as it is now (deleted: none)."""
    return globals().get("DEFAULT_NVCC_FLAGS") or ()


class CudaModule(abc.ABC):  # noqa: B024  (a base for isinstance; it asks nothing of its kinds)
    """What SourceModule, DynamicSourceModule and DynamicModule are (PyCUDA's base class of
    them): `isinstance(mod, CudaModule)` holds for each. SourceModule is kiln's own type, so it
    is registered here rather than derived.

    A class of a program's own derived from it (a module made from a CUBIN it compiled, with
    `self.module = drv.module_from_buffer(cubin)`) has PyCUDA's helpers for it:
    `_check_arch(arch)`, `_bind_module()` and `get_function(name)`."""

    def _check_arch(self, arch):
        """Warns when arch ("sm_90") is above the current device's compute capability."""
        if arch is None:
            return
        try:
            major, minor = _kiln.Context.get_device().compute_capability()
            wanted = int(arch.split("_")[1].rstrip("af"))
        except Exception:  # no device, or an arch this cannot read: nothing to say
            return
        if wanted > 10 * major + minor:
            import warnings
            warnings.warn("trying to compile for a compute capability higher than selected GPU",
                          stacklevel=2)

    def _bind_module(self):
        """self.module's get_global (and get_texref, get_surfref) as the object's own."""
        self.get_global = self.module.get_global
        self.get_texref = self.module.get_texref
        if hasattr(self.module, "get_surfref"):
            self.get_surfref = self.module.get_surfref

    def get_function(self, name):
        return self.module.get_function(name)


CudaModule.register(SourceModule)


class DynamicSourceModule(SourceModule):
    """A SourceModule whose kernels may launch kernels: compiled as relocatable device code
    (-rdc=true) and linked with the device runtime, libcudadevrt.a, found beside NVRTC (or in
    cuda_libdir)."""

    __slots__ = ()

    def __new__(cls, source, nvcc="nvcc", options=None, keep=False, no_extern_c=False,
                arch=None, code=None, cache_dir=None, include_dirs=None, cuda_libdir=None,
                **kiln_options):
        if isinstance(options, (str, bytes)):
            raise TypeError("options must be a list of strings, not a single string")
        options = [*(_default_options() if options is None else options), "-rdc=true"]
        if cuda_libdir is not None:
            options.append("-L" + os.fspath(cuda_libdir))
        return super().__new__(cls, source, nvcc, options, keep, no_extern_c, arch, code,
                               cache_dir, include_dirs, **kiln_options)


def _compiled_with_c_linkage(source, nvcc, options, keep, no_extern_c, *rest):
    """SourceModule of the source as PyCUDA's compile() hands it to nvcc: inside extern "C" { }
    unless no_extern_c, so that the code names its kernels and device functions as C does, for
    the linkers and loaders that look them up by name. (SourceModule itself does without: it
    finds kernels either way, and C++ names tell it their arguments' types.) A compile error
    that C linkage caused says how to do without it."""
    if no_extern_c or isinstance(source, bytes):  # bytes: SourceModule's TypeError says why
        return _SourceModule(source, nvcc, options, keep, no_extern_c, *rest)
    try:
        return _SourceModule('extern "C" {\n%s\n}\n' % (source,), nvcc, options, keep,
                             no_extern_c, *rest)
    except CompileError as e:
        if '"C" linkage' not in (e.log or "") and "linkage specification" not in (e.log or ""):
            raise
        raise _compile_error.again(type(e), e, str(e) + (
            '\n\nThe source was compiled inside extern "C" { }, as PyCUDA\'s compile() '
            'compiles it, and C++ declarations (templates, overloads, C++ headers, functions '
            'CUDA declares itself) cannot have C linkage there: pass no_extern_c=True.')) from None


def compile(source, nvcc="nvcc", options=None, keep=False, no_extern_c=False, arch=None,
            code=None, cache_dir=None, include_dirs=None, target="cubin"):
    """The CUBIN (target="cubin") or PTX (target="ptx") of source, as bytes, as PyCUDA's
    compile() gives them: the source inside extern "C" unless no_extern_c. Nothing is loaded
    onto a GPU, and none is needed."""
    if target not in ("cubin", "ptx"):
        raise ValueError(f"target is 'cubin' or 'ptx' (NVRTC gives both), not {target!r}"
                         + (": kiln makes no fatbin, and a CUBIN loads wherever one does"
                            if target == "fatbin" else ""))
    if _asks_rdc(options):
        # nvcc --cubin -rdc=true, PyCUDA's command, gives relocatable code and links nothing: a
        # source calling a device function of another file compiles, for a Linker to link.
        options = [*options, "-dc"]
    module = _compiled_with_c_linkage(source, nvcc, options, keep, no_extern_c, arch, code,
                                      cache_dir, include_dirs)
    return module.cubin if target == "cubin" else module.ptx.encode()


def _asks_rdc(options):
    """Whether nvcc's options ask for relocatable device code (-rdc=true, -rdc true, and the
    long spelling), the last such option deciding, as nvcc reads them."""
    rdc = False
    options = list(options or ())
    for i, option in enumerate(options):
        if not isinstance(option, str):
            continue
        name, equals, value = option.partition("=")
        if name not in ("-rdc", "--relocatable-device-code"):
            continue
        if not equals:
            value = options[i + 1] if i + 1 < len(options) else ""
        rdc = value == "true"
    return rdc


def compile_plain(source, options, keep, nvcc, cache_dir, target="cubin"):
    """PyCUDA's inner compile: source as it is (no extern "C" added) with these options, as
    bytes; compile() with no_extern_c=True."""
    return compile(source, nvcc, list(options), keep, True, cache_dir=cache_dir, target=target)


def _nvcc_command(nvcc):
    """The nvcc to run for the name a program gave: as given where it is a path or on PATH,
    else the one of the toolkit whose headers NVRTC compiles with."""
    import shutil
    if os.sep in nvcc or shutil.which(nvcc):
        return nvcc
    include = _kiln.nvrtc_info()["include_dir"]
    beside = include and os.path.join(os.path.dirname(include), "bin", nvcc)
    return beside if beside and os.access(beside, os.X_OK) else nvcc


def preprocess_source(source, options, nvcc="nvcc"):
    """PyCUDA's: the source after nvcc's preprocessor (`nvcc --preprocess`, with the host
    preprocessor's line markers left out), as text. NVRTC has no preprocess-only mode, so this
    runs nvcc, as PyCUDA does: the one named, else the toolkit's. A CompileError when it fails
    (.stderr: nvcc's) or cannot be run at all."""
    import subprocess
    import tempfile
    command = _nvcc_command(nvcc)
    with tempfile.TemporaryDirectory(prefix="kiln-preprocess-") as folder:
        # A name of its own, so that taking it out of the output touches nothing of the source.
        path = os.path.join(folder, os.path.basename(folder) + ".cu")
        with open(path, "w") as f:
            f.write(source)
        cmdline = [command, "--preprocess", *options, path, "--compiler-options", "-P"]
        try:
            done = subprocess.run(cmdline, capture_output=True, check=False)
        except OSError as e:
            raise CompileError(f"preprocess_source could not run {nvcc!r}: {e}; it needs nvcc, "
                               f"which kiln's compiles do not", cmdline, stderr=b"") from None
        if done.returncode != 0:
            raise CompileError(f"nvcc preprocessing failed:\n"
                               f"{done.stderr.decode('utf-8', 'replace')}", cmdline,
                               stderr=done.stderr)
    # The temporary file's name out, so that the text of one source is the same every time.
    return done.stdout.decode("utf-8", "replace").replace(path, "").replace(
        os.path.basename(path), "")


def get_nvcc_version(nvcc):
    """What `<nvcc> --version` prints, as PyCUDA gives it. kiln compiles with NVRTC and needs
    no nvcc; where that command cannot run, a warning and "nvcc unknown version", as PyCUDA."""
    import subprocess
    import warnings
    try:
        done = subprocess.run([nvcc, "--version"], capture_output=True, check=False)
        out = done.stdout if done.returncode == 0 else b""
    except OSError:
        out = b""
    if not out:
        warnings.warn("NVCC version could not be determined.", stacklevel=2)
        out = b"nvcc unknown version"
    return out.decode("utf-8", "replace")


class DynamicModule(CudaModule):
    """PyCUDA's DynamicModule: sources, PTX, objects and libraries linked into one module, whose
    kernels may launch kernels and call device functions of the others.

        mod = DynamicModule()
        mod.add_source(outer_src, nvcc_options=["-rdc=true"]).add_source(inner_src)
        mod.add_stdlib("cudadevrt")
        mod.link()
        mod.get_function("outer")(..., block=..., grid=...)

    add_source compiles at once, as relocatable device code left unlinked (nvcc's -dc), through
    kiln's cache like any SourceModule; add_data and add_file take inputs of a jit_input_type;
    add_stdlib adds lib<name>.a (cudadevrt) from cuda_libdir, else from beside NVRTC or the
    toolkit. link() links them for the arch the sources were compiled for (nvJitLink, which
    needs no GPU, else the driver's linker) and loads the module: a link error is a
    CompileError with the linker's log. link_options, (jit_option, int) pairs such as
    (jit_option.MAX_REGISTERS, 64), are the driver linker's JIT options, as in PyCUDA: given
    any, the link is the driver's, in the current context. message_handler, when given, is
    called as PyCUDA calls it: (success, info_log, error_log).
    """

    def __init__(self, nvcc="nvcc", link_options=None, keep=False, no_extern_c=False, arch=None,
                 code=None, cache_dir=None, include_dirs=None, message_handler=None,
                 log_verbose=False, cuda_libdir=None):
        self.link_options = list(link_options or ())
        self.nvcc, self.keep, self.no_extern_c = nvcc, keep, no_extern_c
        self.arch, self.code, self.cache_dir = arch, code, cache_dir
        self.include_dirs = list(include_dirs or ())
        self.message_handler, self.log_verbose = message_handler, log_verbose
        self.cuda_libdir = cuda_libdir
        self.module = None
        self._inputs = []
        self._link_arch = None

    def _adding(self):
        if self.module is not None:
            raise RuntimeError("this DynamicModule is linked already; make another to link more")

    def add_source(self, source, nvcc_options=None, name="kernel.ptx"):
        """Compiles source (nvcc_options, else DEFAULT_NVCC_FLAGS) as relocatable device code
        and adds it to the link."""
        self._adding()
        if isinstance(nvcc_options, (str, bytes)):
            raise TypeError("nvcc_options must be a list of strings, not a single string")
        options = list(_default_options() if nvcc_options is None else nvcc_options)
        # As a SourceModule, not wrapped in extern "C" as PyCUDA's add_source is: the linked
        # module is loaded from a CUBIN, where only C++ names give the kernels' parameter types
        # (without them a Python int passed for a float would go as an int's bits).
        module = _SourceModule(source, self.nvcc, [*options, "-dc"], False, self.no_extern_c,
                               self.arch, self.code, self.cache_dir, self.include_dirs or None)
        if self._link_arch not in (None, module.arch):
            raise ValueError(f"this source compiled for {module.arch}, an earlier one for "
                             f"{self._link_arch}: a link takes code of one arch")
        self._link_arch = module.arch
        self._inputs.append((int(_driver_enums.jit_input_type.CUBIN), module.cubin, None,
                             str(name)))
        return self

    def add_data(self, data, input_type, name="unknown"):
        """Adds data (bytes: a CUBIN, PTX, fatbin, object or library, as input_type says)."""
        self._adding()
        self._inputs.append((int(input_type), data, None, str(name)))
        return self

    def add_file(self, filename, input_type):
        """Adds the file filename, of input_type."""
        self._adding()
        self._inputs.append((int(input_type), None, os.fspath(filename), None))
        return self

    def add_stdlib(self, libname):
        """Adds the toolkit's static library lib<libname>.a (PyCUDA's use: "cudadevrt")."""
        self._adding()
        name = f"lib{libname}.a"
        folders = [self.cuda_libdir] if self.cuda_libdir is not None else _library_folders()
        for folder in folders:
            path = os.path.join(os.fspath(folder), name)
            if os.path.isfile(path):
                return self.add_file(path, _driver_enums.jit_input_type.LIBRARY)
        raise OSError(f"CUDA library file {name} not found in {', '.join(map(str, folders))}")

    def link(self):
        """Links what was added and loads the module (needs a GPU to load)."""
        self._adding()
        try:
            cubin = _kiln._link(self._inputs, self._link_arch or self.arch,
                                self.link_options or None)
        except CompileError as e:
            if self.message_handler is not None:
                self.message_handler(False, "", str(e))
            raise
        if self.message_handler is not None:
            self.message_handler(True, "", "")
        self.module = _kiln.module_from_buffer(cubin)
        return self

    def _linked(self):
        if self.module is None:
            raise RuntimeError("call link() first: the module exists once linked")
        return self.module

    def get_function(self, name):
        return self._linked().get_function(name)

    def get_global(self, name):
        return self._linked().get_global(name)

    def get_texref(self, name):
        return self._linked().get_texref(name)

    def get_surfref(self, name):
        return self._linked().get_surfref(name)


def _library_folders():
    """Where the toolkit's static libraries are: beside NVRTC, then lib64 under $CUDA_HOME,
    $CUDA_PATH and /usr/local/cuda (as libcudadevrt.a is found for DynamicSourceModule)."""
    folders = []
    try:
        folders.append(os.path.dirname(_kiln.nvrtc_info()["path"]))
    except Exception:  # no NVRTC: the toolkit's folders all the same
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            folders.append(os.path.join(root, "lib64"))
    return list(dict.fromkeys(folders))
