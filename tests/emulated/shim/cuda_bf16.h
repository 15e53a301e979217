#pragma once
// Stand-in for <cuda_bf16.h> in the CPU block emulator (see cuda_runtime.h here): the two bf16
// types the backend's sources name. Arithmetic goes through hw::bf16 (include/headwise/core).
#include <cstdint>

struct __nv_bfloat16_raw {
  unsigned short x;
};
struct __nv_bfloat16 {
  unsigned short x;
  __nv_bfloat16() = default;
  __nv_bfloat16(__nv_bfloat16_raw r) : x(r.x) {}
};
