#pragma once
// What one attention launch knows: the POD parameter block passed BY VALUE to the forward and
// backward kernels (__grid_constant__; CUDA 12.1+ allows up to 32 KiB of kernel parameters),
// and the contract between the launcher/scheduler (softmax family, pruned, launch, schedule)
// and the device code of the static and linear head kinds.
//
// ---- Contract for the static/linear device code (called from the kernels' per-item dispatch) ----
// Files: src/kernels/cuda/attention_static.cuh and src/kernels/cuda/attention_linear.cuh
// (header-only device code: hw_gpu is built without separable compilation, so device
// functions must be visible in attention_forward.cu / attention_backward.cu, which include them),
// namespace hw::cuda::attn_dev. Every function is called by ALL kAttnThreads (= 256) threads of
// the block (blockDim.x == 256, 1-D), uniformly; it may use __syncthreads() freely and must
// start and end with the shared memory it uses free for the caller (i.e. __syncthreads() at
// entry and exit). `smem` is the block's dynamic shared memory (16-byte aligned), of at least the
// byte count the matching constexpr function returns. HD (head_dim) is 64 or 128. St (float or
// hw::bf16) is the activation storage type. fp32 activations: the SIMT tiles, fp32 in shared
// memory. bf16 activations: static items run the tensor-core tiles of attention_mma_static.cuh
// (bf16 word tiles, an fp32 parameter stage and an fp32 exchange between the two warps of a row
// block; sized by attn_mma::static_forward_smem_bytes / static_tiles_bytes, NOT by the attn_dev
// functions below), linear items keep fp32 tiles (loads widen, stores round once).
//
// Dynamic shared memory per item in bytes, head_dim 64 / 128 (the launchers take the max over the
// schedule's item kinds; everything over 48 KiB needs the opt-in attribute they set):
//                        fp32 (SIMT)            bf16 (tensor cores, attention_mma_*.cuh)
//   softmax forward      67,328 / 116,480       46,080 / 87,040  (Q, K[2], V[2] word tiles)
//   softmax backward    100,352 / 165,888       56,064 / 105,216 (six word tiles, two of them the
//                                                                 double buffers, + lse, delta)
//   static forward       33,280 /  49,664       20,480 / 36,864  (two V word tiles + stages, or the exchange)
//   static dK/dV scratch 33,280 /  49,664       20,480 / 36,864  (two dO word tiles + stages), each
//                        plus dv_acc [64][HD] fp32 = 16,384 / 32,768; a dK/dV item takes the max
//                        of that and the softmax backward size.
//   linear forward       75,520 / 91,136        83,584 / 95,616  (fp32 tiles for both storage types;
//   linear backward      97,024 / 128,768      107,776 / 135,936  bf16's row strides suit the mma
//                                                                 fragments, fp32's the SIMT tiles)
//   (checked at compile time by tests/cuda/test_attention_smem_sizes.cu)
//
//   template <int HD> constexpr int static_forward_smem_bytes();   // fp32 (SIMT) tiles
//   template <int HD, class St> __device__ void static_item_forward(const AttnLaunchParamsT<St>& p, int b, int h,
//                                                                  int q_tile, float* smem);
//       Writes (overwrites) out rows [q_tile*kBr, min(T, q_tile*kBr + kBr)) of head h, sequence b:
//       out_i = sum_{j<=i} exp(alpha[j] + rho[i-j] - log_z[i]) v_j (as detail::static_forward).
//       row_stats of static heads are zeroed by the caller, not by this function.
//   template <int HD> constexpr int static_backward_smem_bytes();  // fp32 (SIMT) tiles; excludes dv_acc
//   template <int HD, class St> __device__ void static_kv_tile_backward(const AttnLaunchParamsT<St>& p, int b, int h,
//                                                                      int k_tile, float* dv_acc, float* smem);
//       ADDS head h's dV contribution for keys [k_tile*kBc, min(T, k_tile*kBc + kBc)) to dv_acc,
//       a shared-memory [kBc][HD] row-major block (row r = key k_tile*kBc + r; rows past T stay
//       untouched): dv_acc[j] += sum_{i>=j} P(i,j) dO_i. `smem` is separate scratch. No alpha/rho
//       gradients (the launcher refuses non-null dalpha/drho).
//   Linear heads run as chains of stages (tiles::linear_stage_count(HD) per head; stage s owns
//   feature blocks [s * kLinStageBlocks, (s + 1) * kLinStageBlocks) and keeps their state in
//   shared memory). Stage s of (b, h) waits for stage s - 1 chunk by chunk
//   (linear_progress) and adds its partial sums to theirs in the workspace, so every sum has
//   a fixed order; the launcher zeroes the sync region before each launch and hands out items
//   in ticket order (chain_sync.cuh), so a waited-for stage has always started.
//   template <int HD, class St> constexpr int linear_forward_smem_bytes();
//   template <int HD, class St> __device__ void linear_item_forward(const AttnLaunchParamsT<St>& p, int b, int h,
//                                                                  int stage, float* smem);
//       Stage `stage` of head h, sequence b; the last stage writes (overwrites) out rows [0, T)
//       and row_stats (the row denominators, as detail::linear_forward). Global scratch:
//       linear_acc(p, b, h), the partial numerators and denominators [T][HD + 1].
//   template <int HD, class St> constexpr int linear_backward_smem_bytes();
//   template <int HD, class St> __device__ void linear_item_backward_dq(const AttnLaunchParamsT<St>& p, int b,
//                                                                      int h, int stage, float* smem);
//       The dQ chain (chunks forward); the last stage OVERWRITES dQ rows [0, T) at dq_rows(p, b, h)
//       and, once every stage has left its per-feature totals at linear_totals(p, b, h),
//       OVERWRITES the (G+1)x(G+1) matrix A = sum_i dkappa_i s_i s_i^T at linear_dA(p, b, h) (as
//       detail::linear_backward's A, row stride n_groups + 1); the launcher reduces A over b in
//       order and adds dL += 2 A L_lower. Partial dQ rows meet in linear_acc(p, b, h) (stride HD + 1).
//   template <int HD, class St> __device__ void linear_item_backward_dkv(const AttnLaunchParamsT<St>& p, int b,
//                                                                       int h, int stage, float* smem);
//       The dK/dV chain (chunks backward): stage 0 OVERWRITES this head's own dK and dV
//       contributions at linear_dk_rows / linear_dv_rows (workspace partials; the launcher's
//       combine kernel adds them to dQKV in head order after the main launch), later stages add.
//   int64_t linear_scratch_floats(int head_dim, int64_t T);  // HOST function (defined in
//       attention_linear_scratch.cpp; declared below): global scratch per (b, linear head).
//
// Row pointers below address row 0 of sequence b at a head's column block; rows are strided
// by the returned stride.
#include <cstdint>
#include <type_traits>

#include "headwise/attention/head_kind.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/host_device.hpp"
#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "headwise/kernels/tiles/work_schedule.hpp"

namespace hw::cuda {

constexpr int kMaxHeads = 64;

// attn::HeadKind as the byte a head descriptor stores (head_kind.hpp: the one definition).
using namespace attn::kind_bytes;

struct AttnHeadDesc {
  uint8_t kind = kPruned;
  int32_t kv_head = 0;
  // Key set of the softmax family: j <= i && (j < sink || j > i - window); softmax has
  // sink 0 and window max(T, 1) (as detail::key_set).
  int32_t sink = 0, window = 0;
  // Column offsets (elements) in qkv/dqkv and out/dout; -1 where the layout has no block.
  int64_t q_col = -1, k_col = -1, v_col = -1, out_col = -1;
  // static heads
  const float* alpha = nullptr;
  const float* rho = nullptr;
  const float* log_z = nullptr;
  // linear heads
  const float* L = nullptr;        // (G+1)x(G+1) row-major, lower triangle used
  float* dL = nullptr;             // may be null (no gradient wanted)
  const int32_t* groups = nullptr;  // head_dim entries in 1..n_groups
  int32_t n_groups = 0;
  int32_t linear_slot = -1;        // ordinal among the layer's linear heads
  // First head of a KV group with linear and softmax-family/static heads, bf16 storage: the
  // group's fp32 dK/dV staging slot (see AttnLaunchParamsT); -1 otherwise.
  int32_t stage_slot = -1;
};

// St: the activation storage type (float or hw::bf16) of qkv, out, dout and dqkv. Row
// statistics, head parameters and the workspace are fp32 for both.
template <class St>
struct AttnLaunchParamsT {
  const St* qkv = nullptr;      // [B*T, qkv_stride]
  St* out = nullptr;            // [B*T, out_stride]   (forward output)
  const St* out_in = nullptr;   // [B*T, out_stride]   (backward input: the forward's out)
  float* row_stats = nullptr;   // [B, n_head, T]      (forward output)
  const float* row_stats_in = nullptr;  // (backward input)
  const St* dout = nullptr;     // [B*T, out_stride]
  St* dqkv = nullptr;           // [B*T, qkv_stride]
  float* workspace = nullptr;   // attention_workspace_floats() floats
  int64_t qkv_stride = 0, out_stride = 0;
  int32_t B = 0, T = 0, n_head = 0, n_kv_head = 0, head_dim = 0;
  float scale = 0.f;       // 1 / sqrt(head_dim)
  float linear_eps = 0.f;
  // Linear heads' sync region at the workspace's start (linear_sync_floats; zeroed before each
  // launch): int32 [0] the item ticket, then per (b, linear_slot) two chains of
  // linear_stage_count(head_dim) progress counters. Then slot (b, linear_slot) at
  // workspace + linear_sync_floats + (b * n_linear + linear_slot) * linear_slot_floats holds
  // [dA: (head_dim+1)^2, padded to 32] [dK partial: T*head_dim] [dV partial: T*head_dim] [D's scratch].
  int32_t n_linear = 0;
  int64_t linear_sync_floats = 0;
  int64_t linear_slot_floats = 0;
  // Staging of KV groups that mix linear heads with softmax-family or static ones, bf16 storage
  // only: their kBwdDkv item leaves its fp32 dK/dV at stage slot (b, heads[first].stage_slot),
  // workspace + stage_offset + (b * n_stage + stage_slot) * 2 * T * head_dim ([dK][dV], T x head_dim
  // each), and the combine rounds the sum with the linear partials once. n_stage is 0 for fp32.
  int32_t n_stage = 0;
  int64_t stage_offset = 0;
  AttnHeadDesc heads[kMaxHeads];
  tiles::WorkSchedule schedule;  // item index -> (kind, b, head or KV group, tile)
};
using AttnLaunchParams = AttnLaunchParamsT<float>;
using AttnLaunchParamsBf16 = AttnLaunchParamsT<bf16>;

// ---- row accessors shared by every item kind ----
template <class E>
struct Rows {
  E* ptr;
  int64_t stride;
};
template <class E>
using ConstRows = Rows<const E>;

template <class St>
HW_HOST_DEVICE ConstRows<St> q_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.qkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].q_col, p.qkv_stride};
}
template <class St>
HW_HOST_DEVICE ConstRows<St> k_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.qkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].k_col, p.qkv_stride};
}
template <class St>
HW_HOST_DEVICE ConstRows<St> v_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.qkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].v_col, p.qkv_stride};
}
template <class St>
HW_HOST_DEVICE Rows<St> out_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.out + int64_t(b) * p.T * p.out_stride + p.heads[h].out_col, p.out_stride};
}
template <class St>
HW_HOST_DEVICE ConstRows<St> out_in_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.out_in + int64_t(b) * p.T * p.out_stride + p.heads[h].out_col, p.out_stride};
}
template <class St>
HW_HOST_DEVICE ConstRows<St> dout_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.dout + int64_t(b) * p.T * p.out_stride + p.heads[h].out_col, p.out_stride};
}
template <class St>
HW_HOST_DEVICE Rows<St> dq_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.dqkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].q_col, p.qkv_stride};
}
template <class St>
HW_HOST_DEVICE Rows<St> dk_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.dqkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].k_col, p.qkv_stride};
}
template <class St>
HW_HOST_DEVICE Rows<St> dv_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {p.dqkv + int64_t(b) * p.T * p.qkv_stride + p.heads[h].v_col, p.qkv_stride};
}
// Forward: row statistics to write; backward: the saved ones.
template <class St>
HW_HOST_DEVICE float* row_stats_out(const AttnLaunchParamsT<St>& p, int b, int h) {
  return p.row_stats + (int64_t(b) * p.n_head + h) * p.T;
}
template <class St>
HW_HOST_DEVICE const float* row_stats_in(const AttnLaunchParamsT<St>& p, int b, int h) {
  return p.row_stats_in + (int64_t(b) * p.n_head + h) * p.T;
}

// ---- linear heads' sync region and workspace slot ----
// Floats of the sync region (a multiple of 32, so the slots stay 128-byte aligned).
HW_HOST_DEVICE int64_t linear_sync_floats(int64_t B, int n_linear, int head_dim) {
  if (n_linear == 0) return 0;
  return (1 + B * n_linear * 2 * tiles::linear_stage_count(head_dim) + 31) / 32 * 32;
}
template <class St>
HW_HOST_DEVICE int32_t* linear_ticket(const AttnLaunchParamsT<St>& p) {
  return reinterpret_cast<int32_t*>(p.workspace);
}
// Progress counters of (b, h)'s chain `chain` (0: forward or dQ, 1: dK/dV), one per stage: the
// number of chunks the stage has published.
template <class St>
HW_HOST_DEVICE int32_t* linear_progress(const AttnLaunchParamsT<St>& p, int b, int h, int chain) {
  const int ns = tiles::linear_stage_count(p.head_dim);
  return linear_ticket(p) + 1 + ((int64_t(b) * p.n_linear + p.heads[h].linear_slot) * 2 + chain) * ns;
}
HW_HOST_DEVICE int64_t linear_dA_floats(int head_dim) { return (int64_t(head_dim + 1) * (head_dim + 1) + 31) / 32 * 32; }
template <class St>
HW_HOST_DEVICE float* linear_slot(const AttnLaunchParamsT<St>& p, int b, int h) {
  return p.workspace + p.linear_sync_floats + (int64_t(b) * p.n_linear + p.heads[h].linear_slot) * p.linear_slot_floats;
}
template <class St>
HW_HOST_DEVICE float* linear_dA(const AttnLaunchParamsT<St>& p, int b, int h) {
  return linear_slot(p, b, h);
}
template <class St>
HW_HOST_DEVICE Rows<float> linear_dk_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {linear_slot(p, b, h) + linear_dA_floats(p.head_dim), p.head_dim};
}
template <class St>
HW_HOST_DEVICE Rows<float> linear_dv_rows(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {linear_slot(p, b, h) + linear_dA_floats(p.head_dim) + int64_t(p.T) * p.head_dim, p.head_dim};
}
// Scratch: the chain's partial sums [T][head_dim + 1] (forward: numerators and denominator;
// dQ chain: dQ rows, row stride head_dim + 1), then the per-feature totals of the dQ chain.
template <class St>
HW_HOST_DEVICE Rows<float> linear_acc(const AttnLaunchParamsT<St>& p, int b, int h) {
  return {linear_slot(p, b, h) + linear_dA_floats(p.head_dim) + 2 * int64_t(p.T) * p.head_dim, p.head_dim + 1};
}
template <class St>
HW_HOST_DEVICE float* linear_totals(const AttnLaunchParamsT<St>& p, int b, int h) {
  return linear_acc(p, b, h).ptr + int64_t(p.T) * (p.head_dim + 1);
}

// ---- staged fp32 dK/dV of a mixed KV group (bf16 storage; see AttnLaunchParamsT) ----
// Only bf16 storage stages (fp32 dQKV holds the unrounded sum); a compile-time switch keeps the fp32
// kernels free of the staging code.
template <class St>
constexpr bool kStagesDkv = std::is_same_v<St, bf16>;
template <class St>
HW_HOST_DEVICE bool stages_dkv(const AttnLaunchParamsT<St>& p, int h0) {
  if constexpr (kStagesDkv<St>) return p.heads[h0].stage_slot >= 0;
  return false;
}
// `h0`: the group's first head, whose stage_slot is >= 0.
template <class St>
HW_HOST_DEVICE Rows<float> stage_dk_rows(const AttnLaunchParamsT<St>& p, int b, int h0) {
  const int64_t slot = int64_t(b) * p.n_stage + p.heads[h0].stage_slot;
  return {p.workspace + p.stage_offset + slot * 2 * int64_t(p.T) * p.head_dim, p.head_dim};
}
template <class St>
HW_HOST_DEVICE Rows<float> stage_dv_rows(const AttnLaunchParamsT<St>& p, int b, int h0) {
  const Rows<float> k = stage_dk_rows(p, b, h0);
  return {k.ptr + int64_t(p.T) * p.head_dim, p.head_dim};
}

namespace attn_dev {
// Defined in attention_linear_scratch.cpp (host): global scratch floats one linear item (b, h) needs, beyond the
// slot's dA/dK/dV parts. The launcher sizes the workspace with it.
int64_t linear_scratch_floats(int head_dim, int64_t T);
}  // namespace attn_dev

}  // namespace hw::cuda
