"""CLUDA_PREAMBLE: the macros with which one kernel text reads as CUDA here and as OpenCL
under PyOpenCL (WITHIN_KERNEL, KERNEL, GLOBAL_MEM, LOCAL_MEM, local_barrier(), and the thread,
block and grid indices and sizes as LID_n, GID_n, LDIM_n and GDIM_n), under the module name
PyCUDA gives them, pycuda._cluda, which libraries generating code for both import (compyle)."""

CLUDA_PREAMBLE = """
#define local_barrier() __syncthreads();

#define WITHIN_KERNEL __device__
#define KERNEL extern "C" __global__
#define GLOBAL_MEM /* global memory is a plain pointer in CUDA */
#define LOCAL_MEM __shared__
#define LOCAL_MEM_ARG /* shared memory is not passed in CUDA */
#define REQD_WG_SIZE(X,Y,Z) __launch_bounds__(X*Y*Z, 1)

#define LID_0 threadIdx.x
#define LID_1 threadIdx.y
#define LID_2 threadIdx.z

#define GID_0 blockIdx.x
#define GID_1 blockIdx.y
#define GID_2 blockIdx.z

#define LDIM_0 blockDim.x
#define LDIM_1 blockDim.y
#define LDIM_2 blockDim.z

#define GDIM_0 gridDim.x
#define GDIM_1 gridDim.y
#define GDIM_2 gridDim.z
"""
