// Seed 001 (a hand-written C-API extension: hello world and memoized Fibonacci), as kernels.
// printf needs no header in device code.

__global__ void helloworld()
{
    printf("Hello World\n");
}

// out[i] = fib(i) for i < n, one thread filling the table as the seed's memo does.
__global__ void fib(unsigned long long *out, int n)
{
    if (n > 0) out[0] = 0;
    if (n > 1) out[1] = 1;
    for (int i = 2; i < n; i++) out[i] = out[i - 1] + out[i - 2];
}
