// Seed 004 (PyCUDA's front-page example), with a bound so any grid is safe.
__global__ void multiply_them(float *dest, const float *a, const float *b, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) dest[i] = a[i] * b[i];
}
