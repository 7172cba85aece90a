/* What nvcc's front end accepts as a GNU extension and NVRTC refuses, rewritten into the C++
 * NVRTC compiles. Used only for a source NVRTC has already refused, so a source that compiles
 * is never touched. */
#ifndef KILN_DIALECT_H
#define KILN_DIALECT_H

#include <stddef.h>

/* C99's compound literals, "(float3){x, y, z}", which nvcc takes in C++ (a GNU extension) and
 * NVRTC refuses ("expected an expression"): src with each one's parentheses made spaces, so
 * that it reads "float3 {x, y, z}", C++'s functional cast with a braced list, and every line
 * and column stays where it was. A literal is a '(' with a type name of one identifier (or
 * several joined by "::") before ')', then '{', where an expression can begin: after an
 * operator, '(', '[', '{', ',', '?', ':', '=' or "return", but not after an operator's name
 * (operator++(int) {) or a template's arguments (f<int>(int) {). Strings, characters and
 * comments are skipped. NULL when src has none (or memory ran out); else a malloc'd string (free
 * it). */
char *kiln__dialect_compound_literals(const char *src);

/* A specialization of a template of kiln's libcu++ headers in namespace std ("namespace std {
 * template <> struct numeric_limits<half2> {...}; }"), which nvcc's host library takes and
 * NVRTC refuses ("cannot be specialized in the current scope"): the templates are libcu++'s,
 * in cuda::std, whose names kiln's headers bring into std. src with each "namespace std {"
 * written "namespace cuda::std {" (C++17's nested namespace), where the templates are and
 * whose names std's lookup finds. Strings, characters and comments are skipped. NULL when src
 * has none (or memory ran out); else a malloc'd string (free it). */
char *kiln__dialect_std_namespace(const char *src);

/* A constant of a class initialized inside it that is not of an integral type ("struct S {
 * const static float pi = 3.14f; };"), which nvcc's front end takes as a GNU extension and
 * NVRTC refuses ("a member of type "const float" cannot have an in-class initializer"): src
 * with that "const" written "constexpr" on each line an error of log names so, which C++11
 * allows in the class. NULL when there is none (or memory ran out); else a malloc'd string
 * (free it). */
char *kiln__dialect_inclass_constants(const char *src, const char *log);

/* A floating constant at namespace scope whose initializer names another ("const float a =
 * 0.01; const float b = a * a;"), which nvcc folds and lets kernels read, as it does any
 * constant of a scalar type initialized with a constant expression, and which NVRTC, whose
 * -default-device puts it on the device, refuses ("dynamic initialization is not supported for
 * a __device__ variable"): src with "const" written "constexpr" in each such declaration an
 * error of log names whose initializer folds (literals, operators, casts, the source's macros,
 * names in capitals, taken for macros from -D or a header, and foldable constants before it),
 * and in the floating constants it names. One that does not
 * fold ("const float c = sqrtf(2.f);") is left to the host functions' rewrite below, as a
 * variable no kernel could read under nvcc. NULL when there is none (or memory ran out); else a
 * malloc'd string (free it). */
char *kiln__dialect_namespace_constants(const char *src, const char *log);

/* A whole CUDA program handed over as a module's source, its host code with it (main, which
 * calls cudaMalloc): nvcc compiles a function with no __global__ or __device__ for the host,
 * and under -default-device NVRTC compiles it for the device and refuses what only a host can
 * run. src with each such function that an error of log ("kernel.cu(N): error") falls inside
 * made blanks, newlines kept, so that every line stays where it was; no kernel can call it, as
 * none could under nvcc. A function's head is what follows the last ';', '}' or directive at
 * namespace scope (in a namespace or extern "C" block, or a class's body, too) up to its '{',
 * and ends with ')' (or a member's const, override, ...); a constructor's initializers aside.
 * A macro of the source in a head keeps it, unless it says only __host__ (or nothing). An
 * explicit instantiation of a host template ("template void up<float>(float *&, int);") with an
 * error on its lines is blanked too: a later round's, once the template is gone.
 * A variable nvcc keeps on the host ("const float2 G = make_float2(1, 2);") whose initializer
 * NVRTC refused to run on the device is blanked the same way: no kernel could read it under
 * nvcc either; a constexpr one is kept. NULL when there is none to blank (or memory ran out);
 * else a malloc'd string (free it). */
char *kiln__dialect_host_functions(const char *src, const char *log);

/* The same for the text of another file of the compile, a header, whose errors log names as
 * file ("/path/to/util.h(12): error"). */
char *kiln__dialect_host_functions_in(const char *text, const char *log, const char *file);

/* An array of no elements declared as a parameter ("int n[0]", which decays to a pointer as any
 * array parameter does) or as extern __shared__ memory ("extern __shared__ float sh[0];"),
 * which nvcc's front end takes as a GNU extension and NVRTC refuses ("the size of an array must
 * be greater than zero"): src with that 0 made a blank on each line an error of log names so,
 * "int n[ ]", which C++ takes there. Only a declarator's "[0]" is: a name after a type's last
 * word (or '*', '&') and before ',', ')' or ';', so that "out[0] = n[1]" on the same line stays.
 * A class's member of no elements ("float d[0];") has no C++ spelling of the same layout and
 * stays refused. NULL when there is none (or memory ran out); else a malloc'd string (free it). */
char *kiln__dialect_zero_arrays(const char *src, const char *log);

/* A source that closes a block it never opened, at namespace scope ("}" on its first line, C++
 * templates after it, then extern "C" { again): written for PyCUDA's SourceModule, which
 * compiles it inside extern "C" { } and which the "}" closes so that C++ can follow; NVRTC
 * refuses the stray brace ("expected a declaration"). src inside extern "C" {\n ... \n}, a
 * #line directive first so that every line keeps its number. Strings, characters, comments and
 * directive lines are skipped. NULL when the source closes no block it did not open (or memory
 * ran out); else a malloc'd string (free it). */
char *kiln__dialect_extern_c(const char *src);

#endif
