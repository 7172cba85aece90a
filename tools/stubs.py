"""Writes pymod/kiln/_kiln.pyi, the type stubs of the C extension, from its text signatures
(inspect.signature) and the return types below. Run after changing the extension's API:

    PYTHONPATH=pymod python3 tools/stubs.py

tests/test_introspection.py fails when the stubs miss a public name of kiln._kiln."""
import inspect
import sys
import types

import kiln
import kiln._kiln as K

RETURNS = {
    "SourceModule.get_function": "Function", "Module.get_function": "Function",
    "Module.get_global": "tuple[int, int]", "Device.name": "str", "Device.count": "int",
    "Device.compute_capability": "tuple[int, int]", "Device.total_memory": "int",
    "Device.pci_bus_id": "str", "Device.get_attributes": "dict[Any, int]",
    "Device.get_attribute": "int", "Device.retain_primary_context": "Context",
    "Device.make_context": "Context", "Context.get_device": "Device",
    "cache_stats": "dict[str, int]", "cache_info": "dict[str, Any]",
    "cache_list": "list[dict[str, Any]]", "cache_prune": "int", "cache_clear": "int",
    "nvrtc_info": "dict[str, Any]", "default_arch": "str", "staging_info": "dict[str, int]",
    "pool_stats": "dict[str, int]", "empty": "DeviceArray", "zeros": "DeviceArray",
    "to_device": "DeviceArray", "asarray": "DeviceArray", "mem_alloc": "DeviceAllocation",
    "mem_info": "tuple[int, int]", "current_device": "Device",
    "pagelocked_empty": "np.ndarray", "pagelocked_zeros": "np.ndarray",
    "DeviceArray.get": "np.ndarray", "DeviceArray.copy": "DeviceArray",
    "DeviceArray.reshape": "DeviceArray", "DeviceArray.ravel": "DeviceArray",
    "DeviceArray.view": "DeviceArray", "DeviceArray.astype": "DeviceArray",
    "DeviceArray.transpose": "DeviceArray", "DeviceArray.tolist": "list[Any]",
    "Event.elapsed": "float", "Event.time_since": "float", "Event.time_till": "float",
    "Event.query": "bool", "Stream.query": "bool", "Stream.is_done": "bool",
    "Function.get_attribute": "int", "get_driver_version": "int",
    "get_version": "tuple[int, int, int]", "mem_get_ipc_handle": "bytes",
    "Event.ipc_handle": "bytes", "Event.from_ipc_handle": "Event",
    "Device.can_access_peer": "bool",
}
ATTRS = {"IPCMemoryHandle.size": "int", "Function.name": "str", "Function.declaration": "str",
         "Function.signature": "tuple[str, ...]", "Module.kernels": "tuple[str, ...]",
         "Module.arch": "str", "Module.ptx": "str", "Module.log": "str",
         "DeviceArray.shape": "tuple[int, ...]", "DeviceArray.dtype": "np.dtype[Any]",
         "DeviceArray.size": "int", "DeviceArray.ndim": "int", "DeviceArray.ptr": "int",
         "DeviceArray.nbytes": "int", "DeviceArray.itemsize": "int"}
CALL = ("    def __call__(self, *args: Any, block: tuple[int, ...] = ..., "
        "grid: tuple[int, ...] = ..., shared: int = 0, stream: Optional[Stream] = None, "
        "time_kernel: bool = False) -> Any: ...")

out = ['"""Type stubs for kiln._kiln, the C extension: written by tools/stubs.py from its text',
       'signatures."""',
       "from typing import Any, Callable, Optional, Sequence, Union", "",
       "import numpy as np", "", "__version__: str", "STREAM_NON_BLOCKING: int", ""]
def sig(obj, drop_self=False):
    try:
        s = str(inspect.signature(obj))
    except (ValueError, TypeError):
        return "(*args: Any, **kwargs: Any)"
    return s
def doc1(obj):
    d = inspect.getdoc(obj) or ""
    return d.split("\n")[0].replace('"""', "'")
names = sorted(n for n in dir(K) if not n.startswith("__"))
classes = [n for n in names if isinstance(getattr(K, n), type)]
funcs = [n for n in names if n not in classes and callable(getattr(K, n))]
consts = [n for n in names if n not in classes and n not in funcs]
for n in consts:
    if n not in ("STREAM_NON_BLOCKING",): out.append(f"{n}: Any")
out.append("")
# base classes first
order = sorted(classes, key=lambda n: len(getattr(K, n).__mro__))
for n in order:
    c = getattr(K, n)
    bases = [b.__name__ for b in c.__bases__ if b is not object and b.__module__ in ("kiln", "kiln._kiln")]
    if issubclass(c, BaseException):  # every base: kiln's, and Python's (MemoryError, ...)
        names = [b.__name__ for b in c.__bases__ if b is not object]
        out.append(f"class {n}({', '.join(names)}): ...")
        continue
    out.append(f"class {n}{'(' + ', '.join(bases) + ')' if bases else ''}:")
    try:
        s = inspect.signature(c)
        params = str(s)[1:-1]
        out.append(f"    def __init__(self{', ' + params if params else ''}) -> None: ...")
    except (ValueError, TypeError):
        pass
    for a, v in sorted(vars(c).items()):
        if a.startswith("__") and a not in ("__enter__", "__exit__", "__call__", "__cuda_array_interface__", "__dlpack__", "__dlpack_device__", "__cuda_stream__", "__getitem__", "__setitem__", "__len__", "__iter__", "__int__", "__float__", "__index__", "__complex__"):
            continue
        if a.startswith("_") and not a.startswith("__"): continue
        if n == "Function" and a == "__call__": continue  # CALL below spells its keywords
        if isinstance(v, (types.GetSetDescriptorType, types.MemberDescriptorType, property)):
            out.append(f"    {a}: {ATTRS.get(n + '.' + a, 'Any')}")
        elif isinstance(v, types.ClassMethodDescriptorType) or isinstance(v, classmethod):
            s = sig(getattr(c, a))
            out.append("    @classmethod")
            out.append(f"    def {a}(cls{', ' + s[1:-1] if s[1:-1] else ''}) -> "
                       f"{RETURNS.get(n + '.' + a, 'Any')}: ...")
        elif isinstance(v, staticmethod):
            s = sig(getattr(c, a))
            out.append("    @staticmethod")
            out.append(f"    def {a}{s} -> Any: ...")
        elif callable(v):
            s = sig(v)
            inner = s[1:-1]
            if inner.startswith("self, /"):
                inner = inner[len("self, /"):].lstrip(", ")
                inner = ("/, " + inner) if False else inner
            elif inner.startswith("self"):
                inner = inner[4:].lstrip(", ")
            if inner.startswith("*args: Any"): pass
            out.append(f"    def {a}(self{', ' + inner if inner else ''}) -> "
                       f"{RETURNS.get(n + '.' + a, 'Any')}: ...")
    if n == "Function":
        out.append(CALL)
    if out[-1].endswith(":"): out.append("    ...")
    out.append("")
for n in funcs:
    f = getattr(K, n)
    out.append(f"def {n}{sig(f)} -> {RETURNS.get(n, 'Any')}: ...")
path = sys.argv[1] if len(sys.argv) > 1 else "pymod/kiln/_kiln.pyi"
with open(path, "w") as f:
    f.write("\n".join(out) + "\n")
