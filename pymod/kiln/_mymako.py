"""The Mako templating engine, under the module name PyCUDA gives it (pycuda._mymako), which
libraries that render their kernels with Mako import (compyle). kiln needs no Mako itself;
importing this without it installed says how to install it."""

try:
    import mako.template  # noqa: F401
except ImportError as e:
    raise ImportError("kiln._mymako is the Mako templating engine, which is not installed: "
                      "pip install mako") from e

from mako import *  # noqa: E402, F403 (Mako's names, as pycuda._mymako gives them)
