/* CUDA arrays from C: descriptors and copies checked before the device, then made, filled and
 * read back on it. */
#include "runner.h"

#include "../../engine/src/cuarray.h"

/* An array handle as kiln_array_create would make it, without a device: for the checks that
 * come before one. Its CUarray is never given to the driver. */
static kiln_array fake_array(size_t width, size_t height, size_t depth, unsigned format,
                             unsigned channels, size_t element_bytes) {
  kiln_array a = {0};
  a.desc.width = width;
  a.desc.height = height;
  a.desc.depth = depth;
  a.desc.format = format;
  a.desc.num_channels = channels;
  a.element_bytes = element_bytes;
  return a;
}

static kiln_array_desc desc_of(size_t width, size_t height, size_t depth, unsigned format,
                               unsigned channels, unsigned flags) {
  kiln_array_desc d = {width, height, depth, format, channels, flags};
  return d;
}

TEST(arrays_check_their_descriptor_and_copies_first) {
  setenv("KILN_CUDA_PATH", "/nonexistent/libcuda.so.1", 1);
  kiln_array *a = (kiln_array *)1;
  kiln_array_desc d = desc_of(64, 32, 0, 0x04, 1, 0);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "HALF (0x10) and FLOAT (0x20), not 0x4");
  ASSERT(a == NULL);
  d = desc_of(64, 32, 0, KILN_ARRAY_FLOAT, 3, 0);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "1, 2 or 4 channels, not 3");
  d = desc_of(0, 32, 0, KILN_ARRAY_FLOAT, 1, 0);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "width is at least 1 element, not 0");
  d = desc_of(8, 8, 2, KILN_ARRAY_UINT8, 1, 0x40);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "TEXTURE_GATHER (8), not 0x40");
  d = desc_of(8, 0, 2, KILN_ARRAY_UINT8, 1, 0);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "a 1D array (height 0) has no depth, not 2");
  d = desc_of(8, 8, 0, KILN_ARRAY_UINT8, 1, KILN_ARRAY_LAYERED);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "LAYERED array counts its layers in depth");
  d = desc_of(8, 4, 6, KILN_ARRAY_UINT8, 1, KILN_ARRAY_CUBEMAP);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "CUBEMAP array is square");
  d = desc_of(8, 8, 12, KILN_ARRAY_UINT8, 1, KILN_ARRAY_CUBEMAP);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "not 8 x 8 x 12");
  d = desc_of(SIZE_MAX / 2, 4, 0, KILN_ARRAY_FLOAT, 4, 0);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "holds more than memory");
  ASSERT_STATUS(kiln_array_create(NULL, &a), KILN_ERROR_INVALID);
  /* Past the checks, no driver: a status, not a crash. The layered cubemap and the layered 1D
   * array are shapes CUDA takes. */
  d = desc_of(8, 8, 12, KILN_ARRAY_UINT8, 1, KILN_ARRAY_CUBEMAP | KILN_ARRAY_LAYERED);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_NO_DRIVER);
  d = desc_of(8, 0, 3, KILN_ARRAY_HALF, 2, KILN_ARRAY_LAYERED);
  ASSERT_STATUS(kiln_array_create(&d, &a), KILN_ERROR_NO_DRIVER);
  ASSERT(a == NULL);
  ASSERT_OK(kiln_array_free(NULL));

  /* The 1D copies: 16 x 4 elements of 2 floats, 512 bytes. */
  kiln_array arr = fake_array(16, 4, 0, KILN_ARRAY_FLOAT, 2, 8);
  unsigned char host[1024] = {0};
  ASSERT_STATUS(kiln_memcpy_htoa(&arr, 500, host, 16), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "copying 16 bytes from byte 500 runs past the end of the "
                                     "destination array (512 bytes: 16 x 4 x 0 elements of 8)");
  ASSERT_STATUS(kiln_memcpy_atoh(host, &arr, 0, 513), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "source array (512 bytes");
  ASSERT_STATUS(kiln_memcpy_htoa(&arr, SIZE_MAX, host, 1), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_memcpy_dtoa(&arr, 8, 0x1000, SIZE_MAX), KILN_ERROR_INVALID);
  ASSERT_STATUS(kiln_memcpy_atod(0x1000, NULL, 0, 8), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "the source array is NULL");
  ASSERT_STATUS(kiln_memcpy_htoa(&arr, 0, NULL, 8), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "host memory of a copy of 8 bytes is NULL");
  kiln_array small = fake_array(4, 0, 0, KILN_ARRAY_UINT8, 1, 1);
  ASSERT_STATUS(kiln_memcpy_atoa(&small, 0, &arr, 0, 8), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "destination array (4 bytes: 4 x 0 x 0 elements of 1)");
  ASSERT_STATUS(kiln_memcpy_atoa(&arr, 0, &small, 2, 3), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "copying 3 bytes from byte 2");
  ASSERT_STATUS(kiln_memcpy_htoa(&arr, 504, host, 8), KILN_ERROR_NO_DRIVER); /* the last 8 */
  ASSERT_STATUS(kiln_memcpy_atoa(&arr, 0, &small, 0, 4), KILN_ERROR_NO_DRIVER);

  /* Array sides of 2D and 3D copies: 16 elements of 8 bytes a row, 4 rows, 3 slices. */
  kiln_array vol = fake_array(16, 4, 3, KILN_ARRAY_FLOAT, 2, 8);
  kiln_copy_side h = {0}, v = {0};
  h.kind = KILN_COPY_HOST;
  h.host = host;
  h.host_size = sizeof host;
  h.pitch = 128;
  h.height = 4;
  v.kind = KILN_COPY_ARRAY;
  v.array = &vol;
  ASSERT_OK(kiln_memcpy_3d_check(&h, &v, 128, 4, 2)); /* pitch and height of v unread */
  h.host = NULL; /* a size but no memory: refused, never handed to the driver */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 128, 4, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "the source's host memory is NULL");
  h.host = host;
  v.z = 1;
  ASSERT_OK(kiln_memcpy_3d_check(&h, &v, 128, 4, 2));
  v.z = 2;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 128, 4, 2), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(),
                  "reaches slice 4 of the destination array, which has 3 (slices from slice 2)");
  v.z = 0;
  v.y = 1;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 128, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches row 5 of the destination array, which has 4");
  v.y = 0;
  v.x_in_bytes = 8;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 128, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "rows reach 136 bytes into the destination array's rows "
                                     "of 128 (x_in_bytes 8 and width_in_bytes 128)");
  v.x_in_bytes = 4; /* half an element */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 16, 4, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "are whole elements of 8 bytes");
  v.x_in_bytes = 8;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 12, 4, 1), KILN_ERROR_INVALID);
  ASSERT_OK(kiln_memcpy_3d_check(&h, &v, 16, 4, 1)); /* a window: one element of each row */
  v.x_in_bytes = 0;
  v.y = SIZE_MAX; /* offsets that wrap */
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 8, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reach past the end of memory");
  v.y = 0;
  v.array = NULL;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 8, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "destination is an array side with no array");
  v.array = &vol;
  /* Both sides arrays: a 1D one is a single row, whatever the copy's rows. */
  kiln_array line = fake_array(64, 0, 0, KILN_ARRAY_UINT8, 1, 1);
  kiln_copy_side l = {0};
  l.kind = KILN_COPY_ARRAY;
  l.array = &line;
  ASSERT_OK(kiln_memcpy_3d_check(&l, &v, 64, 1, 1));
  ASSERT_STATUS(kiln_memcpy_3d_check(&l, &v, 64, 2, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches row 2 of the source array, which has 1");
  /* The host side's own checks still hold next to an array. */
  h.host_size = 100;
  ASSERT_STATUS(kiln_memcpy_3d_check(&h, &v, 128, 1, 1), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "reaches 128 bytes into its source, which has 100");
  h.host_size = sizeof host;
  ASSERT_STATUS(kiln_memcpy_3d(&h, &v, 128, 4, 1, 0), KILN_ERROR_NO_DRIVER);
}

TEST(gpu_arrays_made_filled_and_read_back) {
  kiln_test_require_gpu();
  /* A 2D array of 24 x 5 elements of 4 uint16 channels (8 bytes), through a 2D copy. */
  enum { W = 24, H = 5, E = 8 };
  unsigned char src[H][W * E], back[H][W * E];
  for (int y = 0; y < H; y++)
    for (int x = 0; x < W * E; x++) src[y][x] = (unsigned char)(y * 31 + x);
  kiln_array_desc d = desc_of(W, H, 0, KILN_ARRAY_UINT16, 4, 0);
  kiln_array *a = NULL;
  ASSERT_OK(kiln_array_create(&d, &a));
  ASSERT(kiln_array_handle(a) != 0);
  ASSERT_EQ(kiln_array_element_size(a), E);
  ASSERT_EQ(kiln_array_descriptor(a)->height, H);
  kiln_copy_side h = {0}, s = {0}, b = {0};
  h.kind = b.kind = KILN_COPY_HOST;
  h.host = src;
  b.host = back;
  h.host_size = b.host_size = sizeof src;
  h.pitch = b.pitch = W * E;
  s.kind = KILN_COPY_ARRAY;
  s.array = a;
  ASSERT_OK(kiln_memcpy_3d(&h, &s, W * E, H, 1, 0));
  memset(back, 0, sizeof back);
  ASSERT_OK(kiln_memcpy_3d(&s, &b, W * E, H, 1, 0));
  ASSERT_EQ(memcmp(src, back, sizeof src), 0);
  /* A window: elements 3 to 9 of rows 1 to 3 into the corner of the host buffer. */
  memset(back, 0, sizeof back);
  s.x_in_bytes = 3 * E;
  s.y = 1;
  ASSERT_OK(kiln_memcpy_3d(&s, &b, 7 * E, 3, 1, 1));
  ASSERT_EQ(back[0][0], src[1][3 * E]);
  ASSERT_EQ(back[2][7 * E - 1], src[3][10 * E - 1]);
  ASSERT_EQ(back[0][7 * E], 0);
  ASSERT_EQ(back[3][0], 0);
  /* A 3D array: two slices, filled by cuMemcpy3D, one slice read back alone. */
  kiln_array *vol = NULL;
  d = desc_of(W, H, 2, KILN_ARRAY_UINT16, 4, 0);
  ASSERT_OK(kiln_array_create(&d, &vol));
  kiln_copy_side v = {0};
  v.kind = KILN_COPY_ARRAY;
  v.array = vol;
  h.height = H;
  h.z = 0;
  h.host_size = sizeof src;
  v.z = 1;
  ASSERT_OK(kiln_memcpy_3d(&h, &v, W * E, H, 1, 0)); /* slice 1 only */
  memset(back, 0, sizeof back);
  ASSERT_OK(kiln_memcpy_3d(&v, &b, W * E, H, 1, 0));
  ASSERT_EQ(memcmp(src, back, sizeof src), 0);
  /* A 1D array through the driver's 1D copies, to and from device memory and another array. */
  kiln_array *line = NULL, *other = NULL;
  d = desc_of(64, 0, 0, KILN_ARRAY_FLOAT, 1, 0);
  ASSERT_OK(kiln_array_create(&d, &line));
  ASSERT_OK(kiln_array_create(&d, &other));
  float f[64], g[64], zeros[64] = {0};
  for (int i = 0; i < 64; i++) f[i] = 1.0f + (float)i * 0.5f; /* no zeros */
  ASSERT_OK(kiln_memcpy_htoa(line, 0, f, sizeof f));
  ASSERT_OK(kiln_memcpy_htoa(other, 0, zeros, sizeof zeros)); /* arrays are not zeroed */
  ASSERT_OK(kiln_memcpy_atoa(other, 16, line, 0, 128));       /* floats 4 to 35: f[0..31] */
  kiln_deviceptr dev = 0;
  ASSERT_OK(kiln_mem_alloc(256, &dev));
  ASSERT_OK(kiln_memcpy_atod(dev, other, 0, 256));
  memset(g, 0, sizeof g);
  ASSERT_OK(kiln_memcpy_dtoh(g, dev, 256));
  ASSERT(g[3] == 0.0f && g[4] == f[0] && g[35] == f[31] && g[36] == 0.0f);
  ASSERT_OK(kiln_memcpy_dtoa(line, 4, dev, 128)); /* floats 1 to 32: 0, 0, 0, 0, f[0..27] */
  ASSERT_OK(kiln_memcpy_atoh(g, line, 0, sizeof g));
  ASSERT(g[0] == f[0] && g[1] == 0.0f && g[4] == 0.0f && g[5] == f[0] && g[32] == f[27] &&
         g[33] == f[33]);
  /* Past the end, and a device side past its allocation: refused before the driver. */
  ASSERT_STATUS(kiln_memcpy_htoa(line, 4, f, sizeof f), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past the end of the destination array");
  ASSERT_STATUS(kiln_memcpy_dtoa(line, 0, dev + 192, 128), KILN_ERROR_INVALID);
  ASSERT_CONTAINS(kiln_last_error(), "runs past its allocation");
  ASSERT_OK(kiln_mem_free(dev));
  ASSERT_OK(kiln_array_free(line));
  ASSERT_OK(kiln_array_free(other));
  ASSERT_OK(kiln_array_free(vol));
  ASSERT_OK(kiln_array_free(a));
}
