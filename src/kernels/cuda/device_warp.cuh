#pragma once
// The warp policy of the lane-indexed tensor-core routines (tiles/mma_attention_warp.hpp,
// tiles/mma_static_warp.hpp, tiles/mma_tf32.hpp): the mma instructions and the shuffle and
// ldmatrix loads they need, as the hardware does them. Its own file so that the CPU block emulator
// (tests/emulated) can put its emulated warp in the same place (tests/emulated/shim) and run
// the kernels' code unchanged.
#include <cuda_runtime.h>

#include <cstdint>

namespace hw::cuda::attn_mma {

// The hardware behind tiles::mma's policy. mma.sync with bf16 operands needs sm_80 or later; it is a
// warp-collective instruction, so it is volatile (never moved into or out of divergent code).
struct DeviceWarp {
  __device__ __forceinline__ static void mma(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  // The fp32 tiles' product (tiles/mma_tf32.hpp): m16n8k8 with tf32 operands (registers hold fp32 bit
  // patterns already rounded by cvt.rna.tf32.f32), fp32 accumulation; sm_80 and later.
  __device__ __forceinline__ static void mma_tf32(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
        "{%0, %1, %2, %3};\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
  __device__ __forceinline__ static float shfl_xor(float v, int mask) { return __shfl_xor_sync(0xffffffffu, v, mask); }
  // ldmatrix .x4 (tiles/mma_fragments.hpp says which row each lane addresses and what it gets).
  // Like every read of a shared tile it follows the block barrier after the tile's stores; the
  // compiler moves no memory access across that barrier, so no "memory" clobber is needed here.
  __device__ __forceinline__ static void ldsm_x4(uint32_t (&r)[4], const uint32_t* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(addr));
  }
  __device__ __forceinline__ static void ldsm_x4_trans(uint32_t (&r)[4], const uint32_t* row) {
    const unsigned addr = static_cast<unsigned>(__cvta_generic_to_shared(row));
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
        : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
        : "r"(addr));
  }
};

}  // namespace hw::cuda::attn_mma
