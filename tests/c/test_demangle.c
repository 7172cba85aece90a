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
