#pragma once
// Device code of the linear (OAL) head items (contract: attention_params.hpp). Exact chunked
// evaluation of the grouped quadratic kernel in feature space (math, feature layout and the
// serial chunk functions: headwise/kernels/tiles/linear_chunk.hpp, CPU-tested in
// tests/attention/test_linear_chunk.cpp).
//
// Work split: a head's NF feature slots are cut into stages of SF = kLinStageBlocks x FB
// slots, one work item each. A stage keeps its slice of the prefix (or suffix) state,
// [SF][D+1], in shared memory for the whole sequence and walks the chunks of kLinChunk
// tokens in order; per chunk it computes its slots' share of every sum (numerators and
// denominators, dQ, dK, dV), including the same-chunk pairs through its share of the chunk
// kernel matrix Kap = Psi^T Phi. The stages of one (b, head) form a chain: stage s waits
// until stage s - 1 has published the chunk (chain_sync.cuh), adds its share to the running
// sum in the workspace and publishes in turn; the last stage finishes the chunk (divides by
// the denominator, rounds once to the storage type). Sums therefore have one fixed order, the
// state never travels through global memory, and a head is linear_stage_count(HD) items that
// run side by side, a chunk apart.
//
// Every product runs through the item's tile policy LinTiles<St>: SIMT fp32 FMAs for fp32
// activations (parity 1e-5 with the CPU), tf32 tensor cores (tiles/mma_tf32.hpp) for bf16
// activations. Accumulators are read and written only through the policy's for_each, so the
// code below does not depend on which thread owns which element.
//
// Global scratch of (b, head) (attention_params.hpp): linear_acc, the running sums [T][D+1],
// and linear_totals, the per-feature totals for dL [NF].
//
// Thread mappings (256 threads): tile products as the policy's accumulators; chunk rows in
// row sums: row tid / 8, lanes tid % 8; feature rows in feature sums: slot tid / (256 / FB);
// feature tiles: slot tid % FB, chunk rows tid / FB + k (256 / FB); the Jacobian: warp w owns
// chunk rows w + 8u, lane l owns columns l + 32v, so the row sums of the pair Jacobian are
// warp reductions.
#include <cstdint>
#include <type_traits>

#include "headwise/kernels/tiles/attention_storage.hpp"
#include "headwise/kernels/tiles/attention_tiles.hpp"
#include "headwise/kernels/tiles/linear_chunk.hpp"
#include "headwise/kernels/tiles/mma_tf32.hpp"
#include "kernels/cuda/attention_params.hpp"
#include "kernels/cuda/attention_tile_gemm.cuh"
#include "kernels/cuda/chain_sync.cuh"
#include "kernels/cuda/device_warp.cuh"

namespace hw::cuda::attn_dev {

// St: the activation storage type, which picks the tile products (LinTiles<St>) and with them
// the row strides that keep their shared-memory reads free of bank conflicts.
template <int HD, class St = float>
struct LinCfg {
  static constexpr int C = tiles::kLinChunk;
  static constexpr int FB = tiles::linear_feature_block(HD);
  static constexpr int NF = tiles::linear_feature_slots(HD);
  static constexpr int NB = tiles::linear_feature_blocks(HD);
  static constexpr int SB = tiles::kLinStageBlocks;  // feature blocks per stage
  static constexpr int SF = SB * FB;                 // slots per stage
  static constexpr int NS = tiles::linear_stage_count(HD);
  // Row strides of U rows [v, 1], G rows [G, G_den] and the state [S, z] (LDU), and of the
  // feature tiles [FB][LDP] and chunk matrices [C][LDP]. fp32 (SIMT tiles): odd, so the B views
  // that walk a column are conflict-free. bf16 (tensor-core fragments, lane (g, t) = (lane / 4,
  // lane % 4) reading row g and column t of a 8 x 4 patch, or the transpose): 8 mod 32, so the
  // 32 words of a row-major B fragment or a column-major A fragment (8 t + g) fall on 32
  // banks and the other two views on 16 (2-way); odd strides gave g + t, up to 4-way, in every
  // product.
  static constexpr bool kTc = std::is_same_v<St, bf16>;
  static constexpr int LDU = kTc ? HD + 8 : HD + 1;
  static constexpr int LDP = kTc ? C + 8 : C + 1;
  static constexpr int LPR = tiles::kAttnThreads / C;   // lanes per chunk row in row sums
  static constexpr int LPF = tiles::kAttnThreads / FB;  // lanes per feature slot in slot sums
  static constexpr int JU = C / 8, JV = HD / 32;        // Jacobian rows / columns per thread
  static_assert(HD % 32 == 0 && C % 16 == 0 && FB % 16 == 0 && FB >= C, "linear head tile shapes");
  static_assert(tiles::kAttnThreads == 256 && LPR <= 32 && LPF <= 32, "linear head thread mapping");

  static constexpr int r4(int n) { return (n + 3) / 4 * 4; }
  // shared memory carve (floats)
  static constexpr int q_off = 0;                   // [C][HD] query rows
  static constexpr int k_off = q_off + C * HD;      // [C][HD] key rows
  static constexpr int u_off = k_off + C * HD;      // [C][LDU] U rows [v, 1]
  static constexpr int pa_off = u_off + r4(C * LDU);  // [FB][LDP] Psi (or X(q)); later dX or Kap
  static constexpr int pb_off = pa_off + r4(FB * LDP);  // [FB][LDP] Phi; later dX or Kap
  static constexpr int s_off = pb_off + r4(FB * LDP);   // [SF][LDU] the stage's state slice
  static constexpr int w_off = s_off + r4(SF * LDU);    // [SF] its query-side weights
  static constexpr int den_off = w_off + SF;            // [C] 1 / row denominators (both ways)
  static constexpr int forward_floats = den_off + C;
  static constexpr int g_off = forward_floats;          // [C][LDU] G rows (backward)
  static constexpr int dk_off = g_off + r4(C * LDU);    // [C][LDP] dKT[j][i] (backward)
  static constexpr int tt_off = dk_off + r4(C * LDP);   // [SF] the stage's totals (dQ chain)
  static constexpr int do_off = tt_off + SF;             // [C][LDU] dO rows (backward)
  static constexpr int od_off = do_off + r4(C * LDU);    // [C] dO . O per row (backward)
  static constexpr int backward_floats = od_off + C;
  // dL, after the dQ chain: every stage's totals [NF], then row sums [HD][G1], G1 <= HD + 1.
  static_assert(NF + HD * (HD + 1) <= backward_floats, "dL reuses the backward's shared memory");
};

// The tile products of a linear item and element access to their accumulators. Two
// products: `gemm` for every product of features, states and chunk rows, and `gemm_exact` for
// the one whose terms cancel exactly, V dO^T in dKappa (dkappa_ij = (dO_i . v_j - dO_i . O_i)
// / den_i vanishes where a position sees one key, O_i = v_i). fp32 activations: attn_tile's
// SIMT tiles for both (16 x 16 thread grid, exact fp32 FMAs in a fixed order).
template <class St>
struct LinTiles {
  template <int M, int N>
  using Acc = attn_tile::Acc<M, N>;
  template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
  __device__ __forceinline__ static void gemm(Acc<M, N>& acc, const float* A, const float* B) {
    attn_tile::tile_gemm_acc<M, N, K, ARS, ACS, BRS, BCS>(acc, A, B);
  }
  template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
  __device__ __forceinline__ static void gemm_exact(Acc<M, N>& acc, const float* A, const float* B) {
    attn_tile::tile_gemm_acc<M, N, K, ARS, ACS, BRS, BCS>(acc, A, B);
  }
  // f(row, col, value&) for every element this thread owns.
  template <int M, int N, class F>
  __device__ __forceinline__ static void for_each(Acc<M, N>& acc, F&& f) {
    const int ty = attn_tile::tid_y(), tx = attn_tile::tid_x();
#pragma unroll
    for (int a = 0; a < M / 16; ++a)
#pragma unroll
      for (int c = 0; c < N / 16; ++c) f(ty + 16 * a, tx + 16 * c, acc.v[a][c]);
  }
};
// bf16 activations: tensor-core tiles, each warp owning 16 x 8 output tiles. `gemm` rounds its
// operands to tf32 once (m16n8k8): relative error about 5e-4 per term, under the bf16
// rounding of the inputs and outputs (the emulated parity tests measure the same output errors
// as with fp32-accurate products, up to T = 1024; the fp32 denominators move from 2e-7 to at
// most 8e-4). bf16 operands there were tried and rejected (errors up to 5.8e-2: the numerators
// cancel across features). `gemm_exact` takes operands that hold bf16 values (v and dO as
// loaded) to the bf16 instruction m16n8k16: every product is exact and the sum is fp32, one
// mma per step at twice the tf32 rate. (The earlier form G U^T, with G = dO / den no longer
// a bf16 value, left noise of 1e-3 of the terms in dQ under single tf32 rounding, found on the
// block emulator, and needed split operands: three tf32 mma per step.)
template <>
struct LinTiles<bf16> {
  template <int M, int N>
  using Acc = tiles::mma::TcAcc<M, N>;
  template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
  __device__ __forceinline__ static void gemm(Acc<M, N>& acc, const float* A, const float* B) {
    tiles::mma::tc_tile_gemm_acc<M, N, K, ARS, ACS, BRS, BCS, attn_mma::DeviceWarp, tiles::mma::TcPrecision::kTf32>(
        acc, A, B, static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32);
  }
  template <int M, int N, int K, int ARS, int ACS, int BRS, int BCS>
  __device__ __forceinline__ static void gemm_exact(Acc<M, N>& acc, const float* A, const float* B) {
    tiles::mma::tc_tile_gemm_acc<M, N, K, ARS, ACS, BRS, BCS, attn_mma::DeviceWarp, tiles::mma::TcPrecision::kBf16>(
        acc, A, B, static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32);
  }
  template <int M, int N, class F>
  __device__ __forceinline__ static void for_each(Acc<M, N>& acc, F&& f) {
    acc.for_each(static_cast<int>(threadIdx.x) / 32, static_cast<int>(threadIdx.x) % 32, f);
  }
};

template <int HD, class St>
constexpr int linear_forward_smem_bytes() {
  return static_cast<int>(sizeof(float)) * LinCfg<HD, St>::forward_floats;
}
template <int HD, class St>
constexpr int linear_backward_smem_bytes() {
  return static_cast<int>(sizeof(float)) * LinCfg<HD, St>::backward_floats;
}

namespace linear_detail {

// The block's shared tiles by name (offsets: LinCfg).
template <int HD, class St>
struct LinSmem {
  using Cfg = LinCfg<HD, St>;
  float* base;
  __device__ explicit LinSmem(float* smem) : base(smem) {}
  __device__ float* q() const { return base + Cfg::q_off; }
  __device__ float* k() const { return base + Cfg::k_off; }
  __device__ float* u() const { return base + Cfg::u_off; }
  __device__ float* pa() const { return base + Cfg::pa_off; }
  __device__ float* pb() const { return base + Cfg::pb_off; }
  __device__ float* state() const { return base + Cfg::s_off; }
  __device__ float* weights() const { return base + Cfg::w_off; }
  __device__ float* inv_den() const { return base + Cfg::den_off; }
  __device__ float* g() const { return base + Cfg::g_off; }
  __device__ float* dkt() const { return base + Cfg::dk_off; }
  __device__ float* totals() const { return base + Cfg::tt_off; }
  __device__ float* dout() const { return base + Cfg::do_off; }
  __device__ float* out_dot() const { return base + Cfg::od_off; }
};

// Sum over each aligned group of LANES consecutive lanes (power of two <= 32) in a fixed
// butterfly order: every lane of a group gets the same bits. All 32 lanes must call it.
template <int LANES>
__device__ __forceinline__ float group_sum(float v) {
  static_assert(LANES >= 1 && LANES <= 32 && (LANES & (LANES - 1)) == 0, "LANES: a power of two <= 32");
#pragma unroll
  for (int o = LANES / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Zeroes the stage's state slice and totals and fills its query-side weights (slots
// [f_first, f_first + SF); slots past the head's last block get weight 0).
template <int HD, class St>
__device__ void init_stage(const AttnLaunchParamsT<St>& p, const AttnHeadDesc& d, int f_first, float* sS, float* sW,
                           float* sTt) {
  using Cfg = LinCfg<HD, St>;
  const int tid = static_cast<int>(threadIdx.x);
  for (int e = tid; e < Cfg::SF * Cfg::LDU; e += tiles::kAttnThreads) sS[e] = 0.f;
  for (int s = tid; s < Cfg::SF; s += tiles::kAttnThreads) {
    const int f = f_first + s;
    sW[s] = f < Cfg::NF ? tiles::linear_weight(tiles::linear_feature(HD, f), d.L, d.n_groups + 1, d.groups,
                                               p.linear_eps, p.scale)
                        : 0.f;
    if (sTt) sTt[s] = 0.f;
  }
  __syncthreads();
}

// Chunk rows [t0, t0 + n) of a head block: dst[r * ldd + c] (c < HD), zero rows n..C-1.
template <int HD, class St>
__device__ __forceinline__ void load_chunk_rows(float* dst, int ldd, ConstRows<St> src, int64_t t0, int n) {
  attn_tile::load_tile<LinCfg<HD>::C, HD>(dst, ldd, src.ptr, src.stride, t0, t0 + n);
}

// U rows [v_j, 1] (zero past n).
template <int HD, class St>
__device__ __forceinline__ void load_u(float* sU, ConstRows<St> v, int64_t t0, int n) {
  using Cfg = LinCfg<HD, St>;
  load_chunk_rows<HD>(sU, Cfg::LDU, v, t0, n);
  for (int r = static_cast<int>(threadIdx.x); r < Cfg::C; r += tiles::kAttnThreads)
    sU[r * Cfg::LDU + HD] = r < n ? 1.f : 0.f;
}

// Feature tiles of slots [f0, f0 + FB): Psi[s][i] = w_s X_s(q_i) (W null: X_s(q_i)), Phi[s][i] =
// X_s(k_i); zero for i >= n (the rows of sq, sk past n are zero too). Psi may be null.
template <int HD, class St>
__device__ __forceinline__ void fill_features(float* Psi, float* Phi, int f0, const float* sW, const float* sq,
                                              const float* sk, int n) {
  using Cfg = LinCfg<HD, St>;
  const int tid = static_cast<int>(threadIdx.x), s = tid % Cfg::FB;
  const tiles::LinFeature ft = tiles::linear_feature(HD, f0 + s);
  const float w = sW ? sW[s] : 1.f;
  for (int i = tid / Cfg::FB; i < Cfg::C; i += Cfg::LPF) {
    const bool in = i < n;
    if (Psi) Psi[s * Cfg::LDP + i] = in ? w * tiles::linear_x(ft, sq + i * HD) : 0.f;
    Phi[s * Cfg::LDP + i] = in ? tiles::linear_x(ft, sk + i * HD) : 0.f;
  }
}

// State step of one block: Sg[s][e] = sS[s][e] + sum_j A[s][j] B[j][e] for e <= HD, with A a
// feature tile [FB][LDP] and B chunk rows [C][LDU] (prefix: Phi and U; suffix: Psi and G). In
// place (Sg == sS) is fine: every element is read and written by the same thread, after a
// barrier has ended the block's other reads of sS.
template <int HD, class St>
__device__ __forceinline__ void state_step(float* Sg, const float* sS, const float* A, const float* B) {
  using Cfg = LinCfg<HD, St>;
  using Tl = LinTiles<St>;
  constexpr int FB = Cfg::FB, LDU = Cfg::LDU, LDP = Cfg::LDP;
  typename Tl::template Acc<FB, HD> up;
  Tl::for_each(up, [&](int r, int c, float& x) { x = sS[r * LDU + c]; });
  Tl::template gemm<FB, HD, Cfg::C, LDP, 1, LDU, 1>(up, A, B);
  Tl::for_each(up, [&](int r, int c, float& x) { Sg[r * LDU + c] = x; });
  // column HD (denominator side): slot tid / LPF, its lanes split the chunk rows
  const int tid = static_cast<int>(threadIdx.x), s = tid / Cfg::LPF, l = tid % Cfg::LPF;
  float z = 0.f;
  for (int j = l; j < Cfg::C; j += Cfg::LPF) z = fmaf(A[s * LDP + j], B[j * LDU + HD], z);
  z = group_sum<Cfg::LPF>(z);
  if (l == 0) Sg[s * LDU + HD] = sS[s * LDU + HD] + z;
}

// Stores a chunk matrix accumulator acc[i][j] (query row i, key column j) into M[i * LDP + j],
// keeping j <= i < n (the causal pairs of the chunk) and zeroing the rest.
template <int HD, class St>
__device__ __forceinline__ void store_causal(float* M,
                                             typename LinTiles<St>::template Acc<LinCfg<HD>::C, LinCfg<HD>::C>& acc,
                                             int n) {
  LinTiles<St>::for_each(acc, [&](int i, int j, float& x) {
    M[i * LinCfg<HD, St>::LDP + j] = (j <= i && i < n) ? x : 0.f;
  });
}

// Backward chunk setup: q, k, U and G rows, then dKT[j][i] = dkappa_ij = (v_j . dO_i - dO_i . O_i)
// / den_i for j <= i < n (0 elsewhere), with v_j . dO_i from gemm_exact.
template <int HD, class St>
__device__ void load_backward_chunk(const AttnLaunchParamsT<St>& p, int b, int h, float* smem, int64_t t0, int n) {
  using Cfg = LinCfg<HD, St>;
  constexpr int C = Cfg::C, LDU = Cfg::LDU, LDP = Cfg::LDP;
  const LinSmem<HD, St> sm(smem);
  float *sG = sm.g(), *sDO = sm.dout(), *sOd = sm.out_dot(), *sInv = sm.inv_den();
  load_chunk_rows<HD>(sm.q(), HD, q_rows(p, b, h), t0, n);
  load_chunk_rows<HD>(sm.k(), HD, k_rows(p, b, h), t0, n);
  load_u<HD>(sm.u(), v_rows(p, b, h), t0, n);
  // dO and G rows: row tid / LPR, lanes split the columns; G = [dO, -(dO . O)] / den
  const ConstRows<St> o = out_in_rows(p, b, h), go = dout_rows(p, b, h);
  const float* den = row_stats_in(p, b, h);
  const int tid = static_cast<int>(threadIdx.x), i = tid / Cfg::LPR, l = tid % Cfg::LPR;
  const bool in = i < n;
  const float inv = in ? 1.f / den[t0 + i] : 0.f;
  float od = 0.f;
  for (int e = l; e < HD; e += Cfg::LPR) {
    const float g = in ? tiles::load_as_float(go.ptr + (t0 + i) * go.stride + e) : 0.f;
    if (in) od = fmaf(g, tiles::load_as_float(o.ptr + (t0 + i) * o.stride + e), od);
    sDO[i * LDU + e] = g;
    sG[i * LDU + e] = g * inv;
  }
  od = group_sum<Cfg::LPR>(od);
  if (l == 0) {
    sG[i * LDU + HD] = -od * inv;
    sOd[i] = od;
    sInv[i] = inv;
  }
  __syncthreads();
  using Tl = LinTiles<St>;
  typename Tl::template Acc<C, C> kt;  // kt[j][i] = v_j . dO_i
  kt.zero();
  Tl::template gemm_exact<C, C, HD, LDU, 1, 1, LDU>(kt, sm.u(), sDO);
  float* sDK = sm.dkt();
  Tl::for_each(kt, [&](int j, int col, float& x) {
    sDK[j * LDP + col] = (j <= col && col < n) ? (x - sOd[col]) * sInv[col] : 0.f;
  });
  __syncthreads();
}

// dx[u][v] (row w + 8u, column l + 32v) += Jacobian of slots [f0, f0 + FB) applied to
// dX[s * LDP + i]; w: the block's query-side weights, or null on the key side.
template <int HD, class St>
__device__ __forceinline__ void jacobian_block(float (&dx)[LinCfg<HD>::JU][LinCfg<HD>::JV], int f0, const float* dX,
                                               const float* sW, const float* sx) {
  using Cfg = LinCfg<HD, St>;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
  const bool pair_block = f0 >= tiles::linear_head_slots(HD);  // the same for the whole block
  const tiles::LinPairRows pr = tiles::linear_pair_rows(HD, f0);
#pragma unroll
  for (int u = 0; u < Cfg::JU; ++u) {
    const int i = warp + 8 * u;
    float rb = 0.f, rbp = 0.f;
#pragma unroll
    for (int v = 0; v < Cfg::JV; ++v) {
      const tiles::LinJacTerms<float> t =
          tiles::linear_jacobian_terms(HD, f0, Cfg::FB, lane + 32 * v, dX + i, Cfg::LDP, sW, sx + i * HD);
      dx[u][v] += t.own;
      rb += t.red_b;
      rbp += t.red_bp;
    }
    if (pair_block) {
      rb = group_sum<32>(rb);
      rbp = group_sum<32>(rbp);
#pragma unroll
      for (int v = 0; v < Cfg::JV; ++v) {
        if (lane + 32 * v == pr.b) dx[u][v] += rb;
        if (lane + 32 * v == pr.bp) dx[u][v] += rbp;
      }
    }
  }
}

// Rows [t0, t0 + n) of Jacobian-mapped values (row w + 8u, column l + 32v) go to dst. With
// `prev` (an earlier stage's running sum, fp32, after its publish) each value is added to
// prev's first; dst may equal prev. U: bf16 rounds once, fp32 rows as they are.
template <int HD, class U>
__device__ __forceinline__ void store_jacobian_rows(Rows<U> dst, const float (&dx)[LinCfg<HD>::JU][LinCfg<HD>::JV],
                                                    const Rows<float>* prev, int64_t t0, int n) {
  using Cfg = LinCfg<HD>;
  const int lane = static_cast<int>(threadIdx.x) % 32, warp = static_cast<int>(threadIdx.x) / 32;
#pragma unroll
  for (int u = 0; u < Cfg::JU; ++u) {
    const int i = warp + 8 * u;
    if (i >= n) continue;
#pragma unroll
    for (int v = 0; v < Cfg::JV; ++v) {
      const int c = lane + 32 * v;
      float x = dx[u][v];
      if (prev) x = chain::load_shared_partial(prev->ptr + (t0 + i) * prev->stride + c) + x;
      tiles::store_from_float(dst.ptr + (t0 + i) * dst.stride + c, x);
    }
  }
}

// Feature blocks of stage `stage` (the last stage may own fewer).
template <int HD>
__device__ __forceinline__ int stage_blocks(int stage) {
  using Cfg = LinCfg<HD>;
  const int left = Cfg::NB - stage * Cfg::SB;
  return left < Cfg::SB ? left : Cfg::SB;
}

}  // namespace linear_detail

// Stage `stage` of head h, sequence b: its slots' share of the numerators and denominators of
// every chunk, added to the earlier stages' running sums; the last stage writes out rows
// [0, T) and row_stats (the denominators).
template <int HD, class St>
__device__ void linear_item_forward(const AttnLaunchParamsT<St>& p, int b, int h, int stage, float* smem) {
  using Cfg = LinCfg<HD, St>;
  using Tl = LinTiles<St>;
  namespace ld = linear_detail;
  constexpr int C = Cfg::C, FB = Cfg::FB, LDU = Cfg::LDU, LDP = Cfg::LDP, LPR = Cfg::LPR;
  __syncthreads();
  const ld::LinSmem<HD, St> sm(smem);
  float *sq = sm.q(), *sk = sm.k(), *sU = sm.u(), *sS = sm.state(), *sW = sm.weights();
  float *sPsi = sm.pa(), *sPhi = sm.pb();
  float* sInv = sm.inv_den();  // last stage
  const int f_first = stage * Cfg::SF, nb = ld::stage_blocks<HD>(stage);
  const bool first = stage == 0, last = stage == Cfg::NS - 1;
  ld::init_stage<HD>(p, p.heads[h], f_first, sS, sW, nullptr);
  const int tid = static_cast<int>(threadIdx.x), drow = tid / LPR, dlane = tid % LPR;
  const int64_t T = p.T;
  const Rows<float> run = linear_acc(p, b, h);  // running sums [T][HD + 1]
  int32_t* progress = linear_progress(p, b, h, 0);
  const Rows<St> out = out_rows(p, b, h);
  float* stats = row_stats_out(p, b, h);
  int32_t chunk = 0;
  for (int64_t t0 = 0; t0 < T; t0 += C, ++chunk) {
    const int n = static_cast<int>(tiles::min64(C, T - t0));
    __syncthreads();  // the previous chunk is done with every shared buffer
    ld::load_chunk_rows<HD>(sq, HD, q_rows(p, b, h), t0, n);
    ld::load_chunk_rows<HD>(sk, HD, k_rows(p, b, h), t0, n);
    ld::load_u<HD>(sU, v_rows(p, b, h), t0, n);
    typename Tl::template Acc<C, HD> acc;  // numerators acc[i][e]
    typename Tl::template Acc<C, C> kap;   // the stage's share of the chunk kernel matrix
    acc.zero();
    kap.zero();
    float den = 0.f;  // partial of row drow
    for (int k = 0; k < nb; ++k) {
      float* sSk = sS + k * FB * LDU;
      __syncthreads();  // chunk rows loaded; feature tiles free
      ld::fill_features<HD, St>(sPsi, sPhi, f_first + k * FB, sW + k * FB, sq, sk, n);
      __syncthreads();
      Tl::template gemm<C, HD, FB, 1, LDP, LDU, 1>(acc, sPsi, sSk);  // earlier chunks
      Tl::template gemm<C, C, FB, 1, LDP, LDP, 1>(kap, sPsi, sPhi);
      for (int s = dlane; s < FB; s += LPR) den = fmaf(sPsi[s * LDP + drow], sSk[s * LDU + HD], den);
    }
    __syncthreads();  // done with sPsi: it takes the masked chunk kernel
    ld::store_causal<HD, St>(sPsi, kap, n);
    __syncthreads();
    Tl::template gemm<C, HD, C, LDP, 1, LDU, 1>(acc, sPsi, sU);  // same chunk
    for (int j = dlane; j < C; j += LPR) den += sPsi[drow * LDP + j];
    den = ld::group_sum<LPR>(den);

    // The chain: add the earlier stages' sums, pass them on (or finish the chunk).
    if (!first) chain::wait_at_least(progress + stage - 1, chunk + 1, chain::kWaitForward, b, h, stage);
    float* den_at = run.ptr + (t0 + drow) * run.stride + HD;
    if (dlane == 0 && drow < n && !first) den += chain::load_shared_partial(den_at);
    if (!last) {
      if (dlane == 0 && drow < n) *den_at = den;
      Tl::for_each(acc, [&](int i, int e, float& x) {
        if (i >= n) return;
        float* at = run.ptr + (t0 + i) * run.stride + e;
        *at = first ? x : chain::load_shared_partial(at) + x;
      });
      chain::publish(progress + stage, chunk + 1);
    } else {
      if (dlane == 0) {
        sInv[drow] = 1.f / den;
        if (drow < n) stats[t0 + drow] = den;
      }
      __syncthreads();
      Tl::for_each(acc, [&](int i, int e, float& x) {
        if (i >= n) return;
        const float num = first ? x : chain::load_shared_partial(run.ptr + (t0 + i) * run.stride + e) + x;
        tiles::store_from_float(out.ptr + (t0 + i) * out.stride + e, num * sInv[i]);
      });
    }

    // The state steps come after the publish (the next stage waits less) and after the
    // accumulators are dead; Phi of each block is rebuilt (elementwise, cheap) for its step.
    for (int k = 0; k < nb; ++k) {
      __syncthreads();  // feature tiles free
      ld::fill_features<HD, St>(nullptr, sPhi, f_first + k * FB, sW + k * FB, sq, sk, n);
      __syncthreads();
      ld::state_step<HD, St>(sS + k * FB * LDU, sS + k * FB * LDU, sPhi, sU);  // S += Phi^T [v, 1]
    }
  }
  __syncthreads();
}

// Stage `stage` of head h's dQ chain, sequence b (chunks forward): dPsi = S_excl G + Phi dKappa
// for its slots -> their share of dq (Jacobian) and their totals for dL. The last stage
// writes (overwrites) dQ rows [0, T), then A (row stride n_groups + 1) from every stage's totals.
template <int HD, class St>
__device__ void linear_item_backward_dq(const AttnLaunchParamsT<St>& p, int b, int h, int stage, float* smem) {
  using Cfg = LinCfg<HD, St>;
  using Tl = LinTiles<St>;
  namespace ld = linear_detail;
  constexpr int C = Cfg::C, FB = Cfg::FB, LDU = Cfg::LDU, LDP = Cfg::LDP, LPF = Cfg::LPF;
  constexpr int JU = Cfg::JU, JV = Cfg::JV;
  __syncthreads();
  const AttnHeadDesc& d = p.heads[h];
  const ld::LinSmem<HD, St> sm(smem);
  float *sq = sm.q(), *sU = sm.u(), *sS = sm.state(), *sW = sm.weights();
  float *sPA = sm.pa(), *sPB = sm.pb(), *sG = sm.g(), *sDK = sm.dkt(), *sTt = sm.totals();
  const int f_first = stage * Cfg::SF, nb = ld::stage_blocks<HD>(stage);
  const bool first = stage == 0, last = stage == Cfg::NS - 1;
  ld::init_stage<HD>(p, d, f_first, sS, sW, sTt);
  const int tid = static_cast<int>(threadIdx.x);
  const int64_t T = p.T;
  const int32_t n_chunks = static_cast<int32_t>(tiles::ceil_div(T, C));
  const Rows<float> run = linear_acc(p, b, h);  // running dQ sums (first HD columns)
  float* totals = linear_totals(p, b, h);
  int32_t* progress = linear_progress(p, b, h, 0);

  for (int32_t chunk = 0; chunk < n_chunks; ++chunk) {
    const int64_t t0 = int64_t(chunk) * C;
    const int n = static_cast<int>(tiles::min64(C, T - t0));
    __syncthreads();
    ld::load_backward_chunk<HD>(p, b, h, smem, t0, n);
    float dq[JU][JV] = {};
    for (int k = 0; k < nb; ++k) {
      const int f0 = f_first + k * FB;
      float* sSk = sS + k * FB * LDU;
      __syncthreads();
      ld::fill_features<HD, St>(sPA, sPB, f0, nullptr, sq, sm.k(), n);  // sPA: unweighted X(q)
      __syncthreads();
      typename Tl::template Acc<FB, C> dX;  // dX[s][i]
      dX.zero();
      Tl::template gemm<FB, C, HD + 1, LDU, 1, 1, LDU>(dX, sSk, sG);
      Tl::template gemm<FB, C, C, LDP, 1, LDP, 1>(dX, sPB, sDK);
      __syncthreads();  // every read of the state slice is done
      ld::state_step<HD, St>(sSk, sSk, sPB, sU);
      __syncthreads();  // done with Phi: sPB takes dX
      Tl::for_each(dX, [&](int r, int c, float& x) { sPB[r * LDP + c] = x; });
      __syncthreads();
      {  // totals of the block's slots: Tt[s] += sum_i dX[s][i] X_s(q_i)
        const int s = tid / LPF, l = tid % LPF;
        float t = 0.f;
        for (int i = l; i < C; i += LPF) t = fmaf(sPB[s * LDP + i], sPA[s * LDP + i], t);
        t = ld::group_sum<LPF>(t);
        if (l == 0) sTt[k * FB + s] += t;
      }
      ld::jacobian_block<HD, St>(dq, f0, sPB, sW + k * FB, sq);
    }
    if (chunk == n_chunks - 1) {  // the totals are final: leave them for the last stage's A
      __syncthreads();
      for (int s = tid; s < nb * FB; s += tiles::kAttnThreads) totals[f_first + s] = sTt[s];
    }
    if (!first) chain::wait_at_least(progress + stage - 1, chunk + 1, chain::kWaitDq, b, h, stage);
    const Rows<float>* prev = first ? nullptr : &run;
    if (last) {
      ld::store_jacobian_rows<HD>(dq_rows(p, b, h), dq, prev, t0, n);
    } else {
      ld::store_jacobian_rows<HD>(run, dq, prev, t0, n);
      chain::publish(progress + stage, chunk + 1);
    }
  }
  if (!last) return;

  // A = sum over pairs of dkappa s s^T from every stage's totals (each stage wrote its own
  // before publishing its last chunk, which this stage has seen): row sums by group, then entries.
  __threadfence();  // this stage's own totals, written by other threads of the block
  __syncthreads();
  float* sTotals = smem;          // [NF]
  float* Brow = smem + Cfg::NF;   // [HD][G1]
  for (int f = tid; f < Cfg::NF; f += tiles::kAttnThreads) sTotals[f] = chain::load_shared_partial(totals + f);
  __syncthreads();
  const int G1 = d.n_groups + 1;
  for (int e = tid; e < HD * (G1 - 1); e += tiles::kAttnThreads) {
    const int r = e / (G1 - 1), y = 1 + e % (G1 - 1);
    Brow[r * G1 + y] = tiles::linear_A_rowsum(HD, static_cast<const float*>(sTotals), d.groups, r, y);
  }
  __syncthreads();
  float* dA = linear_dA(p, b, h);
  for (int e = tid; e < G1 * G1; e += tiles::kAttnThreads)
    dA[e] = tiles::linear_A_entry(HD, static_cast<const float*>(sTotals), static_cast<const float*>(Brow), G1,
                                  d.groups, p.scale, e / G1, e % G1);
  __syncthreads();
}

// Stage `stage` of head h's dK/dV chain, sequence b (chunks backward, suffix state R): dPhi =
// R_excl U + Psi dKappa -> its slots' share of dk; dv = Phi R_excl + Kap^T G with its share of
// Kap. Stage 0 overwrites the head's dK / dV partial rows, later stages add to them.
template <int HD, class St>
__device__ void linear_item_backward_dkv(const AttnLaunchParamsT<St>& p, int b, int h, int stage, float* smem) {
  using Cfg = LinCfg<HD, St>;
  using Tl = LinTiles<St>;
  namespace ld = linear_detail;
  constexpr int C = Cfg::C, FB = Cfg::FB, LDU = Cfg::LDU, LDP = Cfg::LDP;
  constexpr int JU = Cfg::JU, JV = Cfg::JV;
  __syncthreads();
  const ld::LinSmem<HD, St> sm(smem);
  float *sq = sm.q(), *sk = sm.k(), *sU = sm.u(), *sS = sm.state(), *sW = sm.weights();
  float *sPA = sm.pa(), *sPB = sm.pb(), *sG = sm.g(), *sDK = sm.dkt();
  const int f_first = stage * Cfg::SF, nb = ld::stage_blocks<HD>(stage);
  const bool first = stage == 0;
  ld::init_stage<HD>(p, p.heads[h], f_first, sS, sW, nullptr);
  const int64_t T = p.T;
  const int32_t n_chunks = static_cast<int32_t>(tiles::ceil_div(T, C));
  const Rows<float> dk_run = linear_dk_rows(p, b, h), dv_run = linear_dv_rows(p, b, h);
  int32_t* progress = linear_progress(p, b, h, 1);

  for (int32_t done = 0; done < n_chunks; ++done) {
    const int64_t t0 = int64_t(n_chunks - 1 - done) * C;
    const int n = static_cast<int>(tiles::min64(C, T - t0));
    __syncthreads();
    ld::load_backward_chunk<HD>(p, b, h, smem, t0, n);
    float dk[JU][JV] = {};
    typename Tl::template Acc<C, HD> dv;  // dv[j][e]
    typename Tl::template Acc<C, C> kap;  // the stage's share of kap[i][j]
    dv.zero();
    kap.zero();
    for (int k = 0; k < nb; ++k) {
      const int f0 = f_first + k * FB;
      float* sSk = sS + k * FB * LDU;
      __syncthreads();
      ld::fill_features<HD, St>(sPA, sPB, f0, sW + k * FB, sq, sk, n);  // sPA: Psi, sPB: Phi
      __syncthreads();
      typename Tl::template Acc<FB, C> dX;  // dX[s][j]
      dX.zero();
      Tl::template gemm<FB, C, HD + 1, LDU, 1, 1, LDU>(dX, sSk, sU);
      Tl::template gemm<FB, C, C, LDP, 1, 1, LDP>(dX, sPA, sDK);
      Tl::template gemm<C, HD, FB, 1, LDP, LDU, 1>(dv, sPB, sSk);
      Tl::template gemm<C, C, FB, 1, LDP, LDP, 1>(kap, sPA, sPB);
      __syncthreads();  // every read of the state slice is done
      ld::state_step<HD, St>(sSk, sSk, sPA, sG);  // R += Psi^T G
      __syncthreads();  // done with Psi: sPA takes dX
      Tl::for_each(dX, [&](int r, int c, float& x) { sPA[r * LDP + c] = x; });
      __syncthreads();
      ld::jacobian_block<HD, St>(dk, f0, sPA, nullptr, sk);
    }
    __syncthreads();  // done with Phi: sPB takes the masked chunk kernel
    ld::store_causal<HD, St>(sPB, kap, n);
    __syncthreads();
    Tl::template gemm<C, HD, C, 1, LDP, LDU, 1>(dv, sPB, sG);  // dv_j += sum_{i>=j} Kap[i][j] G_i

    if (!first) chain::wait_at_least(progress + stage - 1, done + 1, chain::kWaitDkv, b, h, stage);
    const Rows<float>* prev = first ? nullptr : &dk_run;
    ld::store_jacobian_rows<HD>(dk_run, dk, prev, t0, n);
    Tl::for_each(dv, [&](int j, int e, float& x) {
      if (j >= n) return;
      float* at = dv_run.ptr + (t0 + j) * dv_run.stride + e;
      *at = first ? x : chain::load_shared_partial(at) + x;
    });
    chain::publish(progress + stage, done + 1);
  }
  __syncthreads();
}

}  // namespace hw::cuda::attn_dev
