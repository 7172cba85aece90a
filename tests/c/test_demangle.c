/* The Itanium-mangled name reader: plain names, signs and pointers. No GPU, no NVRTC. */
#include "runner.h"

#include "../../engine/src/demangle.h"

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
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    int types[16], n = -2;
    char *plain = kiln__demangle(cases[i].mangled, types, 16, &n);
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
  char *plain = kiln__demangle("_Z4axpyIfEvT_PKS0_PS0_i", types, 8, &n);
  ASSERT_STR_EQ(plain, "axpy");
  ASSERT_EQ(n, -1);
  free(plain);
  plain = kiln__demangle("_ZN2ns4axpyILi3EEEvPf", types, 8, &n);
  ASSERT_STR_EQ(plain, "ns::axpy");
  ASSERT_EQ(n, -1);
  free(plain);
  ASSERT(kiln__demangle("multiply_them", types, 8, &n) == NULL);
  ASSERT(kiln__demangle("_Z", types, 8, &n) == NULL);
  ASSERT(kiln__demangle("_Z99short", types, 8, &n) == NULL);
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
  const char *names[] = {"multiply_them", "_Z",      "_Z0",     "_Z99short",         "_Z1kPS3_",
                         "_Z1kT_",        "_Z1kPf_", "_ZN2nsE", "_Z1kIXadL_Z1xEEEvv"};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    char *declared = kiln__demangle_signature(names[i]);
    if (declared) FAIL("%s gave '%s', want none", names[i], declared);
  }
}
