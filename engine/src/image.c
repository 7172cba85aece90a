/* Prebuilt code: a CUBIN, a fatbin or PTX given as bytes. Kernels and their parameters come
 * from the PTX when there is PTX; a binary is asked of the driver, which knows each
 * parameter's size, and the mangled names say the rest. */
#include "module.h"

#include "dup.h"
#include "file.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KILN__FATBIN_MAGIC 0xBA55ED50u

typedef enum kiln__image_kind {
  KILN__PTX,
  KILN__CUBIN,
  KILN__FATBIN,
  KILN__UNKNOWN
} kiln__image_kind;

static kiln__image_kind kiln__image_kind_of(const unsigned char *p, size_t n) {
  if (n >= 4 && memcmp(p,
                       "\x7f"
                       "ELF",
                       4) == 0)
    return KILN__CUBIN;
  if (n >= 4 && ((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
                 (uint32_t)p[3] << 24) == KILN__FATBIN_MAGIC)
    return KILN__FATBIN;
  if (memmem(p, n, ".version", 8) && memmem(p, n, ".target", 7)) return KILN__PTX;
  return KILN__UNKNOWN;
}

/* "sm_80" from the PTX's .target line; 0 when it names none. */
static int kiln__ptx_target(const char *ptx, char *arch, size_t cap) {
  const char *t = strstr(ptx, ".target");
  if (!t) return 0;
  t += 7;
  while (*t == ' ' || *t == '\t') t++;
  if (strncmp(t, "sm_", 3) != 0) return 0;
  int n = 0, digits = 0;
  const char *d = t + 3;
  while (*d >= '0' && *d <= '9' && digits < 4) n = n * 10 + (*d++ - '0'), digits++;
  if (digits < 2) return 0;
  int suffix = *d == 'a' || *d == 'f';
  snprintf(arch, cap, "sm_%d%s", n, suffix ? (*d == 'a' ? "a" : "f") : "");
  return n;
}

static kiln_status kiln__from_ptx(const char *image, size_t size, kiln_module **out) {
  const char *nul = memchr(image, '\0', size);
  if (nul) size = (size_t)(nul - image); /* PTX is often stored with its NUL */
  kiln__code code = {0};
  kiln__kernel *kernels = NULL;
  int n = 0;
  if (!(code.ptx = kiln__dup_range(image, size)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the PTX");
  code.ptx_size = size;
  code.arch_num = kiln__ptx_target(code.ptx, code.arch, sizeof code.arch);
  if (!code.arch_num) {
    kiln__compile_free_code(&code);
    return kiln__fail(KILN_ERROR_PTX, "the PTX has no '.target sm_XY' line");
  }
  kiln_status s = kiln__ptx_parse(code.ptx, code.ptx_size, &kernels, &n);
  if (s) {
    kiln__compile_free_code(&code);
    return s;
  }
  kiln__cached c = {.code = code, .kernels = kernels, .n_kernels = n};
  return kiln__module_adopt(&c, out);
}

/* Each kernel of a loaded binary, with parameters as the driver reports them. */
static kiln_status kiln__describe(CUlibrary lib, kiln__kernel **out, int *n_out) {
  if (!kiln__driver.LibraryGetKernelCount || !kiln__driver.LibraryEnumerateKernels ||
      !kiln__driver.KernelGetName || !kiln__driver.KernelGetParamInfo)
    return kiln__fail(KILN_ERROR_CUDA, "this CUDA driver is older than 12.4 and cannot list "
                                       "the kernels of a CUBIN or fatbin; load the PTX instead");
  unsigned count = 0;
  KILN__CU(LibraryGetKernelCount, (&count, lib));
  CUkernel *handles = calloc(count ? count : 1, sizeof *handles);
  kiln__kernel *kernels = calloc(count ? count : 1, sizeof *kernels);
  if (!handles || !kernels) {
    free(handles);
    free(kernels);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory listing kernels");
  }
  kiln_status s = KILN_OK;
  CUresult rc = count ? kiln__driver.LibraryEnumerateKernels(handles, count, lib) : CUDA_SUCCESS;
  if (rc) s = kiln__cuda_fail("cuLibraryEnumerateKernels", (int)rc);
  int n = 0;
  for (unsigned i = 0; i < count && !s; i++) {
    kiln__kernel *kernel = &kernels[i];
    n = (int)i + 1;
    const char *name = NULL;
    if ((rc = kiln__driver.KernelGetName(&name, handles[i]))) {
      s = kiln__cuda_fail("cuKernelGetName", (int)rc);
      break;
    }
    if (!(kernel->name = kiln__dup_str(name))) {
      s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory listing kernels");
      break;
    }
    for (size_t k = 0;; k++) {
      size_t offset = 0, bytes = 0;
      rc = kiln__driver.KernelGetParamInfo(handles[i], k, &offset, &bytes);
      if (rc == CUDA_ERROR_INVALID_VALUE) break; /* past the last parameter */
      if (rc) {
        s = kiln__cuda_fail("cuKernelGetParamInfo", (int)rc);
        break;
      }
      kiln_param *grown = realloc(kernel->params, (k + 1) * sizeof *grown);
      if (!grown) {
        s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory listing kernels");
        break;
      }
      kernel->params = grown;
      kiln_param *p = &kernel->params[k];
      p->size = (unsigned)bytes;
      p->cls = bytes == 1   ? KILN_PARAM_B8
               : bytes == 2 ? KILN_PARAM_B16
               : bytes == 4 ? KILN_PARAM_B32
               : bytes == 8 ? KILN_PARAM_B64
                            : KILN_PARAM_AGGREGATE;
      /* The largest power of two (up to 16) that both the offset and the size allow. */
      unsigned align = 16;
      while (align > 1 && ((offset % align) || (bytes % align))) align /= 2;
      p->align = align;
      kernel->n_params = (int)k + 1;
    }
    kernel->by_size = 1;
    if (!s) s = kiln__ptx_refine(kernel, 1);
    const char *why = s ? NULL : kiln__ptx_check_kernel(kernel);
    if (why)
      s = kiln__fail(KILN_ERROR_CUDA,
                     "the driver describes kernel %s in a way kiln cannot call: %s", kernel->name,
                     why);
  }
  free(handles);
  if (s) {
    kiln__ptx_free_kernels(kernels, n);
    return s;
  }
  *out = kernels;
  *n_out = (int)count;
  return KILN_OK;
}

/* The driver loader's options for one load: the caller's, then the log buffers. */
typedef struct kiln__jit {
  CUjit_option keys[KILN__DRIVER_JIT_MAX + 4];
  void *values[KILN__DRIVER_JIT_MAX + 4];
  unsigned n;
  char *error_log; /* never NULL when there is a kiln__jit: a failed load says it */
} kiln__jit;

/* One load by the driver's loader; jit may be NULL (no options). */
static kiln_status kiln__load(CUlibrary *lib, const void *image, kiln__jit *jit) {
  CUresult rc =
      kiln__driver.LibraryLoadData(lib, image, jit ? jit->keys : NULL, jit ? jit->values : NULL,
                                   jit ? jit->n : 0, NULL, NULL, 0);
  if (!rc) return KILN_OK;
  kiln_status s = kiln__cuda_fail("cuLibraryLoadData", (int)rc);
  if (jit && jit->error_log[0]) kiln__fail_append("; the loader said: %s", jit->error_log);
  return s;
}

/* An image refused before the driver saw it: KILN_ERROR_INVALID with the driver's own
 * CUresult for it, CUDA_ERROR_INVALID_IMAGE, so that a caller reporting CUresults (PyCUDA's
 * LogicError) reports the refusal as the driver's would be. */
static kiln_status kiln__refuse_image(void) {
  kiln__set_cuda_result(CUDA_ERROR_INVALID_IMAGE);
  return KILN_ERROR_INVALID;
}

/* Why bytes that begin as an ELF file are no CUBIN the driver could load, or NULL: a CUBIN is
 * a 64-bit little-endian ELF file for EM_CUDA whose section headers lie within it. (The driver
 * may take any bytes and fail only when a kernel is asked for.) */
static const char *kiln__cubin_flaw(const unsigned char *p, size_t n) {
  if (n < 64) return "it is shorter than an ELF file's header (64 bytes)";
  if (p[4] != 2 || p[5] != 1) return "it is not a 64-bit little-endian ELF file";
  if ((p[18] | p[19] << 8) != 190) return "it is an ELF file for another machine than EM_CUDA";
  uint64_t shoff = 0;
  for (int i = 7; i >= 0; i--) shoff = shoff << 8 | p[40 + i];
  uint64_t entry = (uint64_t)(p[58] | p[59] << 8), count = (uint64_t)(p[60] | p[61] << 8);
  if (shoff > n || entry * count > n - shoff) return "its section headers lie past its end";
  return NULL;
}

static kiln_status kiln__from_binary(const void *image, size_t size, kiln__jit *jit,
                                     kiln_module **out) {
  const char *flaw =
      kiln__image_kind_of(image, size) == KILN__CUBIN ? kiln__cubin_flaw(image, size) : NULL;
  if (flaw) {
    kiln__fail(KILN_ERROR_INVALID, "the image begins as an ELF file but is no CUBIN: %s", flaw);
    return kiln__refuse_image();
  }
  kiln__device *d;
  kiln_status s = kiln__device_enter(&d);
  if (s) {
    kiln__fail_append(" (the kernels of a CUBIN or fatbin are read through the driver; PTX "
                      "needs no device)");
    return s;
  }
  kiln__code code = {0};
  if (!(code.cubin = kiln__dup_mem(image, size)))
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the CUBIN");
  code.cubin_size = size;
  CUlibrary lib = NULL;
  if ((s = kiln__load(&lib, code.cubin, jit))) {
    kiln__compile_free_code(&code);
    return s;
  }
  kiln__kernel *kernels = NULL;
  int n = 0;
  if ((s = kiln__describe(lib, &kernels, &n))) {
    kiln__driver.LibraryUnload(lib);
    kiln__compile_free_code(&code);
    return s;
  }
  kiln__cached c = {.code = code, .kernels = kernels, .n_kernels = n};
  if ((s = kiln__module_adopt(&c, out))) {
    kiln__driver.LibraryUnload(lib);
    return s;
  }
  (*out)->lib = lib;
  return KILN_OK;
}

kiln_status kiln_module_from_image(const void *image, size_t size, kiln_module **out) {
  KILN__NEED(out);
  *out = NULL;
  if (!image || !size) {
    kiln__fail(KILN_ERROR_INVALID, "the image is empty");
    return kiln__refuse_image();
  }
  const unsigned char *p = image;
  kiln_status s;
  switch (kiln__image_kind_of(p, size)) {
  case KILN__PTX: s = kiln__from_ptx(image, size, out); break;
  case KILN__CUBIN:
  case KILN__FATBIN: s = kiln__from_binary(image, size, NULL, out); break;
  default:
    kiln__fail(KILN_ERROR_INVALID,
               "the image is neither a CUBIN (ELF), a fatbin nor PTX text; it starts with "
               "bytes %02x %02x %02x %02x",
               p[0], size > 1 ? p[1] : 0, size > 2 ? p[2] : 0, size > 3 ? p[3] : 0);
    return kiln__refuse_image();
  }
  if (!s) kiln__clear_error();
  return s;
}

/* The driver may put off compiling PTX until a kernel is first asked for (lazy loading), and
 * a PyCUDA program learns of bad code from module_from_buffer: each kernel is asked for in the
 * current context now, so that the loader's failure is this call's. */
static kiln_status kiln__jit_resolve(kiln_module *m, const kiln__jit *jit) {
  for (int i = 0; i < m->n_kernels; i++) {
    CUkernel k = NULL;
    CUfunction f = NULL;
    CUresult rc = kiln__driver.LibraryGetKernel(&k, m->lib, m->kernels[i].name);
    if (!rc) rc = kiln__driver.KernelGetFunction(&f, k);
    if (rc) {
      kiln_status s = kiln__cuda_fail(k ? "cuKernelGetFunction" : "cuLibraryGetKernel", (int)rc);
      kiln__fail_append(" compiling kernel %s", m->kernels[i].plain);
      if (jit->error_log[0]) kiln__fail_append("; the loader said: %s", jit->error_log);
      return s;
    }
  }
  return KILN_OK;
}

kiln_status kiln_module_from_image_jit(const void *image, size_t size,
                                       const kiln_jit_option *options, int n_options,
                                       char *info_log, size_t info_size, char *error_log,
                                       size_t error_size, kiln_module **out) {
  KILN__NEED(out);
  *out = NULL;
  if (info_log && info_size) info_log[0] = '\0';
  if (error_log && error_size) error_log[0] = '\0';
  if (n_options < 0 || n_options > KILN__DRIVER_JIT_MAX || (n_options && !options))
    return kiln__fail(KILN_ERROR_INVALID, "%d loader options given; 0 to %d are taken", n_options,
                      KILN__DRIVER_JIT_MAX);
  kiln__jit jit = {.n = (unsigned)n_options};
  kiln_status checked =
      kiln__driver_jit_options(options, n_options, "loader", jit.keys, jit.values);
  if (checked) return checked;
  if (!image || !size) return kiln_module_from_image(image, size, out); /* says it is empty */
  /* The logs live as long as the module: a library loads into other contexts later (another
   * device, lazily) with the options of this load, the log buffers among them. Each holds its
   * caller's size, the last byte always the NUL (the sizes given the loader exclude it). */
  size_t cap = (size_t)1 << 20;
  size_t info_cap = info_log && info_size > 1 ? (info_size < cap ? info_size : cap) : 0;
  size_t error_cap = error_log && error_size > 1 ? (error_size < cap ? error_size : cap) : 4096;
  char *logs = calloc(1, info_cap + error_cap);
  if (!logs) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the loader's logs");
  jit.error_log = logs + info_cap;
  if (info_cap) {
    jit.keys[jit.n] = CU_JIT_INFO_LOG_BUFFER;
    jit.values[jit.n++] = logs;
    jit.keys[jit.n] = CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES;
    jit.values[jit.n++] = (void *)(uintptr_t)(info_cap - 1);
  }
  jit.keys[jit.n] = CU_JIT_ERROR_LOG_BUFFER;
  jit.values[jit.n++] = jit.error_log;
  jit.keys[jit.n] = CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES;
  jit.values[jit.n++] = (void *)(uintptr_t)(error_cap - 1);

  kiln_status s = KILN_OK;
  switch (kiln__image_kind_of(image, size)) {
  case KILN__PTX:
    if ((s = kiln__from_ptx(image, size, out))) break;
    kiln__device *d;
    if (!(s = kiln__device_enter(&d))) s = kiln__load(&(*out)->lib, (*out)->code.ptx, &jit);
    break;
  case KILN__CUBIN:
  case KILN__FATBIN: s = kiln__from_binary(image, size, &jit, out); break;
  default: free(logs); return kiln_module_from_image(image, size, out); /* says what they are not */
  }
  if (!s) s = kiln__jit_resolve(*out, &jit);
  if (info_cap) memcpy(info_log, logs, info_cap);
  if (error_log && error_size > 1) memcpy(error_log, jit.error_log, error_cap);
  if (s) {
    kiln_module_free(*out); /* its library unloaded first: then no loader writes the logs */
    *out = NULL;
    free(logs);
    return s;
  }
  (*out)->loader_logs = logs;
  kiln__clear_error();
  return KILN_OK;
}

kiln_status kiln_module_from_file(const char *path, kiln_module **out) {
  KILN__NEED(out);
  *out = NULL;
  if (!path) return kiln__fail(KILN_ERROR_INVALID, "the path is NULL");
  struct stat st;
  size_t n = 0;
  char *buf = kiln__file_read(path, (size_t)1 << 30, &st, &n);
  if (!buf) {
    if (errno == ENOMEM) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading %s", path);
    if (errno == EINVAL || errno == EISDIR)
      return kiln__fail(KILN_ERROR_INVALID, "%s cannot be read: it is not a regular file", path);
    return kiln__fail(KILN_ERROR_INVALID, "%s cannot be read: %s", path, strerror(errno));
  }
  kiln_status s = kiln_module_from_image(buf, n, out);
  free(buf);
  return s;
}

/* Writes n bytes to dir/name, whole or with the reason it could not. */
static kiln_status kiln__save_one(const char *dir, const char *name, const void *data, size_t n) {
  char path[PATH_MAX];
  if (!kiln__file_join(path, sizeof path, dir, name))
    return kiln__fail(KILN_ERROR_INVALID, "the folder's path is too long: %s", dir);
  if (kiln__file_write(path, data, n) != 0)
    return kiln__fail(KILN_ERROR_INVALID, "%s cannot be written: %s", path,
                      errno == EINVAL ? "it is not a regular file" : strerror(errno));
  return KILN_OK;
}

kiln_status kiln_module_save(const kiln_module *m, const char *source, const char *dir) {
  if (!m || !dir || !*dir)
    return kiln__fail(KILN_ERROR_INVALID, "no module or no folder to save to");
  const char *log = m->code.log ? m->code.log : "";
  kiln_status s = source ? kiln__save_one(dir, "kernel.cu", source, strlen(source)) : KILN_OK;
  if (!s && m->code.ptx) s = kiln__save_one(dir, "kernel.ptx", m->code.ptx, m->code.ptx_size);
  if (!s && m->code.cubin)
    s = kiln__save_one(dir, "kernel.cubin", m->code.cubin, m->code.cubin_size);
  if (!s) s = kiln__save_one(dir, "kernel.log", log, strlen(log));
  if (!s) kiln__clear_error();
  return s;
}
