/* A kernel's attributes and cache preference on the current device, through the library API
 * (cuKernelGetAttribute and friends), which takes the device rather than a context. */
#include "module.h"

/* f loaded and ready on the current device, which *d is. */
static kiln_status kiln__function_on_device(kiln_function *f, kiln__device **d) {
  kiln_status s = kiln__device_enter(d);
  if (!s) s = kiln__module_function_ready(f, *d);
  return s;
}

static kiln_status kiln__check_attribute(int attribute) {
  if (attribute >= 0 && attribute < CU_FUNC_ATTRIBUTE_MAX) return KILN_OK;
  return kiln__fail(KILN_ERROR_INVALID,
                    "function attribute %d is not a CUfunction_attribute (0 to %d)", attribute,
                    CU_FUNC_ATTRIBUTE_MAX - 1);
}

kiln_status kiln_function_get_attribute(kiln_function *f, int attribute, int *value) {
  KILN__NEED(f);
  KILN__NEED(value);
  *value = 0;
  kiln__device *d;
  kiln_status s = kiln__check_attribute(attribute);
  if (s || (s = kiln__function_on_device(f, &d))) return s;
  CUresult rc =
      kiln__driver.KernelGetAttribute(value, (CUfunction_attribute)attribute, f->handle, d->dev);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID, "function attribute %d is not one this driver can read",
                      attribute);
  if (rc) return kiln__cuda_fail("cuKernelGetAttribute", (int)rc);
  kiln__clear_error();
  return KILN_OK;
}

/* What a program may set; the rest describe the compiled kernel. */
static int kiln__settable(int attribute) {
  switch (attribute) {
  case CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES:
  case CU_FUNC_ATTRIBUTE_PREFERRED_SHARED_MEMORY_CARVEOUT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_WIDTH:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_HEIGHT:
  case CU_FUNC_ATTRIBUTE_REQUIRED_CLUSTER_DEPTH:
  case CU_FUNC_ATTRIBUTE_NON_PORTABLE_CLUSTER_SIZE_ALLOWED:
  case CU_FUNC_ATTRIBUTE_CLUSTER_SCHEDULING_POLICY_PREFERENCE: return 1;
  default: return 0;
  }
}

kiln_status kiln_function_set_attribute(kiln_function *f, int attribute, int value) {
  KILN__NEED(f);
  kiln__device *d;
  kiln_status s = kiln__check_attribute(attribute);
  if (s) return s;
  if (!kiln__settable(attribute))
    return kiln__fail(KILN_ERROR_INVALID,
                      "function attribute %d is read-only; a program sets 8 (max dynamic shared "
                      "bytes), 9 (shared memory carveout) and the cluster attributes 11 to 15",
                      attribute);
  if ((s = kiln__function_on_device(f, &d))) return s;
  CUresult rc =
      kiln__driver.KernelSetAttribute((CUfunction_attribute)attribute, value, f->handle, d->dev);
  if (rc == CUDA_ERROR_INVALID_VALUE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "function attribute %d cannot be set to %d for kernel %s on device %d: "
                      "the value is out of its range",
                      attribute, value, f->kernel->plain, d->ordinal);
  if (rc) return kiln__cuda_fail("cuKernelSetAttribute", (int)rc);
  /* The launch checks shared memory against what the kernel is opted in to: this is that. */
  if (attribute == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)
    f->dynamic_shared_allowed = value;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_function_set_cache_config(kiln_function *f, int config) {
  KILN__NEED(f);
  if (config < CU_FUNC_CACHE_PREFER_NONE || config > CU_FUNC_CACHE_PREFER_EQUAL)
    return kiln__fail(KILN_ERROR_INVALID,
                      "cache config %d is not a CUfunc_cache (0 none, 1 shared, 2 L1, 3 equal)",
                      config);
  kiln__device *d;
  kiln_status s = kiln__function_on_device(f, &d);
  if (s) return s;
  KILN__CU(KernelSetCacheConfig, (f->handle, (CUfunc_cache)config, d->dev));
  kiln__clear_error();
  return KILN_OK;
}
