// Seed 000 (a Cython wrapper over an nvcc-built library): one thread adds two ints.
__global__ void add_kernel(int a, int b, int *c)
{
    *c = a + b;
}
