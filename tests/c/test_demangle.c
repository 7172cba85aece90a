/* The Itanium-mangled name reader: plain names, signs and pointers. No GPU, no NVRTC. */
#include "runner.h"

#include "../../engine/src/demangle.h"

/* A NUL-terminated name through the (pointer, length) reader. */
static char *demangle(const char *s, int *types, int max_types, int *n_types) {
  return kiln__demangle(s, strlen(s), types, max_types, n_types);
}

TEST(mangled_names_give_signs_and_pointers) {
  struct {
    const char *mangled, *plain;
    int n;
    int types[8];
  } cases[] = {
      {"_Z13multiply_themPfPKfS1_i",
       "multiply_them",
       4,
       {KILN_PARAM_PTR, KILN_PARAM_PTR, KILN_PARAM_PTR, KILN_PARAM_I32}},
      {"_Z1kjmyhtsa",
       "k",
       7,
       {KILN_PARAM_U32, KILN_PARAM_U64, KILN_PARAM_U64, KILN_PARAM_U8, KILN_PARAM_U16,
        KILN_PARAM_I16, KILN_PARAM_I8}},
      {"_ZN2ns5scaleEPdd", "ns::scale", 2, {KILN_PARAM_PTR, KILN_PARAM_F64}},
      {"_Z3vecP4int44int4", "vec", 2, {KILN_PARAM_PTR, -1}},
      {"_Z1kPf4int4S0_", "k", 3, {KILN_PARAM_PTR, -1, -1}},
      {"_Z1kv", "k", 0, {0}},
      {"_Z1kKi", "k", 1, {KILN_PARAM_I32}},
      {"_Z1kPKiS_", "k", 2, {KILN_PARAM_PTR, KILN_PARAM_I32}},
      {"_Z1kPKiS0_", "k", 2, {KILN_PARAM_PTR, KILN_PARAM_PTR}},
      /* a nested name from a substitution (NS_1YE) adds ns::Y, not ns again: S2_ is ns::Y * */
      {"_Z1hN2ns1XEPNS_1YES2_", "h", 3, {-1, KILN_PARAM_PTR, KILN_PARAM_PTR}},
      /* pointers to arrays, and a substitution for one (S0_ is float (*)[6]) */
      {"_Z1kPA6_A6_fPA3_ii", "k", 3, {KILN_PARAM_PTR, KILN_PARAM_PTR, KILN_PARAM_I32}},
      {"_Z1kPA6_fS0_", "k", 2, {KILN_PARAM_PTR, KILN_PARAM_PTR}},
      /* void behind a pointer; long double's class is PTX's */
      {"_Z1kPKvijPPvS1_e",
       "k",
       6,
       {KILN_PARAM_PTR, KILN_PARAM_I32, KILN_PARAM_U32, KILN_PARAM_PTR, KILN_PARAM_PTR, -1}},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int types[16], n = -2;
    char *plain = demangle(cases[i].mangled, types, 16, &n);
    ASSERT_STR_EQ(plain, cases[i].plain);
    if (n != cases[i].n) FAIL("%s: %d types, want %d", cases[i].mangled, n, cases[i].n);
    for (int j = 0; j < n; j++)
      if (types[j] != cases[i].types[j])
        FAIL("%s: type %d is %d, want %d", cases[i].mangled, j, types[j], cases[i].types[j]);
    free(plain);
  }
}

TEST(mangled_templates_give_the_name_only) {
  int types[8], n = 0;
  char *plain = demangle("_Z4axpyIfEvT_PKS0_PS0_i", types, 8, &n);
  ASSERT_STR_EQ(plain, "axpy");
  ASSERT_EQ(n, -1);
  free(plain);
  plain = demangle("_ZN2ns4axpyILi3EEEvPf", types, 8, &n);
  ASSERT_STR_EQ(plain, "ns::axpy");
  ASSERT_EQ(n, -1);
  free(plain);
  ASSERT(demangle("multiply_them", types, 8, &n) == NULL);
  ASSERT(demangle("_Z", types, 8, &n) == NULL);
  ASSERT(demangle("_Z99short", types, 8, &n) == NULL);
}

TEST(mangled_names_nest_only_so_deep) {
  /* _Z1f and 300,000 P's, as a .entry might spell it: unreadable types, never a stack overflow.
   * No NUL after it either: the reader keeps to the length it is given. */
  size_t len = 4 + 300000;
  char *name = malloc(len);
  ASSERT(name);
  memcpy(name, "_Z1f", 4);
  memset(name + 4, 'P', len - 4);
  int types[4], n = 0;
  char *plain = kiln__demangle(name, len, types, 4, &n);
  ASSERT_STR_EQ(plain, "f");
  ASSERT_EQ(n, -1);
  free(plain);
  /* 32 levels are read; 100 are past the limit, and say so by reading nothing. */
  memcpy(name + 4 + 32, "i", 1);
  plain = kiln__demangle(name, 4 + 32 + 1, types, 4, &n);
  ASSERT_STR_EQ(plain, "f");
  ASSERT_EQ(n, 1);
  ASSERT_EQ(types[0], KILN_PARAM_PTR);
  free(plain);
  memcpy(name + 4 + 32, "P", 1);
  memcpy(name + 4 + 100, "i", 1);
  plain = kiln__demangle(name, 4 + 100 + 1, types, 4, &n);
  ASSERT_STR_EQ(plain, "f");
  ASSERT_EQ(n, -1);
  free(plain);
  /* cv-qualifiers nest the same way. */
  memset(name + 4, 'K', len - 4);
  plain = kiln__demangle(name, len, types, 4, &n);
  ASSERT_STR_EQ(plain, "f");
  ASSERT_EQ(n, -1);
  free(plain);
  for (size_t i = 4; i < len; i++) name[i] = (char)("PKRVO"[i % 5]);
  plain = kiln__demangle(name, len, types, 4, &n);
  ASSERT_STR_EQ(plain, "f");
  ASSERT_EQ(n, -1);
  free(plain);
  free(name);
}

TEST(mangled_names_are_read_within_their_length) {
  /* Every prefix of each name, in a buffer of exactly that many bytes: ASan or valgrind catch a
   * read past it. */
  const char *names[] = {
      "_Z13multiply_themPfPKfS1_i", "_ZN2ns5scaleEPdd", "_Z4axpyIfEvT_PKS0_PS0_i",
      "_ZN2ns4axpyILi3EEEvPf",      "_Z1kPf4int4S0_",   "_Z3vecP4int44int4"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    size_t len = strlen(names[i]);
    for (size_t cut = 0; cut <= len; cut++) {
      char *copy = malloc(cut ? cut : 1);
      ASSERT(copy);
      memcpy(copy, names[i], cut);
      int types[16], n = -2;
      char *plain = kiln__demangle(copy, cut, types, 16, &n);
      ASSERT(n >= -1 && n <= 16);
      if (plain) ASSERT(strlen(plain) < cut);
      free(plain);
      free(copy);
    }
  }
  /* A name's characters are an identifier's: a NUL inside is no name (it would be an empty one). */
  int t[4], m = 0;
  ASSERT(kiln__demangle("_Z1\0iKS0_", 9, t, 4, &m) == NULL);
  ASSERT(kiln__demangle("_Z2a ii", 7, t, 4, &m) == NULL);
  /* The length decides, not a NUL: what follows it is not read as part of the name. */
  int types[4], n = 0;
  char *plain = kiln__demangle("_Z1kiPPPPjunk", 5, types, 4, &n);
  ASSERT_STR_EQ(plain, "k");
  ASSERT_EQ(n, 1);
  ASSERT_EQ(types[0], KILN_PARAM_I32);
  free(plain);
}

TEST(module_from_image_with_a_deeply_nested_name) {
  /* The whole path a prebuilt PTX takes: the kernel loads under its plain name, its parameter
   * types taken from the PTX alone. */
  const char *head = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry _Z1f";
  const char *tail = "(\n.param .u64 p\n)\n{\nret;\n}\n";
  size_t deep = 300000, len = strlen(head) + deep + strlen(tail);
  char *ptx = malloc(len);
  ASSERT(ptx);
  memcpy(ptx, head, strlen(head));
  memset(ptx + strlen(head), 'P', deep);
  memcpy(ptx + strlen(head) + deep, tail, strlen(tail)); /* no NUL after it */
  kiln_module *m = NULL;
  ASSERT_OK(kiln_module_from_image(ptx, len, &m));
  ASSERT_EQ(kiln_module_function_count(m), 1);
  ASSERT_EQ(strlen(kiln_module_function_name(m, 0)), 4 + deep); /* the PTX name, whole */
  kiln_function *f = NULL;
  ASSERT_OK(kiln_module_get_function(m, "f", &f));
  ASSERT_EQ(kiln_function_param_count(f), 1);
  ASSERT_EQ(kiln_function_params(f)[0].cls, KILN_PARAM_B64);
  kiln_module_free(m);
  free(ptx);
}

TEST(mangled_names_give_the_declaration) {
  struct {
    const char *mangled, *declared;
  } cases[] = {
      {"_Z13multiply_themPfPKfS1_i", "multiply_them(float *, const float *, const float *, int)"},
      {"_Z3cppPfPKfiid", "cpp(float *, const float *, int, int, double)"},
      {"_Z1kjmyhtsa", "k(unsigned int, unsigned long, unsigned long long, unsigned char, "
                      "unsigned short, short, signed char)"},
      {"_ZN2ns5scaleEPdd", "ns::scale(double *, double)"},
      {"_Z3vecP4int44int4", "vec(int4 *, int4)"},
      {"_Z1kv", "k()"},
      {"_Z1kPKiS_", "k(const int *, const int)"}, /* K i is a candidate, i alone is not */
      {"_Z1kPKiS0_", "k(const int *, const int *)"},
      {"_Z1kPPc", "k(char **)"},
      {"_Z1kKPf", "k(float *const)"},
      {"_Z4axpyIfLi128EEvT_PKS0_PS0_", "axpy<float, 128>(float, const float *, float *)"},
      {"_ZN2ns4axpyILi3EEEvPf", "ns::axpy<3>(float *)"},
      {"_ZN2ns5innerE1SPKS0_yS2_PPc",
       "ns::inner(S, const S *, unsigned long long, const S *, char **)"},
      {"_Z1kIbLb1EEvT_", "k<bool, true>(bool)"},
      /* NS0_IdE: S0_ is a candidate already, so S3_ is kiln::complex<double> */
      {"_Z3putPN4kiln7complexIfEES1_PNS0_IdEES3_",
       "put(kiln::complex<float> *, kiln::complex<float>, kiln::complex<double> *, "
       "kiln::complex<double>)"},
      {"_Z1hN2ns1XEPNS_1YES2_", "h(ns::X, ns::Y *, ns::Y *)"},
      /* float a[][6][6], int (*b)[3], const float c[][4]: pointers to arrays */
      {"_Z1kPA6_A6_fPA3_iPA4_Kf", "k(float (*)[6][6], int (*)[3], const float (*)[4])"},
      {"_Z1kPPA6_f", "k(float (**)[6])"},
      {"_Z1kRPA6_f", "k(float (*&)[6])"},
      {"_Z1kRA4_f", "k(float (&)[4])"},
      {"_Z1kPA3_Pf", "k(float *(*)[3])"},
      {"_Z1kPA6_fS0_", "k(float (*)[6], float (*)[6])"}, /* A6_f is S_, its pointer S0_ */
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    char *declared = kiln__demangle_signature(cases[i].mangled);
    ASSERT_STR_EQ(declared, cases[i].declared);
    free(declared);
  }
}

TEST(unreadable_names_give_no_declaration) {
  /* Not mangled, cut short, an empty name, a substitution or template argument that is not
   * there, an expression: NULL, never a wrong text. */
  const char *names[] = {"multiply_them",      "_Z",       "_Z0",     "_Z99short",
                         "_Z1kPS3_",           "_Z1kT_",   "_Z1kPf_", "_ZN2nsE",
                         "_Z1kIXadL_Z1xEEEvv", "_Z1kPA6f", "_Z1kPA",  "_Z1kKPA6_f",
                         "_Z1kPA2_PA3_f",      "_Z1[1$",   "_Z1k1(",  "_ZN2ns4axpyILi)3EEEvPf"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char *declared = kiln__demangle_signature(names[i]);
    if (declared) FAIL("%s gave '%s', want none", names[i], declared);
  }
}
