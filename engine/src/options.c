/* Compile options as nvcc users write them, put into what NVRTC takes. A program written for
 * PyCUDA passes nvcc's options (PyCUDA compiles with nvcc): the ones NVRTC spells the same pass
 * as they are; a value nvcc takes as the next item is joined to its option; the target
 * (-arch, -code, -gencode) becomes the compile's arch and code; relocatable device code (-rdc)
 * becomes a link with the device runtime; options for the host compiler, the host linker or
 * nvcc itself, which NVRTC has no use for, are dropped. An option NVRTC does not know and
 * kiln does not translate is passed on, and NVRTC's refusal names it. */
#include "options.h"

#include "device.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* What an nvcc option becomes. */
typedef enum kiln__action {
  KILN__KEEP, /* passed as it is */
  KILN__DROP, /* no meaning under NVRTC */
  KILN__JOIN, /* "-D X" -> "-DX": to, then the value */
  KILN__LIST, /* "-Xptxas a,b" -> "--ptxas-options=a", "--ptxas-options=b": JOIN of each */
  KILN__HOST, /* "-Xcompiler -DX,-fPIC" -> "-DX": the preprocessor's of a list, the rest dropped */
  KILN__REPLACE, /* to, instead */
  KILN__ARCH,    /* the compile's arch */
  KILN__CODE,    /* the compile's code */
  KILN__GENCODE, /* arch=compute_XY,code=sm_XY */
  KILN__RDC,     /* -rdc=true: link with the device runtime; -rdc=false: nothing */
  KILN__LIBDIR,  /* -L: where the device runtime library is */
} kiln__action;

typedef struct kiln__rule {
  const char *name; /* the option, without its value */
  int takes_value;  /* 1: "-x v", "-x=v" (and "-xv" when attached); 0: a flag */
  int attached;     /* "-Dv" is "-D v" */
  kiln__action action;
  const char *to; /* JOIN's prefix, REPLACE's option */
} kiln__rule;

static const kiln__rule kiln__rules[] = {
    /* the target */
    {"-arch", 1, 0, KILN__ARCH, NULL},
    {"--gpu-architecture", 1, 0, KILN__ARCH, NULL},
    {"-code", 1, 0, KILN__CODE, NULL},
    {"--gpu-code", 1, 0, KILN__CODE, NULL},
    {"-gencode", 1, 0, KILN__GENCODE, NULL},
    {"--generate-code", 1, 0, KILN__GENCODE, NULL},
    /* values nvcc takes as the next item, which NVRTC wants attached */
    {"-D", 1, 1, KILN__JOIN, "-D"},
    {"--define-macro", 1, 0, KILN__JOIN, "-D"},
    {"-U", 1, 1, KILN__JOIN, "-U"},
    {"--undefine-macro", 1, 0, KILN__JOIN, "-U"},
    {"-I", 1, 1, KILN__JOIN, "-I"},
    {"--include-path", 1, 0, KILN__JOIN, "-I"},
    {"-include", 1, 0, KILN__JOIN, "--pre-include="},
    {"--pre-include", 1, 0, KILN__JOIN, "--pre-include="},
    {"-std", 1, 0, KILN__JOIN, "-std="},
    {"--std", 1, 0, KILN__JOIN, "-std="},
    {"-maxrregcount", 1, 0, KILN__JOIN, "-maxrregcount="},
    {"--maxrregcount", 1, 0, KILN__JOIN, "-maxrregcount="},
    /* nvcc splits ptxas's options at commas; NVRTC passes its value whole, and ptxas would read
     * "-O3,-v" as one option */
    {"-Xptxas", 1, 0, KILN__LIST, "--ptxas-options="},
    {"--ptxas-options", 1, 0, KILN__LIST, "--ptxas-options="},
    {"-Ofast-compile", 1, 0, KILN__JOIN, "--Ofast-compile="},
    /* nvcc's spellings of what NVRTC has under another */
    {"--expt-relaxed-constexpr", 0, 0, KILN__REPLACE, "-default-device"},
    {"-expt-relaxed-constexpr", 0, 0, KILN__REPLACE, "-default-device"},
    /* relocatable device code: linked with the device runtime */
    {"-rdc", 1, 0, KILN__RDC, NULL},
    {"--relocatable-device-code", 1, 0, KILN__RDC, NULL},
    /* ... or left unlinked, for a link of several (kiln.compiler.DynamicModule) */
    {"-dc", 0, 0, KILN__RDC, "unlinked"},
    {"--device-c", 0, 0, KILN__RDC, "unlinked"},
    {"-L", 1, 1, KILN__LIBDIR, NULL},
    {"--library-path", 1, 0, KILN__LIBDIR, NULL},
    /* "-l lib"; "-llib" is kiln__library_rule's, since "-l" with any value attached would be
     * -lineinfo too */
    {"-l", 1, 0, KILN__DROP, NULL},
    {"--library", 1, 0, KILN__DROP, NULL},
    /* the host compiler's and nvcc's own: nothing NVRTC compiles depends on them */
    {"--optimize", 1, 0, KILN__DROP, NULL},
    {"-g", 0, 0, KILN__DROP, NULL},
    {"--debug", 0, 0, KILN__DROP, NULL},
    {"-m64", 0, 0, KILN__DROP, NULL},
    {"--machine", 1, 0, KILN__DROP, NULL},
    {"-v", 0, 0, KILN__DROP, NULL},
    {"--verbose", 0, 0, KILN__DROP, NULL},
    {"-keep", 0, 0, KILN__DROP, NULL},
    {"--keep", 0, 0, KILN__DROP, NULL},
    {"-keep-dir", 1, 0, KILN__DROP, NULL},
    {"--keep-dir", 1, 0, KILN__DROP, NULL},
    {"-cubin", 0, 0, KILN__DROP, NULL},
    {"--cubin", 0, 0, KILN__DROP, NULL},
    {"-ptx", 0, 0, KILN__DROP, NULL},
    {"--ptx", 0, 0, KILN__DROP, NULL},
    {"-fatbin", 0, 0, KILN__DROP, NULL},
    {"--fatbin", 0, 0, KILN__DROP, NULL},
    {"-c", 0, 0, KILN__DROP, NULL},
    {"--compile", 0, 0, KILN__DROP, NULL},
    {"-shared", 0, 0, KILN__DROP, NULL},
    {"--shared", 0, 0, KILN__DROP, NULL},
    {"-o", 1, 0, KILN__DROP, NULL},
    {"--output-file", 1, 0, KILN__DROP, NULL},
    {"-x", 1, 0, KILN__DROP, NULL},
    {"--x", 1, 0, KILN__DROP, NULL},
    {"-ccbin", 1, 0, KILN__DROP, NULL},
    {"--compiler-bindir", 1, 0, KILN__DROP, NULL},
    /* the host compiler's, but nvcc preprocesses device code with it too: a program may define
     * the macros of its kernels there (--compiler-options "-DPHYSICS=2 -DTRACKPOINTS=64") */
    {"-Xcompiler", 1, 0, KILN__HOST, NULL},
    {"--compiler-options", 1, 0, KILN__HOST, NULL},
    {"-Xlinker", 1, 0, KILN__DROP, NULL},
    {"--linker-options", 1, 0, KILN__DROP, NULL},
    {"-Xnvlink", 1, 0, KILN__DROP, NULL},
    {"--nvlink-options", 1, 0, KILN__DROP, NULL},
    {"-Xcudafe", 1, 0, KILN__DROP, NULL},
    {"-t", 1, 0, KILN__DROP, NULL},
    {"--threads", 1, 0, KILN__DROP, NULL},
    {"-src-in-ptx", 0, 0, KILN__DROP, NULL},
    {"--source-in-ptx", 0, 0, KILN__DROP, NULL},
    {"-res-usage", 0, 0, KILN__DROP, NULL},
    {"--resource-usage", 0, 0, KILN__DROP, NULL},
    {"--expt-extended-lambda", 0, 0, KILN__DROP, NULL},
    {"-expt-extended-lambda", 0, 0, KILN__DROP, NULL},
    {"--extended-lambda", 0, 0, KILN__DROP, NULL},
    {"-extended-lambda", 0, 0, KILN__DROP, NULL},
    /* which kernels nvcc keeps in the output (Kernel Tuner passes -e <kernel>): NVRTC keeps
     * them all, and a module loads only what it is asked for */
    {"-e", 1, 0, KILN__DROP, NULL},
    {"--entries", 1, 0, KILN__DROP, NULL},
    {"-Werror", 1, 0, KILN__DROP, NULL},
    /* nvcc's checks and settings for the host side and its own runs */
    {"-allow-unsupported-compiler", 0, 0, KILN__DROP, NULL},
    {"--allow-unsupported-compiler", 0, 0, KILN__DROP, NULL},
    {"-default-stream", 1, 0, KILN__DROP, NULL},
    {"--default-stream", 1, 0, KILN__DROP, NULL},
    {"-cudart", 1, 0, KILN__DROP, NULL},
    {"--cudart", 1, 0, KILN__DROP, NULL},
    {"-cudadevrt", 1, 0, KILN__DROP, NULL},
    {"--cudadevrt", 1, 0, KILN__DROP, NULL},
    {"-noeh", 0, 0, KILN__DROP, NULL},
    {"--no-exceptions", 0, 0, KILN__DROP, NULL},
    {"-forward-unknown-to-host-compiler", 0, 0, KILN__DROP, NULL},
    {"--forward-unknown-to-host-compiler", 0, 0, KILN__DROP, NULL},
    {"-forward-unknown-to-host-linker", 0, 0, KILN__DROP, NULL},
    {"--forward-unknown-to-host-linker", 0, 0, KILN__DROP, NULL},
    {"-Xarchive", 1, 0, KILN__DROP, NULL},
    {"--archive-options", 1, 0, KILN__DROP, NULL},
    {"-dryrun", 0, 0, KILN__DROP, NULL},
    {"--dryrun", 0, 0, KILN__DROP, NULL},
    {"-nohdinitlist", 0, 0, KILN__DROP, NULL},
    {"--no-host-device-initializer-list", 0, 0, KILN__DROP, NULL},
    {"--Werror", 1, 0, KILN__DROP, NULL},
    /* nvcc's promise that no two pointer parameters of a kernel alias. NVRTC 13 keeps it on for
     * every later compile in the process once one has asked for it, so that it would hold for
     * other programs' kernels, ones called in place (in == out) among them, which would then
     * read through the read-only cache what they have just written. Without it the code is
     * right, if maybe slower; a kernel that means it says so with __restrict__. */
    {"--restrict", 0, 0, KILN__DROP, NULL},
    {"-restrict", 0, 0, KILN__DROP, NULL},
};

/* nvcc's other warning controls (-Wno-deprecated-gpu-targets, -Wreorder, ...): NVRTC has -w. */
static const kiln__rule kiln__warning_rule = {"-W", 0, 0, KILN__DROP, NULL};

/* The host compiler's optimization level: -O and a number, attached (-O3, -O4) or as the next
 * item (-O 3), as nvcc takes it; a bare -O too. Nothing else of -O's spelling (NVRTC's own
 * -Ofc=max, -Ofast-compile) and no next item that is no number. */
static const kiln__rule kiln__level_rule = {"-O", 0, 0, KILN__DROP, NULL};

static int kiln__digits(const char *s) {
  if (!s || !*s) return 0;
  while (isdigit((unsigned char)*s)) s++;
  return *s == '\0';
}

/* A library to link, attached to -l: a host program's (-lcurand, -lm), or -lcudadevrt, the
 * device runtime, which the link takes itself. */
static const kiln__rule kiln__library_rule = {"-l", 0, 0, KILN__DROP, NULL};

/* The rule option i matches, and its value (NULL for a flag); *used counts the items it took. */
static const kiln__rule *kiln__rule_of(const kiln_compile_opts *in, int i, const char **value,
                                       int *used) {
  const char *a = in->options[i];
  *value = NULL;
  *used = 1;
  if (!a) return NULL;
  if (a[0] == '-' && a[1] == 'O' && (a[2] == '\0' || kiln__digits(a + 2))) {
    if (a[2] == '\0' && i + 1 < in->n_options && kiln__digits(in->options[i + 1])) *used = 2;
    return &kiln__level_rule;
  }
  for (size_t r = 0; r < KILN__COUNT(kiln__rules); r++) {
    const kiln__rule *rule = &kiln__rules[r];
    size_t n = strlen(rule->name);
    if (strncmp(a, rule->name, n) != 0) continue;
    if (a[n] == '\0') {
      if (rule->takes_value) {
        if (i + 1 >= in->n_options || !in->options[i + 1]) continue; /* NVRTC says what is wrong */
        *value = in->options[i + 1];
        *used = 2;
      }
      return rule;
    }
    if (rule->takes_value && a[n] == '=') {
      *value = a + n + 1;
      return rule;
    }
    if (rule->takes_value && rule->attached) {
      *value = a + n;
      return rule;
    }
  }
  if (a[0] == '-' && a[1] == 'W') return &kiln__warning_rule;
  if (a[0] == '-' && a[1] == 'l' && isalpha((unsigned char)a[2]) && strcmp(a, "-lineinfo") != 0)
    return &kiln__library_rule;
  return NULL;
}

static kiln_status kiln__one_target(const char *what, const char *value) {
  if (!strchr(value, ',')) return KILN_OK;
  return kiln__fail(KILN_ERROR_INVALID,
                    "%s '%s' names several targets; kiln compiles one (the device's, or the one "
                    "named), so give one",
                    what, value);
}

/* "90a" of "sm_90a", "compute_90a" or "90a": kiln builds one arch from any of them, so two
 * spellings with the same number agree. */
static const char *kiln__target_number(const char *t) {
  if (strncmp(t, "sm_", 3) == 0) return t + 3;
  if (strncmp(t, "compute_", 8) == 0) return t + 8;
  return t;
}

/* Sets *slot to value unless it already holds another target. */
static kiln_status kiln__set_target(const char **slot, const char *value, const char *what) {
  kiln_status s = kiln__one_target(what, value);
  if (s) return s;
  if (*slot && strcmp(kiln__target_number(*slot), kiln__target_number(value)) != 0)
    return kiln__fail(KILN_ERROR_INVALID, "%s is given twice, as '%s' and '%s'", what, *slot,
                      value);
  *slot = value;
  return KILN_OK;
}

/* "arch=compute_80,code=sm_80" (quotes and braces of nvcc's spelling allowed). */
static kiln_status kiln__gencode(kiln__options *o, const char *value) {
  const char *arch = strstr(value, "arch="), *code = strstr(value, "code=");
  if (!arch || !code)
    return kiln__fail(KILN_ERROR_INVALID,
                      "-gencode '%s' is not of the form arch=compute_XY,code=sm_XY", value);
  char buf[2][32];
  const char *starts[2] = {arch + 5, code + 5};
  for (int k = 0; k < 2; k++) {
    size_t n = 0;
    const char *p = starts[k];
    while (*p == '"' || *p == '[') p++;
    while (p[n] && p[n] != ',' && p[n] != '"' && p[n] != ']' && n < sizeof buf[k] - 1) n++;
    memcpy(buf[k], p, n);
    buf[k][n] = '\0';
    if (k == 1 && p[n] == ',' && strchr(p + n + 1, '_'))
      return kiln__one_target("-gencode code", p);
  }
  if (o->n_gencodes++)
    return kiln__fail(KILN_ERROR_INVALID,
                      "-gencode is given more than once; kiln compiles one target, so give one");
  memcpy(o->arch, buf[0], sizeof o->arch);
  memcpy(o->code, buf[1], sizeof o->code);
  kiln_status s = kiln__set_target(&o->opts.arch, o->arch, "the arch");
  if (!s) s = kiln__set_target(&o->opts.code, o->code, "the code");
  return s;
}

/* A string made for this compile, prefix then len bytes of value: kept until
 * kiln__options_free. */
static const char *kiln__own_n(kiln__options *o, const char *prefix, const char *value,
                               size_t len) {
  size_t p = strlen(prefix);
  char *s = malloc(p + len + 1);
  if (!s) return NULL;
  memcpy(s, prefix, p);
  memcpy(s + p, value, len);
  s[p + len] = '\0';
  o->strings[o->n_strings++] = s;
  return s;
}

static const char *kiln__own(kiln__options *o, const char *prefix, const char *value) {
  return kiln__own_n(o, prefix, value, strlen(value));
}

/* A word of the host compiler's options, of len bytes: the preprocessor's -D, -U and -I (the
 * value attached or the next word, which *pending remembers) pass to NVRTC; the rest speak to
 * the host compiler alone. */
static const char *kiln__host_word(kiln__options *o, const char *word, size_t len,
                                   const char **pending, int *failed) {
  const char *prefix = *pending;
  size_t skip = 0;
  *pending = NULL;
  if (!prefix) {
    if (len < 2 || word[0] != '-' || !strchr("DUI", word[1])) return NULL;
    prefix = word[1] == 'D' ? "-D" : word[1] == 'U' ? "-U" : "-I";
    if (len == 2) {
      *pending = prefix;
      return NULL;
    }
    skip = 2;
  }
  const char *made = kiln__own_n(o, prefix, word + skip, len - skip);
  if (!made) *failed = 1;
  return made;
}

/* A list's value as nvcc hands it on: split at its commas, and each piece put on a shell's
 * command line as it is, so that blanks part words and double quotes group and go
 * ("-Xptxas=\"-v\"" is ptxas's -v, "-Xptxas '-v -O3'" two options). For ptxas (prefix set),
 * each word is one option to NVRTC, which gives its value to ptxas whole; for the host compiler
 * (prefix NULL), what kiln__host_word keeps. */
static kiln_status kiln__list(kiln__options *o, const char *prefix, const char *value, int *k) {
  size_t n = strlen(value);
  char *word = malloc(n + 1);
  if (!word) return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading the compile options");
  kiln_status s = KILN_OK;
  size_t len = 0;
  int quoted = 0, failed = 0;
  const char *pending = NULL;
  for (size_t i = 0; i <= n && !s; i++) {
    char c = value[i];
    if (c == '"') quoted = !quoted;
    else if (c && (quoted || (c != ',' && c != ' ' && c != '\t'))) word[len++] = c;
    else if (quoted) {
      s = kiln__fail(KILN_ERROR_INVALID, "the %s options '%s' open a \" they do not close",
                     prefix ? "ptxas" : "host compiler", value);
    } else if (len) {
      const char *made = prefix ? kiln__own_n(o, prefix, word, len)
                                : kiln__host_word(o, word, len, &pending, &failed);
      if (prefix && !made) failed = 1;
      if (failed) s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading the compile options");
      else if (made) o->options[(*k)++] = made;
      len = 0;
    }
  }
  if (!s && pending)
    s = kiln__fail(KILN_ERROR_INVALID, "the host compiler options '%s' end in %s with no value",
                   value, pending);
  free(word);
  return s;
}

/* Line tables change nothing the GPU runs (the same instructions; a larger CUBIN), and with
 * them compute-sanitizer and the profilers name the source line of a fault: so -lineinfo,
 * unless the options give it or ask for device debugging, or KILN_LINEINFO=0. */
int kiln__options_lineinfo_off(void) {
  return kiln__options_lineinfo_off_in(getenv("KILN_LINEINFO"));
}

int kiln__options_lineinfo_off_in(const char *value) { return value && strcmp(value, "0") == 0; }

extern char **environ;

void kiln__options_env(const char **arch, const char **lineinfo) {
  *arch = *lineinfo = NULL;
  for (char **e = environ; e && *e; e++) {
    const char *v = *e;
    if (v[0] != 'K' || strncmp(v, "KILN_", 5) != 0) continue;
    v += 5;
    /* getenv's answer is the first entry of a name: so is this one's */
    if (!*arch && strncmp(v, "ARCH=", 5) == 0) *arch = v + 5;
    else if (!*lineinfo && strncmp(v, "LINEINFO=", 9) == 0) *lineinfo = v + 9;
  }
}

static int kiln__device_debug; /* atomic */

void kiln_compile_set_device_debug(int on) {
  __atomic_store_n(&kiln__device_debug, on != 0, __ATOMIC_RELEASE);
}

int kiln__options_device_debug(void) {
  return __atomic_load_n(&kiln__device_debug, __ATOMIC_ACQUIRE);
}

/* The spellings of the options kiln adds, each list ending in NULL: one of them among a
 * compile's options means kiln adds nothing. -G gives line tables of its own. */
static const char *const kiln__device_debug_names[] = {"-G", "--device-debug", NULL};
static const char *const kiln__default_device_names[] = {
    "-default-device", "--device-as-default-execution-space", NULL};
static const char *const kiln__lineinfo_names[] = {"-G", "--device-debug", "-lineinfo",
                                                   "--generate-line-info", NULL};

int kiln__options_arch_follows(const char *env_arch) {
  if (env_arch && *env_arch) return 1;
  int major, minor;
  if (kiln__device_capability(&major, &minor) == KILN_OK) return 1;
  kiln__clear_error();
  return 0;
}

/* Settles an -arch of the options. PyCUDA appends `-arch <arch= or the device's>` to the
 * options it hands nvcc, so a program's own -arch (an old GPU's, often one NVRTC no longer
 * builds) gives way to that one, and nvcc only warns; kiln does the same, and .arch says what
 * was built. Where nothing follows it (no arch=, no GPU) it is the compile's arch. With -code
 * or -gencode it is half of a target, which nvcc under PyCUDA refuses and kiln builds: it
 * stays, checked against the rest. */
static kiln_status kiln__options_arch(kiln__options *o, const kiln_compile_opts *in) {
  if ((o->opts.code && *o->opts.code) || o->n_gencodes)
    return kiln__set_target(&o->opts.arch, o->options_arch, "the arch");
  if (in && in->arch && *in->arch) return KILN_OK; /* arch= follows it */
  o->arch_alone = 1;
  if (!kiln__options_arch_follows(getenv("KILN_ARCH"))) o->opts.arch = o->options_arch;
  return KILN_OK;
}

static int kiln__names(const char *const *options, int n, const char *const *names) {
  for (int i = 0; i < n; i++)
    for (const char *const *name = names; options[i] && *name; name++)
      if (strcmp(options[i], *name) == 0) return 1;
  return 0;
}

/* The counts and arrays of opts as kiln.h allows them: no count below 0, an array behind every
 * count above it, and a name and a text for every include folder and header. */
static kiln_status kiln__options_check(const kiln_compile_opts *in) {
  if (!in) return KILN_OK;
  const struct {
    int n;
    const void *array;
    const char *name;
  } counts[] = {{in->n_options, in->options, "n_options"},
                {in->n_include_dirs, in->include_dirs, "n_include_dirs"},
                {in->n_name_expressions, in->name_expressions, "n_name_expressions"},
                {in->n_headers, in->header_names, "n_headers (header_names)"},
                {in->n_headers, in->header_sources, "n_headers (header_sources)"}};
  for (size_t i = 0; i < sizeof counts / sizeof *counts; i++) {
    if (counts[i].n < 0)
      return kiln__fail(KILN_ERROR_INVALID, "%s is %d; a count is 0 or more", counts[i].name,
                        counts[i].n);
    if (counts[i].n && !counts[i].array)
      return kiln__fail(KILN_ERROR_INVALID, "%s is %d, but its array is NULL", counts[i].name,
                        counts[i].n);
  }
  unsigned known = KILN_COMPILE_NO_CACHE | KILN_COMPILE_DEVICE_RUNTIME | KILN_COMPILE_RELOCATABLE;
  if (in->flags & ~known)
    return kiln__fail(KILN_ERROR_INVALID, "flags 0x%x has bits no KILN_COMPILE_* names (0x%x)",
                      in->flags, in->flags & ~known);
  for (int i = 0; i < in->n_include_dirs; i++)
    if (!in->include_dirs[i]) return kiln__fail(KILN_ERROR_INVALID, "include_dirs[%d] is NULL", i);
  for (int i = 0; i < in->n_headers; i++)
    if (!in->header_names[i] || !in->header_sources[i])
      return kiln__fail(KILN_ERROR_INVALID, "header %d has no %s", i,
                        in->header_names[i] ? "source (header_sources)" : "name (header_names)");
  return KILN_OK;
}

kiln_status kiln__options_translate(const kiln_compile_opts *in, kiln__options *o) {
  memset(o, 0, sizeof *o);
  kiln_status checked = kiln__options_check(in);
  if (checked) return checked;
  if (in) o->opts = *in;
  int n = in ? in->n_options : 0;
  /* Each comma or blank may start one more option of a list (KILN__LIST). */
  size_t commas = 0;
  for (int i = 0; i < n; i++)
    for (const char *c = in->options[i]; c && (c = strpbrk(c, ", \t")); c++) commas++;
  /* Three more places, for -G, -default-device and -lineinfo; strings needs one at least for
   * calloc's sake. */
  o->options = calloc((size_t)n + commas + 3, sizeof *o->options);
  o->strings = calloc((size_t)n + commas + 1, sizeof *o->strings);
  if (!o->options || !o->strings) {
    kiln__options_free(o);
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading the compile options");
  }
  int k = 0;
  kiln_status s = KILN_OK;
  for (int i = 0; i < n && !s; i++) {
    const char *value;
    int used;
    const kiln__rule *rule = kiln__rule_of(in, i, &value, &used);
    kiln__action action = rule ? rule->action : KILN__KEEP;
    const char *made = NULL;
    switch (action) {
    case KILN__KEEP: o->options[k++] = in->options[i]; break;
    case KILN__DROP: break;
    case KILN__JOIN:
    case KILN__REPLACE:
      made = kiln__own(o, rule->to, action == KILN__JOIN ? value : "");
      if (!made) s = kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory reading the compile options");
      else o->options[k++] = made;
      break;
    case KILN__LIST:
    case KILN__HOST: s = kiln__list(o, rule->to, value, &k); break;
    case KILN__ARCH:
      s = kiln__one_target("the arch", value);
      o->options_arch = value; /* nvcc takes the last */
      break;
    case KILN__CODE: s = kiln__set_target(&o->opts.code, value, "the code"); break;
    case KILN__GENCODE: s = kiln__gencode(o, value); break;
    case KILN__RDC:
      if (!value) value = rule->to;
      /* the last -rdc decides, as nvcc reads them (it warns of the redefinition) */
      if (strcmp(value, "true") == 0) o->opts.flags |= KILN_COMPILE_DEVICE_RUNTIME;
      else if (strcmp(value, "false") == 0) o->opts.flags &= ~KILN_COMPILE_DEVICE_RUNTIME;
      else if (strcmp(value, "unlinked") == 0 && rule->to)
        o->opts.flags |= KILN_COMPILE_RELOCATABLE;
      else s = kiln__fail(KILN_ERROR_INVALID, "-rdc takes true or false, not '%s'", value);
      break;
    case KILN__LIBDIR:
      if (!o->opts.device_runtime) o->opts.device_runtime = value;
      break;
    }
    i += used - 1;
  }
  if (!s && o->options_arch) s = kiln__options_arch(o, in);
  o->device_debug = kiln__options_device_debug(); /* once: the memo records what was applied */
  if (!s && o->device_debug && !kiln__names(o->options, k, kiln__device_debug_names))
    o->options[k++] = "-G";
  /* nvcc compiles a function or a namespace-scope variable with no execution space for the
   * host, and sources written for it have them (a helper, a global of the host program);
   * NVRTC refuses each as host code it cannot compile. -default-device makes them device
   * entities instead, and changes nothing else: without it such a source does not compile. */
  if (!s && !kiln__names(o->options, k, kiln__default_device_names))
    o->options[k++] = "-default-device";
  o->lineinfo_env = !kiln__names(o->options, k, kiln__lineinfo_names);
  if (!s && o->lineinfo_env && !kiln__options_lineinfo_off()) o->options[k++] = "-lineinfo";
  o->opts.options = o->options;
  o->opts.n_options = k;
  if (s) kiln__options_free(o);
  return s;
}

void kiln__options_free(kiln__options *o) {
  for (int i = 0; i < o->n_strings; i++) free(o->strings[i]);
  free(o->strings);
  free(o->options);
  memset(o, 0, sizeof *o);
}
