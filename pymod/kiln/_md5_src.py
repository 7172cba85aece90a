"""`md5_code`, the CUDA statements behind PyCUDA's first `rand`: programs written for PyCUDA
import it from `pycuda.curandom` and put it at the start of an elementwise operation of their
own (`get_elwise_kernel`), as PyCUDA's `rand` once did.

The contract is PyCUDA's: placed where `seed`, `i` and `n` are in scope (an operation of a
kernel made by get_elwise_kernel, whose loop gives `i` and `n`), the statements declare the
`unsigned int`s `a`, `b`, `c` and `d` and leave in them the four words of MD5's compression
(RFC 1321) of one block whose sixteen words are, in order, threadIdx.x, .y, .z, blockIdx.x,
.y, .z, seed, i, n, blockDim.x, .y, .z, gridDim.x, .y, .z and 0 (each taken as 32 bits). The
same launch shape and seed give PyCUDA's numbers. The code is kiln's own: a loop over MD5's 64
steps, its names prefixed so that they meet none of the caller's, and no macros left behind.
"""
import math

# MD5's additive constants, floor(2**32 * |sin(j + 1)|) (RFC 1321, section 3.4).
_K = [int(abs(math.sin(j + 1)) * 2**32) & 0xFFFFFFFF for j in range(64)]
# The left rotations of each round's four steps.
_S = [7, 12, 17, 22, 5, 9, 14, 20, 4, 11, 16, 23, 6, 10, 15, 21]
# The words MD5 starts from, and adds to its result.
_START = (0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476)


def _words(values, per_line):
    lines = [", ".join(f"{v:#010x}u" for v in values[k:k + per_line])
             for k in range(0, len(values), per_line)]
    return (",\n" + " " * 8).join(lines)


md5_code = f"""
  /* kiln.curandom.md5_code: a, b, c and d from MD5 over the launch's indices, seed, i, n */
  unsigned int a = {_START[0]:#010x}u, b = {_START[1]:#010x}u, c = {_START[2]:#010x}u,
               d = {_START[3]:#010x}u;
  {{
    const unsigned int _kiln_md5_x[16] = {{
        threadIdx.x, threadIdx.y, threadIdx.z, blockIdx.x, blockIdx.y, blockIdx.z,
        (unsigned int)(seed), (unsigned int)(i), (unsigned int)(n), blockDim.x, blockDim.y,
        blockDim.z, gridDim.x, gridDim.y, gridDim.z, 0u}};
    const unsigned int _kiln_md5_k[64] = {{
        {_words(_K, 6)}}};
    const unsigned int _kiln_md5_s[16] = {{{", ".join(map(str, _S))}}};
#pragma unroll
    for (int _kiln_md5_j = 0; _kiln_md5_j < 64; _kiln_md5_j++) {{
      unsigned int _kiln_md5_f;
      int _kiln_md5_g;
      if (_kiln_md5_j < 16) {{
        _kiln_md5_f = (b & c) | (~b & d);
        _kiln_md5_g = _kiln_md5_j;
      }} else if (_kiln_md5_j < 32) {{
        _kiln_md5_f = (b & d) | (c & ~d);
        _kiln_md5_g = (5 * _kiln_md5_j + 1) & 15;
      }} else if (_kiln_md5_j < 48) {{
        _kiln_md5_f = b ^ c ^ d;
        _kiln_md5_g = (3 * _kiln_md5_j + 5) & 15;
      }} else {{
        _kiln_md5_f = c ^ (b | ~d);
        _kiln_md5_g = (7 * _kiln_md5_j) & 15;
      }}
      unsigned int _kiln_md5_t = a + _kiln_md5_f + _kiln_md5_k[_kiln_md5_j] +
                                 _kiln_md5_x[_kiln_md5_g];
      unsigned int _kiln_md5_r = _kiln_md5_s[(_kiln_md5_j >> 4) * 4 + (_kiln_md5_j & 3)];
      a = d;
      d = c;
      c = b;
      b += (_kiln_md5_t << _kiln_md5_r) | (_kiln_md5_t >> (32 - _kiln_md5_r));
    }}
  }}
  a += {_START[0]:#010x}u;
  b += {_START[1]:#010x}u;
  c += {_START[2]:#010x}u;
  d += {_START[3]:#010x}u;
"""
