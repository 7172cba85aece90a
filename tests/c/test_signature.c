/* The PTX signature parser and the mangled-name reader: no GPU, no NVRTC. */
#include "runner.h"

#include "../../engine/src/signature.h"

static kiln__entry *parse_ok(const char *ptx, int *n) {
  kiln__entry *e = NULL;
  kiln_status s = kiln__ptx_parse(ptx, strlen(ptx), &e, n);
  if (s != KILN_OK) FAIL("parse failed: %s: %s", kiln_status_name(s), kiln_last_error());
  return e;
}

TEST(ptx_every_parameter_class) {
  const char *ptx =
      "// comment with .entry fake(\n"
      ".version 8.0\n.target sm_90\n.address_size 64\n"
      "/* block comment .entry alsofake( */\n"
      ".visible .entry k(\n"
      "  .param .u8 k_param_0, .param .s8 k_param_1,\n"
      "  .param .u16 k_param_2, .param .s16 k_param_3,\n"
      "  .param .u32 k_param_4, .param .s32 k_param_5, .param .b32 k_param_6,\n"
      "  .param .f32 k_param_7, .param .u64 k_param_8, .param .s64 k_param_9,\n"
      "  .param .f64 k_param_10,\n"
      "  .param .align 16 .b8 k_param_11[16],\n"
      "  .param .align 8 .b8 k_param_12[24],\n"
      "  .param .u64 .ptr .global .align 4 k_param_13\n"
      ")\n.maxntid 128, 1, 1\n{\n ret;\n}\n";
  int n = 0;
  kiln__entry *e = parse_ok(ptx, &n);
  ASSERT_EQ(n, 1);
  ASSERT_STR_EQ(e[0].name, "k");
  ASSERT_STR_EQ(e[0].plain, "k");
  ASSERT_EQ(e[0].n_params, 14);
  struct { kiln_param_class cls; unsigned size, align; } want[] = {
      {KILN_PARAM_B8, 1, 1},   {KILN_PARAM_I8, 1, 1},   {KILN_PARAM_B16, 2, 2},
      {KILN_PARAM_I16, 2, 2},  {KILN_PARAM_B32, 4, 4},  {KILN_PARAM_I32, 4, 4},
      {KILN_PARAM_B32, 4, 4},  {KILN_PARAM_F32, 4, 4},  {KILN_PARAM_B64, 8, 8},
      {KILN_PARAM_I64, 8, 8},  {KILN_PARAM_F64, 8, 8},  {KILN_PARAM_AGGREGATE, 16, 16},
      {KILN_PARAM_AGGREGATE, 24, 8}, {KILN_PARAM_PTR, 8, 8},
  };
  for (int i = 0; i < 14; i++) {
    if (e[0].params[i].cls != want[i].cls || e[0].params[i].size != want[i].size ||
        e[0].params[i].align != want[i].align)
      FAIL("param %d: got %s size %u align %u, want %s size %u align %u", i,
           kiln_param_class_name(e[0].params[i].cls), e[0].params[i].size,
           e[0].params[i].align, kiln_param_class_name(want[i].cls), want[i].size,
           want[i].align);
  }
  kiln__entries_free(e, n);
}

TEST(ptx_several_entries_and_no_parameters) {
  const char *ptx = ".entry a()\n{ ret; }\n.visible .entry b\n{ ret; }\n"
                    ".weak .entry c(.param .f32 c_p0)\n{ ret; }\n"
                    ".func (.param .b32 r) helper(.param .b32 x) { ret; }\n";
  int n = 0;
  kiln__entry *e = parse_ok(ptx, &n);
  ASSERT_EQ(n, 3);
  ASSERT_STR_EQ(e[0].name, "a");
  ASSERT_EQ(e[0].n_params, 0);
  ASSERT_STR_EQ(e[1].name, "b");
  ASSERT_EQ(e[1].n_params, 0);
  ASSERT_STR_EQ(e[2].name, "c");
  ASSERT_EQ(e[2].n_params, 1);
  ASSERT_EQ(e[2].params[0].cls, KILN_PARAM_F32);
  kiln__entries_free(e, n);
}

TEST(ptx_long_signature) {
  char *ptx = malloc(64 * 1024);
  size_t used = (size_t)sprintf(ptx, ".visible .entry many(\n");
  for (int i = 0; i < 500; i++)
    used += (size_t)sprintf(ptx + used, "  .param .u32 many_param_%d%s\n", i, i < 499 ? "," : "");
  sprintf(ptx + used, ")\n{ ret; }\n");
  int n = 0;
  kiln__entry *e = parse_ok(ptx, &n);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(e[0].n_params, 500);
  ASSERT_EQ(e[0].params[499].size, 4);
  kiln__entries_free(e, n);
  free(ptx);
}

TEST(ptx_malformed_is_a_status) {
  const char *bad[] = {
      ".entry k(.param .u32 a",                     /* unterminated */
      ".entry k(.param .u32)\n{}",                  /* no name */
      ".entry k(.param a)\n{}",                     /* no type */
      ".entry k(.param .align 3 .b8 a[4])\n{}",     /* alignment not a power of two */
      ".entry k(.param .align 8 .b8 a[])\n{}",      /* no length */
      ".entry k(.param .align 8 .b8 a[0])\n{}",     /* zero length */
      ".entry k(.param .align 8 .b8 a[99999])\n{}", /* past the parameter space */
      ".entry k(.u32 a)\n{}",                       /* no .param */
      ".entry k(.param .u32 a .param .u32 b)\n{}",  /* no comma */
      ".entry (",                                   /* no name */
      ".entry",
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kiln__entry *e = (kiln__entry *)1;
    int n = -1;
    kiln_status s = kiln__ptx_parse(bad[i], strlen(bad[i]), &e, &n);
    if (s != KILN_ERROR_PTX) FAIL("'%s' gave %s, not KILN_ERROR_PTX", bad[i], kiln_status_name(s));
    ASSERT(e == NULL);
    ASSERT_EQ(n, 0);
    ASSERT_CONTAINS(kiln_last_error(), "malformed PTX");
  }
}

TEST(ptx_every_prefix_parses_or_fails_cleanly) {
  /* Truncated PTX, at every length: a status or a parse, never a read past the end. */
  const char *ptx = ".visible .entry _Z1kPfi(\n .param .u64 _Z1kPfi_param_0,\n"
                    " .param .align 16 .b8 _Z1kPfi_param_1[16]\n)\n{ ret; }\n";
  size_t len = strlen(ptx);
  for (size_t cut = 0; cut <= len; cut++) {
    char *copy = malloc(cut ? cut : 1); /* exactly cut bytes: ASan or valgrind catch overreads */
    memcpy(copy, ptx, cut);
    kiln__entry *e = NULL;
    int n = 0;
    kiln_status s = kiln__ptx_parse(copy, cut, &e, &n);
    ASSERT(s == KILN_OK || s == KILN_ERROR_PTX);
    kiln__entries_free(e, n);
    free(copy);
  }
}

TEST(mangled_names_give_signs_and_pointers) {
  struct {
    const char *mangled, *plain;
    int n;
    int types[8];
  } cases[] = {
      {"_Z13multiply_themPfPKfS1_i", "multiply_them", 4,
       {KILN_PARAM_PTR, KILN_PARAM_PTR, KILN_PARAM_PTR, KILN_PARAM_I32}},
      {"_Z1kjmyhtsa", "k", 7,
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
