/* Peer access between devices and copies between them: whether one device can reach
 * another's memory, that access granted to the current device's primary context and taken
 * back, and cuMemcpyPeer with each side checked in its own device's context. */
#include "peer.h"

static kiln_status kiln__peer_calls(void) {
  if (kiln__driver.DeviceCanAccessPeer && kiln__driver.CtxEnablePeerAccess &&
      kiln__driver.CtxDisablePeerAccess && kiln__driver.MemcpyPeer && kiln__driver.MemcpyPeerAsync)
    return KILN_OK;
  return kiln__fail(KILN_ERROR_CUDA,
                    "this CUDA driver has no peer access calls "
                    "(cuDeviceCanAccessPeer, cuCtxEnablePeerAccess, cuMemcpyPeer)");
}

kiln_status kiln_device_can_access_peer(int device, int peer, int *can) {
  KILN__NEED(can);
  *can = 0;
  CUdevice a, b;
  kiln_status s = kiln__device_handle(device, &a);
  if (s || (s = kiln__device_handle(peer, &b)) || (s = kiln__peer_calls())) return s;
  /* The driver answers 0 for a device and itself; said here without asking. */
  if (device != peer) KILN__CU(DeviceCanAccessPeer, (can, a, b));
  kiln__clear_error();
  return KILN_OK;
}

/* The primary context of device peer (set up if need be), while the current device's context
 * stays current. */
static kiln_status kiln__peer_context(int peer, CUcontext *out) {
  if (peer < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      peer);
  kiln__device *d, *p;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  if (peer == d->ordinal)
    return kiln__fail(KILN_ERROR_INVALID,
                      "device %d is current: a context is not its own peer (it reaches its own "
                      "memory always)",
                      peer);
  if ((s = kiln__device_visit(peer, &p)) || (s = kiln__device_enter(&d))) return s;
  *out = p->ctx;
  return kiln__peer_calls();
}

kiln_status kiln_context_enable_peer_access(int peer, unsigned flags) {
  if (flags)
    return kiln__fail(KILN_ERROR_INVALID,
                      "peer access takes flags 0 (the driver has no others), "
                      "not 0x%x",
                      flags);
  CUcontext ctx = NULL;
  kiln_status s = kiln__peer_context(peer, &ctx);
  if (s) return s;
  int current = kiln_device_current();
  CUresult rc = kiln__driver.CtxEnablePeerAccess(ctx, 0);
  if (rc == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED || rc == CUDA_ERROR_INVALID_DEVICE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "device %d cannot be given access to device %d's memory (the driver says "
                      "so: kiln_device_can_access_peer(%d, %d) is 0)",
                      current, peer, current, peer);
  if (rc) {
    s = kiln__cuda_fail("cuCtxEnablePeerAccess", (int)rc);
    if (rc == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED)
      kiln__fail_append("; device %d has access to device %d's memory already", current, peer);
    return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_context_disable_peer_access(int peer) {
  CUcontext ctx = NULL;
  kiln_status s = kiln__peer_context(peer, &ctx);
  if (s) return s;
  CUresult rc = kiln__driver.CtxDisablePeerAccess(ctx);
  if (rc) {
    s = kiln__cuda_fail("cuCtxDisablePeerAccess", (int)rc);
    if (rc == CUDA_ERROR_PEER_ACCESS_NOT_ENABLED)
      kiln__fail_append("; device %d was not given access to device %d's memory",
                        kiln_device_current(), peer);
    return s;
  }
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln__peer_check(int device, kiln_deviceptr p, size_t nbytes, const char *what,
                             CUcontext *ctx) {
  kiln__device *d;
  kiln_status s = kiln__device_visit(device, &d);
  if (!s && nbytes) s = kiln__memory_check_range(p, nbytes, what);
  if (!s && ctx) *ctx = d->ctx;
  return s;
}

static kiln_status kiln__memcpy_peer(kiln_deviceptr dst, int dst_device, kiln_deviceptr src,
                                     int src_device, size_t nbytes, kiln_stream stream, int async) {
  kiln__stream_note_work();
  if (dst_device < 0 || src_device < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      dst_device < 0 ? dst_device : src_device);
  CUcontext dst_ctx = NULL, src_ctx = NULL;
  kiln__device *d;
  kiln_status s = kiln__peer_check(dst_device, dst, nbytes, "destination", &dst_ctx);
  if (!s) s = kiln__peer_check(src_device, src, nbytes, "source", &src_ctx);
  /* Back in the current device's context whatever the checks found. */
  kiln_status back = kiln__device_enter(&d);
  if (s || (s = back) || (s = kiln__peer_calls()) || nbytes == 0) return kiln__done(s);
  if (async)
    KILN__CU(MemcpyPeerAsync,
             ((CUdeviceptr)dst, dst_ctx, (CUdeviceptr)src, src_ctx, nbytes, stream));
  else KILN__CU(MemcpyPeer, ((CUdeviceptr)dst, dst_ctx, (CUdeviceptr)src, src_ctx, nbytes));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_memcpy_peer(kiln_deviceptr dst, int dst_device, kiln_deviceptr src, int src_device,
                             size_t nbytes) {
  return kiln__memcpy_peer(dst, dst_device, src, src_device, nbytes, NULL, 0);
}

kiln_status kiln_memcpy_peer_async(kiln_deviceptr dst, int dst_device, kiln_deviceptr src,
                                   int src_device, size_t nbytes, kiln_stream stream) {
  return kiln__memcpy_peer(dst, dst_device, src, src_device, nbytes, stream, 1);
}
