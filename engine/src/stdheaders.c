/* The C and C++ standard headers NVRTC lacks, given to it in memory: kernels written for nvcc
 * include <stdio.h> for printf, <math.h> for M_PI, <stdint.h>, <assert.h>, and NVRTC, which
 * compiles device code only, ships none of them. What device code has of each is built into
 * NVRTC already (printf, malloc, sinf, __assertfail); these headers add the macros, types and
 * std:: names around them. Where the toolkit's libcu++ defines the same names for NVRTC
 * (<cuda/std/cstdint>, <cuda/std/climits>), they are taken from it, so a source that includes
 * both sees one definition. A header is given only when the compile would find no file of that
 * name: NVRTC searches in-memory headers before the include folders, and a user's own stdio.h
 * must win as it would under nvcc. */
#include "stdheaders.h"

#include "headers.h"
#include "nvrtc.h"

#include <ctype.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

/* The C library's macros of <math.h> and <stdlib.h>, which kiln's headers of those names and
 * the names nvcc's kernels see without an #include (below) share, each guarded, so that
 * either may come first. INFINITY and NAN are apart (KILN__INF_MACROS). */
#define KILN__MATH_MACROS                                                \
  "#ifndef HUGE_VALF\n"                                                  \
  "#define HUGE_VALF __builtin_bit_cast(float, 0x7f800000u)\n"           \
  "#endif\n"                                                             \
  "#ifndef HUGE_VAL\n"                                                   \
  "#define HUGE_VAL __builtin_bit_cast(double, 0x7ff0000000000000ull)\n" \
  "#endif\n"                                                             \
  "#ifndef M_PI\n"                                                       \
  "#define M_E 2.7182818284590452354\n"                                  \
  "#define M_LOG2E 1.4426950408889634074\n"                              \
  "#define M_LOG10E 0.43429448190325182765\n"                            \
  "#define M_LN2 0.69314718055994530942\n"                               \
  "#define M_LN10 2.30258509299404568402\n"                              \
  "#define M_PI 3.14159265358979323846\n"                                \
  "#define M_PI_2 1.57079632679489661923\n"                              \
  "#define M_PI_4 0.78539816339744830962\n"                              \
  "#define M_1_PI 0.31830988618379067154\n"                              \
  "#define M_2_PI 0.63661977236758134308\n"                              \
  "#define M_2_SQRTPI 1.12837916709551257390\n"                          \
  "#define M_SQRT2 1.41421356237309504880\n"                             \
  "#define M_SQRT1_2 0.70710678118654752440\n"                           \
  "#endif\n"                                                             \
  "#ifndef MAXFLOAT\n"                                                   \
  "#define MAXFLOAT 3.40282347e+38F\n"                                   \
  "#endif\n"

#define KILN__STDLIB_MACROS       \
  "#ifndef EXIT_SUCCESS\n"        \
  "#define EXIT_SUCCESS 0\n"      \
  "#define EXIT_FAILURE 1\n"      \
  "#endif\n"                      \
  "#ifndef RAND_MAX\n"            \
  "#define RAND_MAX 2147483647\n" \
  "#endif\n"

/* <math.h>'s INFINITY and NAN, shared by kiln's <math.h> and nvcc's implicit names (below). */
#define KILN__INF_MACROS                                      \
  "#ifndef INFINITY\n"                                        \
  "#define INFINITY __builtin_bit_cast(float, 0x7f800000u)\n" \
  "#endif\n"                                                  \
  "#ifndef NAN\n"                                             \
  "#define NAN __builtin_bit_cast(float, 0x7fc00000u)\n"      \
  "#endif\n"
/* <limits.h>'s macros, which nvcc's kernels see without an #include too, spelled as libcu++'s
 * <cuda/std/climits> spells them under NVRTC: it defines them whatever came before, and a macro
 * defined again with the same text is no redefinition, so <climits> or CUB after them agrees.
 * kiln's <limits.h> takes libcu++'s where the toolkit has them, else these. Each is guarded,
 * for a -D of one's own. (LONG_MAX is LLONG_MAX there: NVRTC's long has 64 bits.) */
#define KILN__LIMITS_MACROS                   \
  "#ifndef CHAR_BIT\n"                        \
  "#define CHAR_BIT 8\n"                      \
  "#endif\n"                                  \
  "#ifndef SCHAR_MIN\n"                       \
  "#define SCHAR_MIN (-128)\n"                \
  "#endif\n"                                  \
  "#ifndef SCHAR_MAX\n"                       \
  "#define SCHAR_MAX 127\n"                   \
  "#endif\n"                                  \
  "#ifndef UCHAR_MAX\n"                       \
  "#define UCHAR_MAX 255\n"                   \
  "#endif\n"                                  \
  "#ifndef CHAR_MIN\n"                        \
  "#define CHAR_MIN SCHAR_MIN\n"              \
  "#endif\n"                                  \
  "#ifndef CHAR_MAX\n"                        \
  "#define CHAR_MAX SCHAR_MAX\n"              \
  "#endif\n"                                  \
  "#ifndef SHRT_MIN\n"                        \
  "#define SHRT_MIN (-SHRT_MAX - 1)\n"        \
  "#endif\n"                                  \
  "#ifndef SHRT_MAX\n"                        \
  "#define SHRT_MAX 0x7fff\n"                 \
  "#endif\n"                                  \
  "#ifndef USHRT_MAX\n"                       \
  "#define USHRT_MAX 0xffff\n"                \
  "#endif\n"                                  \
  "#ifndef INT_MIN\n"                         \
  "#define INT_MIN (-INT_MAX - 1)\n"          \
  "#endif\n"                                  \
  "#ifndef INT_MAX\n"                         \
  "#define INT_MAX 0x7fffffff\n"              \
  "#endif\n"                                  \
  "#ifndef UINT_MAX\n"                        \
  "#define UINT_MAX 0xffffffff\n"             \
  "#endif\n"                                  \
  "#ifndef LONG_MIN\n"                        \
  "#define LONG_MIN (-LONG_MAX - 1)\n"        \
  "#endif\n"                                  \
  "#ifndef LONG_MAX\n"                        \
  "#define LONG_MAX LLONG_MAX\n"              \
  "#endif\n"                                  \
  "#ifndef ULONG_MAX\n"                       \
  "#define ULONG_MAX ULLONG_MAX\n"            \
  "#endif\n"                                  \
  "#ifndef LLONG_MIN\n"                       \
  "#define LLONG_MIN (-LLONG_MAX - 1)\n"      \
  "#endif\n"                                  \
  "#ifndef LLONG_MAX\n"                       \
  "#define LLONG_MAX 0x7fffffffffffffffLL\n"  \
  "#endif\n"                                  \
  "#ifndef ULLONG_MAX\n"                      \
  "#define ULLONG_MAX 0xffffffffffffffffUL\n" \
  "#endif\n"

/* <cmath>'s functions in std, which nvcc's kernels see without an #include too (nvcc's
 * cuda_runtime.h brings in the host's <cmath>): kiln's <cmath> and the names before every
 * compile (below) share them; a using-declaration may be repeated. */
#define KILN__STD_MATH_NAMES                                                                      \
  "  using ::acos; using ::acosf; using ::acosh; using ::acoshf; using ::asin; using ::asinf;\n"  \
  "  using ::asinh; using ::asinhf; using ::atan; using ::atanf; using ::atan2; using "           \
  "::atan2f;\n"                                                                                   \
  "  using ::atanh; using ::atanhf; using ::cbrt; using ::cbrtf; using ::ceil; using ::ceilf;\n"  \
  "  using ::copysign; using ::copysignf; using ::cos; using ::cosf; using ::cosh; using "        \
  "::coshf;\n"                                                                                    \
  "  using ::erf; using ::erff; using ::erfc; using ::erfcf; using ::exp; using ::expf;\n"        \
  "  using ::exp2; using ::exp2f; using ::expm1; using ::expm1f; using ::fabs; using ::fabsf;\n"  \
  "  using ::fdim; using ::fdimf; using ::floor; using ::floorf; using ::fma; using ::fmaf;\n"    \
  "  using ::fmax; using ::fmaxf; using ::fmin; using ::fminf; using ::fmod; using ::fmodf;\n"    \
  "  using ::frexp; using ::frexpf; using ::hypot; using ::hypotf; using ::ilogb; using "         \
  "::ilogbf;\n"                                                                                   \
  "  using ::ldexp; using ::ldexpf; using ::lgamma; using ::lgammaf; using ::llrint;\n"           \
  "  using ::llrintf; using ::llround; using ::llroundf; using ::log; using ::logf; using "       \
  "::log10;\n"                                                                                    \
  "  using ::log10f; using ::log1p; using ::log1pf; using ::log2; using ::log2f; using ::logb;\n" \
  "  using ::logbf; using ::lrint; using ::lrintf; using ::lround; using ::lroundf; using "       \
  "::modf;\n"                                                                                     \
  "  using ::modff; using ::nan; using ::nanf; using ::nearbyint; using ::nearbyintf;\n"          \
  "  using ::nextafter; using ::nextafterf; using ::pow; using ::powf; using ::remainder;\n"      \
  "  using ::remainderf; using ::remquo; using ::remquof; using ::rint; using ::rintf;\n"         \
  "  using ::round; using ::roundf; using ::scalbln; using ::scalblnf; using ::scalbn;\n"         \
  "  using ::scalbnf; using ::sin; using ::sinf; using ::sinh; using ::sinhf; using ::sqrt;\n"    \
  "  using ::sqrtf; using ::tan; using ::tanf; using ::tanh; using ::tanhf; using ::tgamma;\n"    \
  "  using ::tgammaf; using ::trunc; using ::truncf; using ::isfinite; using ::isinf;\n"          \
  "  using ::isnan; using ::signbit; using ::abs;\n"

/* <cstdlib>'s device functions in std, shared alike. */
#define KILN__STD_STDLIB_NAMES \
  "using ::malloc; using ::free; using ::abs; using ::labs; using ::llabs;\n"

/* offsetof, shared by <stddef.h> and the names before every compile. NVRTC has no
 * __builtin_offsetof; __INTADDR__ is its front end's own way, and like nvcc's offsetof it is a
 * constant expression (static_assert, array sizes). libcu++ defines offsetof only when no one
 * has. */
#define KILN__OFFSETOF                                                             \
  "#ifndef offsetof\n"                                                             \
  "#define offsetof(type, member) ((size_t)__INTADDR__(&(((type *)0)->member)))\n" \
  "#endif\n"

/* A C++ standard header NVRTC lacks, given as libcu++'s of the same name (CCCL's, which the
 * toolkit ships and kiln puts on NVRTC's include path) with libcu++'s names in std, so that
 * std::is_same or std::numeric_limits<float>::max() means there what it means under nvcc. Only
 * headers that bring in none of libcu++'s functions of the C library's names are given this
 * way: after `using namespace std;`, cuda::std::abs beside the abs built into device code would
 * make a plain abs(x) ambiguous, which it is not under nvcc (<array>, <functional>, <optional>,
 * <span>, <complex> and <memory> bring it in with CCCL 3.0, so they are not given). */
/* C++'s streams, containers and algorithms, which only host code can use: a kernel source
 * that includes one (a habit of C++, or a whole program's host code, as nvcc compiles it) gets
 * a header that declares nothing. A use of std::cout or std::vector in device code is NVRTC's
 * error, as it is nvcc's; a host function that uses one is blanked like any other (dialect.c).
 * <memory> is not among them: thrust's headers need its contents, and "cannot open source file
 * memory" says more than what an empty one would make of them. */
#define KILN__HOST_HEADER(name)                                                                \
  {name, "/* kiln's <" name "> for NVRTC: host code, which a kernel cannot call; it declares " \
         "nothing. */\n"}

/* The stream headers: host code too, but declaring the stream templates, as <iosfwd> does, so
 * that the operators a library declares for them (thrust's random engines' << and >>) parse;
 * nothing of them is defined, so a kernel still cannot print to one. */
#define KILN__STREAM_HEADER(name)                                                              \
  {name, "/* kiln's <" name "> for NVRTC: host code, which a kernel cannot call; it declares " \
         "the stream templates alone, as <iosfwd> does. */\n"                                  \
         "#ifndef KILN_IOSFWD\n"                                                               \
         "#define KILN_IOSFWD\n"                                                               \
         "namespace std {\n"                                                                   \
         "template <class C> struct char_traits;\n"                                            \
         "template <class C, class T = char_traits<C> > class basic_ostream;\n"                \
         "template <class C, class T = char_traits<C> > class basic_istream;\n"                \
         "typedef basic_ostream<char> ostream;\n"                                              \
         "typedef basic_istream<char> istream;\n"                                              \
         "}\n"                                                                                 \
         "#endif\n"}

#define KILN__LIBCU_HEADER(name)                                                                 \
  {name, "/* kiln's <" name "> for NVRTC: libcu++'s <cuda/std/" name ">, its names in std. */\n" \
         "#if (__cplusplus >= 201703L || defined(CCCL_IGNORE_DEPRECATED_CPP_DIALECT)) && "       \
         "__has_include(<cuda/std/" name ">)\n"                                                  \
         "#include <cuda/std/" name ">\n"                                                        \
         "namespace std { using namespace ::cuda::std; }\n"                                      \
         "#else\n"                                                                               \
         "#error kiln gives <" name "> as the one of libcu++ (cuda/std/" name                    \
         "), which needs C++17 or later and the CCCL headers of the CUDA toolkit\n"              \
         "#endif\n"}

/* <type_traits> alone of libcu++'s headers still compiles under C++14, where CCCL would stop
 * at its dialect check: nvcc's host <type_traits> serves C++14 programs, so kiln's does too,
 * passing that check for this one header only (kiln's others after it still say they need
 * C++17, rather than fail inside libcu++). */
#define KILN__LIBCU_HEADER_CXX14(name)                                                           \
  {name, "/* kiln's <" name "> for NVRTC: libcu++'s <cuda/std/" name ">, its names in std. */\n" \
         "#if __cplusplus >= 201402L && __has_include(<cuda/std/" name ">)\n"                    \
         "#if __cplusplus < 201703L && !defined(CCCL_IGNORE_DEPRECATED_CPP_DIALECT)\n"           \
         "#define CCCL_IGNORE_DEPRECATED_CPP_DIALECT\n"                                          \
         "#define KILN_DIALECT_PASSED\n"                                                         \
         "#endif\n"                                                                              \
         "#include <cuda/std/" name ">\n"                                                        \
         "#ifdef KILN_DIALECT_PASSED\n"                                                          \
         "#undef CCCL_IGNORE_DEPRECATED_CPP_DIALECT\n"                                           \
         "#undef KILN_DIALECT_PASSED\n"                                                          \
         "#endif\n"                                                                              \
         "namespace std { using namespace ::cuda::std; }\n"                                      \
         "#else\n"                                                                               \
         "#error kiln gives <" name "> as the one of libcu++ (cuda/std/" name                    \
         "), which needs C++14 or later and the CCCL headers of the CUDA toolkit\n"              \
         "#endif\n"}

typedef struct kiln__stdheader {
  const char *name, *text;
} kiln__stdheader;

static const kiln__stdheader kiln__stdheaders[] = {
    {"stdio.h",
     "/* kiln's <stdio.h> for NVRTC, which has no C library: printf is built into device code. */\n"
     "#ifndef KILN_STDIO_H\n"
     "#define KILN_STDIO_H\n"
     "#ifndef EOF\n"
     "#define EOF (-1)\n"
     "#endif\n"
     "#endif\n"},
    {"cstdio", "/* kiln's <cstdio> for NVRTC: <stdio.h>, and printf in std. */\n"
               "#ifndef KILN_CSTDIO\n"
               "#define KILN_CSTDIO\n"
               "#include <stdio.h>\n"
               "namespace std { using ::printf; }\n"
               "#endif\n"},
    {"stdlib.h", "/* kiln's <stdlib.h> for NVRTC: malloc, free, abs, labs and llabs are built into "
                 "device code\n"
                 " * (malloc takes from the heap the context's malloc heap limit sizes). */\n"
                 "#ifndef KILN_STDLIB_H\n"
                 "#define KILN_STDLIB_H\n" KILN__STDLIB_MACROS "#endif\n"},
    {"cstdlib", "/* kiln's <cstdlib> for NVRTC: <stdlib.h>, and its device functions in std. */\n"
                "#ifndef KILN_CSTDLIB\n"
                "#define KILN_CSTDLIB\n"
                "#include <stdlib.h>\n"
                "namespace std {\n" KILN__STD_STDLIB_NAMES "}\n"
                "#endif\n"},
    {"math.h",
     "/* kiln's <math.h> for NVRTC: the functions (sinf, sqrt, isnan, ...) are built into device\n"
     " * code; these are the C library's macros and types. */\n"
     "#ifndef KILN_MATH_H\n"
     "#define KILN_MATH_H\n" KILN__INF_MACROS KILN__MATH_MACROS "typedef float float_t;\n"
     "typedef double double_t;\n"
     "#endif\n"},
    {"cmath",
     "/* kiln's <cmath> for NVRTC: <math.h>, and the functions built into device code in std. */\n"
     "#ifndef KILN_CMATH\n"
     "#define KILN_CMATH\n"
     "#include <math.h>\n"
     "namespace std {\n" KILN__STD_MATH_NAMES "using ::float_t;\n"
     "using ::double_t;\n"
     "}\n"
     "#endif\n"},
    {"stdint.h", "/* kiln's <stdint.h> for NVRTC: libcu++'s definitions where the toolkit has them "
                 "(so including\n"
                 " * <cuda/std/cstdint> as well agrees with them), the same ones otherwise. */\n"
                 "#ifndef KILN_STDINT_H\n"
                 "#define KILN_STDINT_H\n"
                 "#if (__cplusplus >= 201703L || defined(CCCL_IGNORE_DEPRECATED_CPP_DIALECT)) &&   "
                 "  __has_include(<cuda/std/cstdint>)\n"
                 "extern \"C++\" { /* a C header: PyCUDA's compile() puts it in extern \"C\" */\n"
                 "#include <cuda/std/cstdint>\n"
                 "}\n"
                 "#else\n"
                 "typedef signed char int8_t;\n"
                 "typedef signed short int16_t;\n"
                 "typedef signed int int32_t;\n"
                 "typedef signed long long int64_t;\n"
                 "typedef unsigned char uint8_t;\n"
                 "typedef unsigned short uint16_t;\n"
                 "typedef unsigned int uint32_t;\n"
                 "typedef unsigned long long uint64_t;\n"
                 "typedef int8_t int_least8_t;\n"
                 "typedef int16_t int_least16_t;\n"
                 "typedef int32_t int_least32_t;\n"
                 "typedef int64_t int_least64_t;\n"
                 "typedef uint8_t uint_least8_t;\n"
                 "typedef uint16_t uint_least16_t;\n"
                 "typedef uint32_t uint_least32_t;\n"
                 "typedef uint64_t uint_least64_t;\n"
                 "typedef int8_t int_fast8_t;\n"
                 "typedef int16_t int_fast16_t;\n"
                 "typedef int32_t int_fast32_t;\n"
                 "typedef int64_t int_fast64_t;\n"
                 "typedef uint8_t uint_fast8_t;\n"
                 "typedef uint16_t uint_fast16_t;\n"
                 "typedef uint32_t uint_fast32_t;\n"
                 "typedef uint64_t uint_fast64_t;\n"
                 "typedef int64_t intptr_t;\n"
                 "typedef uint64_t uintptr_t;\n"
                 "typedef int64_t intmax_t;\n"
                 "typedef uint64_t uintmax_t;\n"
                 "#define INT8_MIN (-128)\n"
                 "#define INT16_MIN (-32767 - 1)\n"
                 "#define INT32_MIN (-2147483647 - 1)\n"
                 "#define INT64_MIN (-9223372036854775807LL - 1)\n"
                 "#define INT8_MAX 127\n"
                 "#define INT16_MAX 32767\n"
                 "#define INT32_MAX 2147483647\n"
                 "#define INT64_MAX 9223372036854775807LL\n"
                 "#define UINT8_MAX 255\n"
                 "#define UINT16_MAX 65535\n"
                 "#define UINT32_MAX 4294967295U\n"
                 "#define UINT64_MAX 18446744073709551615ULL\n"
                 "#define INTPTR_MIN INT64_MIN\n"
                 "#define INTPTR_MAX INT64_MAX\n"
                 "#define UINTPTR_MAX UINT64_MAX\n"
                 "#define SIZE_MAX UINT64_MAX\n"
                 "#define INT8_C(x) x\n"
                 "#define INT16_C(x) x\n"
                 "#define INT32_C(x) x\n"
                 "#define INT64_C(x) x##LL\n"
                 "#define UINT8_C(x) x\n"
                 "#define UINT16_C(x) x\n"
                 "#define UINT32_C(x) x##U\n"
                 "#define UINT64_C(x) x##ULL\n"
                 "#endif\n"
                 "#endif\n"},
    {"inttypes.h",
     "/* kiln's <inttypes.h> for NVRTC: <stdint.h>, and the printf formats of its types for\n"
     " * device printf (PRId64 and kin; the 64-bit types are long long here). */\n"
     "#ifndef KILN_INTTYPES_H\n"
     "#define KILN_INTTYPES_H\n"
     "#include <stdint.h>\n"
     "#define PRId8 \"d\"\n"
     "#define PRIdLEAST8 \"d\"\n"
     "#define PRIdFAST8 \"d\"\n"
     "#define PRId16 \"d\"\n"
     "#define PRIdLEAST16 \"d\"\n"
     "#define PRIdFAST16 \"d\"\n"
     "#define PRId32 \"d\"\n"
     "#define PRIdLEAST32 \"d\"\n"
     "#define PRIdFAST32 \"d\"\n"
     "#define PRId64 \"lld\"\n"
     "#define PRIdLEAST64 \"lld\"\n"
     "#define PRIdFAST64 \"lld\"\n"
     "#define PRIdMAX \"lld\"\n"
     "#define PRIdPTR \"lld\"\n"
     "#define PRIi8 \"i\"\n"
     "#define PRIiLEAST8 \"i\"\n"
     "#define PRIiFAST8 \"i\"\n"
     "#define PRIi16 \"i\"\n"
     "#define PRIiLEAST16 \"i\"\n"
     "#define PRIiFAST16 \"i\"\n"
     "#define PRIi32 \"i\"\n"
     "#define PRIiLEAST32 \"i\"\n"
     "#define PRIiFAST32 \"i\"\n"
     "#define PRIi64 \"lli\"\n"
     "#define PRIiLEAST64 \"lli\"\n"
     "#define PRIiFAST64 \"lli\"\n"
     "#define PRIiMAX \"lli\"\n"
     "#define PRIiPTR \"lli\"\n"
     "#define PRIo8 \"o\"\n"
     "#define PRIoLEAST8 \"o\"\n"
     "#define PRIoFAST8 \"o\"\n"
     "#define PRIo16 \"o\"\n"
     "#define PRIoLEAST16 \"o\"\n"
     "#define PRIoFAST16 \"o\"\n"
     "#define PRIo32 \"o\"\n"
     "#define PRIoLEAST32 \"o\"\n"
     "#define PRIoFAST32 \"o\"\n"
     "#define PRIo64 \"llo\"\n"
     "#define PRIoLEAST64 \"llo\"\n"
     "#define PRIoFAST64 \"llo\"\n"
     "#define PRIoMAX \"llo\"\n"
     "#define PRIoPTR \"llo\"\n"
     "#define PRIu8 \"u\"\n"
     "#define PRIuLEAST8 \"u\"\n"
     "#define PRIuFAST8 \"u\"\n"
     "#define PRIu16 \"u\"\n"
     "#define PRIuLEAST16 \"u\"\n"
     "#define PRIuFAST16 \"u\"\n"
     "#define PRIu32 \"u\"\n"
     "#define PRIuLEAST32 \"u\"\n"
     "#define PRIuFAST32 \"u\"\n"
     "#define PRIu64 \"llu\"\n"
     "#define PRIuLEAST64 \"llu\"\n"
     "#define PRIuFAST64 \"llu\"\n"
     "#define PRIuMAX \"llu\"\n"
     "#define PRIuPTR \"llu\"\n"
     "#define PRIx8 \"x\"\n"
     "#define PRIxLEAST8 \"x\"\n"
     "#define PRIxFAST8 \"x\"\n"
     "#define PRIx16 \"x\"\n"
     "#define PRIxLEAST16 \"x\"\n"
     "#define PRIxFAST16 \"x\"\n"
     "#define PRIx32 \"x\"\n"
     "#define PRIxLEAST32 \"x\"\n"
     "#define PRIxFAST32 \"x\"\n"
     "#define PRIx64 \"llx\"\n"
     "#define PRIxLEAST64 \"llx\"\n"
     "#define PRIxFAST64 \"llx\"\n"
     "#define PRIxMAX \"llx\"\n"
     "#define PRIxPTR \"llx\"\n"
     "#define PRIX8 \"X\"\n"
     "#define PRIXLEAST8 \"X\"\n"
     "#define PRIXFAST8 \"X\"\n"
     "#define PRIX16 \"X\"\n"
     "#define PRIXLEAST16 \"X\"\n"
     "#define PRIXFAST16 \"X\"\n"
     "#define PRIX32 \"X\"\n"
     "#define PRIXLEAST32 \"X\"\n"
     "#define PRIXFAST32 \"X\"\n"
     "#define PRIX64 \"llX\"\n"
     "#define PRIXLEAST64 \"llX\"\n"
     "#define PRIXFAST64 \"llX\"\n"
     "#define PRIXMAX \"llX\"\n"
     "#define PRIXPTR \"llX\"\n"
     "#endif\n"},
    {"cinttypes",
     "/* kiln's <cinttypes> for NVRTC: <inttypes.h>, and <cstdint>'s names in std. */\n"
     "#include <inttypes.h>\n"
     "#include <cstdint>\n"},
    {"cstdint",
     "/* kiln's <cstdint> for NVRTC: <stdint.h>, and its types in std. */\n"
     "#ifndef KILN_CSTDINT\n"
     "#define KILN_CSTDINT\n"
     "#include <stdint.h>\n"
     "namespace std {\n"
     "using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;\n"
     "using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;\n"
     "using ::int_least8_t; using ::int_least16_t; using ::int_least32_t; using ::int_least64_t;\n"
     "using ::uint_least8_t; using ::uint_least16_t; using ::uint_least32_t; using "
     "::uint_least64_t;\n"
     "using ::int_fast8_t; using ::int_fast16_t; using ::int_fast32_t; using ::int_fast64_t;\n"
     "using ::uint_fast8_t; using ::uint_fast16_t; using ::uint_fast32_t; using ::uint_fast64_t;\n"
     "using ::intptr_t; using ::uintptr_t; using ::intmax_t; using ::uintmax_t;\n"
     "}\n"
     "#endif\n"},
    {"assert.h", "/* kiln's <assert.h> for NVRTC: a failed assert stops the kernel, and the next "
                 "call that waits\n"
                 " * for the GPU reports CUDA_ERROR_ASSERT. No include guard: as the C library's, "
                 "each inclusion\n"
                 " * follows NDEBUG as it is then. */\n"
                 "#undef assert\n"
                 "#ifdef NDEBUG\n"
                 "#define assert(e) ((void)0)\n"
                 "#else\n"
                 "#define assert(e) ((e) ? (void)0 : __assertfail(#e, __FILE__, __LINE__, "
                 "__func__, sizeof(char)))\n"
                 "#endif\n"},
    {"cassert", "/* kiln's <cassert> for NVRTC. */\n"
                "#include <assert.h>\n"},
    {"limits.h",
     "/* kiln's <limits.h> for NVRTC: libcu++'s definitions where the toolkit has them, the same\n"
     " * ones otherwise. */\n"
     "#ifndef KILN_LIMITS_H\n"
     "#define KILN_LIMITS_H\n"
     "#if (__cplusplus >= 201703L || defined(CCCL_IGNORE_DEPRECATED_CPP_DIALECT)) &&     "
     "__has_include(<cuda/std/climits>)\n"
     "extern \"C++\" { /* a C header: PyCUDA's compile() puts it in extern \"C\" */\n"
     "#include <cuda/std/climits>\n"
     "}\n"
     "#else\n" KILN__LIMITS_MACROS "#endif\n"
     "#endif\n"},
    {"climits", "/* kiln's <climits> for NVRTC. */\n"
                "#ifndef KILN_CLIMITS\n"
                "#define KILN_CLIMITS\n"
                "#include <limits.h>\n"
                "#endif\n"},
    {"float.h",
     "/* kiln's <float.h> for NVRTC: IEEE float and double, as device code has them. */\n"
     "#ifndef KILN_FLOAT_H\n"
     "#define KILN_FLOAT_H\n"
     "#define FLT_RADIX 2\n"
     "#define FLT_MANT_DIG 24\n"
     "#define DBL_MANT_DIG 53\n"
     "#define FLT_DIG 6\n"
     "#define DBL_DIG 15\n"
     "#define FLT_MIN_EXP (-125)\n"
     "#define DBL_MIN_EXP (-1021)\n"
     "#define FLT_MIN_10_EXP (-37)\n"
     "#define DBL_MIN_10_EXP (-307)\n"
     "#define FLT_MAX_EXP 128\n"
     "#define DBL_MAX_EXP 1024\n"
     "#define FLT_MAX_10_EXP 38\n"
     "#define DBL_MAX_10_EXP 308\n"
     "#define FLT_MAX 3.40282346638528859811704183484516925e+38F\n"
     "#define DBL_MAX 1.79769313486231570814527423731704357e+308\n"
     "#define FLT_EPSILON 1.19209289550781250000000000000000000e-7F\n"
     "#define DBL_EPSILON 2.22044604925031308084726333618164062e-16\n"
     "#define FLT_MIN 1.17549435082228750796873653722224568e-38F\n"
     "#define DBL_MIN 2.22507385850720138309023271733240406e-308\n"
     "#define FLT_TRUE_MIN 1.40129846432481707092372958328991613e-45F\n"
     "#define DBL_TRUE_MIN 4.94065645841246544176568792868221372e-324\n"
     "#endif\n"},
    {"cfloat", "/* kiln's <cfloat> for NVRTC. */\n"
               "#ifndef KILN_CFLOAT\n"
               "#define KILN_CFLOAT\n"
               "#include <float.h>\n"
               "#endif\n"},
    {"stddef.h", "/* kiln's <stddef.h> for NVRTC: size_t, ptrdiff_t and NULL are built in. */\n"
                 "#ifndef KILN_STDDEF_H\n"
                 "#define KILN_STDDEF_H\n" KILN__OFFSETOF "#endif\n"},
    {"cstddef", "/* kiln's <cstddef> for NVRTC. */\n"
                "#ifndef KILN_CSTDDEF\n"
                "#define KILN_CSTDDEF\n"
                "#include <stddef.h>\n"
                "namespace std {\n"
                "using ::size_t;\n"
                "using ::ptrdiff_t;\n"
                "#if __cplusplus >= 201103L\n"
                "typedef decltype(nullptr) nullptr_t;\n"
                "#endif\n"
                "}\n"
                "#endif\n"},
    {"string.h",
     "/* kiln's <string.h> for NVRTC: memcpy and memset are built into device code. */\n"
     "#ifndef KILN_STRING_H\n"
     "#define KILN_STRING_H\n"
     "#endif\n"},
    {"cstring", "/* kiln's <cstring> for NVRTC. */\n"
                "#ifndef KILN_CSTRING\n"
                "#define KILN_CSTRING\n"
                "#include <string.h>\n"
                "namespace std { using ::memcpy; using ::memset; }\n"
                "#endif\n"},
    /* clock() and clock_t are built into device code; the rest of <time.h> is the host's.
     * time_t is long long, as libcu++'s <cuda/std/ctime> (under <chrono>, CUB and thrust)
     * makes it under NVRTC: the two agree whichever comes first. */
    {"time.h", "/* kiln's <time.h> for NVRTC: clock() and clock_t are built into device code. */\n"
               "#ifndef KILN_TIME_H\n"
               "#define KILN_TIME_H\n"
               "typedef long long time_t;\n"
               "#ifndef CLOCKS_PER_SEC\n"
               "#define CLOCKS_PER_SEC ((clock_t)1000000)\n"
               "#endif\n"
               "#endif\n"},
    {"ctime", "/* kiln's <ctime> for NVRTC: <time.h>, and its names in std. */\n"
              "#ifndef KILN_CTIME\n"
              "#define KILN_CTIME\n"
              "#include <time.h>\n"
              "namespace std { using ::clock_t; using ::time_t; using ::size_t; using ::clock; }\n"
              "#endif\n"},
    {"stdbool.h", "/* kiln's <stdbool.h> for NVRTC: bool, true and false are C++'s own. */\n"
                  "#ifndef __bool_true_false_are_defined\n"
                  "#define __bool_true_false_are_defined 1\n"
                  "#endif\n"},
    {"cstdbool", "/* kiln's <cstdbool> for NVRTC. */\n"
                 "#include <stdbool.h>\n"},
    KILN__STREAM_HEADER("iostream"),
    KILN__STREAM_HEADER("ostream"),
    KILN__STREAM_HEADER("istream"),
    KILN__STREAM_HEADER("iosfwd"),
    KILN__HOST_HEADER("fstream"),
    KILN__HOST_HEADER("sstream"),
    KILN__HOST_HEADER("iomanip"),
    KILN__HOST_HEADER("vector"),
    KILN__HOST_HEADER("string"),
    KILN__HOST_HEADER("map"),
    KILN__HOST_HEADER("set"),
    KILN__HOST_HEADER("list"),
    KILN__HOST_HEADER("deque"),
    KILN__HOST_HEADER("forward_list"),
    KILN__HOST_HEADER("unordered_map"),
    KILN__HOST_HEADER("unordered_set"),
    KILN__HOST_HEADER("queue"),
    KILN__HOST_HEADER("stack"),
    /* host code, but for min, max, minmax and clamp: constexpr templates, which kernels call
     * under nvcc's --expt-relaxed-constexpr (softmax kernels' std::max), given as libcu++'s */
    {"algorithm",
     "/* kiln's <algorithm> for NVRTC: host code, which a kernel cannot call, but for std::min, "
     "std::max, std::minmax and std::clamp, libcu++'s. */\n"
     "#if __cplusplus >= 201703L && __has_include(<cuda/std/__algorithm/max.h>)\n"
     "#include <cuda/std/__algorithm/max.h>\n"
     "#include <cuda/std/__algorithm/min.h>\n"
     "#include <cuda/std/__algorithm/minmax.h>\n"
     "#include <cuda/std/__algorithm/clamp.h>\n"
     "namespace std {\n"
     "using ::cuda::std::max;\n"
     "using ::cuda::std::min;\n"
     "using ::cuda::std::minmax;\n"
     "using ::cuda::std::clamp;\n"
     "}\n"
     "#endif\n"},
    KILN__HOST_HEADER("random"),
    KILN__HOST_HEADER("thread"),
    KILN__HOST_HEADER("mutex"),
    KILN__HOST_HEADER("stdexcept"),
    KILN__HOST_HEADER("exception"),
    /* POSIX's, for a whole program's timing and file handling (gettimeofday, usleep) */
    KILN__HOST_HEADER("unistd.h"),
    KILN__HOST_HEADER("sys/time.h"),
    /* GCC's everything-at-once header, of programs written for contests: what kiln gives of
     * C's headers, and C++'s host ones, which declare nothing */
    {"bits/stdc++.h", "/* kiln's <bits/stdc++.h> for NVRTC: C's headers as kiln gives them; C++'s "
                      "containers, streams and algorithms are host code. */\n"
                      "#include <cstdio>\n#include <cstdlib>\n#include <cstring>\n"
                      "#include <cmath>\n#include <climits>\n#include <cfloat>\n"
                      "#include <cstdint>\n#include <cstddef>\n#include <cassert>\n"
                      "#include <ctime>\n"},
    KILN__LIBCU_HEADER_CXX14("type_traits"),
    KILN__LIBCU_HEADER("limits"),
    KILN__LIBCU_HEADER("utility"),
    KILN__LIBCU_HEADER("tuple"),
    KILN__LIBCU_HEADER("initializer_list"),
    KILN__LIBCU_HEADER("iterator"),
    KILN__LIBCU_HEADER("numeric"),
    KILN__LIBCU_HEADER("bit"),
    KILN__LIBCU_HEADER("numbers"),
    KILN__LIBCU_HEADER("ratio"),
    KILN__LIBCU_HEADER("concepts"),
    KILN__LIBCU_HEADER("atomic"),
    KILN__LIBCU_HEADER("chrono"),
    /* <array>: libcu++'s array alone, not all of cuda::std (which brings its abs and sqrt,
     * ambiguous with device code's own after `using namespace std;`) */
    {"array", "/* kiln's <array> for NVRTC: libcu++'s cuda::std::array as std::array. */\n"
              "#if (__cplusplus >= 201703L || defined(CCCL_IGNORE_DEPRECATED_CPP_DIALECT)) && "
              "__has_include(<cuda/std/array>)\n"
              "#include <cuda/std/array>\n"
              "namespace std {\n"
              "using ::cuda::std::array;\nusing ::cuda::std::get;\n"
              "}\n"
              "#else\n"
              "#error kiln gives <array> as libcu++'s (cuda/std/array), which needs C++17 or "
              "later and the CCCL headers of the CUDA toolkit\n"
              "#endif\n"},
};

/* The host's rarer headers, given to a compile only when its text names one (between <> or
 * ""; kiln__stdheaders_mark_named): each header NVRTC is handed costs every compile that can
 * include anything a little (a lookup on disk and NVRTC's copy, about 8 µs), and the toolkit's
 * headers that include one (thrust's containers, <thrust/complex.h>) are host code that fails
 * under NVRTC whatever kiln gives. (A header of the program's own, on disk, that includes one
 * is not read for it.) Host code to nvcc too: a kernel cannot call what they
 * declare (host functions, or constexpr ones nvcc refuses in device code), but a source may
 * include one by habit, or for host code of its own, which is left out as above. libcu++ has
 * forms of some (<cuda/std/complex>, <cuda/std/functional>, ...); they are not given under
 * these names, as they bring libcu++'s abs and sqrt into std (above). */
static const kiln__stdheader kiln__stdheaders_when_named[] = {
    /* C++'s */
    KILN__HOST_HEADER("functional"),
    KILN__HOST_HEADER("optional"),
    KILN__HOST_HEADER("variant"),
    KILN__HOST_HEADER("any"),
    KILN__HOST_HEADER("span"),
    KILN__HOST_HEADER("bitset"),
    KILN__HOST_HEADER("valarray"),
    KILN__HOST_HEADER("string_view"),
    KILN__HOST_HEADER("charconv"),
    KILN__HOST_HEADER("regex"),
    KILN__HOST_HEADER("locale"),
    KILN__HOST_HEADER("codecvt"),
    KILN__HOST_HEADER("ios"),
    KILN__HOST_HEADER("streambuf"),
    KILN__HOST_HEADER("filesystem"),
    KILN__HOST_HEADER("future"),
    KILN__HOST_HEADER("condition_variable"),
    KILN__HOST_HEADER("shared_mutex"),
    KILN__HOST_HEADER("system_error"),
    KILN__HOST_HEADER("typeinfo"),
    KILN__HOST_HEADER("typeindex"),
    KILN__HOST_HEADER("new"),
    KILN__HOST_HEADER("scoped_allocator"),
    KILN__HOST_HEADER("memory_resource"),
    KILN__HOST_HEADER("execution"),
    KILN__HOST_HEADER("version"),
    /* C++20's and C++23's (under nvcc's C++17 the host's are mostly empty) */
    KILN__HOST_HEADER("compare"),
    KILN__HOST_HEADER("ranges"),
    KILN__HOST_HEADER("format"),
    KILN__HOST_HEADER("source_location"),
    KILN__HOST_HEADER("coroutine"),
    KILN__HOST_HEADER("stop_token"),
    KILN__HOST_HEADER("semaphore"),
    KILN__HOST_HEADER("latch"),
    KILN__HOST_HEADER("barrier"),
    KILN__HOST_HEADER("syncstream"),
    KILN__HOST_HEADER("expected"),
    KILN__HOST_HEADER("mdspan"),
    KILN__HOST_HEADER("print"),
    KILN__HOST_HEADER("stacktrace"),
    /* <memory> is what thrust's containers and algorithms need of the host's library, which
     * NVRTC has not: said plainly where thrust includes it (thrust/detail/memory_wrapper.h
     * marks that include), rather than by the errors deep in thrust that would follow */
    {"memory", "/* kiln's <memory> for NVRTC: host code, which a kernel cannot call; it declares "
               "nothing. */\n"
               "#ifdef THRUST_INCLUDING_ALGORITHMS_HEADER\n"
               "#error thrust's containers and algorithms need the host's <memory>, which NVRTC "
               "has not: under kiln, thrust's and CUB's device-side headers compile "
               "(<thrust/functional.h>, <cub/block/block_reduce.cuh>)\n"
               "#endif\n"},
    KILN__HOST_HEADER("complex"),
    /* C's, and their C++ forms (errno, isdigit, signal, setjmp, va_list, ...) */
    KILN__HOST_HEADER("stdarg.h"),
    KILN__HOST_HEADER("cstdarg"),
    KILN__HOST_HEADER("errno.h"),
    KILN__HOST_HEADER("cerrno"),
    KILN__HOST_HEADER("ctype.h"),
    KILN__HOST_HEADER("cctype"),
    KILN__HOST_HEADER("signal.h"),
    KILN__HOST_HEADER("csignal"),
    KILN__HOST_HEADER("setjmp.h"),
    KILN__HOST_HEADER("csetjmp"),
    KILN__HOST_HEADER("locale.h"),
    KILN__HOST_HEADER("clocale"),
    KILN__HOST_HEADER("wchar.h"),
    KILN__HOST_HEADER("cwchar"),
    KILN__HOST_HEADER("wctype.h"),
    KILN__HOST_HEADER("cwctype"),
    KILN__HOST_HEADER("uchar.h"),
    KILN__HOST_HEADER("cuchar"),
    KILN__HOST_HEADER("fenv.h"),
    KILN__HOST_HEADER("cfenv"),
    KILN__HOST_HEADER("complex.h"),
    KILN__HOST_HEADER("ccomplex"),
    KILN__HOST_HEADER("stdalign.h"),
    KILN__HOST_HEADER("cstdalign"),
    KILN__HOST_HEADER("stdnoreturn.h"),
    KILN__HOST_HEADER("iso646.h"),
    KILN__HOST_HEADER("ciso646"),
    KILN__HOST_HEADER("strings.h"),
    KILN__HOST_HEADER("malloc.h"),
    KILN__HOST_HEADER("alloca.h"),
    /* <tgmath.h>: its math is <cmath>'s in C++ (the complex half is host code) */
    {"tgmath.h", "/* kiln's <tgmath.h> for NVRTC: <cmath>; its complex half is host code. */\n"
                 "#include <cmath>\n"},
    {"ctgmath", "/* kiln's <ctgmath> for NVRTC: <cmath>; its complex half is host code. */\n"
                "#include <cmath>\n"},
    /* glibc's old name for <string.h> */
    {"memory.h", "/* kiln's <memory.h> for NVRTC: <string.h>. */\n"
                 "#include <string.h>\n"},
    /* POSIX's and OpenMP's, for a whole program's threads, files and host loops; the names of
     * <sys/types.h> kernels use come with nvcc's implicit ones (below) */
    KILN__HOST_HEADER("sys/types.h"),
    KILN__HOST_HEADER("sys/stat.h"),
    KILN__HOST_HEADER("sys/mman.h"),
    KILN__HOST_HEADER("sys/resource.h"),
    KILN__HOST_HEADER("fcntl.h"),
    KILN__HOST_HEADER("dirent.h"),
    KILN__HOST_HEADER("dlfcn.h"),
    KILN__HOST_HEADER("sched.h"),
    KILN__HOST_HEADER("pthread.h"),
    KILN__HOST_HEADER("getopt.h"),
    KILN__HOST_HEADER("omp.h"),
};

/* The two lists as one: the first's headers, then the second's. */
#define KILN__STDHEADERS_N \
  (KILN__COUNT(kiln__stdheaders) + KILN__COUNT(kiln__stdheaders_when_named))

static const kiln__stdheader *kiln__stdheader_at(size_t i) {
  return i < KILN__COUNT(kiln__stdheaders)
             ? &kiln__stdheaders[i]
             : &kiln__stdheaders_when_named[i - KILN__COUNT(kiln__stdheaders)];
}

/* What a kernel compiled by nvcc sees without any #include: nvcc puts cuda_runtime.h first,
 * which brings in the host's <stdlib.h>, <math.h> and with them glibc's <sys/types.h> and
 * <limits.h>, so sources written for it use uint, M_PI, INFINITY or INT_MAX bare. Given to every
 * compile and included before the source (NVRTC's --pre-include), as nvcc includes cuda_runtime.h.
 * int8_t to int64_t are libcu++'s types under NVRTC, so <stdint.h> or CUB after them agrees
 * (int64_t is long long there, long in glibc: a source's own typedef of it as long, which nvcc
 * would take, meets a conflict here); u_int8_t to u_int64_t are glibc's alone. (The uintN_t
 * types are not among what nvcc gives bare: <sys/types.h> has only the signed ones.) Of
 * <sys/types.h>'s other names only ssize_t, off_t and quad_t are given: kernels seldom use
 * pid_t or key_t, and a source may well name a type of its own so (key_t in a sort). time_t is
 * long there and long long in libcu++'s <cuda/std/ctime> under NVRTC, so it stays out.
 * std::size_t, std::ptrdiff_t, and <cmath>'s and <cstdlib>'s functions in std (std::sqrt,
 * std::abs, std::isnan) come with the host's <cstddef>, <cmath> and <cstdlib> there; a
 * using-declaration may be repeated, so kiln's <cstddef> or <cmath> after them agrees. */
/* pow of two arithmetic types not both float or both double (pow(x, 2.0) of a float x, pow(n, 2)
 * of an int): nvcc's math_functions.h declares a device pow template that promotes them as
 * <cmath>'s does, to double unless both are float; NVRTC has only pow(float, float),
 * pow(double, double) and the int exponents, and finds such a call ambiguous. An exact match
 * among those wins over the template, so it changes no call that compiled before. */
#define KILN__POW_PROMOTED                                                                  \
  "#if __cplusplus >= 201103L\n"                                                            \
  "template <typename T> struct kiln_pow_arg_ {};\n"                                        \
  "#define KILN_POW_ARG_(T, R) template <> struct kiln_pow_arg_<T> { typedef R type; };\n"  \
  "KILN_POW_ARG_(float, float) KILN_POW_ARG_(double, double) KILN_POW_ARG_(bool, double)\n" \
  "KILN_POW_ARG_(char, double) KILN_POW_ARG_(signed char, double)\n"                        \
  "KILN_POW_ARG_(unsigned char, double) KILN_POW_ARG_(short, double)\n"                     \
  "KILN_POW_ARG_(unsigned short, double) KILN_POW_ARG_(int, double)\n"                      \
  "KILN_POW_ARG_(unsigned int, double) KILN_POW_ARG_(long, double)\n"                       \
  "KILN_POW_ARG_(unsigned long, double) KILN_POW_ARG_(long long, double)\n"                 \
  "KILN_POW_ARG_(unsigned long long, double)\n"                                             \
  "#undef KILN_POW_ARG_\n"                                                                  \
  "template <typename T, typename U,\n"                                                     \
  "          typename R = decltype(typename kiln_pow_arg_<T>::type() +\n"                   \
  "                                typename kiln_pow_arg_<U>::type())>\n"                   \
  "__device__ inline R pow(T x, U y) { return pow((R)x, (R)y); }\n"                         \
  "#endif\n"

#define KILN__NVCC_HOST_NAMES              \
  "typedef unsigned char u_char;\n"        \
  "typedef unsigned short u_short;\n"      \
  "typedef unsigned int u_int;\n"          \
  "typedef unsigned long u_long;\n"        \
  "typedef unsigned short ushort;\n"       \
  "typedef unsigned int uint;\n"           \
  "typedef unsigned long ulong;\n"         \
  "typedef signed char int8_t;\n"          \
  "typedef signed short int16_t;\n"        \
  "typedef signed int int32_t;\n"          \
  "typedef signed long long int64_t;\n"    \
  "typedef unsigned char u_int8_t;\n"      \
  "typedef unsigned short u_int16_t;\n"    \
  "typedef unsigned int u_int32_t;\n"      \
  "typedef unsigned long u_int64_t;\n"     \
  "typedef long quad_t;\n"                 \
  "typedef unsigned long u_quad_t;\n"      \
  "typedef long ssize_t;\n"                \
  "typedef long off_t;\n"                  \
  "typedef float float_t;\n"               \
  "typedef double double_t;\n"             \
  "namespace std {\n"                      \
  "using ::size_t;\n"                      \
  "using ::ptrdiff_t;\n"                   \
  "#if __cplusplus >= 201103L\n"           \
  "typedef decltype(nullptr) nullptr_t;\n" \
  "#endif\n"                               \
  "using ::float_t;\n"                     \
  "using ::double_t;\n"                    \
  "}\n" KILN__OFFSETOF KILN__MATH_MACROS KILN__STDLIB_MACROS KILN__LIMITS_MACROS

/* Programmatic dependent launch's two device calls, which cuda_runtime.h gives every kernel
 * under nvcc (from cuda_device_runtime_api.h, as inline functions of one PTX instruction each,
 * with no device runtime behind them) and NVRTC declares only with -rdc=true. Templates, so
 * that the toolkit's own plain functions, from -rdc=true or an #include of the header, are
 * other overloads that calls prefer, not redefinitions. */
#define KILN__PDL                                                                                \
  "template <int kiln_ = 0> static __device__ inline void cudaGridDependencySynchronize(void)\n" \
  "{ asm volatile(\"griddepcontrol.wait;\" ::: \"memory\"); }\n"                                 \
  "template <int kiln_ = 0>\n"                                                                   \
  "static __device__ inline void cudaTriggerProgrammaticLaunchCompletion(void)\n"                \
  "{ asm volatile(\"griddepcontrol.launch_dependents;\" :::); }\n"

#define KILN__NVCC_HOST_BEGIN                                               \
  "/* kiln: the names nvcc's implicit host headers give every kernel. */\n" \
  "#ifndef KILN_NVCC_HOST_H\n"                                              \
  "#define KILN_NVCC_HOST_H\n" KILN__NVCC_HOST_NAMES KILN__PDL
#define KILN__NVCC_HOST_STD "namespace std {\n" KILN__STD_MATH_NAMES KILN__STD_STDLIB_NAMES "}\n"

/* For a compile that can include something. INFINITY and NAN are macros here as under nvcc,
 * where libcu++'s <cuda/std/cmath> (and with it CUB and thrust) cannot conflict with them. */
static const char kiln__nvcc_host_text[] =
    KILN__NVCC_HOST_BEGIN KILN__INF_MACROS KILN__POW_PROMOTED KILN__NVCC_HOST_STD "#endif\n";

/* For one some text of which names a header of CUB, thrust or libcu++ ("cub/", "thrust/",
 * "cuda/"): libcu++'s <cuda/std/cmath> defines INFINITY and NAN under NVRTC whatever came
 * before and warns of an earlier macro of another text, so they are left to it. (A constant of
 * the name instead would be a variable in every module.) A header file of the user's that
 * includes CUB is not read for this: there libcu++'s definitions come with a warning. Nor is
 * the pow template given: after `using namespace cuda::std;` it and cuda::std::pow would make a
 * mixed pow ambiguous, as nvcc finds it, where NVRTC alone takes libcu++'s. */
static const char kiln__nvcc_host_libcu_text[] =
    KILN__NVCC_HOST_BEGIN KILN__NVCC_HOST_STD "#endif\n";

/* For one that can include nothing and spells no "std", which cannot name <cmath>'s and
 * <cstdlib>'s std names: without them, some 130 using-declarations that cost NVRTC about 3% of
 * a small kernel's compile. Nor the pow template, unless it spells "pow" (its own text is all
 * such a compile has): most kernels call no pow, and they need not pay for its parse. */
static const char kiln__nvcc_host_lean_text[] = KILN__NVCC_HOST_BEGIN KILN__INF_MACROS "#endif\n";
static const char kiln__nvcc_host_lean_pow_text[] =
    KILN__NVCC_HOST_BEGIN KILN__INF_MACROS KILN__POW_PROMOTED "#endif\n";

/* 1 when dir (relative to the working folder when not absolute) holds a file called name. */
static int kiln__stdheaders_in(const char *dir, const char *name) {
  char path[PATH_MAX];
  struct stat st;
  int n = snprintf(path, sizeof path, "%s/%s", dir, name);
  return n > 0 && (size_t)n < sizeof path && stat(path, &st) == 0;
}

/* Which of kiln's headers the toolkit's own folders shadow, looked up once: NVRTC, and so its
 * folders, is chosen once per process. */
static pthread_once_t kiln__stdheaders_toolkit_once = PTHREAD_ONCE_INIT;
static unsigned char kiln__stdheaders_in_toolkit[KILN__STDHEADERS_N];

static void kiln__stdheaders_toolkit_scan(void) {
  for (size_t i = 0; i < KILN__STDHEADERS_N; i++) {
    const char *name = kiln__stdheader_at(i)->name;
    kiln__stdheaders_in_toolkit[i] =
        (kiln__nvrtc.include_dir[0] && kiln__stdheaders_in(kiln__nvrtc.include_dir, name)) ||
        (kiln__nvrtc.cccl_dir[0] && kiln__stdheaders_in(kiln__nvrtc.cccl_dir, name));
  }
}

/* Whether the compile would find kiln's header `which` under its name without kiln's. */
static int kiln__stdheaders_shadowed(const kiln_compile_opts *opts, size_t which) {
  const char *name = kiln__stdheader_at(which)->name;
  for (int i = 0; opts && i < opts->n_headers; i++)
    if (opts->header_names[i] && strcmp(opts->header_names[i], name) == 0) return 1;
  for (int i = 0; opts && i < opts->n_include_dirs; i++)
    if (opts->include_dirs[i] && kiln__stdheaders_in(opts->include_dirs[i], name)) return 1;
  for (int i = 0; opts && i < opts->n_options; i++) {
    const char *o = opts->options[i];
    if (o && strncmp(o, "-I", 2) == 0 && o[2] && kiln__stdheaders_in(o + 2, name)) return 1;
  }
  pthread_once(&kiln__stdheaders_toolkit_once, kiln__stdheaders_toolkit_scan);
  if (kiln__stdheaders_in_toolkit[which]) return 1;
  return kiln__stdheaders_in(".", name); /* a quoted include's first place */
}

/* Whether text holds word, not right after not_after (NULL: anywhere). */
static int kiln__stdheaders_has(const char *text, const char *word, const char *not_after) {
  size_t n = not_after ? strlen(not_after) : 0;
  for (const char *p = text; (p = strstr(p, word)); p++)
    if (!n || (size_t)(p - text) < n || strncmp(p - n, not_after, n) != 0) return 1;
  return 0;
}

/* Whether any text of the compile (the source, an option, a header of opts) spells word, not
 * right after not_after. */
static int kiln__stdheaders_spell_not_after(const char *src, const kiln_compile_opts *opts,
                                            const char *word, const char *not_after) {
  if (kiln__stdheaders_has(src, word, not_after)) return 1;
  for (int i = 0; opts && i < opts->n_options; i++)
    if (opts->options[i] && kiln__stdheaders_has(opts->options[i], word, not_after)) return 1;
  for (int i = 0; opts && i < opts->n_headers; i++)
    if (opts->header_sources[i] && kiln__stdheaders_has(opts->header_sources[i], word, not_after))
      return 1;
  return 0;
}

static int kiln__stdheaders_spell(const char *src, const kiln_compile_opts *opts,
                                  const char *word) {
  return kiln__stdheaders_spell_not_after(src, opts, word, NULL);
}

/* Which text of nvcc's implicit names a compile gets (above). */
static const char *kiln__stdheaders_nvcc_host(const char *src, const kiln_compile_opts *opts,
                                              int reachable) {
  if (!reachable)
    return kiln__stdheaders_spell(src, opts, "std")   ? kiln__nvcc_host_text
           : kiln__stdheaders_spell(src, opts, "pow") ? kiln__nvcc_host_lean_pow_text
                                                      : kiln__nvcc_host_lean_text;
  int libcu = kiln__stdheaders_spell(src, opts, "cub/") ||
              kiln__stdheaders_spell(src, opts, "thrust/") ||
              /* not PyCUDA's headers' folder (<pycuda/pycuda-complex.hpp>) */
              kiln__stdheaders_spell_not_after(src, opts, "cuda/", "py");
  return libcu ? kiln__nvcc_host_libcu_text : kiln__nvcc_host_text;
}

/* Marks in named[] the header of the second list named by the n characters at word. */
static void kiln__stdheaders_mark_word(const char *word, size_t n, unsigned char *named) {
  for (size_t i = 0; i < KILN__COUNT(kiln__stdheaders_when_named); i++) {
    const char *name = kiln__stdheaders_when_named[i].name;
    if (name[0] == word[0] && strncmp(name, word, n) == 0 && !name[n]) named[i] = 1;
  }
}

/* Marks in named[] each header of the second list that text spells between <> or "": an
 * #include of it, directly or through a macro. One pass; a name is looked up only where a
 * bracket or quote opens a run of a header name's characters that it also closes. */
static void kiln__stdheaders_mark_named(const char *text, unsigned char *named) {
  for (const char *p = text; p && (p = strpbrk(p, "<\"")) != NULL; p++) {
    const char close = *p == '<' ? '>' : '"', *word = p + 1;
    size_t n = 0;
    while (n < 32 &&
           (isalnum((unsigned char)word[n]) || word[n] == '_' || word[n] == '.' || word[n] == '/'))
      n++;
    if (n && word[n] == close) kiln__stdheaders_mark_word(word, n, named);
  }
}

kiln_status kiln__stdheaders_select(const char *src, const kiln_compile_opts *opts,
                                    const char ***names, const char ***sources, int *n_out) {
  int given = opts ? opts->n_headers : 0;
  size_t cap = (size_t)given + KILN__STDHEADERS_N + 1;
  *names = calloc(cap, sizeof **names);
  *sources = calloc(cap, sizeof **sources);
  if (!*names || !*sources) {
    free(*names);
    free(*sources);
    *names = *sources = NULL;
    return kiln__fail(KILN_ERROR_NO_MEMORY, "out of memory for the compile's headers");
  }
  /* A compile that can include nothing gets none of kiln's: each would cost a stat or three,
   * and NVRTC a copy, for a header no line can reach. */
  int reachable = kiln__headers_reachable(src, opts);
  int n = 0;
  (*names)[n] = KILN__NVCC_HOST_HEADER;
  (*sources)[n++] = kiln__stdheaders_nvcc_host(src, opts, reachable);
  for (int i = 0; i < given; i++, n++) {
    (*names)[n] = opts->header_names[i];
    (*sources)[n] = opts->header_sources[i];
  }
  unsigned char named[KILN__COUNT(kiln__stdheaders_when_named)] = {0};
  if (reachable) {
    kiln__stdheaders_mark_named(src, named);
    /* an option names one as its value (-include pthread.h, --pre-include=pthread.h) */
    for (int i = 0; opts && i < opts->n_options; i++) {
      const char *o = opts->options[i], *value = o ? strrchr(o, '=') : NULL;
      if (value) o = value + 1;
      if (o) kiln__stdheaders_mark_word(o, strlen(o), named);
    }
    for (int i = 0; i < given; i++) kiln__stdheaders_mark_named(opts->header_sources[i], named);
  }
  for (size_t i = 0; reachable && i < KILN__STDHEADERS_N; i++) {
    size_t later = i - KILN__COUNT(kiln__stdheaders); /* its place in the second list */
    if ((i < KILN__COUNT(kiln__stdheaders) || named[later]) &&
        !kiln__stdheaders_shadowed(opts, i)) {
      (*names)[n] = kiln__stdheader_at(i)->name;
      (*sources)[n++] = kiln__stdheader_at(i)->text;
    }
  }
  *n_out = n;
  return KILN_OK;
}

/* The digest kiln__stdheaders_digest computes, written out: a new process would otherwise
 * hash these texts, some 10 us, before its first lookup. The C test
 * stdheaders_digest_matches_the_texts recomputes it, so a text edited without it fails. */
static const unsigned char kiln__stdheaders_sha[KILN__KEY_SIZE] = {
    0x71, 0xb2, 0xae, 0x6d, 0xcc, 0x13, 0xff, 0x3e, 0x05, 0xaa, 0xbf, 0xd1, 0xaa, 0x9d, 0x01, 0xc5,
    0xd2, 0x72, 0x47, 0x33, 0xec, 0x6d, 0x6f, 0x2e, 0x74, 0xdb, 0xa2, 0x66, 0x04, 0x1b, 0x99, 0x31};

kiln_status kiln__stdheaders_digest(unsigned char out[KILN__KEY_SIZE]) {
  kiln__hasher *h;
  kiln_status s = kiln__hash_begin(&h);
  if (s) return s;
  for (size_t i = 0; i < KILN__STDHEADERS_N; i++) {
    kiln__hash_string(h, kiln__stdheader_at(i)->name);
    kiln__hash_string(h, kiln__stdheader_at(i)->text);
  }
  kiln__hash_string(h, KILN__NVCC_HOST_HEADER);
  kiln__hash_string(h, kiln__nvcc_host_text);
  kiln__hash_string(h, kiln__nvcc_host_lean_text);
  kiln__hash_string(h, kiln__nvcc_host_lean_pow_text);
  kiln__hash_string(h, kiln__nvcc_host_libcu_text);
  return kiln__hash_end(h, out);
}

const unsigned char *kiln__stdheaders_digest_kept(void) { return kiln__stdheaders_sha; }

void kiln__stdheaders_hash(kiln__hasher *h) {
  kiln__hash_field(h, kiln__stdheaders_sha, sizeof kiln__stdheaders_sha);
}

int kiln__stdheaders_count(void) { return (int)KILN__STDHEADERS_N; }

const char *kiln__stdheaders_name(int i) {
  return i >= 0 && i < kiln__stdheaders_count() ? kiln__stdheader_at((size_t)i)->name : NULL;
}
