/* The DLPack C ABI (unversioned DLManagedTensor, as exchanged in "dltensor" capsules), written
 * out from the DLPack specification: only what kiln exports and imports. */
#ifndef KPY_DLPACK_H
#define KPY_DLPACK_H

#include <stdint.h>

enum { kDLCPU = 1, kDLCUDA = 2 };
enum { kDLInt = 0, kDLUInt = 1, kDLFloat = 2, kDLBfloat = 4, kDLComplex = 5, kDLBool = 6 };

typedef struct DLDevice {
  int32_t device_type;
  int32_t device_id;
} DLDevice;

typedef struct DLDataType {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;

typedef struct DLTensor {
  void *data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t *shape;
  int64_t *strides; /* in elements; NULL means C-contiguous */
  uint64_t byte_offset;
} DLTensor;

typedef struct DLManagedTensor {
  DLTensor dl_tensor;
  void *manager_ctx;
  void (*deleter)(struct DLManagedTensor *self);
} DLManagedTensor;

#endif
