/* Memory and events shared with another process: the driver's IPC handles, checked so that
 * what CUDA refuses with a bare CUresult (pool memory, an address inside an allocation, a
 * handle opened by the process that made it) is a sentence. */
#include "device.h"

#include <inttypes.h>
#include <string.h>

_Static_assert(KILN_IPC_HANDLE_SIZE == CU_IPC_HANDLE_SIZE &&
                   sizeof(kiln_ipc_mem_handle) == sizeof(CUipcMemHandle) &&
                   sizeof(kiln_ipc_event_handle) == sizeof(CUipcEventHandle),
               "kiln's IPC handles are the driver's bytes");
_Static_assert(KILN_IPC_LAZY_ENABLE_PEER_ACCESS == CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS,
               "kiln's IPC flag is the driver's");

/* The current device's context, with the IPC calls this driver has. */
static kiln_status kiln__ipc_enter(void) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (!kiln__driver.IpcGetMemHandle || !kiln__driver.IpcOpenMemHandle ||
      !kiln__driver.IpcCloseMemHandle || !kiln__driver.IpcGetEventHandle ||
      !kiln__driver.IpcOpenEventHandle)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver has no cuIpc* calls: it cannot share "
                                       "memory or events with another process");
  return KILN_OK;
}

/* Why memory at p (of the current context) has no IPC handle, when the driver can say. */
static kiln_status kiln__ipc_not_shareable(kiln_deviceptr p) {
  CUmemoryPool pool = NULL;
  CUresult rc =
      kiln__driver.PointerGetAttribute(&pool, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, (CUdeviceptr)p);
  if (rc == CUDA_SUCCESS && pool)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is memory of a stream-ordered pool (kiln's arrays are "
                      "allocated there), which has no IPC handle; share memory from "
                      "kiln_mem_alloc (mem_alloc, or an array made with allocator=mem_alloc)",
                      (uint64_t)p);
  return kiln__fail(KILN_ERROR_INVALID,
                    "0x%" PRIx64 " is not memory cuMemAlloc made (managed or pool memory, "
                    "say), which alone has an IPC handle; share memory from kiln_mem_alloc",
                    (uint64_t)p);
}

kiln_status kiln_ipc_mem_get_handle(kiln_deviceptr p, kiln_ipc_mem_handle *out) {
  if (!out) return kiln__fail(KILN_ERROR_INVALID, "no place for the IPC handle (out is NULL)");
  memset(out, 0, sizeof *out);
  if (!p) return kiln__fail(KILN_ERROR_INVALID, "address 0 is no allocation to share");
  kiln_status s = kiln__ipc_enter();
  if (s) return s;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUresult rc = kiln__driver.MemGetAddressRange(&base, &size, (CUdeviceptr)p);
  if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_NOT_FOUND)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is not device memory of the current context: an IPC handle "
                      "shares an allocation of the current device",
                      (uint64_t)p);
  if (rc) return kiln__cuda_fail("cuMemGetAddressRange", (int)rc);
  /* The driver would name the whole allocation and the other process would map its start:
   * an address inside it would be silently another place there. */
  if (base != (CUdeviceptr)p)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is %" PRIu64 " bytes into its allocation (of %zu bytes at "
                      "0x%" PRIx64 "); an IPC handle names a whole allocation: share its start "
                      "and send the offset beside the handle",
                      (uint64_t)p, (uint64_t)(p - base), size, (uint64_t)base);
  int capable = 1;
  rc = kiln__driver.PointerGetAttribute(&capable, CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE,
                                        (CUdeviceptr)p);
  if (rc == CUDA_SUCCESS && !capable) return kiln__ipc_not_shareable(p);
  CUipcMemHandle h;
  rc = kiln__driver.IpcGetMemHandle(&h, (CUdeviceptr)p);
  if (rc == CUDA_ERROR_INVALID_VALUE) return kiln__ipc_not_shareable(p);
  if (rc) return kiln__cuda_fail("cuIpcGetMemHandle", (int)rc);
  memcpy(out->bytes, h.reserved, sizeof out->bytes);
  kiln__clear_error();
  return KILN_OK;
}

/* The sentence a failed open adds to the driver's: the causes a program can mend. */
static void kiln__ipc_open_hint(CUresult rc, const char *what) {
  if (rc == CUDA_ERROR_INVALID_CONTEXT)
    kiln__fail_append("; the %s was made in this process, and CUDA opens a handle only in "
                      "another process (here, use the original)",
                      what);
  else if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_INVALID_HANDLE)
    kiln__fail_append("; the bytes are not a %s the driver made, or what it names is gone "
                      "(freed, or its process ended)",
                      what);
}

kiln_status kiln_ipc_mem_open(const kiln_ipc_mem_handle *handle, unsigned flags,
                              kiln_deviceptr *out, size_t *size) {
  if (out) *out = 0;
  if (size) *size = 0;
  if (!handle || !out)
    return kiln__fail(KILN_ERROR_INVALID, "opening an IPC memory handle needs the handle and a "
                                          "place for the address");
  if (flags & ~KILN_IPC_LAZY_ENABLE_PEER_ACCESS)
    return kiln__fail(KILN_ERROR_INVALID,
                      "IPC memory flags are 0 or KILN_IPC_LAZY_ENABLE_PEER_ACCESS (1); 0x%x has "
                      "others",
                      flags);
  kiln_status s = kiln__ipc_enter();
  if (s) return s;
  CUipcMemHandle h;
  memcpy(h.reserved, handle->bytes, sizeof h.reserved);
  CUdeviceptr p = 0;
  CUresult rc = kiln__driver.IpcOpenMemHandle(&p, h, flags);
  if (rc) {
    s = kiln__cuda_fail("cuIpcOpenMemHandle", (int)rc);
    kiln__ipc_open_hint(rc, "memory handle");
    return s;
  }
  CUdeviceptr base = 0;
  /* The size is a courtesy: a driver that cannot tell it leaves 0, and the memory is still
   * mapped. */
  if (size && kiln__driver.MemGetAddressRange(&base, size, p) != CUDA_SUCCESS) *size = 0;
  *out = (kiln_deviceptr)p;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_ipc_mem_close(kiln_deviceptr p) {
  if (!p) return kiln__fail(KILN_ERROR_INVALID, "address 0 is no memory opened from a handle");
  kiln_status s = kiln__ipc_enter();
  if (s) return s;
  CUresult rc = kiln__driver.IpcCloseMemHandle((CUdeviceptr)p);
  if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_INVALID_HANDLE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "0x%" PRIx64 " is not memory opened from an IPC handle in the current "
                      "device's context (closed already, or opened on another device)",
                      (uint64_t)p);
  if (rc) return kiln__cuda_fail("cuIpcCloseMemHandle", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_ipc_event_get_handle(kiln_event event, kiln_ipc_event_handle *out) {
  if (!out) return kiln__fail(KILN_ERROR_INVALID, "no place for the IPC handle (out is NULL)");
  memset(out, 0, sizeof *out);
  if (!event) return kiln__fail(KILN_ERROR_INVALID, "the event is NULL");
  kiln_status s = kiln__ipc_enter();
  if (s) return s;
  CUipcEventHandle h;
  CUresult rc = kiln__driver.IpcGetEventHandle(&h, event);
  if (rc) {
    /* The driver's refusal of an event made without the flags is a bare code. */
    s = kiln__cuda_fail("cuIpcGetEventHandle", (int)rc);
    kiln__fail_append("; an event shared with another process is made with "
                      "KILN_EVENT_INTERPROCESS | KILN_EVENT_DISABLE_TIMING");
    return s;
  }
  memcpy(out->bytes, h.reserved, sizeof out->bytes);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_ipc_event_open(const kiln_ipc_event_handle *handle, kiln_event *out) {
  if (out) *out = NULL;
  if (!handle || !out)
    return kiln__fail(KILN_ERROR_INVALID, "opening an IPC event handle needs the handle and a "
                                          "place for the event");
  kiln_status s = kiln__ipc_enter();
  if (s) return s;
  CUipcEventHandle h;
  memcpy(h.reserved, handle->bytes, sizeof h.reserved);
  CUevent e = NULL;
  CUresult rc = kiln__driver.IpcOpenEventHandle(&e, h);
  if (rc) {
    s = kiln__cuda_fail("cuIpcOpenEventHandle", (int)rc);
    kiln__ipc_open_hint(rc, "event handle");
    return s;
  }
  *out = e;
  kiln__clear_error();
  return KILN_OK;
}
