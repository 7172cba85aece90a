"""Seed 004: PyCUDA's front-page example, with only its import lines changed."""
import pytest


@pytest.mark.gpu
def test_multiply_them_as_pycuda_wrote_it():
    import kiln.autoinit  # noqa: F401
    import kiln.driver as drv
    import numpy

    from kiln.compiler import SourceModule
    mod = SourceModule("""
	__global__ void multiply_them(float *dest, float *a, float *b)
	{
	  const int i = threadIdx.x;
	  dest[i] = a[i] * b[i];
	}
	""")

    multiply_them = mod.get_function("multiply_them")

    a = numpy.random.randn(400).astype(numpy.float32)
    b = numpy.random.randn(400).astype(numpy.float32)

    dest = numpy.zeros_like(a)
    multiply_them(
        drv.Out(dest), drv.In(a), drv.In(b),
        block=(400, 1, 1), grid=(1, 1))

    print(dest - a * b)
    assert not (dest - a * b).any()


@pytest.mark.gpu
def test_multiply_them_from_the_issue():
    import numpy as np

    import kiln
    mod = kiln.SourceModule("""
    __global__ void multiply_them(float *dest, const float *a, const float *b, int n)
    { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) dest[i] = a[i] * b[i]; }
    """)
    f = mod.get_function("multiply_them")
    a = np.random.randn(400).astype(np.float32)
    b = np.random.randn(400).astype(np.float32)
    dest = np.zeros_like(a)
    f(kiln.Out(dest), kiln.In(a), kiln.In(b), 400, block=(400, 1, 1), grid=(1, 1))
    assert np.array_equal(dest, a * b)
