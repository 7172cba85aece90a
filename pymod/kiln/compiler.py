"""For code ported from PyCUDA: `from kiln.compiler import SourceModule`."""
from ._kiln import CompileError, SourceModule  # noqa: F401
