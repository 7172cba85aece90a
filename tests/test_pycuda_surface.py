"""Every name PyCUDA 2026.1's documentation gives (its doc/*.rst, read from the source
distribution in vendor/) is kiln's under the same module, but for those kiln leaves out on
purpose, listed here with the reason (docs/pycuda.md, "Not provided"). A name PyCUDA documents
and kiln lacks fails here before a program using it fails elsewhere."""
import ast
import functools
import importlib
import inspect
import re
import tarfile
from pathlib import Path

import pytest

SDIST = Path(__file__).resolve().parent.parent / "vendor" / "pycuda-2026.1.tar.gz"
PAGES = ("driver.rst", "array.rst", "util.rst", "metaprog.rst", "misc.rst", "tutorial.rst")

# Documented and left out, with the reason.
NOT_PROVIDED = {
    **{f"kiln.driver.{name}": "texture and surface references: CUDA 12 removed them"
       for name in ("TextureReference", "SurfaceReference")},
    **{f"kiln.driver.Function.{name}": "launch calls PyCUDA itself offers only before CUDA 4.0"
       for name in ("launch", "launch_grid", "launch_grid_async", "param_set", "param_set_size",
                    "param_set_texref", "param_setf", "param_seti", "set_block_shape",
                    "set_shared_size")},
    "kiln.driver.Function.set_shared_config": "documented, but not in PyCUDA's own binding",
    **{f"kiln.driver.jit_target.COMPUTE_{n}": "a target cuda.h no longer has"
       for n in ("10", "11", "12", "13", "20", "21")},
}

# Attributes each instance has, which the class does not (set in __init__), and the attributes
# of an exception the page documents under it.
INSTANCE = {
    "kiln.driver.Memcpy2D", "kiln.driver.Memcpy3D", "kiln.tools.DeviceData",
    "kiln.tools.OccupancyRecord", "kiln.tools.DeviceMemoryPool", "kiln.tools.PageLockedMemoryPool",
}
EXCEPTION_ATTRIBUTES = {"msg", "command_line", "stdout", "stderr"}


@functools.cache
def _sdist_files():
    """The files of PyCUDA's source distribution, by their path below its top folder, read
    once (a gzipped tar is read from its start for each member asked for)."""
    with tarfile.open(SDIST) as tar:
        return {m.name.split("/", 1)[1]: tar.extractfile(m).read()
                for m in tar.getmembers() if m.isfile() and "/" in m.name}


def sdist_text(path):
    """The text of the file of PyCUDA's source distribution at path (below its top folder)."""
    return _sdist_files()[path].decode()


def documented():
    """(module, dotted name) for every class, function, method, attribute and datum."""
    for page in PAGES:
        module = cls = None
        for line in sdist_text("doc/" + page).splitlines():
            m = re.match(r"\.\. module:: (\S+)", line.strip())
            if m:
                module, cls = m.group(1), None
                continue
            m = re.match(r"(\s*)\.\. (class|function|method|attribute|data|exception):: "
                         r"([A-Za-z_][\w.]*)", line)
            if not m or not module:
                continue
            indent, kind, name = m.groups()
            if name.startswith("pycuda."):  # written out in full on another module's page
                yield name.rsplit(".", 1)[0], name.rsplit(".", 1)[1]
                continue
            if kind == "class":
                cls = name
            if kind in ("class", "exception") or not indent or not cls:
                yield module, name
            else:
                yield module, f"{cls}.{name}"


@pytest.mark.skipif(not SDIST.exists(), reason=f"no {SDIST} to read PyCUDA's pages from")
def test_every_documented_name_is_kilns():
    missing, seen = [], set()
    for module, name in documented():
        if module in ("pycuda.autoinit", "pycuda.autoprimaryctx"):
            continue  # they make a context on import: the GPU machine's tests import them
        kiln_module = "kiln" + module[len("pycuda"):]
        full = f"{kiln_module}.{name}"
        seen.add(full)
        if full in NOT_PROVIDED or full.rsplit(".", 1)[0] in NOT_PROVIDED \
                or full.rsplit(".", 1)[0] in INSTANCE \
                or name in EXCEPTION_ATTRIBUTES:
            continue
        obj = importlib.import_module(kiln_module)
        for part in name.split("."):
            if not hasattr(obj, part):
                missing.append(full)
                break
            obj = getattr(obj, part)
    assert len(seen) > 300, "PyCUDA's pages were not read"
    assert not missing, f"documented by PyCUDA, missing from kiln: {missing}"
    assert not set(NOT_PROVIDED) - seen, "a name left out that PyCUDA no longer documents"


@pytest.mark.skipif(not SDIST.exists(), reason=f"no {SDIST} to read PyCUDA's pages from")
def test_instance_attributes_pycuda_documents():
    import kiln.driver as drv
    wanted = {cls: [n.split(".", 1)[1] for m, n in documented()
                    if f"kiln{m[len('pycuda'):]}.{n.split('.', 1)[0]}" == f"kiln.driver.{cls}"
                    and "." in n]
              for cls in ("Memcpy2D", "Memcpy3D")}
    for cls, names in wanted.items():
        copy = getattr(drv, cls)()
        assert names and all(hasattr(copy, n) for n in names), (cls, names)


# The pycuda modules each of PyCUDA 2026.1's modules imports at its top, directly or through
# another (read from its source): a program that imports only pycuda.cumath and then calls
# pycuda.gpuarray.to_gpu works there, so it must under kiln. autoinit and autoprimaryctx make
# a context on import: the GPU machine's tests import them.
IMPORTED_WITH = {
    "characterize": ["driver", "tools"],
    "compiler": [],
    "cumath": ["characterize", "driver", "elementwise", "gpuarray", "tools"],
    "curandom": ["characterize", "compiler", "driver", "elementwise", "gpuarray", "tools"],
    "debug": ["driver"],
    "driver": [],
    "elementwise": ["driver", "tools"],
    "gpuarray": ["characterize", "driver", "elementwise", "tools"],
    "reduction": ["driver", "tools"],
    "scan": ["characterize", "compiler", "driver", "elementwise", "gpuarray", "tools"],
    "tools": ["driver"],
}


@pytest.mark.parametrize("module", sorted(IMPORTED_WITH))
def test_a_module_brings_the_modules_pycudas_brings(module):
    from helpers import run_python
    done = run_python(f"import types, kiln.{module}, kiln\n"
                      "print(' '.join(sorted(n for n, v in vars(kiln).items()\n"
                      "                  if isinstance(v, types.ModuleType))))\n")
    assert done.returncode == 0, done.stderr
    have = set(done.stdout.split())
    assert not set(IMPORTED_WITH[module]) - have, f"import kiln.{module} leaves out " \
        f"{sorted(set(IMPORTED_WITH[module]) - have)}"


def test_the_private_modules_code_generators_import():
    # compyle renders its kernels with pycuda._mymako and prefixes them with pycuda._cluda's
    # CLUDA_PREAMBLE, so that one text is CUDA here and OpenCL under PyOpenCL.
    import kiln
    from kiln._cluda import CLUDA_PREAMBLE
    from helpers import ARCH
    mod = kiln.SourceModule(CLUDA_PREAMBLE + """
        WITHIN_KERNEL float twice(float x) { return 2 * x; }
        KERNEL REQD_WG_SIZE(128, 1, 1) void k(GLOBAL_MEM float *x, int n)
        {
          LOCAL_MEM float tile[128];
          int i = GID_0 * LDIM_0 + LID_0;
          tile[LID_0] = i < n ? twice(x[i]) : 0;
          local_barrier();
          if (i < n) x[i] = tile[LDIM_0 - 1 - LID_0] + GDIM_0 + LID_1 + GID_2;
        }""", arch=ARCH, cache_dir=False)
    assert mod.get_function("k").signature == ("b64", "b32")
    try:
        import mako.template  # noqa: F401
    except ImportError:
        with pytest.raises(ImportError, match="pip install mako"):
            importlib.import_module("kiln._mymako")
    else:
        assert importlib.import_module("kiln._mymako").template is mako.template


# PyCUDA's modules written in Python, whose functions and methods take their parameters by name.
PYTHON_MODULES = ("gpuarray", "cumath", "curandom", "elementwise", "reduction", "scan", "tools",
                  "compiler", "driver", "characterize", "debug")


def python_signatures():
    """(module, dotted name, parameter names) of each public function and method of PyCUDA's
    Python modules, read from its source."""
    for module in PYTHON_MODULES:
        tree = ast.parse(sdist_text(f"pycuda/{module}.py"))
        for node in tree.body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                for sub in node.body:
                    if isinstance(sub, ast.FunctionDef) and sub.name == "__init__":
                        yield module, node.name, sub.args  # the class's call
                    elif isinstance(sub, ast.FunctionDef) and (
                            not sub.name.startswith("_") or sub.name == "__call__"):
                        yield module, f"{node.name}.{sub.name}", sub.args
            elif isinstance(node, ast.FunctionDef) and not node.name.startswith("_"):
                yield module, node.name, node.args


# Callables whose parameters differ on purpose, with the reason.
OTHER_PARAMETERS = {}


@pytest.mark.skipif(not SDIST.exists(), reason=f"no {SDIST} to read PyCUDA's source from")
def test_every_parameter_name_pycudas_python_takes_is_kilns():
    # A program may pass any of them by keyword (`to_device(bf_obj=a)`, `conj(out=b)`).
    wrong, checked, signatures = [], 0, list(python_signatures())
    for module, name, args in signatures:
        if f"{module}.{name}" in OTHER_PARAMETERS:
            continue
        obj = importlib.import_module(f"kiln.{module}")
        try:
            for part in name.split("."):
                obj = getattr(obj, part)
            params = inspect.signature(obj).parameters
        except (AttributeError, TypeError, ValueError):
            continue  # a name kiln lacks is the test above's; a property has no signature
        names = [a.arg for a in args.posonlyargs + args.args + args.kwonlyargs
                 if a.arg not in ("self", "cls")]
        if any(p.kind == p.VAR_KEYWORD for p in params.values()):
            continue
        checked += 1
        wrong += [f"kiln.{module}.{name}({n}=)" for n in names if n not in params]
    assert checked > 150, "PyCUDA's source was not read"
    assert set(OTHER_PARAMETERS) <= {f"{m}.{n}" for m, n, _ in signatures}
    assert not wrong, f"parameters PyCUDA takes by name, which kiln does not: {wrong}"


@pytest.mark.skipif(not SDIST.exists(), reason=f"no {SDIST} to read PyCUDA's source from")
def test_every_keyword_pycudas_driver_binding_names_is_kilns():
    # The module's functions of PyCUDA's C++ binding that name their parameters (py::args,
    # py::arg) take them by keyword: memset_d8(dest=, data=, size=), module_from_file(filename=),
    # ... (its classes' methods are not read here)
    text = sdist_text("src/wrapper/wrap_cudadrv.cpp")
    import kiln.driver as drv
    wrong, checked = [], 0
    defs = re.findall(r'py::def\(\s*"(\w+)"\s*,([^;]*);', text)
    # DEF_SIMPLE_FUNCTION_WITH_ARGS(name, ("a", "b")): a C++ function of that name (py_ before
    # the one a Python module of PyCUDA's renames)
    defs += [(re.sub(r"^py_", "", n), f"py::args({a})")
             for n, a in re.findall(r"DEF_SIMPLE_FUNCTION_WITH_ARGS\(\s*(\w+),\s*\(([^)]*)\)",
                                    text)]
    for name, body in defs:
        names = re.findall(r'py::arg\("(\w+)"\)', body)
        for group in re.findall(r"py::args\(([^)]*)\)", body):
            names += re.findall(r'"(\w+)"', group)
        if not names:
            continue
        checked += 1
        assert hasattr(drv, name), f"PyCUDA's binding has drv.{name}, kiln has not"
        params = inspect.signature(getattr(drv, name)).parameters
        wrong += [f"drv.{name}({n}=)" for n in names if n not in params]
    assert checked > 20, "PyCUDA's binding was not read"
    assert not wrong, f"keywords PyCUDA's binding takes, which kiln does not: {wrong}"
