/* The standard headers kiln gives NVRTC in memory (<stdio.h>, <math.h>, <stdint.h>,
 * <assert.h>, ... and their <c...> forms), where the compile would find no file of the name. */
#ifndef KILN_STDHEADERS_H
#define KILN_STDHEADERS_H

#include "hash.h"

/* The header every compile is given and includes first (--pre-include): the names nvcc's
 * implicit host headers give kernels (uint, M_PI, INFINITY, ...). */
#define KILN__NVCC_HOST_HEADER "kiln_nvcc_host.h"

/* The in-memory headers of a compile of src: kiln's nvcc names, opts' own, then kiln's that no
 * in-memory header, include folder (include_dirs, -I options, the toolkit's) or the working folder
 * shadows, when any text of the compile can name a header at all. The arrays are malloc'd (free
 * them); their strings belong to opts or to kiln. */
kiln_status kiln__stdheaders_select(const char *src, const kiln_compile_opts *opts,
                                    const char ***names, const char ***sources, int *n);

/* Feeds the headers' identity (the digest of their names and texts) into a cache key. */
void kiln__stdheaders_hash(kiln__hasher *h);
/* That digest computed now from the texts, and the one kept in the source, which a test holds
 * equal. */
kiln_status kiln__stdheaders_digest(unsigned char out[KILN__KEY_SIZE]);
const unsigned char *kiln__stdheaders_digest_kept(void);

int kiln__stdheaders_count(void);
const char *kiln__stdheaders_name(int i);

#endif
