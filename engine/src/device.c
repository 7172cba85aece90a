/* Devices, their primary contexts and default pools; the current device of each thread. */
#include "device.h"
#include "dup.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static pthread_mutex_t kiln__devices_lock = PTHREAD_MUTEX_INITIALIZER;
static kiln__device **kiln__devices; /* one per ordinal, made on first use, never freed */
static pid_t kiln__devices_pid;      /* the process that set them up (a fork's child did not) */
static int kiln__n_devices = -1;

/* Like the CUDA runtime's, the current device is per thread. */
static _Thread_local int kiln__current;

static kiln_status kiln__device_count_locked(void) {
  if (kiln__n_devices >= 0) return KILN_OK;
  int n = 0;
  KILN__CU(DeviceGetCount, (&n));
  kiln__devices = calloc((size_t)(n ? n : 1), sizeof *kiln__devices);
  if (!kiln__devices) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for devices");
  __atomic_store_n(&kiln__n_devices, n, __ATOMIC_RELEASE);
  return KILN_OK;
}

kiln_status kiln_device_count(int *count) {
  KILN__NEED(count);
  *count = 0;
  kiln_status s = kiln__driver_load();
  if (s == KILN_ERROR_NO_DEVICE) {
    kiln__clear_error();
    return KILN_OK;
  }
  if (s) return s;
  pthread_mutex_lock(&kiln__devices_lock);
  s = kiln__device_count_locked();
  if (!s) *count = kiln__n_devices;
  pthread_mutex_unlock(&kiln__devices_lock);
  if (!s) kiln__clear_error();
  return s;
}

static kiln_status kiln__read_info(CUdevice dev, kiln_device_info *info) {
  memset(info, 0, sizeof *info);
  KILN__CU(DeviceGetName, (info->name, (int)sizeof info->name - 1, dev));
  KILN__CU(DeviceTotalMem, (&info->total_memory, dev));
  struct {
    CUdevice_attribute attr;
    int *out;
  } attrs[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, &info->major},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, &info->minor},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, &info->multiprocessors},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, &info->max_threads_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_X, &info->max_block[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Y, &info->max_block[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_BLOCK_DIM_Z, &info->max_block[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, &info->max_grid[0]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Y, &info->max_grid[1]},
      {CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_Z, &info->max_grid[2]},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK, &info->max_shared_per_block},
      {CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, &info->max_shared_per_block_optin},
  };
  for (size_t i = 0; i < KILN__COUNT(attrs); i++)
    KILN__CU(DeviceGetAttribute, (attrs[i].out, attrs[i].attr, dev));
  return KILN_OK;
}

static kiln_status kiln__check_ordinal(int device) {
  kiln_status s = kiln__driver_load();
  if (s) return s;
  s = kiln__device_count_locked();
  if (s) return s;
  if (kiln__n_devices == 0)
    return kiln__fail(KILN_ERROR_NO_DEVICE, "the driver found no CUDA device");
  if (device < 0 || device >= kiln__n_devices)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; there %s %d (0 to %d)", device,
                      kiln__n_devices == 1 ? "is" : "are", kiln__n_devices, kiln__n_devices - 1);
  return KILN_OK;
}

/* Sets up device `ordinal` once: its info and its retained primary context. */
static kiln_status kiln__device_setup(int ordinal, kiln__device **out) {
  if (ordinal < 0) /* before the driver is opened */
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      ordinal);
  pthread_mutex_lock(&kiln__devices_lock);
  kiln_status s = kiln__check_ordinal(ordinal);
  if (!s && !kiln__devices[ordinal]) {
    kiln__device *d = calloc(1, sizeof *d);
    int pools = 0;
    if (!d) s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for a device");
    if (!s) {
      d->ordinal = ordinal;
      CUresult rc = kiln__driver.DeviceGet(&d->dev, ordinal);
      if (rc) s = kiln__cuda_fail("cuDeviceGet", rc);
    }
    if (!s) s = kiln__read_info(d->dev, &d->info);
    if (!s) {
      CUresult rc = kiln__driver.DeviceGetAttribute(
          &pools, CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, d->dev);
      d->has_pools = rc == CUDA_SUCCESS && pools;
      int pageable = 0;
      rc = kiln__driver.DeviceGetAttribute(&pageable, CU_DEVICE_ATTRIBUTE_PAGEABLE_MEMORY_ACCESS,
                                           d->dev);
      d->pageable_access = rc == CUDA_SUCCESS && pageable;
      rc = kiln__driver.DevicePrimaryCtxRetain(&d->ctx, d->dev);
      if (rc) s = kiln__cuda_fail("cuDevicePrimaryCtxRetain", rc);
    }
    if (!s && d->has_pools &&
        kiln__driver.DeviceGetDefaultMemPool(&d->pool, d->dev) == CUDA_SUCCESS) {
      /* By default the pool hands freed memory back to the driver at every synchronize, and
       * the next allocation pays cuMemAlloc again; kept, it is reused at once. */
      cuuint64_t keep = UINT64_MAX;
      kiln__driver.MemPoolSetAttribute(d->pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep);
    }
    if (s) {
      free(d);
    } else {
      __atomic_store_n(&kiln__devices_pid, getpid(), __ATOMIC_RELEASE);
      __atomic_store_n(&kiln__devices[ordinal], d, __ATOMIC_RELEASE);
    }
  }
  if (!s) *out = kiln__devices[ordinal];
  pthread_mutex_unlock(&kiln__devices_lock);
  return s;
}

kiln_status kiln__device_enter(kiln__device **out) {
  /* Devices are never freed once made, so reading the slot without the lock is safe. */
  kiln__device *d = NULL;
  if (__atomic_load_n(&kiln__n_devices, __ATOMIC_ACQUIRE) > kiln__current)
    d = __atomic_load_n(&kiln__devices[kiln__current], __ATOMIC_ACQUIRE);
  if (KILN__UNLIKELY(!d)) {
    kiln_status s = kiln__device_setup(kiln__current, &d);
    if (s) return s;
  }
  CUcontext cur = NULL;
  KILN__CU(CtxGetCurrent, (&cur));
  if (KILN__UNLIKELY(cur != d->ctx)) KILN__CU(CtxSetCurrent, (d->ctx));
  *out = d;
  return KILN_OK;
}

kiln_status kiln__device_visit(int ordinal, kiln__device **out) {
  kiln__device *d = NULL;
  if (ordinal >= 0 && __atomic_load_n(&kiln__n_devices, __ATOMIC_ACQUIRE) > ordinal)
    d = __atomic_load_n(&kiln__devices[ordinal], __ATOMIC_ACQUIRE);
  if (!d) {
    kiln_status s = kiln__device_setup(ordinal, &d);
    if (s) return s;
  }
  CUcontext cur = NULL;
  KILN__CU(CtxGetCurrent, (&cur));
  if (cur != d->ctx) KILN__CU(CtxSetCurrent, (d->ctx));
  *out = d;
  return KILN_OK;
}

int kiln__device_count_known(void) { return __atomic_load_n(&kiln__n_devices, __ATOMIC_ACQUIRE); }

kiln_status kiln__device_capability(int *major, int *minor) {
  /* A device set up already read it (devices are never freed once made): a repeated
   * SourceModule asks this each time, so without a lock or a driver call. */
  int current = kiln__current;
  if (current >= 0 && __atomic_load_n(&kiln__n_devices, __ATOMIC_ACQUIRE) > current) {
    const kiln__device *d = __atomic_load_n(&kiln__devices[current], __ATOMIC_ACQUIRE);
    if (d) {
      *major = d->info.major;
      *minor = d->info.minor;
      return KILN_OK;
    }
  }
  kiln_status s = kiln__driver_load();
  if (s) return s;
  pthread_mutex_lock(&kiln__devices_lock);
  s = kiln__check_ordinal(kiln__current);
  CUdevice dev = 0;
  if (!s) {
    CUresult rc = kiln__driver.DeviceGet(&dev, kiln__current);
    if (!rc)
      rc =
          kiln__driver.DeviceGetAttribute(major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
    if (!rc)
      rc =
          kiln__driver.DeviceGetAttribute(minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
    if (rc) s = kiln__cuda_fail("cuDeviceGetAttribute", rc);
  }
  pthread_mutex_unlock(&kiln__devices_lock);
  return s;
}

kiln_status kiln_device_get_info(int device, kiln_device_info *out) {
  KILN__NEED(out);
  kiln__device *d;
  kiln_status s = kiln__device_setup(device, &d);
  if (s) return s;
  *out = d->info;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_device_set_current(int device) {
  if (device < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      device);
  pthread_mutex_lock(&kiln__devices_lock);
  kiln_status s = kiln__check_ordinal(device);
  pthread_mutex_unlock(&kiln__devices_lock);
  if (s) return s;
  kiln__current = device;
  kiln__clear_error();
  return KILN_OK;
}

int kiln_device_current(void) { return kiln__current; }

void kiln__device_switch(int ordinal) { kiln__current = ordinal; }

kiln_status kiln__device_handle(int device, CUdevice *out) {
  if (device < 0)
    return kiln__fail(KILN_ERROR_INVALID, "device %d does not exist; devices are numbered from 0",
                      device);
  pthread_mutex_lock(&kiln__devices_lock);
  kiln_status s = kiln__check_ordinal(device);
  pthread_mutex_unlock(&kiln__devices_lock);
  if (s) return s;
  KILN__CU(DeviceGet, (out, device));
  return KILN_OK;
}

kiln_status kiln_device_get_attribute(int device, int attribute, int *value) {
  KILN__NEED(value);
  *value = 0;
  if (attribute < 0 || attribute >= CU_DEVICE_ATTRIBUTE_MAX)
    return kiln__fail(KILN_ERROR_INVALID,
                      "device attribute %d is not a CUdevice_attribute (1 to %d in the CUDA %d.%d "
                      "headers kiln was built with)",
                      attribute, CU_DEVICE_ATTRIBUTE_MAX - 1, CUDA_VERSION / 1000,
                      CUDA_VERSION % 1000 / 10);
  CUdevice dev;
  kiln_status s = kiln__device_handle(device, &dev);
  if (s) return s;
  CUresult rc = kiln__driver.DeviceGetAttribute(value, (CUdevice_attribute)attribute, dev);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID, "device attribute %d is not one this driver knows",
                      attribute);
  if (rc) return kiln__cuda_fail("cuDeviceGetAttribute", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_device_pci_bus_id(int device, char *out, size_t cap) {
  if (!out || cap < 13)
    return kiln__fail(KILN_ERROR_INVALID, "a PCI bus id needs a buffer of 13 bytes or more");
  out[0] = '\0';
  CUdevice dev;
  kiln_status s = kiln__device_handle(device, &dev);
  if (s) return s;
  KILN__CU(DeviceGetPCIBusId, (out, (int)(cap > 64 ? 64 : cap), dev));
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_device_from_pci_bus_id(const char *pci_bus_id, int *device) {
  KILN__NEED(device);
  *device = -1;
  if (!pci_bus_id || !*pci_bus_id)
    return kiln__fail(KILN_ERROR_INVALID, "the PCI bus id is empty; it reads like 0000:01:00.0");
  kiln_status s = kiln__driver_load();
  if (s) return s;
  CUdevice dev;
  CUresult rc = kiln__driver.DeviceGetByPCIBusId(&dev, pci_bus_id);
  if (rc == CUDA_ERROR_INVALID_VALUE || rc == CUDA_ERROR_INVALID_DEVICE)
    return kiln__fail(KILN_ERROR_INVALID, "no CUDA device has the PCI bus id '%s'", pci_bus_id);
  if (rc) return kiln__cuda_fail("cuDeviceGetByPCIBusId", (int)rc);
  /* A CUdevice is a handle, not promised to be the ordinal: find the ordinal it is. */
  pthread_mutex_lock(&kiln__devices_lock);
  s = kiln__device_count_locked();
  int n = s ? 0 : kiln__n_devices;
  pthread_mutex_unlock(&kiln__devices_lock);
  if (s) return s;
  for (int i = 0; i < n; i++) {
    CUdevice d;
    if (kiln__driver.DeviceGet(&d, i) == CUDA_SUCCESS && d == dev) {
      *device = i;
      kiln__clear_error();
      return KILN_OK;
    }
  }
  return kiln__fail(KILN_ERROR_INVALID, "no CUDA device has the PCI bus id '%s'", pci_bus_id);
}

kiln_status kiln_synchronize_all(void) {
  kiln_status first = KILN_OK;
  char *why = NULL;
  int n = __atomic_load_n(&kiln__n_devices, __ATOMIC_ACQUIRE);
  /* A fork's child inherits the devices' slots but not their contexts, which it cannot use. */
  if (__atomic_load_n(&kiln__devices_pid, __ATOMIC_ACQUIRE) != getpid()) n = 0;
  for (int i = 0; i < n; i++) {
    kiln__device *d = __atomic_load_n(&kiln__devices[i], __ATOMIC_ACQUIRE);
    if (!d) continue;
    kiln_status s = kiln__device_visit(i, &d);
    if (!s) {
      CUresult rc = kiln__driver.CtxSynchronize();
      if (rc) s = kiln__cuda_fail("cuCtxSynchronize", rc);
    }
    if (s && !first) {
      first = s;
      why = kiln__dup_str(kiln_last_error());
    }
  }
  /* Back in the current device's context, which a visit left. */
  kiln__device *current;
  if (kiln__current >= 0 && kiln__current < n &&
      __atomic_load_n(&kiln__devices[kiln__current], __ATOMIC_ACQUIRE))
    (void)kiln__device_enter(&current);
  if (first) kiln__fail(first, "%s", why ? why : "a device failed to synchronize");
  else kiln__clear_error();
  free(why);
  return first;
}

kiln_status kiln_synchronize(void) {
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) return s;
  KILN__CU(CtxSynchronize, ());
  kiln__clear_error();
  return KILN_OK;
}
