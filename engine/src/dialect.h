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

#endif
