/* Compile options in nvcc's spelling, translated into NVRTC's, with the target, relocatable
 * device code and the device runtime's folder taken out into the compile's own fields. */
#ifndef KILN_OPTIONS_H
#define KILN_OPTIONS_H

#include "internal.h"

typedef struct kiln__options {
  kiln_compile_opts opts; /* what the compile uses: the caller's, options translated */
  const char **options;   /* owned array; its strings are the caller's or in strings */
  char **strings;         /* owned: options made by joining or replacing */
  int n_strings;
  int n_gencodes;
  char arch[32], code[32];  /* read from -gencode */
  const char *options_arch; /* the last -arch of the options, settled after them */
  int arch_alone;           /* ... and it stood alone (no arch=, -code or -gencode): the arch
                               is $KILN_ARCH's or the device's, else it */
  int lineinfo_env;         /* KILN_LINEINFO decided -lineinfo: the options named neither it
                               nor -G */
  int device_debug;         /* kiln_compile_set_device_debug's setting, read once, as applied */
} kiln__options;

/* Whether KILN_LINEINFO=0 turns the default -lineinfo off now. */
int kiln__options_lineinfo_off(void);
/* The same of a value of KILN_LINEINFO (NULL: unset). */
int kiln__options_lineinfo_off_in(const char *value);

/* $KILN_ARCH and $KILN_LINEINFO, NULL where unset, read in one pass over the environment: a
 * memo's recall (kiln_module_recall) reads both on every call, and each getenv is a pass. */
void kiln__options_env(const char **arch, const char **lineinfo);

/* Whether an arch follows an -arch of the options alone on PyCUDA's nvcc command line, which
 * takes the last: the device's, for which env_arch ($KILN_ARCH) stands when set. None does
 * without $KILN_ARCH, driver or GPU. */
int kiln__options_arch_follows(const char *env_arch);

/* Whether kiln_compile_set_device_debug asks for -G in every compile now. */
int kiln__options_device_debug(void);

/* Fills o from in (NULL: no options). -code or -gencode set o->opts.arch and .code (a
 * disagreement with in's is KILN_ERROR_INVALID); -arch alone is PyCUDA's, the last one given,
 * and only where neither in's arch nor the device's (or $KILN_ARCH) follows it; -rdc=true sets
 * KILN_COMPILE_DEVICE_RUNTIME, -L sets device_runtime; -G is added while
 * kiln_compile_set_device_debug says so and the options do not give it; -lineinfo is added unless
 * the options give it or -G, or KILN_LINEINFO=0. Free with kiln__options_free, whose strings
 * o->opts points at. */
kiln_status kiln__options_translate(const kiln_compile_opts *in, kiln__options *o);
void kiln__options_free(kiln__options *o);

#endif
