/* Module-scope variables (__constant__, __device__): found by name in the PTX before the GPU is
 * touched, then their address on the current device from cuLibraryGetGlobal, kept per module
 * so the next lookup on that device costs a string compare. */
#include "memory.h"
#include "module.h"

#include "demangle.h"
#include "dup.h"
#include "ptx.h"

#include <stdlib.h>
#include <string.h>

/* Reads the variables of m's PTX once; call with m->load_lock held. A module without PTX (a
 * CUBIN) has none listed: the driver alone is asked. */
static kiln_status kiln__globals_read_locked(kiln_module *m) {
  if (m->globals_read || !m->code.ptx) return KILN_OK;
  char **names = NULL;
  int n = 0;
  kiln_status s = kiln__ptx_globals(m->code.ptx, m->code.ptx_size, &names, &n);
  if (s) return s;
  kiln__global *globals = calloc((size_t)(n ? n : 1), sizeof *globals);
  if (!globals) {
    kiln__ptx_free_names(names, n);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the module's variables");
  }
  for (int i = 0; i < n; i++) {
    int n_types = 0;
    char *plain = kiln__demangle(names[i], strlen(names[i]), NULL, 0, &n_types);
    globals[i].name = names[i];
    globals[i].plain = plain ? plain : kiln__dup_str(names[i]);
    globals[i].device = -1;
    if (!globals[i].plain) {
      for (int k = i + 1; k < n; k++) free(names[k]);
      for (int k = 0; k <= i; k++) free(globals[k].name), free(globals[k].plain);
      free(globals);
      free(names);
      return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the module's variables");
    }
  }
  free(names); /* the strings now belong to globals */
  m->globals = globals;
  m->n_globals = n;
  m->globals_read = 1;
  return KILN_OK;
}

/* The unqualified tail of a plain name: "table" of "ns::table". */
static const char *kiln__globals_tail(const char *plain) {
  const char *t = plain, *p;
  while ((p = strstr(t, "::"))) t = p + 2;
  return t;
}

static void kiln__globals_list(const kiln_module *m) {
  for (int i = 0; i < m->n_globals; i++) {
    kiln__fail_append("%s%s", i ? ", " : " ", m->globals[i].plain);
    if (strcmp(m->globals[i].plain, m->globals[i].name) != 0)
      kiln__fail_append(" (%s)", m->globals[i].name);
  }
}

/* The variable called name: its PTX name exactly, else its plain name, qualified or not. */
static kiln_status kiln__globals_find(kiln_module *m, const char *name, kiln__global **out) {
  *out = NULL;
  for (int i = 0; i < m->n_globals; i++)
    if (strcmp(m->globals[i].name, name) == 0) {
      *out = &m->globals[i];
      return KILN_OK;
    }
  int matches = 0;
  for (int i = 0; i < m->n_globals; i++) {
    const char *plain = m->globals[i].plain;
    if (strcmp(plain, name) == 0 || strcmp(kiln__globals_tail(plain), name) == 0) {
      if (!matches++) *out = &m->globals[i];
    }
  }
  if (matches == 1) return KILN_OK;
  *out = NULL;
  if (matches > 1) {
    kiln__fail(KILN_ERROR_AMBIGUOUS,
               "'%s' matches %d variables of the module; name one by its PTX name:", name, matches);
    kiln__globals_list(m);
    return KILN_ERROR_AMBIGUOUS;
  }
  if (m->n_globals == 0)
    return kiln__fail(KILN_ERROR_NOT_FOUND,
                      "no variable '%s': the module has no __device__ or __constant__ variables",
                      name);
  kiln__fail(KILN_ERROR_NOT_FOUND, "no variable '%s' in the module; it has", name);
  kiln__globals_list(m);
  return KILN_ERROR_NOT_FOUND;
}

kiln_status kiln_module_get_global(kiln_module *m, const char *name, kiln_deviceptr *ptr,
                                   size_t *size) {
  KILN__NEED(m);
  KILN__NEED(ptr);
  KILN__NEED(size);
  *ptr = 0;
  *size = 0;
  if (!name || !*name) return kiln__fail(KILN_ERROR_INVALID, "the variable's name is empty");
  pthread_mutex_lock(&m->load_lock);
  kiln_status s = kiln__globals_read_locked(m);
  pthread_mutex_unlock(&m->load_lock);
  kiln__global *g = NULL;
  if (!s && m->code.ptx) s = kiln__globals_find(m, name, &g);
  if (s) return s;
  kiln__device *d;
  if ((s = kiln__device_enter(&d))) return s;
  /* Under the lock: another device's lookup may be replacing the address this one reads. */
  pthread_mutex_lock(&m->load_lock);
  int cached = g && g->device == d->ordinal;
  if (cached) *ptr = (kiln_deviceptr)g->ptr, *size = g->size;
  pthread_mutex_unlock(&m->load_lock);
  if (cached) {
    kiln__clear_error();
    return KILN_OK;
  }
  pthread_mutex_lock(&m->load_lock);
  s = kiln__module_load_locked(m, d);
  CUdeviceptr p = 0;
  size_t bytes = 0;
  CUresult rc =
      s ? CUDA_SUCCESS : kiln__driver.LibraryGetGlobal(&p, &bytes, m->lib, g ? g->name : name);
  if (!s && rc == CUDA_ERROR_NOT_FOUND)
    s = kiln__fail(KILN_ERROR_NOT_FOUND, "no variable '%s' in the module", name);
  else if (!s && rc) s = kiln__cuda_fail("cuLibraryGetGlobal", (int)rc);
  if (!s && g) {
    g->ptr = p;
    g->size = bytes;
    g->device = d->ordinal;
  }
  pthread_mutex_unlock(&m->load_lock);
  if (s) return s;
  kiln__memory_note_range(m, p, bytes);
  *ptr = (kiln_deviceptr)p;
  *size = bytes;
  kiln__clear_error();
  return KILN_OK;
}

int kiln_module_global_count(kiln_module *m) {
  if (!m) return 0;
  pthread_mutex_lock(&m->load_lock);
  kiln_status s = kiln__globals_read_locked(m);
  pthread_mutex_unlock(&m->load_lock);
  return s ? 0 : m->n_globals;
}

const char *kiln_module_global_name(kiln_module *m, int i) {
  return i >= 0 && i < kiln_module_global_count(m) ? m->globals[i].name : NULL;
}
