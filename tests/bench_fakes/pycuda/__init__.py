"""A stand-in for PyCUDA (see ../README.md)."""
VERSION_TEXT = "0+fake"
