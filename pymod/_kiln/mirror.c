/* Host mirrors of reduction results: see mirror.h. The slots live in one page-locked block,
 * mapped for the GPU (its address there is the host's, with unified addressing); a slot is
 * free, held by a result array, or left by one that died before its kernel wrote the flag (it
 * is free again once the flag is there: until then that kernel may still write it). */
#include "mirror.h"

#include "launches.h"
#include "wait.h"

#include <stddef.h>
#include <string.h>

/* The slots of a process: reductions whose results are all alive at once past this get no
 * mirror (their reads copy, as before). */
#define KPY_MIRROR_SLOTS 1024
/* The reductions before the slots are made: making them (cuMemHostAlloc) costs about what a
 * hundred reads save, so a process that reduces a few times never pays for it. */
#define KPY_MIRROR_AFTER 8
/* Polls of the flag between two queries of the reduction's stream, which tell a device fault
 * (the flag never comes) from a kernel still running. */
#define KPY_MIRROR_QUERY_EVERY 64

enum { KPY_MIRROR_FREE, KPY_MIRROR_HELD, KPY_MIRROR_LEFT };

/* A slot as the kernel writes it (_reduce_src.py: the value, then the flag at MIRROR_FLAG). */
typedef struct kpy_mirror_slot {
  _Alignas(16) unsigned char value[KPY_MIRROR_FLAG];
  unsigned flag;
  unsigned unused[3];
} kpy_mirror_slot;
_Static_assert(sizeof(kpy_mirror_slot) == KPY_MIRROR_SLOT &&
                   offsetof(kpy_mirror_slot, flag) == KPY_MIRROR_FLAG,
               "the slot is laid out as the kernel writes it");

struct kpy_mirrors {
  kpy_mirror_slot *slots;               /* KPY_MIRROR_SLOTS of them, page-locked and mapped */
  kiln_stream stream[KPY_MIRROR_SLOTS]; /* the stream of the reduction writing each */
  unsigned char state[KPY_MIRROR_SLOTS];
  int free[KPY_MIRROR_SLOTS], n_free;
  int left[KPY_MIRROR_SLOTS], n_left;
  unsigned long long reads;
};

static unsigned *kpy_mirror_flag(struct kpy_mirrors *m, int i) { return &m->slots[i].flag; }

static int kpy_mirror_written(struct kpy_mirrors *m, int i) {
  return __atomic_load_n(kpy_mirror_flag(m, i), __ATOMIC_ACQUIRE) != 0;
}

/* Makes the slots; 0 when they cannot be made (no memory): reductions go without. */
static struct kpy_mirrors *kpy_mirror_make(void) {
  struct kpy_mirrors *m = PyMem_Calloc(1, sizeof *m);
  if (!m) return NULL;
  void *host = NULL;
  if (kiln_host_alloc_with_flags((size_t)KPY_MIRROR_SLOTS * KPY_MIRROR_SLOT, KILN_HOST_DEVICEMAP,
                                 &host)) {
    PyMem_Free(m);
    return NULL;
  }
  m->slots = host;
  memset(host, 0, (size_t)KPY_MIRROR_SLOTS * KPY_MIRROR_SLOT);
  for (int i = 0; i < KPY_MIRROR_SLOTS; i++) m->free[i] = KPY_MIRROR_SLOTS - 1 - i;
  m->n_free = KPY_MIRROR_SLOTS;
  return m;
}

/* Left slots whose kernels have written them go back to the free ones. */
static void kpy_mirror_reclaim(struct kpy_mirrors *m) {
  int kept = 0;
  for (int k = 0; k < m->n_left; k++) {
    int i = m->left[k];
    if (kpy_mirror_written(m, i)) {
      m->state[i] = KPY_MIRROR_FREE;
      m->free[m->n_free++] = i;
    } else {
      m->left[kept++] = i;
    }
  }
  m->n_left = kept;
}

kiln_deviceptr kpy_mirror_take(kpy_state *st, kpy_mirror *mirror, size_t nbytes, kiln_stream stream,
                               int stream_owned) {
  if (mirror->slot || nbytes > KPY_MIRROR_FLAG || !stream_owned || st->capture) return 0;
  if (stream) {
    int capturing = 1;
    if (kiln_stream_is_capturing(stream, &capturing) || capturing) return 0;
  }
  struct kpy_mirrors *m = st->mirrors;
  if (!m) {
    if (st->mirror_before < KPY_MIRROR_AFTER) {
      st->mirror_before++;
      return 0;
    }
    if (st->mirror_before > KPY_MIRROR_AFTER) return 0; /* they could not be made */
    st->mirror_before++;
    if (!(m = st->mirrors = kpy_mirror_make())) return 0;
  }
  if (!m->n_free) kpy_mirror_reclaim(m);
  if (!m->n_free) return 0;
  int i = m->free[--m->n_free];
  /* Seen by the GPU before the launch: x86 orders this store before the driver's doorbell. */
  __atomic_store_n(kpy_mirror_flag(m, i), 0u, __ATOMIC_RELEASE);
  m->state[i] = KPY_MIRROR_HELD;
  m->stream[i] = stream;
  mirror->slot = i + 1;
  mirror->work = 0;
  return (kiln_deviceptr)(uintptr_t)&m->slots[i];
}

void kpy_mirror_queued(kpy_mirror *mirror) { mirror->work = kiln_work_count(); }

void kpy_mirror_drop(kpy_state *st, kpy_mirror *mirror) {
  if (!mirror->slot) return;
  int i = mirror->slot - 1;
  mirror->slot = 0;
  struct kpy_mirrors *m = st ? st->mirrors : NULL;
  if (!m || m->state[i] != KPY_MIRROR_HELD) return;
  if (kpy_mirror_written(m, i)) {
    m->state[i] = KPY_MIRROR_FREE;
    m->free[m->n_free++] = i;
  } else {
    m->state[i] = KPY_MIRROR_LEFT;
    m->left[m->n_left++] = i;
  }
}

typedef struct kpy_mirror_wait {
  unsigned *flag;
  kiln_stream stream;
  unsigned polls;
  int lost; /* the stream finished and no flag came: the launch never ran the kernel */
} kpy_mirror_wait;

static kiln_status kpy_mirror_poll(void *what, int *done) {
  kpy_mirror_wait *w = what;
  *done = __atomic_load_n(w->flag, __ATOMIC_ACQUIRE) != 0;
  if (*done || ++w->polls % KPY_MIRROR_QUERY_EVERY) return KILN_OK;
  /* A fault is the stream's error; an idle stream has flushed what its kernels wrote. */
  int idle = 0;
  kiln_status s = kiln_stream_query(w->stream, &idle);
  if (s || !idle) return s;
  *done = 1;
  w->lost = !__atomic_load_n(w->flag, __ATOMIC_ACQUIRE);
  return KILN_OK;
}

/* Whether the mirror still holds: kiln queued nothing since its reduction (whose work count
 * is never 0, the reduction itself counting), on the current device. */
static int kpy_mirror_holds(const kpy_mirror *mirror, int device) {
  return mirror->slot && mirror->work && kiln_work_count() == mirror->work &&
         device == kiln_device_current();
}

int kpy_mirror_get(kpy_state *st, kpy_mirror *mirror, int device, void *data, size_t n) {
  struct kpy_mirrors *m = st->mirrors;
  if (!mirror->slot) return 0;
  if (!m || n > KPY_MIRROR_FLAG || !kpy_mirror_holds(mirror, device)) {
    kpy_mirror_drop(st, mirror);
    return 0;
  }
  int i = mirror->slot - 1;
  kpy_mirror_wait w = {kpy_mirror_flag(m, i), m->stream[i], 0, 0};
  if (kpy_wait(st, kpy_mirror_poll, &w, -1, "the reduction") < 0) return -1;
  /* The GIL was let go in the wait: another thread may have queued work or taken the address. */
  if (w.lost || mirror->slot != i + 1 || !kpy_mirror_holds(mirror, device)) {
    kpy_mirror_drop(st, mirror);
    return 0;
  }
  memcpy(data, m->slots[i].value, n);
  m->reads++;
  /* The kernel ran to its end, so what its stream ran before it had finished: a later fault
   * is none of theirs. (kiln queued nothing since, or the mirror would not hold.) */
  kpy_launches_settle(m->stream[i]);
  return 1;
}

void kpy_mirror_counts(kpy_state *st, Py_ssize_t *slots, Py_ssize_t *held,
                       unsigned long long *reads) {
  struct kpy_mirrors *m = st->mirrors;
  *slots = m ? KPY_MIRROR_SLOTS : 0;
  *held = m ? KPY_MIRROR_SLOTS - m->n_free - m->n_left : 0;
  *reads = m ? m->reads : 0;
}
void kpy_mirror_free(kpy_state *st) {
  struct kpy_mirrors *m = st->mirrors;
  if (!m) return;
  st->mirrors = NULL;
  int pending = 0;
  for (int i = 0; i < KPY_MIRROR_SLOTS && !pending; i++)
    pending = m->state[i] != KPY_MIRROR_FREE && !kpy_mirror_written(m, i);
  /* A kernel yet to write its slot would write freed memory; one that faulted never will, and
   * the context's error then ends the wait. */
  if (!pending || !kiln_synchronize()) kiln_host_free(m->slots);
  PyMem_Free(m);
}
