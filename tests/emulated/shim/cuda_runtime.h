#pragma once
// Stand-in for <cuda_runtime.h> when the CUDA backend's kernels and launchers are compiled as
// host C++ for the CPU block emulator (tests/emulated): this folder comes first on the
// emulator's include path, so the sources' own `#include <cuda_runtime.h>` lands here. It
// supplies the CUDA names those sources use. A block's threads are fibers
// (block_emulator.hpp), so barriers and warp collectives behave as on the GPU, including the
// deadlock a divergent __syncthreads would cause (the emulator reports it and aborts).
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define __device__
#define __host__
#define __global__
#define __forceinline__ inline
// Empty, not __attribute__((noinline)): libstdc++ writes __attribute__((__noinline__)), which
// that definition would turn into a nested attribute; inlining changes nothing on the emulator.
#define __noinline__
#define __launch_bounds__(...)
#define __grid_constant__
// A block's threads share one instance of a __shared__ variable: a function-local static (the
// emulator runs one block at a time).
#define __shared__ static

struct dim3 {
  unsigned x, y, z;
  constexpr dim3(unsigned vx = 1, unsigned vy = 1, unsigned vz = 1) : x(vx), y(vy), z(vz) {}
};
struct uint4 {
  unsigned x, y, z, w;
};
struct uint2 {
  unsigned x, y;
};
struct alignas(16) float4 {
  float x, y, z, w;
};
inline uint4 make_uint4(unsigned x, unsigned y, unsigned z, unsigned w) { return {x, y, z, w}; }
inline uint2 make_uint2(unsigned x, unsigned y) { return {x, y}; }
inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }

// ---- the runtime API the launchers call (host memory, no streams: everything is in order) ----
enum cudaError_t { cudaSuccess = 0, cudaErrorInvalidValue = 1, cudaErrorMemoryAllocation = 2 };
// Streams and events are distinct dummy objects (a stream must not be null: the backend tells
// its stream from "no stream"); every launch runs to completion when it is made, so there is
// nothing to order or wait for.
struct CUstream_st {
  int unused;
};
using cudaStream_t = CUstream_st*;
struct CUevent_st {
  int unused;
};
using cudaEvent_t = CUevent_st*;
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8 };
inline cudaError_t cudaGetLastError() { return cudaSuccess; }
inline const char* cudaGetErrorName(cudaError_t) { return "cudaErrorEmulated"; }
inline const char* cudaGetErrorString(cudaError_t) { return "emulated"; }
inline cudaError_t cudaMemsetAsync(void* p, int value, size_t bytes, cudaStream_t = nullptr) {
  std::memset(p, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int value, size_t width, size_t height,
                                     cudaStream_t = nullptr) {
  for (size_t r = 0; r < height; ++r) std::memset(static_cast<char*>(p) + r * pitch, value, width);
  return cudaSuccess;
}
template <class F>
cudaError_t cudaFuncSetAttribute(F, cudaFuncAttribute, int) {
  return cudaSuccess;
}

namespace hw_emu {
// The running emulated thread's place in its grid (the block emulator points this at the
// fiber it resumes).
struct ThreadPlace {
  dim3 thread, block, block_dim, grid_dim;
};
inline ThreadPlace* g_place = nullptr;
void sync_block();  // __syncthreads
// Warp collectives of the running thread's warp, on 64-bit slots.
uint64_t shfl_xor_bits(uint64_t v, int lane_mask);
uint64_t shfl_bits(uint64_t v, int src_lane);
unsigned ballot(bool pred);

template <class T>
T shfl_via_bits(T v, uint64_t (*op)(uint64_t, int), int arg) {
  static_assert(sizeof(T) <= 8, "shuffles move at most 8 bytes");
  uint64_t u = 0;
  std::memcpy(&u, &v, sizeof(T));
  u = op(u, arg);
  T r;
  std::memcpy(&r, &u, sizeof(T));
  return r;
}
}  // namespace hw_emu

#define threadIdx (hw_emu::g_place->thread)
#define blockIdx (hw_emu::g_place->block)
#define blockDim (hw_emu::g_place->block_dim)
#define gridDim (hw_emu::g_place->grid_dim)

inline void __syncthreads() { hw_emu::sync_block(); }
template <class T>
T __shfl_xor_sync(unsigned /*mask*/, T v, int lane_mask) {
  return hw_emu::shfl_via_bits(v, hw_emu::shfl_xor_bits, lane_mask);
}
template <class T>
T __shfl_sync(unsigned /*mask*/, T v, int src_lane) {
  return hw_emu::shfl_via_bits(v, hw_emu::shfl_bits, src_lane);
}
inline unsigned __ballot_sync(unsigned /*mask*/, int pred) { return hw_emu::ballot(pred != 0); }

// ---- ordering between blocks (kernels/cuda/chain_sync.cuh). Blocks run one at a time, in
// block order, and fibers switch only at barriers and warp collectives, so atomics are plain
// read-modify-writes and fences have nothing to order. A block that has to sleep while it
// waits for another block's publish would wait forever here: the block it waits for has
// either finished without publishing or not started, which on the GPU is a hang or a
// schedule that puts a stage before its predecessor. ----
inline int atomicAdd(int* p, int v) {
  const int old = *p;
  *p = old + v;
  return old;
}
inline int atomicExch(int* p, int v) {
  const int old = *p;
  *p = v;
  return old;
}
inline void __threadfence() {}
inline long long clock64() { return 0; }
inline float __ldcg(const float* p) { return *p; }
[[noreturn]] inline void __trap() {
  std::fprintf(stderr, "block emulator: __trap()\n");
  std::abort();
}
[[noreturn]] inline void __nanosleep(unsigned) {
  std::fprintf(stderr, "block emulator: a block waits for another block that has not published (a spin-wait "
                       "would never end: blocks run one at a time, in order)\n");
  std::abort();
}

// ---- the host runtime the backend object and the GPU tests call: device memory is host memory ----
// One emulated device; allocations are 256-byte aligned like cudaMalloc's, so every alignment
// the kernels' vector paths test for comes out as on the GPU.
enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4
};
constexpr unsigned cudaStreamNonBlocking = 1;
constexpr unsigned cudaEventDefault = 0;
struct cudaDeviceProp {
  char name[256];
  size_t totalGlobalMem;
  size_t sharedMemPerBlock;
  size_t sharedMemPerBlockOptin;
  int major, minor;
  int multiProcessorCount;
  int maxThreadsPerBlock;
  int warpSize;
};
inline cudaError_t cudaGetDeviceCount(int* n) {
  *n = 1;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* dev) {
  *dev = 0;
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int dev) { return dev == 0 ? cudaSuccess : cudaErrorInvalidValue; }
inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int dev) {
  if (dev != 0) return cudaErrorInvalidValue;
  *p = cudaDeviceProp{};
  std::strcpy(p->name, "emulated");
  p->totalGlobalMem = size_t(16) << 30;
  p->sharedMemPerBlock = 48 << 10;
  p->sharedMemPerBlockOptin = 227 << 10;  // sm_90's opt-in limit
  p->major = 9;
  p->minor = 0;
  p->multiProcessorCount = 132;
  p->maxThreadsPerBlock = 1024;
  p->warpSize = 32;
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaMalloc(void** p, size_t bytes) {
  *p = std::aligned_alloc(256, (bytes + 255) / 256 * 256 + 256 * (bytes == 0));
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
inline cudaError_t cudaFree(void* p) {
  std::free(p);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, size_t bytes, cudaMemcpyKind) {
  if (bytes) std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t = nullptr) {
  return cudaMemcpy(dst, src, bytes, kind);
}
inline cudaError_t cudaMemset(void* p, int value, size_t bytes) { return cudaMemsetAsync(p, value, bytes); }
inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned) {
  *s = new CUstream_st{};
  return cudaSuccess;
}
inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
  delete s;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaEventCreate(cudaEvent_t* e) {
  *e = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
  delete e;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t = nullptr) { return cudaSuccess; }
inline cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
// No timing on the emulator: every interval is 0 ms.
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) {
  *ms = 0.0f;
  return cudaSuccess;
}
