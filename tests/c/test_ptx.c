/* The PTX parser: every .entry's parameters, and malformed PTX as a status. No GPU, no NVRTC. */
#include "runner.h"

#include "../../engine/src/ptx.h"

static kiln__kernel *parse_ok(const char *ptx, int *n) {
  kiln__kernel *k = NULL;
  kiln_status s = kiln__ptx_parse(ptx, strlen(ptx), &k, n);
  if (s != KILN_OK) FAIL("parse failed: %s: %s", kiln_status_name(s), kiln_last_error());
  return k;
}

TEST(ptx_every_parameter_class) {
  const char *ptx = "// comment with .entry fake(\n"
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
  kiln__kernel *k = parse_ok(ptx, &n);
  ASSERT_EQ(n, 1);
  ASSERT_STR_EQ(k[0].name, "k");
  ASSERT_STR_EQ(k[0].plain, "k");
  ASSERT_EQ(k[0].n_params, 14);
  struct {
    kiln_param_class cls;
    unsigned size, align;
  } want[] = {
      {KILN_PARAM_B8, 1, 1},         {KILN_PARAM_I8, 1, 1},  {KILN_PARAM_B16, 2, 2},
      {KILN_PARAM_I16, 2, 2},        {KILN_PARAM_B32, 4, 4}, {KILN_PARAM_I32, 4, 4},
      {KILN_PARAM_B32, 4, 4},        {KILN_PARAM_F32, 4, 4}, {KILN_PARAM_B64, 8, 8},
      {KILN_PARAM_I64, 8, 8},        {KILN_PARAM_F64, 8, 8}, {KILN_PARAM_AGGREGATE, 16, 16},
      {KILN_PARAM_AGGREGATE, 24, 8}, {KILN_PARAM_PTR, 8, 8},
  };
  for (int i = 0; i < 14; i++) {
    if (k[0].params[i].cls != want[i].cls || k[0].params[i].size != want[i].size ||
        k[0].params[i].align != want[i].align)
      FAIL("param %d: got %s size %u align %u, want %s size %u align %u", i,
           kiln_param_class_name(k[0].params[i].cls), k[0].params[i].size, k[0].params[i].align,
           kiln_param_class_name(want[i].cls), want[i].size, want[i].align);
  }
  kiln__ptx_free_kernels(k, n);
}

TEST(ptx_several_entries_and_no_parameters) {
  const char *ptx = ".entry a()\n{ ret; }\n.visible .entry b\n{ ret; }\n"
                    ".weak .entry c(.param .f32 c_p0)\n{ ret; }\n"
                    ".func (.param .b32 r) helper(.param .b32 x) { ret; }\n";
  int n = 0;
  kiln__kernel *k = parse_ok(ptx, &n);
  ASSERT_EQ(n, 3);
  ASSERT_STR_EQ(k[0].name, "a");
  ASSERT_EQ(k[0].n_params, 0);
  ASSERT_STR_EQ(k[1].name, "b");
  ASSERT_EQ(k[1].n_params, 0);
  ASSERT_STR_EQ(k[2].name, "c");
  ASSERT_EQ(k[2].n_params, 1);
  ASSERT_EQ(k[2].params[0].cls, KILN_PARAM_F32);
  kiln__ptx_free_kernels(k, n);
}

TEST(ptx_long_signature) {
  char *ptx = malloc(64 * 1024);
  size_t used = (size_t)sprintf(ptx, ".visible .entry many(\n");
  for (int i = 0; i < 500; i++)
    used += (size_t)sprintf(ptx + used, "  .param .u32 many_param_%d%s\n", i, i < 499 ? "," : "");
  sprintf(ptx + used, ")\n{ ret; }\n");
  int n = 0;
  kiln__kernel *k = parse_ok(ptx, &n);
  ASSERT_EQ(n, 1);
  ASSERT_EQ(k[0].n_params, 500);
  ASSERT_EQ(k[0].params[499].size, 4);
  kiln__ptx_free_kernels(k, n);
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
    kiln__kernel *k = (kiln__kernel *)1;
    int n = -1;
    kiln_status s = kiln__ptx_parse(bad[i], strlen(bad[i]), &k, &n);
    if (s != KILN_ERROR_PTX) FAIL("'%s' gave %s, not KILN_ERROR_PTX", bad[i], kiln_status_name(s));
    ASSERT(k == NULL);
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
    kiln__kernel *k = NULL;
    int n = 0;
    kiln_status s = kiln__ptx_parse(copy, cut, &k, &n);
    ASSERT(s == KILN_OK || s == KILN_ERROR_PTX);
    kiln__ptx_free_kernels(k, n);
    free(copy);
  }
}
