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

/* An exact-size copy of text[0..n): ASan and valgrind see a read of the byte after it. */
static char *exact_copy(const char *text, size_t n) {
  char *copy = malloc(n ? n : 1);
  if (!copy) FAIL("out of memory");
  memcpy(copy, text, n);
  return copy;
}

TEST(ptx_names_at_the_end_of_the_text_are_copied_exactly) {
  /* A name that ends the buffer is copied without the byte after it, by each reader that keeps
   * names: the kernels', the module variables', and the prebuilt-image path that holds both. */
  const char *ptx = ".version 8.0\n.target sm_90\n.address_size 64\n"
                    ".global .align 4 .b32 counter;\n.visible .entry kern";
  size_t len = strlen(ptx);
  for (size_t cut = 0; cut <= len; cut++) {
    char *copy = exact_copy(ptx, cut);
    kiln__kernel *k = NULL;
    int n = 0;
    kiln_status s = kiln__ptx_parse(copy, cut, &k, &n);
    ASSERT(s == KILN_OK || s == KILN_ERROR_PTX);
    for (int i = 0; i < n; i++) ASSERT(strlen(k[i].name) < cut);
    if (cut == len) {
      ASSERT_EQ(n, 1);
      ASSERT_STR_EQ(k[0].name, "kern");
    }
    kiln__ptx_free_kernels(k, n);
    char **names = NULL;
    ASSERT_OK(kiln__ptx_globals(copy, cut, &names, &n));
    for (int i = 0; i < n; i++) ASSERT(strlen(names[i]) < cut);
    if (cut == len) {
      ASSERT_EQ(n, 1);
      ASSERT_STR_EQ(names[0], "counter");
    }
    kiln__ptx_free_names(names, n);
    kiln_module *m = NULL;
    s = kiln_module_from_image(copy, cut, &m);
    ASSERT(s == KILN_OK || s == KILN_ERROR_PTX || s == KILN_ERROR_INVALID);
    if (cut == len) {
      ASSERT_EQ(s, KILN_OK);
      ASSERT_EQ(kiln_module_function_count(m), 1);
      ASSERT_STR_EQ(kiln_module_function_name(m, 0), "kern");
    }
    kiln_module_free(m);
    free(copy);
  }
  /* A variable's name that ends the text. */
  const char *tail = ".global .b32 last";
  char *copy = exact_copy(tail, strlen(tail));
  char **names = NULL;
  int n = 0;
  ASSERT_OK(kiln__ptx_globals(copy, strlen(tail), &names, &n));
  ASSERT_EQ(n, 1);
  ASSERT_STR_EQ(names[0], "last");
  kiln__ptx_free_names(names, n);
  free(copy);
}

TEST(ptx_signature_rules_hold_for_every_reader) {
  /* What the parser gives keeps the rules a cache entry and the driver are held to. */
  const char *ptx = ".visible .entry _Z1kPfdic(.param .u64 a, .param .f64 b, .param .u32 c,\n"
                    " .param .u8 d)\n{ ret; }\n"
                    ".entry s(.param .align 4096 .b8 big[4096], .param .f16 h)\n{ ret; }\n";
  int n = 0;
  kiln__kernel *k = parse_ok(ptx, &n);
  ASSERT_EQ(n, 2);
  for (int i = 0; i < n; i++) ASSERT(kiln__ptx_check_kernel(&k[i]) == NULL);
  ASSERT_EQ(k[0].params[1].cls, KILN_PARAM_F64);
  kiln__ptx_free_kernels(k, n);

  /* And what breaks them, each named. */
  struct {
    const char *name, *plain;
    kiln_param p;
    const char *why;
  } bad[] = {
      {"k", "k", {KILN_PARAM_F64, 1, 1}, "size does not fit its class"},
      {"k", "k", {KILN_PARAM_F64, 4, 8}, "size does not fit its class"},
      {"k", "k", {KILN_PARAM_PTR, 4, 4}, "size does not fit its class"},
      {"k", "k", {KILN_PARAM_I32, 8, 4}, "size does not fit its class"},
      {"k", "k", {KILN_PARAM_U8, 2, 1}, "size does not fit its class"},
      {"k", "k", {KILN_PARAM_AGGREGATE, 0, 1}, "size does not fit its class"},
      {"k", "k", {(kiln_param_class)99, 4, 4}, "no known class"},
      {"k", "k", {KILN_PARAM_AGGREGATE, 40000, 8}, "larger than the parameter space"},
      {"k", "k", {KILN_PARAM_I32, 4, 3}, "power of two"},
      {"k", "k", {KILN_PARAM_I32, 4, 0}, "power of two"},
      {"k", "k", {KILN_PARAM_AGGREGATE, 16, 8192}, "power of two"},
      {"", "k", {KILN_PARAM_I32, 4, 4}, "not a PTX name"},
      {"1k", "k", {KILN_PARAM_I32, 4, 4}, "not a PTX name"},
      {"k k", "k", {KILN_PARAM_I32, 4, 4}, "not a PTX name"},
      {"k", "", {KILN_PARAM_I32, 4, 4}, "no plain name"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    kiln__kernel one = {(char *)bad[i].name, (char *)bad[i].plain, &bad[i].p, 1, 0};
    const char *why = kiln__ptx_check_kernel(&one);
    if (!why) FAIL("case %zu was accepted", i);
    ASSERT_CONTAINS(why, bad[i].why);
  }
  /* Two parameters that fit alone but not together once padded. */
  kiln_param two[2] = {{KILN_PARAM_B8, 1, 1}, {KILN_PARAM_AGGREGATE, 32760, 8}};
  kiln__kernel pair = {(char *)"k", (char *)"k", two, 2, 0};
  ASSERT_CONTAINS(kiln__ptx_check_kernel(&pair), "more than 32764 bytes");
  two[1].align = 1;
  ASSERT(kiln__ptx_check_kernel(&pair) == NULL);
}
