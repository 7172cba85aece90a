// Seed 002 (ctypes, and a PyTorch extension on the current stream): elementwise sum.
extern "C" __global__ void add_arrays(const float* a, const float* b, float* out, int n) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < n)
        out[idx] = a[idx] + b[idx];
}
