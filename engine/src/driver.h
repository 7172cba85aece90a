/* The CUDA driver, opened with dlopen on first GPU use and never linked. */
#ifndef KILN_DRIVER_H
#define KILN_DRIVER_H

#include "internal.h"

#include <cuda.h>

/* Entry points are resolved through cuGetProcAddress at the CUDA 12.0 ABI, so the table is
 * the same whatever header or driver version; member names drop the `cu` prefix because
 * cuda.h renames many of those (cuMemAlloc -> cuMemAlloc_v2) with macros. */
typedef struct kiln__driver_table {
  CUresult (*GetErrorName)(CUresult, const char **);
  CUresult (*GetErrorString)(CUresult, const char **);
  CUresult (*DeviceGetCount)(int *);
  CUresult (*DeviceGet)(CUdevice *, int);
  CUresult (*DeviceGetName)(char *, int, CUdevice);
  CUresult (*DeviceGetAttribute)(int *, CUdevice_attribute, CUdevice);
  CUresult (*DeviceTotalMem)(size_t *, CUdevice);
  CUresult (*DevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*CtxGetCurrent)(CUcontext *);
  CUresult (*CtxSetCurrent)(CUcontext);
  CUresult (*CtxSynchronize)(void);
  CUresult (*LibraryLoadData)(CUlibrary *, const void *, CUjit_option *, void **, unsigned,
                              CUlibraryOption *, void **, unsigned);
  CUresult (*LibraryUnload)(CUlibrary);
  CUresult (*LibraryGetKernel)(CUkernel *, CUlibrary, const char *);
  CUresult (*KernelGetAttribute)(int *, CUfunction_attribute, CUkernel, CUdevice);
  CUresult (*KernelSetAttribute)(CUfunction_attribute, int, CUkernel, CUdevice);
  CUresult (*LaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                           unsigned, CUstream, void **, void **);
  CUresult (*MemAlloc)(CUdeviceptr *, size_t);
  CUresult (*MemFree)(CUdeviceptr);
  CUresult (*MemAllocHost)(void **, size_t);
  CUresult (*MemFreeHost)(void *);
  CUresult (*MemcpyHtoD)(CUdeviceptr, const void *, size_t);
  CUresult (*MemcpyDtoH)(void *, CUdeviceptr, size_t);
  CUresult (*MemcpyHtoDAsync)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*MemcpyDtoHAsync)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*MemAllocAsync)(CUdeviceptr *, size_t, CUstream);
  CUresult (*MemFreeAsync)(CUdeviceptr, CUstream);
  CUresult (*MemGetAddressRange)(CUdeviceptr *, size_t *, CUdeviceptr);
  CUresult (*MemGetInfo)(size_t *, size_t *);
  CUresult (*StreamSynchronize)(CUstream);
  CUresult (*EventCreate)(CUevent *, unsigned);
  CUresult (*EventDestroy)(CUevent);
  CUresult (*EventRecord)(CUevent, CUstream);
  CUresult (*EventSynchronize)(CUevent);
  CUresult (*EventElapsedTime)(float *, CUevent, CUevent);
  CUresult (*StreamCreateWithPriority)(CUstream *, unsigned, int);
  CUresult (*StreamDestroy)(CUstream);
  CUresult (*StreamQuery)(CUstream);
  CUresult (*StreamWaitEvent)(CUstream, CUevent, unsigned);
  CUresult (*CtxGetStreamPriorityRange)(int *, int *);
  CUresult (*EventQuery)(CUevent);
  CUresult (*MemcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult (*MemsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult (*MemHostAlloc)(void **, size_t, unsigned);
  CUresult (*DeviceGetDefaultMemPool)(CUmemoryPool *, CUdevice);
  CUresult (*MemPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
  CUresult (*MemPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void *);
  CUresult (*MemPoolTrimTo)(CUmemoryPool, size_t);
  CUresult (*PointerGetAttribute)(void *, CUpointer_attribute, CUdeviceptr);
  CUresult (*DriverGetVersion)(int *);
  CUresult (*DeviceGetPCIBusId)(char *, int, CUdevice);
  CUresult (*DeviceGetByPCIBusId)(CUdevice *, const char *);
  CUresult (*CtxGetLimit)(size_t *, CUlimit);
  CUresult (*CtxSetLimit)(CUlimit, size_t);
  CUresult (*CtxGetCacheConfig)(CUfunc_cache *);
  CUresult (*CtxSetCacheConfig)(CUfunc_cache);
  CUresult (*CtxGetApiVersion)(CUcontext, unsigned *);
  CUresult (*KernelSetCacheConfig)(CUkernel, CUfunc_cache, CUdevice);
  CUresult (*LibraryGetGlobal)(CUdeviceptr *, size_t *, CUlibrary, const char *);
  CUresult (*MemsetD8)(CUdeviceptr, unsigned char, size_t);
  CUresult (*MemsetD16)(CUdeviceptr, unsigned short, size_t);
  CUresult (*MemsetD32)(CUdeviceptr, unsigned, size_t);
  CUresult (*MemsetD16Async)(CUdeviceptr, unsigned short, size_t, CUstream);
  CUresult (*MemsetD32Async)(CUdeviceptr, unsigned, size_t, CUstream);
  CUresult (*MemcpyDtoD)(CUdeviceptr, CUdeviceptr, size_t);
  CUresult (*MemAllocPitch)(CUdeviceptr *, size_t *, size_t, size_t, unsigned);
  CUresult (*MemHostRegister)(void *, size_t, unsigned);
  CUresult (*MemHostUnregister)(void *);
  CUresult (*MemHostGetDevicePointer)(CUdeviceptr *, void *, unsigned);
  CUresult (*MemHostGetFlags)(unsigned *, void *);
  CUresult (*KernelGetFunction)(CUfunction *, CUkernel);
  CUresult (*LaunchKernelEx)(const CUlaunchConfig *, CUfunction, void **, void **);
  CUresult (*OccupancyMaxActiveBlocksPerMultiprocessor)(int *, CUfunction, int, size_t);
  CUresult (*OccupancyMaxPotentialBlockSize)(int *, int *, CUfunction, CUoccupancyB2DSize, size_t,
                                             int);
  CUresult (*OccupancyAvailableDynamicSMemPerBlock)(size_t *, CUfunction, int, int);
  CUresult (*OccupancyMaxActiveClusters)(int *, CUfunction, const CUlaunchConfig *);
  CUresult (*StreamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult (*StreamEndCapture)(CUstream, CUgraph *);
  CUresult (*StreamIsCapturing)(CUstream, CUstreamCaptureStatus *);
  /* cuStreamGetCaptureInfo_v2 (the 12.0 ABI's): the nodes the next captured work depends on. */
  CUresult (*StreamGetCaptureInfo)(CUstream, CUstreamCaptureStatus *, cuuint64_t *, CUgraph *,
                                   const CUgraphNode **, size_t *);
  CUresult (*GraphInstantiateWithFlags)(CUgraphExec *, CUgraph, unsigned long long);
  CUresult (*GraphLaunch)(CUgraphExec, CUstream);
  CUresult (*GraphExecUpdate)(CUgraphExec, CUgraph, CUgraphExecUpdateResultInfo *);
  CUresult (*GraphExecKernelNodeSetParams)(CUgraphExec, CUgraphNode,
                                           const CUDA_KERNEL_NODE_PARAMS_v2 *);
  CUresult (*GraphKernelNodeGetParams)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS_v2 *);
  CUresult (*GraphGetNodes)(CUgraph, CUgraphNode *, size_t *);
  CUresult (*GraphNodeGetType)(CUgraphNode, CUgraphNodeType *);
  CUresult (*GraphDestroy)(CUgraph);
  CUresult (*GraphExecDestroy)(CUgraphExec);
  /* CUDA 12.4 and newer; NULL when the driver is older. */
  CUresult (*LibraryGetKernelCount)(unsigned *, CUlibrary);
  CUresult (*LibraryEnumerateKernels)(CUkernel *, unsigned, CUlibrary);
  CUresult (*KernelGetName)(const char **, CUkernel);
  CUresult (*KernelGetParamInfo)(CUkernel, size_t, size_t *, size_t *);
  /* Deprecated, or not needed by every program: NULL when this driver lacks them. */
  CUresult (*CtxGetSharedMemConfig)(CUsharedconfig *);
  CUresult (*CtxSetSharedMemConfig)(CUsharedconfig);
  CUresult (*LinkCreate)(unsigned, CUjit_option *, void **, CUlinkState *);
  CUresult (*LinkAddData)(CUlinkState, CUjitInputType, void *, size_t, const char *, unsigned,
                          CUjit_option *, void **);
  CUresult (*LinkAddFile)(CUlinkState, CUjitInputType, const char *, unsigned, CUjit_option *,
                          void **);
  CUresult (*LinkComplete)(CUlinkState, void **, size_t *);
  CUresult (*LinkDestroy)(CUlinkState);
  /* PyCUDA's managed memory, 2D memsets, 2D and 3D copies and profiler control. */
  CUresult (*MemAllocManaged)(CUdeviceptr *, size_t, unsigned);
  CUresult (*StreamAttachMemAsync)(CUstream, CUdeviceptr, size_t, unsigned);
  CUresult (*MemsetD2D8)(CUdeviceptr, size_t, unsigned char, size_t, size_t);
  CUresult (*MemsetD2D16)(CUdeviceptr, size_t, unsigned short, size_t, size_t);
  CUresult (*MemsetD2D32)(CUdeviceptr, size_t, unsigned, size_t, size_t);
  CUresult (*MemsetD2D8Async)(CUdeviceptr, size_t, unsigned char, size_t, size_t, CUstream);
  CUresult (*MemsetD2D16Async)(CUdeviceptr, size_t, unsigned short, size_t, size_t, CUstream);
  CUresult (*MemsetD2D32Async)(CUdeviceptr, size_t, unsigned, size_t, size_t, CUstream);
  CUresult (*Memcpy2D)(const CUDA_MEMCPY2D *);
  CUresult (*Memcpy2DUnaligned)(const CUDA_MEMCPY2D *);
  CUresult (*Memcpy2DAsync)(const CUDA_MEMCPY2D *, CUstream);
  CUresult (*Memcpy3D)(const CUDA_MEMCPY3D *);
  CUresult (*Memcpy3DAsync)(const CUDA_MEMCPY3D *, CUstream);
  CUresult (*ProfilerStart)(void);
  CUresult (*ProfilerStop)(void);
  /* Sharing memory and events with another process; peer access between devices. */
  CUresult (*IpcGetMemHandle)(CUipcMemHandle *, CUdeviceptr);
  CUresult (*IpcOpenMemHandle)(CUdeviceptr *, CUipcMemHandle, unsigned);
  CUresult (*IpcCloseMemHandle)(CUdeviceptr);
  CUresult (*IpcGetEventHandle)(CUipcEventHandle *, CUevent);
  CUresult (*IpcOpenEventHandle)(CUevent *, CUipcEventHandle);
  CUresult (*DeviceCanAccessPeer)(int *, CUdevice, CUdevice);
  CUresult (*CtxEnablePeerAccess)(CUcontext, unsigned);
  CUresult (*CtxDisablePeerAccess)(CUcontext);
  CUresult (*MemcpyPeer)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t);
  CUresult (*MemcpyPeerAsync)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t, CUstream);
  CUresult (*Memcpy3DPeer)(const CUDA_MEMCPY3D_PEER *);
  CUresult (*Memcpy3DPeerAsync)(const CUDA_MEMCPY3D_PEER *, CUstream);
  /* CUDA arrays (cuarray.c). */
  CUresult (*ArrayCreate)(CUarray *, const CUDA_ARRAY_DESCRIPTOR *);
  CUresult (*Array3DCreate)(CUarray *, const CUDA_ARRAY3D_DESCRIPTOR *);
  CUresult (*ArrayDestroy)(CUarray);
  CUresult (*MemcpyHtoA)(CUarray, size_t, const void *, size_t);
  CUresult (*MemcpyAtoH)(void *, CUarray, size_t, size_t);
  CUresult (*MemcpyDtoA)(CUarray, size_t, CUdeviceptr, size_t);
  CUresult (*MemcpyAtoD)(CUdeviceptr, CUarray, size_t, size_t);
  CUresult (*MemcpyAtoA)(CUarray, size_t, CUarray, size_t, size_t);
} kiln__driver_table;

/* The driver's entry points, named for this file: kiln__driver.MemAlloc(&p, n). */
extern kiln__driver_table kiln__driver;

/* Records a failed driver call: its CUresult, name and the routine that returned it; maps
 * out-of-memory to its own status. Here, not in status.c, because it asks the driver for the
 * CUresult's name; short-named like the status helpers, being of their vocabulary. */
kiln_status kiln__cuda_fail(const char *call, int result);

/* The caller's JIT options (kiln_module_from_image_jit's, kiln_link_jit's) as the driver takes
 * them, into keys and values (room for n of each): integer values of the options listed in
 * driver.c. The log buffers are kiln's own and pointer-valued options are not taken:
 * KILN_ERROR_INVALID naming the option, as the what's ("loader", "link") option i. */
kiln_status kiln__driver_jit_options(const kiln_jit_option *options, int n, const char *what,
                                     CUjit_option *keys, void **values);
/* The most JIT options a load or a link takes from its caller. */
#define KILN__DRIVER_JIT_MAX 64

/* Opens libcuda and runs cuInit once per process; later calls return the first outcome.
 * KILN_ERROR_NO_DRIVER when no driver loads, KILN_ERROR_NO_DEVICE when it finds no GPU. */
kiln_status kiln__driver_load(void);

/* Whether the table is filled, even when cuInit then failed: the calls that need no device
 * (cuDriverGetVersion, cuGetErrorName) work. Call after kiln__driver_load. */
int kiln__driver_opened(void);

/* Calls a driver routine, KILN__CU(MemAlloc, (&p, n)), and returns its failure as a status
 * naming the routine ("cuMemAlloc failed with CUDA_ERROR_OUT_OF_MEMORY ..."). */
#define KILN__CU(fn, args)                                                                         \
  do {                                                                                             \
    CUresult kiln__rc = kiln__driver.fn args;                                                      \
    if (KILN__UNLIKELY(kiln__rc != CUDA_SUCCESS)) return kiln__cuda_fail("cu" #fn, (int)kiln__rc); \
  } while (0)

#endif
