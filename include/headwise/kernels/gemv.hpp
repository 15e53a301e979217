#pragma once
// One-row products with 16-bit weights for cached decoding (infer/cached_forward.cpp): out[O] = x[I] W
// (+ bias), each weight read once, the outputs split over the OpenMP threads (all of them, every
// call large enough to be worth a team). The weights (bf16 or fp16, HalfMatrix) are stored [O,I]
// so every output is one contiguous dot product, widened to fp32 in registers. Every output's sum runs in an order fixed by I alone,
// so results do not depend on the thread count.
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace hw::cpu {

enum class HalfType { BF16, F16 };

// bf16: round to nearest even (NaN stays NaN); fp16: IEEE binary16, round to nearest even.
uint16_t float_to_bf16(float f);
float bf16_to_float(uint16_t h);
uint16_t float_to_f16(float f);
float f16_to_float(uint16_t h);

// Host storage for 16-bit matrices: one mapping (core/host_pages.hpp: 2 MiB aligned, huge pages
// where the kernel allows), shared by the matrices placed in it and freed with the last of them.
using HalfStorage = std::shared_ptr<uint16_t>;
HalfStorage make_half_storage(int64_t values);

// A [O, I] matrix of 16-bit weights: its values at `w` inside `storage` (its own, or a pool that
// a model's matrices share, so that all of them sit on huge pages: matrices of their own left a
// third of a GPT-2 124M model's bytes on 4 KiB pages).
struct HalfMatrix {
  HalfType type = HalfType::BF16;
  int64_t O = 0, I = 0;
  HalfStorage storage;
  uint16_t* w = nullptr;
  bool empty() const { return w == nullptr; }
  int64_t size() const { return O * I; }
  // From fp32 W in [I,O] (w_out_in false) or [O,I] layout, rounded once; into storage of its own,
  // or at `at` inside `pool` (O * I values from there).
  static HalfMatrix from_f32(const float* w, int64_t I, int64_t O, bool w_out_in, HalfType t);
  static HalfMatrix from_f32(const float* w, int64_t I, int64_t O, bool w_out_in, HalfType t, const HalfStorage& pool,
                             uint16_t* at);
};

// Rows lo..hi of a one-row product with fp32 W stored [O, I] (an LM head; matmul.cpp's row_gemv
// calls it per thread): out[o] = (accumulate ? out[o] : 0) + sum_i x[i] W(o, i), AVX-512, four rows
// per pass with the next four prefetched. Returns false, computing nothing, where the CPU lacks
// AVX-512 (the caller takes BLAS). (W [I, O], the decoder's other matrices, stays with OpenBLAS's
// GEMV over blocks of rows: a hand-written kernel of that layout measured slower, 29 against 37
// tok/s on the GPT-2 124M shape.)
bool dot_rows_f32(float* out, const float* x, const float* w, int64_t I, int64_t lo, int64_t hi, bool accumulate);

// out[o] = bias[o] (or 0) + sum_i x[i] W(o, i) for 16-bit W [O,I], by one of three kernels
// (half_kernel_name):
//   "avx512"     the weights widened to fp32 in registers and multiplied by fp32 x (AVX-512F): fp16,
//                and bf16 with I <= kMaxWidenIn;
//   "avx512bf16" AVX512_BF16 dot products, x rounded to bf16 first (a relative error of 2^-9 per
//                input): bf16 with I > kMaxWidenIn, where the CPU has them. At Qwen2.5-0.5B's
//                MLP out (I = 4864) they read 18-26 GB/s against the widening kernel's 14-20 at
//                one thread, while at I = 896 widening reads 10-30% faster (bench_gemv). Since
//                both prefetch wide rows into L2 (gemv.cpp, kL1PassBytes) the two are even at
//                I = 4864 (22.8 against 22.4 GB/s at one thread, 32.6 against 32.3 at two, 40
//                alternating rounds) and widening still leads at I = 896 (24.7 against 19.4,
//                31.4 against 24.9): Auto keeps the dot products past kMaxWidenIn;
//   "plain"      loops the compiler vectorizes: CPUs without AVX-512, I > 32768, HEADWISE_GEMV=plain.
// Every output's sum runs in one order fixed by I and the kernel, whatever the thread count.
void gemv_half(float* out, const float* x, const HalfMatrix& w, const float* bias);

// Rows of a matrix product with 16-bit weights (prefill): out[N,O] = inp[N,I] W^T (+ bias),
// W widened to fp32 a panel of rows at a time into `panel` (resized once, to <= kPanelRows x I).
void matmul_half(float* out, const float* inp, const HalfMatrix& w, const float* bias, int64_t N,
                 std::vector<float>& panel);
constexpr int64_t kPanelRows = 256;
// Up to this many rows matmul_half multiplies each weight, loaded once, into all of them
// (few_rows_half); more rows widen panels for a GEMM.
constexpr int64_t kFewHalfRows = 32;  // (Qwen2.5-0.5B shape, bench_gemv --rows: 4 rows read W as fast as one)

// A few rows at once (batched decoding), few_rows.cpp: each weight loaded into a register once
// and multiplied into up to four rows, each row's result equal bit for bit to its one-row
// product (gemv_half's, or dot_rows_f32's). For 16-bit W [O,I]: out[N,O] = inp[N,I] W^T (+ bias),
// `scratch` holding the rows' x in the kernel's layout (resized once).
void few_rows_half(float* out, const float* inp, const HalfMatrix& w, const float* bias, int64_t N,
                   std::vector<float>& scratch);
// For fp32 W [O,I], outputs lo..hi of N rows (x [N,I], out [N,O]; a thread's piece):
// out[r,o] = (accumulate ? out[r,o] : 0) + sum_i x[r,i] W(o,i). False, computing nothing,
// without AVX-512 (the caller takes BLAS).
bool few_rows_f32(float* out, const float* x, const float* w, int64_t N, int64_t I, int64_t O, int64_t lo, int64_t hi,
                  bool accumulate);

// The widest fan-in bf16 products widen (above it they take the AVX512_BF16 dot products).
constexpr int64_t kMaxWidenIn = 2048;
// The kernel gemv_half runs for a matrix of type t and fan-in I on this machine and environment:
// "avx512", "avx512bf16" or "plain".
std::string half_kernel_name(HalfType t, int64_t I);
// Force one kernel for every 16-bit product (tests; HEADWISE_GEMV=plain|avx512|avx512bf16 forces
// it at startup), or Auto (by type and fan-in, as above). A forced kernel the CPU lacks falls back:
// avx512bf16 to avx512 (fp16, or no AVX512_BF16), avx512 to plain. Plain also forces kv_rows.hpp's
// KV row kernels to their plain loops; half_kernels_plain says whether it is forced.
enum class HalfKernel { Auto, Plain, Widen, Bf16Dot };
void force_half_kernel(HalfKernel k);
void force_plain_half_kernel(bool on);  // Plain or Auto
bool half_kernels_plain();

}  // namespace hw::cpu
