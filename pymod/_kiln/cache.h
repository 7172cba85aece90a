/* The kernel cache from Python: cache_stats, cache_info, cache_list, cache_prune, cache_clear. */
#ifndef KPY_CACHE_H
#define KPY_CACHE_H

#include "state.h"

int kpy_cache_init(PyObject *module, kpy_state *st);

#endif
