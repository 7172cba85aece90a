"""PyCUDA's `pycuda.compyte`, the helpers it shares with PyOpenCL, for programs that import
them from there: `dtypes` (the C names of dtypes, over kiln's own table) and `array` (strides,
flags and promotion of array-like objects)."""
