"""For code ported from PyCUDA: `import kiln.autoinit` in place of `import pycuda.autoinit`.

kiln makes no context of its own: it uses the device's primary context (the one PyTorch, CuPy
and the CUDA runtime use) on first use, so there is nothing to set up here.
"""
