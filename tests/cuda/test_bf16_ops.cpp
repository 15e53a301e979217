// GPU parity tests of the mixed-precision op launchers (bf16 activations, fp32 statistics and
// parameter gradients; launch_ops.hpp "Mixed precision"). Inputs are random and rounded to bf16
// on the host first, so the CPU double reference sees exactly the values the GPU sees; bf16
// outputs are widened and compared with max |got - ref| / max |ref| <= 1e-2, fp32 outputs
// tighter. Where the op is one fp32 add, the result must also be the host's fp32 sum rounded
// once (hw::to_bf16) bit for bit. Row widths include ones that are not a multiple of 4 (the
// scalar path) and pointers offset by one element (misaligned for the 8-byte vector path).
#include <catch2/catch.hpp>

#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <limits>
#include <memory>
#include <random>
#include <vector>

#include "cuda_test_util.hpp"
#include "headwise/core/bf16.hpp"
#include "headwise/kernels/cpu.hpp"
#include "kernels/cuda/launch_ops.hpp"

namespace {

using hw::bf16;
using hw::cudatest::DeviceArray;
using hw::cudatest::max_rel_err;

const hw::Backend<float>& be() { return hw::cudatest::exact_backend(); }
const hw::Backend<double>& ref() { return hw::cudatest::reference(); }
// The backend's stream: its copies (which wait for completion) are ordered after the launches.
cudaStream_t stream() { return static_cast<cudaStream_t>(be().native_stream()); }

// Random values rounded to bf16 (normal, times scale; never all zero).
std::vector<bf16> random_bf16(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<bf16> v(n);
  for (auto& x : v) x = hw::to_bf16(static_cast<float>(scale) * dist(gen));
  return v;
}
std::vector<float> random_float(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(0.0f, 1.0f);
  std::vector<float> v(n);
  for (auto& x : v) x = static_cast<float>(scale) * dist(gen);
  return v;
}

std::vector<float> widen(const std::vector<bf16>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = hw::to_float(v[i]);
  return out;
}
std::vector<double> widen_d(const std::vector<bf16>& v) {
  std::vector<double> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = hw::to_float(v[i]);
  return out;
}
std::vector<double> to_d(const std::vector<float>& v) { return {v.begin(), v.end()}; }

template <class T>
std::unique_ptr<DeviceArray<T>> upload(const std::vector<T>& host) {
  auto d = std::make_unique<DeviceArray<T>>(static_cast<int64_t>(host.size()));
  be().copy_to_device(d->get(), host.data(), d->bytes());
  return d;
}
template <class T>
std::vector<T> download(const DeviceArray<T>& d) {
  std::vector<T> host(static_cast<size_t>(d.size()));
  be().copy_to_host(host.data(), d.get(), d.bytes());
  return host;
}

// Host-side fp32 add rounded once: what a bf16 add op must store, bit for bit.
std::vector<uint16_t> rounded_sum_bits(const std::vector<bf16>& a, const std::vector<bf16>& b) {
  std::vector<uint16_t> out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = hw::to_bf16(hw::to_float(a[i]) + hw::to_float(b[i])).bits;
  return out;
}
std::vector<uint16_t> bits(const std::vector<bf16>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = v[i].bits;
  return out;
}
std::vector<bf16> slice(const std::vector<bf16>& v, size_t off, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(off), v.begin() + static_cast<std::ptrdiff_t>(off + n)};
}

constexpr double kBf16Tol = 1e-2;

}  // namespace

TEST_CASE("cuda bf16 ops: fill_zero clears exactly the range") {
  const size_t n = 1001;
  auto host = random_bf16(n + 2, 1);
  auto d = upload(host);
  hw::cuda::launch_fill_zero(stream(), d->get() + 1, static_cast<int64_t>(n));
  const auto got = download(*d);
  CHECK(got[0].bits == host[0].bits);
  CHECK(got[n + 1].bits == host[n + 1].bits);
  size_t nonzero = 0;
  for (size_t i = 1; i <= n; i++) nonzero += got[i].bits != 0;
  CHECK(nonzero == 0);
}

TEST_CASE("cuda bf16 ops: accumulate and residual add in fp32 and round once") {
  const size_t n = 4003;  // 1000 vectors and a tail of 3
  for (size_t off : {size_t{0}, size_t{1}}) {  // 8-byte aligned vector path, then scalar only
    INFO("offset=" << off);
    const auto a = random_bf16(n + 1, 11), b = random_bf16(n + 1, 12, 0.01);  // small b: rounding matters
    const auto a_n = slice(a, off, n), b_n = slice(b, off, n);
    const auto want_bits = rounded_sum_bits(a_n, b_n);
    std::vector<double> want = widen_d(a_n);
    ref().accumulate(want.data(), widen_d(b_n).data(), static_cast<int64_t>(n));

    // accumulate into a pre-filled dst
    auto dst = upload(a), src = upload(b);
    hw::cuda::launch_accumulate(stream(), dst->get() + off, src->get() + off, static_cast<int64_t>(n));
    const auto acc = slice(download(*dst), off, n);
    CHECK(max_rel_err(widen(acc), want) <= kBf16Tol);
    CHECK(bits(acc) == want_bits);
    // residual_forward, into a separate out and into out aliasing a
    for (bool alias : {false, true}) {
      INFO("alias=" << alias);
      auto da = upload(a), db = upload(b), dout = upload(std::vector<bf16>(n + 1));
      DeviceArray<bf16>& out = alias ? *da : *dout;
      hw::cuda::launch_residual_forward(stream(), out.get() + off, da->get() + off, db->get() + off,
                                        static_cast<int64_t>(n));
      const auto got = slice(download(out), off, n);
      CHECK(max_rel_err(widen(got), want) <= kBf16Tol);
      CHECK(bits(got) == want_bits);
    }
  }
}

TEST_CASE("cuda bf16 ops: GELU forward and accumulating backward") {
  const size_t n = 4003;
  for (size_t off : {size_t{0}, size_t{1}}) {
    INFO("offset=" << off);
    const auto inp = random_bf16(n + 1, 21, 2.0), dout = random_bf16(n + 1, 22), dinp0 = random_bf16(n + 1, 23);
    const auto inp_d = widen_d(slice(inp, off, n)), dout_d = widen_d(slice(dout, off, n));

    std::vector<double> out_ref(n);
    ref().gelu_forward(out_ref.data(), inp_d.data(), static_cast<int64_t>(n));
    auto f_inp = upload(inp), f_out = upload(std::vector<bf16>(n + 1));
    hw::cuda::launch_gelu_forward(stream(), f_out->get() + off, f_inp->get() + off, static_cast<int64_t>(n));
    CHECK(max_rel_err(widen(slice(download(*f_out), off, n)), out_ref) <= kBf16Tol);

    std::vector<double> dinp_ref = widen_d(slice(dinp0, off, n));
    ref().gelu_backward(dinp_ref.data(), inp_d.data(), dout_d.data(), static_cast<int64_t>(n));
    auto d_inp = upload(inp), d_dout = upload(dout), d_dinp = upload(dinp0);
    hw::cuda::launch_gelu_backward(stream(), d_dinp->get() + off, d_inp->get() + off, d_dout->get() + off,
                                   static_cast<int64_t>(n));
    CHECK(max_rel_err(widen(slice(download(*d_dinp), off, n)), dinp_ref) <= kBf16Tol);
  }
}

TEST_CASE("cuda bf16 ops: LayerNorm forward, fp32 statistics") {
  const int64_t N = 37;
  const double eps = 1e-5;
  for (int64_t C : {int64_t{768}, int64_t{67}}) {  // vector rows, scalar rows
    INFO("C=" << C);
    const auto inp = random_bf16(static_cast<size_t>(N * C), 31, 2.0);
    const auto w = random_float(static_cast<size_t>(C), 32), bias = random_float(static_cast<size_t>(C), 33);
    std::vector<double> out_ref(static_cast<size_t>(N * C)), mean_ref(N), rstd_ref(N);
    ref().layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), widen_d(inp).data(), to_d(w).data(),
                            to_d(bias).data(), N, C, eps);
    auto d_inp = upload(inp), d_out = upload(std::vector<bf16>(inp.size()));
    auto d_w = upload(w), d_b = upload(bias), d_mean = upload(std::vector<float>(N)),
         d_rstd = upload(std::vector<float>(N));
    hw::cuda::launch_layernorm_forward(stream(), d_out->get(), d_mean->get(), d_rstd->get(), d_inp->get(),
                                       d_w->get(), d_b->get(), N, C, eps);
    CHECK(max_rel_err(widen(download(*d_out)), out_ref) <= kBf16Tol);
    CHECK(max_rel_err(download(*d_mean), mean_ref) <= 1e-5);
    CHECK(max_rel_err(download(*d_rstd), rstd_ref) <= 1e-5);
  }
}

TEST_CASE("cuda bf16 ops: fused residual + LayerNorm normalises the rounded residual") {
  const int64_t N = 37;
  const double eps = 1e-5;
  for (int64_t C : {int64_t{768}, int64_t{67}}) {
    for (bool alias : {false, true}) {  // resid_out may alias a
      INFO("C=" << C << " alias=" << alias);
      const size_t NC = static_cast<size_t>(N * C);
      const auto a = random_bf16(NC, 41), b = random_bf16(NC, 42, 0.3);
      const auto w = random_float(static_cast<size_t>(C), 43), bias = random_float(static_cast<size_t>(C), 44);
      // The op's meaning: residual_forward stores bf16, then layernorm_forward reads that.
      const auto resid_bits = rounded_sum_bits(a, b);
      std::vector<double> resid_d(NC);
      for (size_t i = 0; i < NC; i++) resid_d[i] = std::bit_cast<float>(static_cast<uint32_t>(resid_bits[i]) << 16);
      std::vector<double> ln_ref(NC), mean_ref(N), rstd_ref(N);
      ref().layernorm_forward(ln_ref.data(), mean_ref.data(), rstd_ref.data(), resid_d.data(), to_d(w).data(),
                              to_d(bias).data(), N, C, eps);

      auto da = upload(a), db = upload(b), dresid = upload(std::vector<bf16>(NC)), dln = upload(std::vector<bf16>(NC));
      auto dw = upload(w), dbias = upload(bias), dmean = upload(std::vector<float>(N)),
           drstd = upload(std::vector<float>(N));
      DeviceArray<bf16>& resid_out = alias ? *da : *dresid;
      hw::cuda::launch_residual_layernorm_forward(stream(), resid_out.get(), dln->get(), dmean->get(), drstd->get(),
                                                  da->get(), db->get(), dw->get(), dbias->get(), N, C, eps);
      CHECK(bits(download(resid_out)) == resid_bits);
      CHECK(max_rel_err(widen(download(*dln)), ln_ref) <= kBf16Tol);
      CHECK(max_rel_err(download(*dmean), mean_ref) <= 1e-5);
      CHECK(max_rel_err(download(*drstd), rstd_ref) <= 1e-5);
    }
  }
}

TEST_CASE("cuda bf16 ops: LayerNorm backward accumulates into bf16 dinp and fp32 dweight/dbias") {
  const int64_t N = 37;
  for (int64_t C : {int64_t{768}, int64_t{67}}) {
    INFO("C=" << C);
    const size_t NC = static_cast<size_t>(N * C);
    const auto inp = random_bf16(NC, 51, 2.0), dout = random_bf16(NC, 52), dinp0 = random_bf16(NC, 53);
    const auto w = random_float(static_cast<size_t>(C), 54);
    const auto dw0 = random_float(static_cast<size_t>(C), 55), db0 = random_float(static_cast<size_t>(C), 56);
    // Row statistics as the forward leaves them (fp32), computed by the reference.
    std::vector<double> scratch(NC), mean_d(N), rstd_d(N);
    ref().layernorm_forward(scratch.data(), mean_d.data(), rstd_d.data(), widen_d(inp).data(), to_d(w).data(),
                            to_d(w).data(), N, C, 1e-5);
    std::vector<float> mean(mean_d.begin(), mean_d.end()), rstd(rstd_d.begin(), rstd_d.end());

    std::vector<double> dinp_ref = widen_d(dinp0), dw_ref = to_d(dw0), db_ref = to_d(db0);
    ref().layernorm_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), widen_d(dout).data(), widen_d(inp).data(),
                             to_d(w).data(), to_d(mean).data(), to_d(rstd).data(), N, C);

    auto d_dinp = upload(dinp0), d_dout = upload(dout), d_inp = upload(inp);
    auto d_w = upload(w), d_dw = upload(dw0), d_db = upload(db0), d_mean = upload(mean), d_rstd = upload(rstd);
    hw::cuda::launch_layernorm_backward(stream(), d_dinp->get(), d_dw->get(), d_db->get(), d_dout->get(),
                                        d_inp->get(), d_w->get(), d_mean->get(), d_rstd->get(), N, C);
    CHECK(max_rel_err(widen(download(*d_dinp)), dinp_ref) <= kBf16Tol);
    CHECK(max_rel_err(download(*d_dw), dw_ref) <= 1e-4);
    CHECK(max_rel_err(download(*d_db), db_ref) <= 1e-4);
  }
}

TEST_CASE("cuda bf16 ops: encoder forward adds in fp32 and rounds once") {
  const int64_t B = 3, T = 7, V = 50;
  for (int64_t C : {int64_t{64}, int64_t{67}}) {
    for (bool with_wpe : {true, false}) {
      INFO("C=" << C << " wpe=" << with_wpe);
      std::mt19937 gen(61);
      std::vector<int32_t> tokens(static_cast<size_t>(B * T));
      for (auto& t : tokens) t = static_cast<int32_t>(gen() % V);
      const auto wte = random_bf16(static_cast<size_t>(V * C), 62), wpe = random_bf16(static_cast<size_t>(T * C), 63);
      std::vector<double> out_ref(static_cast<size_t>(B * T * C));
      const auto wte_d = widen_d(wte), wpe_d = widen_d(wpe);
      ref().encoder_forward(out_ref.data(), tokens.data(), wte_d.data(), with_wpe ? wpe_d.data() : nullptr, B, T, C);
      std::vector<uint16_t> want_bits(out_ref.size());
      for (int64_t bt = 0; bt < B * T; bt++)
        for (int64_t c = 0; c < C; c++) {
          const float e = hw::to_float(wte[static_cast<size_t>(tokens[static_cast<size_t>(bt)] * C + c)]);
          const float p = with_wpe ? hw::to_float(wpe[static_cast<size_t>((bt % T) * C + c)]) : 0.0f;
          want_bits[static_cast<size_t>(bt * C + c)] = hw::to_bf16(with_wpe ? e + p : e).bits;
        }

      auto d_tok = upload(tokens);
      auto d_wte = upload(wte), d_wpe = upload(wpe), d_out = upload(std::vector<bf16>(out_ref.size()));
      hw::cuda::launch_encoder_forward(stream(), d_out->get(), d_tok->get(), d_wte->get(),
                                       with_wpe ? d_wpe->get() : nullptr, B, T, C);
      const auto got = download(*d_out);
      CHECK(max_rel_err(widen(got), out_ref) <= kBf16Tol);
      CHECK(bits(got) == want_bits);
    }
  }
}

TEST_CASE("cuda bf16 ops: encoder backward accumulates bf16 dout into fp32 gradients") {
  const int64_t B = 3, T = 101, C = 67, V = 20;  // repeated tokens, odd sizes
  std::mt19937 gen(71);
  std::vector<int32_t> tokens(static_cast<size_t>(B * T));
  for (auto& t : tokens) t = static_cast<int32_t>(gen() % V);
  const auto dout = random_bf16(static_cast<size_t>(B * T * C), 72);
  const auto dwte0 = random_float(static_cast<size_t>(V * C), 73), dwpe0 = random_float(static_cast<size_t>(T * C), 74);
  std::vector<double> dwte_ref = to_d(dwte0), dwpe_ref = to_d(dwpe0);
  ref().encoder_backward(dwte_ref.data(), dwpe_ref.data(), widen_d(dout).data(), tokens.data(), B, T, C);
  // The fp32 CPU op on the widened dout: the kernel's float sequence per element, bit for bit.
  std::vector<float> dwte_f = dwte0, dwpe_f = dwpe0;
  hw::cpu::encoder_backward(dwte_f.data(), dwpe_f.data(), widen(dout).data(), tokens.data(), B, T, C);

  auto d_tok = upload(tokens);
  auto d_dout = upload(dout);
  auto d_dwte = upload(dwte0), d_dwpe = upload(dwpe0);
  hw::cuda::launch_encoder_backward(stream(), d_dwte->get(), d_dwpe->get(), d_dout->get(), d_tok->get(), B, T, C);
  const auto got_wte = download(*d_dwte), got_wpe = download(*d_dwpe);
  CHECK(max_rel_err(got_wte, dwte_ref) <= 1e-5);
  CHECK(max_rel_err(got_wpe, dwpe_ref) <= 1e-5);
  CHECK(std::memcmp(got_wte.data(), dwte_f.data(), got_wte.size() * sizeof(float)) == 0);
  CHECK(std::memcmp(got_wpe.data(), dwpe_f.data(), got_wpe.size() * sizeof(float)) == 0);
}

TEST_CASE("cuda bf16 ops: RoPE forward and backward in place on a strided qkv-like row") {
  const int64_t B = 3, T = 7, n_heads = 2, hd = 10, col0 = 3, row_stride = 3 * n_heads * hd + 1;  // odd everything
  const double theta = 10000.0;
  const size_t total = static_cast<size_t>(B * T * row_stride);
  const auto x = random_bf16(total, 81);
  for (bool forward : {true, false}) {
    INFO("forward=" << forward);
    std::vector<double> want = widen_d(x);
    if (forward)
      ref().rope_forward(want.data(), B, T, row_stride, col0, n_heads, hd, theta);
    else
      ref().rope_backward(want.data(), B, T, row_stride, col0, n_heads, hd, theta);
    auto d = upload(x);
    if (forward)
      hw::cuda::launch_rope_forward(stream(), d->get(), B, T, row_stride, col0, n_heads, hd, theta);
    else
      hw::cuda::launch_rope_backward(stream(), d->get(), B, T, row_stride, col0, n_heads, hd, theta);
    const auto got = download(*d);
    CHECK(max_rel_err(widen(got), want) <= kBf16Tol);
    // Columns outside the rotated heads are untouched, bit for bit.
    size_t changed_outside = 0;
    for (size_t i = 0; i < total; i++) {
      const int64_t col = static_cast<int64_t>(i) % row_stride;
      if (col < col0 || col >= col0 + n_heads * hd) changed_outside += got[i].bits != x[i].bits;
    }
    CHECK(changed_outside == 0);
  }
}

TEST_CASE("cuda bf16 ops: cross-entropy with an ignored row, in place and separate") {
  const int64_t N = 9;
  for (int64_t V : {int64_t{301}, int64_t{512}}) {  // scalar rows, vector rows
    for (bool in_place : {true, false}) {
      INFO("V=" << V << " in_place=" << in_place);
      const auto logits = random_bf16(static_cast<size_t>(N * V), 91, 3.0);
      std::mt19937 gen(92);
      std::vector<int32_t> targets(N);
      for (auto& t : targets) t = static_cast<int32_t>(gen() % V);
      targets[2] = hw::cpu::kIgnoreTarget;
      const double dloss = 1.0 / 8.0;
      std::vector<double> losses_ref(N), dlogits_ref(static_cast<size_t>(N * V));
      const double total_ref = ref().crossentropy_forward_backward(losses_ref.data(), dlogits_ref.data(),
                                                                   widen_d(logits).data(), targets.data(), N, V, dloss);

      auto d_logits = upload(logits), d_sep = upload(std::vector<bf16>(logits.size()));
      auto d_targets = upload(targets);
      auto d_losses = upload(std::vector<float>(N));
      auto partials = upload(std::vector<double>(hw::cuda::kReductionPartials));
      auto result = upload(std::vector<double>(1));
      DeviceArray<bf16>& dlogits = in_place ? *d_logits : *d_sep;
      hw::cuda::launch_crossentropy_forward_backward(stream(), d_losses->get(), dlogits.get(), d_logits->get(),
                                                     d_targets->get(), N, V, dloss, {partials->get(), result->get()});
      const auto got = download(dlogits);
      const auto losses = download(*d_losses);
      CHECK(max_rel_err(widen(got), dlogits_ref) <= kBf16Tol);
      CHECK(max_rel_err(losses, losses_ref) <= 1e-5);
      CHECK(losses[2] == 0.0f);
      size_t nonzero = 0;
      for (int64_t v = 0; v < V; v++) nonzero += got[static_cast<size_t>(2 * V + v)].bits != 0;
      CHECK(nonzero == 0);  // the ignored row's gradient is +0 everywhere
      CHECK(std::abs(download(*result)[0] - total_ref) <= 1e-5 * std::abs(total_ref));
      if (!in_place) {
        CHECK(bits(download(*d_logits)) == bits(logits));  // logits left alone
      }
    }
  }
}

TEST_CASE("cuda bf16 ops: bias column sum of bf16 rows into fp32, pre-filled") {
  const int64_t N = 1001;
  for (int64_t O : {int64_t{77}, int64_t{1024}}) {
    INFO("O=" << O);
    const auto dout = random_bf16(static_cast<size_t>(N * O), 101);
    const auto dbias0 = random_float(static_cast<size_t>(O), 102);
    std::vector<double> want(static_cast<size_t>(O));
    const auto dout_d = widen_d(dout);
    for (int64_t o = 0; o < O; o++) {
      double s = 0.0;
      for (int64_t n = 0; n < N; n++) s += dout_d[static_cast<size_t>(n * O + o)];
      want[static_cast<size_t>(o)] = dbias0[static_cast<size_t>(o)] + s;
    }
    auto d_dout = upload(dout);
    auto d_bias = upload(dbias0);
    hw::cuda::launch_bias_column_sum(stream(), d_bias->get(), d_dout->get(), N, O);
    CHECK(max_rel_err(download(*d_bias), want) <= 1e-5);
  }
}

TEST_CASE("cuda bf16 ops: round_to_bf16 matches hw::to_bf16 bit for bit") {
  std::vector<float> src = random_float(4003, 111, 100.0);
  // Edge cases: ties (down to even, up to even), just past a tie, overflow, NaNs whose payload
  // is only in the dropped bits, infinities, signed zero, subnormals.
  const uint32_t special[] = {0x3f808000U, 0x3f818000U, 0x3f808001U, 0x7f7f7fffU, 0x7f7f8000U, 0x7f7fffffU,
                              0xff7f8000U, 0x7fc00000U, 0x7f800001U, 0xffc00001U, 0x7f800000U, 0xff800000U,
                              0x80000000U, 0x00000001U, 0x00018000U, 0x807fffffU};
  for (size_t k = 0; k < std::size(special); k++) src[7 * k + 2] = std::bit_cast<float>(special[k]);
  src[4001] = std::bit_cast<float>(0x7f800001U);  // a NaN in the scalar tail too
  const size_t n = src.size() - 1;
  for (size_t off : {size_t{0}, size_t{1}}) {  // vector path, scalar path
    INFO("offset=" << off);
    auto d_src = upload(src);
    auto d_dst = upload(std::vector<bf16>(src.size()));
    hw::cuda::launch_round_to_bf16(stream(), d_dst->get() + off, d_src->get() + off, static_cast<int64_t>(n));
    const auto got = download(*d_dst);
    size_t mismatches = 0;
    for (size_t i = 0; i < n; i++) mismatches += got[off + i].bits != hw::to_bf16(src[off + i]).bits;
    CHECK(mismatches == 0);
    CHECK(got[off ? 0 : n].bits == 0);  // nothing written outside the range
  }
}
