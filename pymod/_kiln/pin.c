/* Large pageable host buffers copied again and again, page-locked in place (see pin.h).
 *
 * A staged copy moves every byte twice, once by a host thread's memcpy into a page-locked chunk
 * and once by the DMA engine; page-locked memory moves once. Registering a buffer costs about as
 * much as copying it once, so only a buffer seen copied before is registered, and it stays so
 * for as long as the numpy array that owns it lives: the registration ends in a weak reference's
 * callback, which numpy runs when the array is collected, before it frees the memory. A copy
 * holds the array it copies (and so its owner) for its whole length, so a registration never
 * ends under a copy in flight. Only blocking copies call here: a queued copy from page-locked
 * memory would read the host array after the call returned, where a staged one has read it
 * before. */
#include "pin.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* The buffers followed at once, seen or registered. */
#define KPY_PIN_SLOTS 64

enum { KPY_PIN_SEEN, KPY_PIN_REGISTERING, KPY_PIN_REGISTERED, KPY_PIN_REFUSED };

struct kpy_pin {
  PyObject *owner_ref; /* a weak reference to the owning array, whose callback ends this */
  uintptr_t owner;     /* the owner's address, only compared while owner_ref lives */
  char *base;          /* the owner's memory, registered whole */
  size_t size;
  int state;  /* KPY_PIN_* */
  int mapped; /* registered with KILN_HOST_DEVICEMAP */
};

/* The array whose own memory a's data lies in, or NULL when it is not a numpy array's own
 * (bytes, an mmap, page-locked memory kiln or another library made). Borrowed. */
static PyArrayObject *kpy_pin_owner(PyArrayObject *a) {
  PyObject *o = (PyObject *)a;
  while (PyArray_Check(o) && !PyArray_CHKFLAGS((PyArrayObject *)o, NPY_ARRAY_OWNDATA)) {
    o = PyArray_BASE((PyArrayObject *)o);
    if (!o) return NULL;
  }
  return PyArray_Check(o) ? (PyArrayObject *)o : NULL;
}

static size_t kpy_pin_bound(void) {
  long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
  return pages > 0 && page > 0 ? (size_t)pages * (size_t)page / 4 : 0;
}

static int kpy_pin_enabled(kpy_state *st) {
  if (!st->pin_ready) {
    st->pin_ready = 1;
    const char *v = getenv("KILN_PIN_REUSED");
    st->pin_enabled = !(v && (!strcmp(v, "0") || !strcmp(v, "off")));
    st->pin_bound = kpy_pin_bound();
  }
  return st->pin_enabled;
}

static void kpy_pin_drop(kpy_state *st, int i) {
  struct kpy_pin *p = st->pins[i];
  if (p->state == KPY_PIN_REGISTERED) {
    kiln_host_unregister(p->base); /* a failure leaves nothing to undo */
    st->pinned_bytes -= p->size;
  }
  st->pins[i] = st->pins[--st->n_pins];
  Py_XDECREF(p->owner_ref);
  PyMem_Free(p);
}

/* The weak reference's callback: the owner is being collected. */
static PyObject *kpy_pin_owner_gone(PyObject *module, PyObject *ref) {
  kpy_state *st = PyModule_GetState(module);
  for (int i = 0; st && i < st->n_pins; i++)
    if (st->pins[i]->owner_ref == ref) {
      kpy_pin_drop(st, i);
      break;
    }
  Py_RETURN_NONE;
}

static PyMethodDef kpy_pin_callback_def = {"_pin_owner_gone", kpy_pin_owner_gone, METH_O, NULL};

/* A new entry for owner, in a free slot or in place of the oldest one only seen; NULL when
 * every slot is registered (or on any error, cleared). */
static struct kpy_pin *kpy_pin_add(kpy_state *st, PyObject *module, PyArrayObject *owner) {
  if (st->n_pins == KPY_PIN_SLOTS) {
    int i = 0;
    while (i < st->n_pins && st->pins[i]->state != KPY_PIN_SEEN) i++;
    if (i == st->n_pins) return NULL;
    kpy_pin_drop(st, i);
  }
  if (!st->pin_callback && !(st->pin_callback = PyCFunction_New(&kpy_pin_callback_def, module)))
    return NULL;
  if (!st->pins && !(st->pins = PyMem_Malloc(KPY_PIN_SLOTS * sizeof *st->pins))) return NULL;
  struct kpy_pin *p = PyMem_Malloc(sizeof *p);
  if (!p) return NULL;
  if (!(p->owner_ref = PyWeakref_NewRef((PyObject *)owner, st->pin_callback))) {
    PyMem_Free(p);
    return NULL;
  }
  p->owner = (uintptr_t)owner;
  p->base = PyArray_DATA(owner);
  p->size = (size_t)PyArray_NBYTES(owner);
  p->state = KPY_PIN_SEEN;
  p->mapped = 0;
  st->pins[st->n_pins++] = p;
  return p;
}

void kpy_pin_reused(kpy_state *st, PyArrayObject *a, size_t nbytes) {
  if (nbytes < KPY_PIN_MIN || !kpy_pin_enabled(st)) return;
  PyArrayObject *owner = kpy_pin_owner(a);
  char *data = PyArray_DATA(a);
  /* The whole buffer is registered, at about the cost of copying it once: not for a small view
   * of a much larger array, whose registration its copies would not repay. */
  if (!owner || data < (char *)PyArray_DATA(owner) ||
      data + nbytes > (char *)PyArray_DATA(owner) + PyArray_NBYTES(owner) ||
      (size_t)PyArray_NBYTES(owner) / 4 > nbytes)
    return;
  struct kpy_pin *p = NULL;
  for (int i = 0; !p && i < st->n_pins; i++)
    if (st->pins[i]->owner == (uintptr_t)owner) p = st->pins[i];
  if (p && p->state == KPY_PIN_REGISTERING) return; /* another thread registers it */
  kpy_raised raised;
  kpy_raised_set_aside(&raised);
  if (!p) {
    PyObject *module = PyType_GetModule(st->ref.In_type);
    if (module) kpy_pin_add(st, module, owner); /* seen once: the next copy registers */
  } else if (p->state == KPY_PIN_SEEN && st->pinned_bytes + p->size <= st->pin_bound) {
    /* Counted before the GIL goes, so that no other thread overshoots the bound meanwhile; the
     * entry stays where it is (the owner lives: this copy holds it). */
    p->state = KPY_PIN_REGISTERING;
    st->pinned_bytes += p->size;
    char *base = p->base;
    size_t size = p->size;
    kiln_status s;
    int mapped = 1;
    Py_BEGIN_ALLOW_THREADS
      /* Mapped too, so that the program's own register_host_memory(ary, DEVICEMAP) of the
       * array, which the driver would refuse as registered already, is served by this one;
       * unmapped where the driver maps none. */
      s = kiln_host_register(base, size, KILN_HOST_DEVICEMAP);
      if (s) {
        mapped = 0;
        s = kiln_host_register(base, size, 0);
      }
    Py_END_ALLOW_THREADS
    p->mapped = mapped;
    if (s) st->pinned_bytes -= size;
    p->state = s ? KPY_PIN_REFUSED : KPY_PIN_REGISTERED;
  }
  kpy_raised_put_back(&raised);
}

/* The registered buffer [p, p + n) lies inside, or NULL. */
static const struct kpy_pin *kpy_pin_holding(kpy_state *st, const void *p, size_t n) {
  const char *c = p;
  for (int i = 0; i < st->n_pins; i++) {
    const struct kpy_pin *pin = st->pins[i];
    if (pin->state == KPY_PIN_REGISTERED && c >= pin->base && n <= pin->size &&
        (size_t)(c - pin->base) <= pin->size - n)
      return pin;
  }
  return NULL;
}

int kpy_pin_touches(kpy_state *st, const void *p, size_t n) {
  const char *c = p;
  for (int i = 0; n && i < st->n_pins; i++) {
    const struct kpy_pin *pin = st->pins[i];
    if (pin->state == KPY_PIN_REGISTERED && c < pin->base + pin->size && pin->base < c + n)
      return 1;
  }
  return 0;
}

int kpy_pin_serves(kpy_state *st, const void *p, size_t n, unsigned flags) {
  if (flags & ~(KILN_HOST_PORTABLE | KILN_HOST_DEVICEMAP)) return 0;
  const struct kpy_pin *pin = kpy_pin_holding(st, p, n);
  return pin && (pin->mapped || !(flags & KILN_HOST_DEVICEMAP));
}

void kpy_pin_counts(kpy_state *st, Py_ssize_t *buffers, Py_ssize_t *bytes) {
  Py_ssize_t n = 0;
  for (int i = 0; i < st->n_pins; i++) n += st->pins[i]->state == KPY_PIN_REGISTERED;
  *buffers = n;
  *bytes = (Py_ssize_t)st->pinned_bytes;
}

void kpy_pin_free(kpy_state *st) {
  while (st->n_pins) kpy_pin_drop(st, st->n_pins - 1);
  PyMem_Free(st->pins);
  st->pins = NULL;
  Py_CLEAR(st->pin_callback);
}
