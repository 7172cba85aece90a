/* A module as bytes for another process: the cache entry's format, which already carries the
 * code, the kernels' signatures and a checksum over them, so one reader (entry.c) serves the
 * disk and the wire. */
#include "module.h"

#include <string.h>

kiln_status kiln_module_serialize(const kiln_module *m, unsigned char **out, size_t *size) {
  if (!m || !out || !size) return kiln__fail(KILN_ERROR_INVALID, "no module or no output");
  *out = NULL;
  *size = 0;
  /* The user headers it was checked against are left out: their paths name this machine's
   * files, which the receiver cannot check, and the code is what it is. */
  kiln__headers none;
  memset(&none, 0, sizeof none);
  kiln_status s = kiln__entry_encode(m->key, &m->code, m->kernels, m->n_kernels, &none, out, size);
  if (!s) kiln__clear_error();
  return s;
}

kiln_status kiln_module_deserialize(const void *data, size_t size, kiln_module **out) {
  if (!out) return kiln__fail(KILN_ERROR_INVALID, "no output");
  *out = NULL;
  if (!data || size < KILN__ENTRY_HEADER_SIZE)
    return kiln__fail(KILN_ERROR_INVALID,
                      "%zu bytes are too few for a serialized kiln module (at least %d)",
                      data ? size : 0, KILN__ENTRY_HEADER_SIZE);
  kiln__cached c;
  memset(&c, 0, sizeof c);
  const char *why = kiln__entry_decode(data, size, NULL, &c);
  if (why) return kiln__fail(KILN_ERROR_INVALID, "not a serialized kiln module: %s", why);
  kiln_status s = kiln__module_adopt(&c, out);
  if (s) return s;
  /* The key as the sender knew it: bytes 24..56 of the header. */
  memcpy((*out)->key, (const unsigned char *)data + 24, KILN__KEY_SIZE);
  kiln__clear_error();
  return KILN_OK;
}
