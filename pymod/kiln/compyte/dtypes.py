"""`pycuda.compyte.dtypes`: the registry of C type names and dtypes that kiln's generated
kernels use (kiln.tools and kiln.elementwise read the same table), under compyte's names."""
import re

import numpy as np

from .. import _cgen
from ..tools import (  # noqa: F401
    TypeNameNotKnown, dtype_to_ctype, get_or_register_dtype, register_dtype)

__all__ = ["TypeNameNotKnown", "DTypeRegistry", "TYPE_REGISTRY", "dtype_to_ctype",
           "get_or_register_dtype", "register_dtype", "parse_c_arg_backend"]


class DTypeRegistry:
    """compyte's registry, seen through kiln's one table: name_to_dtype maps every C spelling
    kiln reads, dtype_to_name every dtype to the name kernels are written with."""

    @property
    def name_to_dtype(self):
        return _cgen._NAMED

    @property
    def dtype_to_name(self):
        """What each dtype is called, as it is now (a copy: register through
        get_or_register_dtype)."""
        return {**_cgen._CTYPE, **_cgen._REGISTERED}

    def get_or_register_dtype(self, names, dtype=None):
        return get_or_register_dtype(names, dtype)

    def dtype_to_ctype(self, dtype):
        return dtype_to_ctype(dtype)


TYPE_REGISTRY = DTypeRegistry()

_DECLARATOR = re.compile(r"(\**)\s*([_a-zA-Z0-9]+)(\s*\[[ 0-9]*\])*\s*$")


def parse_c_arg_backend(c_arg, scalar_arg_factory, vec_arg_factory, name_to_dtype=None):
    """One C parameter declaration ("const float *x", "int n", "float a[4]") as
    scalar_arg_factory(dtype, name) or, for a pointer or an array, vec_arg_factory(dtype,
    name); the type name is looked up in name_to_dtype (a registry, a callable or, by
    default, kiln's table)."""
    if isinstance(name_to_dtype, DTypeRegistry) or name_to_dtype is None:
        lookup = _cgen._NAMED.__getitem__
    else:
        lookup = name_to_dtype
    text = c_arg
    for qualifier in ("const", "volatile", "__restrict__", "restrict"):
        text = text.replace(qualifier, "")
    m = _DECLARATOR.search(text)
    if m is None:
        raise ValueError(f"couldn't parse C declarator '{c_arg}'")
    factory = vec_arg_factory if m.group(1) or m.group(3) is not None else scalar_arg_factory
    type_name = " ".join(text[:m.start()].split())
    try:
        dtype = lookup(type_name)
    except KeyError:
        raise ValueError(f"unknown type '{type_name}'") from None
    return factory(np.dtype(dtype), m.group(2))
