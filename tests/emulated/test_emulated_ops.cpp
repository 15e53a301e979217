// Every op launcher of src/kernels/cuda/launch_ops.hpp (fp32 and bf16) run on the CPU block
// emulator with host pointers, against an independent reference: the CPU ops of
// kernels/cpu.hpp run in double, or a naive double formula, on the same (bf16-rounded where
// the op reads bf16) inputs. Bounds: max |got - ref| / max |ref| <= 1e-5 for fp32 outputs,
// <= 1e-2 for bf16 outputs. Sizes mix odd widths (scalar paths and tails), multiples of 4
// (float4 / 8-byte vector paths) and pointers offset by one element (vector path refused).
// Each launcher also runs twice on the same inputs and must give the same bits (no races,
// fixed reduction order). Backward ops accumulate, so gradients start non-zero.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <limits>
#include <random>
#include <type_traits>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include "headwise/core/bf16.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/kernels/tiles/bf16_stochastic.hpp"
#include "kernels/cuda/launch_ops.hpp"
#include "support/rel_err.hpp"

namespace {

using hw::bf16;
constexpr cudaStream_t kStream = nullptr;  // the emulator runs each launch to completion
constexpr double kFp32Tol = 1e-5;
constexpr double kBf16Tol = 1e-2;

using F = std::vector<float>;
using B = std::vector<bf16>;
using D = std::vector<double>;

F randf(size_t n, uint32_t seed, double scale = 1.0) {
  std::mt19937 gen(seed);
  std::normal_distribution<double> dist(0.0, 1.0);
  F v(n);
  for (auto& x : v) x = static_cast<float>(scale * dist(gen));
  return v;
}
B randb(size_t n, uint32_t seed, double scale = 1.0) {
  const F f = randf(n, seed, scale);
  B v(n);
  for (size_t i = 0; i < n; i++) v[i] = hw::to_bf16(f[i]);
  return v;
}
D wd(const F& v) { return {v.begin(), v.end()}; }
D wd(const B& v) {
  D out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = hw::to_float(v[i]);
  return out;
}
F wf(const B& v) {
  F out(v.size());
  for (size_t i = 0; i < v.size(); i++) out[i] = hw::to_float(v[i]);
  return out;
}
template <class T>
std::vector<T> part(const std::vector<T>& v, size_t off, size_t n) {
  return {v.begin() + static_cast<std::ptrdiff_t>(off), v.begin() + static_cast<std::ptrdiff_t>(off + n)};
}

// max |got - ref| / max |ref|; infinite for a non-finite value or a size mismatch.
double rel_err(const F& got, const D& ref) { return hw::test::max_rel_err(got, ref); }
double rel_err(const B& got, const D& ref) { return rel_err(wf(got), ref); }

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

// The worst error of each output kind over the whole file, printed once at exit for the report.
struct Worst {
  double fp32 = 0.0, bf16 = 0.0;
  ~Worst() {
    if (fp32 > 0.0 || bf16 > 0.0) std::printf("emulated ops: worst relative error fp32 %.3g bf16 %.3g\n", fp32, bf16);
  }
} g_worst;
bool fp32_ok(double e) {
  g_worst.fp32 = hw::test::worse(g_worst.fp32, e);
  return e <= kFp32Tol;
}
bool bf16_ok(double e) {
  g_worst.bf16 = hw::test::worse(g_worst.bf16, e);
  return e <= kBf16Tol;
}

// Host fp32 add rounded once: what a bf16 add op must store, bit for bit.
B rounded_sum(const B& a, const B& b) {
  B out(a.size());
  for (size_t i = 0; i < a.size(); i++) out[i] = hw::to_bf16(hw::to_float(a[i]) + hw::to_float(b[i]));
  return out;
}

// Round to nearest even without the library's bit trick: the nearer of the truncation and
// the next bf16 up in magnitude, compared in double; ties go to the even mantissa.
uint16_t nearest_even_bf16(float x) {
  const uint32_t b = std::bit_cast<uint32_t>(x);
  const uint16_t lo = static_cast<uint16_t>(b >> 16), hi = static_cast<uint16_t>(lo + 1);
  // IEEE rounding treats the step past the largest finite value as landing on 2^128 (then inf).
  auto value = [](uint16_t v) {
    return (v & 0x7fff) == 0x7f80 ? std::copysign(std::ldexp(1.0, 128), hw::tiles::bf16_bits_to_float(v))
                                  : static_cast<double>(hw::tiles::bf16_bits_to_float(v));
  };
  if (!std::isfinite(x)) return lo;  // infinities stay (NaN is checked separately)
  const double dlo = std::abs(value(lo) - x), dhi = std::abs(value(hi) - x);
  if (dlo < dhi) return lo;
  if (dhi < dlo) return hi;
  return (lo & 1) ? hi : lo;
}

}  // namespace

TEST_CASE("emulated ops: fill_zero scale accumulate residual fp32 and bf16") {
  for (size_t n : {size_t{1001}, size_t{64}, size_t{100003}}) {  // 100003: many blocks and a tail of 3
    for (size_t off : {size_t{0}, size_t{1}}) {
      INFO("n=" << n << " offset=" << off);
      const size_t len = n + off + 1;  // one guard element after the range
      const auto n64 = static_cast<int64_t>(n);
      // fp32
      const F a = randf(len, 1), b = randf(len, 2, 0.5);
      F z1 = a, z2 = a;
      hw::cuda::launch_fill_zero(kStream, z1.data() + off, n64);
      hw::cuda::launch_fill_zero(kStream, z2.data() + off, n64);
      size_t wrong = 0;
      for (size_t i = 0; i < len; i++) wrong += (i >= off && i < off + n) ? z1[i] != 0.0f : z1[i] != a[i];
      CHECK(wrong == 0);
      CHECK(same_bits(z1, z2));

      const float s = 0.37f;
      F s1 = a, s2 = a;
      hw::cuda::launch_scale(kStream, s1.data() + off, s, n64);
      hw::cuda::launch_scale(kStream, s2.data() + off, s, n64);
      D sref = wd(part(a, off, n));
      for (auto& x : sref) x *= static_cast<double>(s);
      CHECK(fp32_ok(rel_err(part(s1, off, n), sref)));
      CHECK(s1[off + n] == a[off + n]);
      CHECK(same_bits(s1, s2));

      D sum = wd(part(a, off, n));
      hw::cpu::accumulate(sum.data(), wd(part(b, off, n)).data(), n64);
      F acc1 = a, acc2 = a;
      hw::cuda::launch_accumulate(kStream, acc1.data() + off, b.data() + off, n64);
      hw::cuda::launch_accumulate(kStream, acc2.data() + off, b.data() + off, n64);
      CHECK(fp32_ok(rel_err(part(acc1, off, n), sum)));
      CHECK(acc1[off + n] == a[off + n]);
      CHECK(same_bits(acc1, acc2));
      for (bool alias : {false, true}) {
        INFO("alias=" << alias);
        F ra = a, out(len, NAN);
        float* dst = alias ? ra.data() : out.data();
        hw::cuda::launch_residual_forward(kStream, dst + off, ra.data() + off, b.data() + off, n64);
        const F got = part(alias ? ra : out, off, n);
        CHECK(fp32_ok(rel_err(got, sum)));
        CHECK(same_bits(got, part(acc1, off, n)));  // both are one fp32 add per element
      }

      // bf16: one fp32 add rounded once, bit for bit
      const B ab = randb(len, 3), bb = randb(len, 4, 0.01);  // small b: the rounding matters
      const B want = rounded_sum(part(ab, off, n), part(bb, off, n));
      D bsum = wd(part(ab, off, n));
      hw::cpu::accumulate(bsum.data(), wd(part(bb, off, n)).data(), n64);
      B bz = ab;
      hw::cuda::launch_fill_zero(kStream, bz.data() + off, n64);
      wrong = 0;
      for (size_t i = 0; i < len; i++) wrong += (i >= off && i < off + n) ? bz[i].bits != 0 : bz[i].bits != ab[i].bits;
      CHECK(wrong == 0);
      B bacc1 = ab, bacc2 = ab;
      hw::cuda::launch_accumulate(kStream, bacc1.data() + off, bb.data() + off, n64);
      hw::cuda::launch_accumulate(kStream, bacc2.data() + off, bb.data() + off, n64);
      CHECK(bf16_ok(rel_err(part(bacc1, off, n), bsum)));
      CHECK(same_bits(part(bacc1, off, n), want));
      CHECK(bacc1[off + n].bits == ab[off + n].bits);
      CHECK(same_bits(bacc1, bacc2));
      for (bool alias : {false, true}) {
        INFO("bf16 alias=" << alias);
        B ra = ab, out(len);
        bf16* dst = alias ? ra.data() : out.data();
        hw::cuda::launch_residual_forward(kStream, dst + off, ra.data() + off, bb.data() + off, n64);
        CHECK(same_bits(part(alias ? ra : out, off, n), want));
      }
    }
  }
}

TEST_CASE("emulated ops: gelu forward and backward fp32 and bf16") {
  for (size_t n : {size_t{1001}, size_t{64}, size_t{100003}}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      INFO("n=" << n << " offset=" << off);
      const size_t len = n + off;
      const auto n64 = static_cast<int64_t>(n);
      const F inp = randf(len, 11, 2.0), dout = randf(len, 12), dinp0 = randf(len, 13);
      D fwd(n), bwd = wd(part(dinp0, off, n));
      hw::cpu::gelu_forward(fwd.data(), wd(part(inp, off, n)).data(), n64);
      hw::cpu::gelu_backward(bwd.data(), wd(part(inp, off, n)).data(), wd(part(dout, off, n)).data(), n64);
      F o1(len, NAN), o2(len, NAN), d1 = dinp0, d2 = dinp0;
      for (F* o : {&o1, &o2}) hw::cuda::launch_gelu_forward(kStream, o->data() + off, inp.data() + off, n64);
      for (F* d : {&d1, &d2})
        hw::cuda::launch_gelu_backward(kStream, d->data() + off, inp.data() + off, dout.data() + off, n64);
      CHECK(fp32_ok(rel_err(part(o1, off, n), fwd)));
      CHECK(fp32_ok(rel_err(part(d1, off, n), bwd)));
      CHECK(same_bits(o1, o2));
      CHECK(same_bits(d1, d2));

      const B binp = randb(len, 14, 2.0), bdout = randb(len, 15), bdinp0 = randb(len, 16);
      D bfwd(n), bbwd = wd(part(bdinp0, off, n));
      hw::cpu::gelu_forward(bfwd.data(), wd(part(binp, off, n)).data(), n64);
      hw::cpu::gelu_backward(bbwd.data(), wd(part(binp, off, n)).data(), wd(part(bdout, off, n)).data(), n64);
      B bo1(len), bo2(len), bd1 = bdinp0, bd2 = bdinp0;
      for (B* o : {&bo1, &bo2}) hw::cuda::launch_gelu_forward(kStream, o->data() + off, binp.data() + off, n64);
      for (B* d : {&bd1, &bd2})
        hw::cuda::launch_gelu_backward(kStream, d->data() + off, binp.data() + off, bdout.data() + off, n64);
      CHECK(bf16_ok(rel_err(part(bo1, off, n), bfwd)));
      CHECK(bf16_ok(rel_err(part(bd1, off, n), bbwd)));
      CHECK(same_bits(bo1, bo2));
      CHECK(same_bits(bd1, bd2));
    }
  }
}

namespace {

struct LnShape {
  int64_t N, C;
  size_t off;     // element offset of every row array (1: vector path refused)
  double scale;  // of the inputs: 1e-3 makes eps matter in rstd
};
// 150 rows: several row passes per column-sum lane (64 lanes) for dweight/dbias.
const LnShape kLnShapes[] = {{5, 67, 0, 2.0},   {5, 64, 0, 2.0},    {5, 64, 1, 2.0},   {11, 32, 0, 1e-3},
                             {37, 768, 0, 1.0}, {19, 130, 1, 1e-3}, {150, 67, 1, 1.0}};

}  // namespace

TEST_CASE("emulated ops: layernorm forward and backward fp32 and bf16") {
  const double eps = 1e-5;
  for (const LnShape& sh : kLnShapes) {
    const int64_t N = sh.N, C = sh.C;
    const size_t off = sh.off, NC = static_cast<size_t>(N * C), len = NC + off, Cs = static_cast<size_t>(C);
    INFO("N=" << N << " C=" << C << " offset=" << off << " scale=" << sh.scale);
    const F w = randf(Cs, 21), bias = randf(Cs, 22);
    // fp32 forward
    const F inp = randf(len, 23, sh.scale);
    D out_ref(NC), mean_ref(static_cast<size_t>(N)), rstd_ref(static_cast<size_t>(N));
    hw::cpu::layernorm_forward(out_ref.data(), mean_ref.data(), rstd_ref.data(), wd(part(inp, off, NC)).data(),
                               wd(w).data(), wd(bias).data(), N, C, eps);
    F out[2] = {F(len, NAN), F(len, NAN)}, mean[2] = {F(size_t(N), NAN), F(size_t(N), NAN)},
      rstd[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_layernorm_forward(kStream, out[r].data() + off, mean[r].data(), rstd[r].data(), inp.data() + off,
                                         w.data(), bias.data(), N, C, eps);
    CHECK(fp32_ok(rel_err(part(out[0], off, NC), out_ref)));
    CHECK(fp32_ok(rel_err(mean[0], mean_ref)));
    CHECK(fp32_ok(rel_err(rstd[0], rstd_ref)));
    CHECK((same_bits(out[0], out[1]) && same_bits(mean[0], mean[1]) && same_bits(rstd[0], rstd[1])));

    // fp32 backward, with the reference's statistics rounded to float on both sides
    const F mean_f(mean_ref.begin(), mean_ref.end()), rstd_f(rstd_ref.begin(), rstd_ref.end());
    const F dout = randf(len, 24), dinp0 = randf(len, 25), dw0 = randf(Cs, 26), db0 = randf(Cs, 27);
    D dinp_ref = wd(part(dinp0, off, NC)), dw_ref = wd(dw0), db_ref = wd(db0);
    hw::cpu::layernorm_backward(dinp_ref.data(), dw_ref.data(), db_ref.data(), wd(part(dout, off, NC)).data(),
                                wd(part(inp, off, NC)).data(), wd(w).data(), wd(mean_f).data(), wd(rstd_f).data(), N,
                                C);
    F dinp[2] = {dinp0, dinp0}, dw[2] = {dw0, dw0}, db[2] = {db0, db0};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_layernorm_backward(kStream, dinp[r].data() + off, dw[r].data(), db[r].data(), dout.data() + off,
                                          inp.data() + off, w.data(), mean_f.data(), rstd_f.data(), N, C);
    CHECK(fp32_ok(rel_err(part(dinp[0], off, NC), dinp_ref)));
    CHECK(fp32_ok(rel_err(dw[0], dw_ref)));
    CHECK(fp32_ok(rel_err(db[0], db_ref)));
    CHECK((same_bits(dinp[0], dinp[1]) && same_bits(dw[0], dw[1]) && same_bits(db[0], db[1])));
    // Null gradients are skipped: dinp alone must equal the full call's dinp.
    F dinp_only = dinp0;
    hw::cuda::launch_layernorm_backward(kStream, dinp_only.data() + off, nullptr, nullptr, dout.data() + off,
                                        inp.data() + off, w.data(), mean_f.data(), rstd_f.data(), N, C);
    CHECK(same_bits(dinp_only, dinp[0]));

    // bf16 forward: bf16 rows, fp32 weights and statistics
    const B binp = randb(len, 28, sh.scale);
    D bout_ref(NC), bmean_ref(static_cast<size_t>(N)), brstd_ref(static_cast<size_t>(N));
    hw::cpu::layernorm_forward(bout_ref.data(), bmean_ref.data(), brstd_ref.data(), wd(part(binp, off, NC)).data(),
                               wd(w).data(), wd(bias).data(), N, C, eps);
    B bout[2] = {B(len), B(len)};
    F bmean[2] = {F(size_t(N), NAN), F(size_t(N), NAN)}, brstd[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_layernorm_forward(kStream, bout[r].data() + off, bmean[r].data(), brstd[r].data(),
                                         binp.data() + off, w.data(), bias.data(), N, C, eps);
    CHECK(bf16_ok(rel_err(part(bout[0], off, NC), bout_ref)));
    CHECK(fp32_ok(rel_err(bmean[0], bmean_ref)));
    CHECK(fp32_ok(rel_err(brstd[0], brstd_ref)));
    CHECK((same_bits(bout[0], bout[1]) && same_bits(bmean[0], bmean[1]) && same_bits(brstd[0], brstd[1])));

    // bf16 backward: bf16 dinp accumulates (read, add in fp32, round once), fp32 dweight/dbias
    const F bmean_f(bmean_ref.begin(), bmean_ref.end()), brstd_f(brstd_ref.begin(), brstd_ref.end());
    const B bdout = randb(len, 29), bdinp0 = randb(len, 30);
    D bdinp_ref = wd(part(bdinp0, off, NC)), bdw_ref = wd(dw0), bdb_ref = wd(db0);
    hw::cpu::layernorm_backward(bdinp_ref.data(), bdw_ref.data(), bdb_ref.data(), wd(part(bdout, off, NC)).data(),
                                wd(part(binp, off, NC)).data(), wd(w).data(), wd(bmean_f).data(), wd(brstd_f).data(),
                                N, C);
    B bdinp[2] = {bdinp0, bdinp0};
    F bdw[2] = {dw0, dw0}, bdb[2] = {db0, db0};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_layernorm_backward(kStream, bdinp[r].data() + off, bdw[r].data(), bdb[r].data(),
                                          bdout.data() + off, binp.data() + off, w.data(), bmean_f.data(),
                                          brstd_f.data(), N, C);
    CHECK(bf16_ok(rel_err(part(bdinp[0], off, NC), bdinp_ref)));
    CHECK(fp32_ok(rel_err(bdw[0], bdw_ref)));
    CHECK(fp32_ok(rel_err(bdb[0], bdb_ref)));
    CHECK((same_bits(bdinp[0], bdinp[1]) && same_bits(bdw[0], bdw[1]) && same_bits(bdb[0], bdb[1])));
  }
}

TEST_CASE("emulated ops: fused residual layernorm forward fp32 and bf16") {
  const double eps = 1e-5;
  for (const LnShape& sh : kLnShapes) {
    for (bool alias : {false, true}) {  // resid_out may alias a
      const int64_t N = sh.N, C = sh.C;
      const size_t off = sh.off, NC = static_cast<size_t>(N * C), len = NC + off, Cs = static_cast<size_t>(C);
      INFO("N=" << N << " C=" << C << " offset=" << off << " alias=" << alias);
      const F w = randf(Cs, 31), bias = randf(Cs, 32);
      // fp32: resid = a + b exactly as the host adds, then LayerNorm of it
      const F a = randf(len, 33, sh.scale), b = randf(len, 34, 0.5 * sh.scale);
      F resid_want(NC);
      for (size_t i = 0; i < NC; i++) resid_want[i] = a[off + i] + b[off + i];
      D ln_ref(NC), mean_ref(static_cast<size_t>(N)), rstd_ref(static_cast<size_t>(N));
      hw::cpu::layernorm_forward(ln_ref.data(), mean_ref.data(), rstd_ref.data(), wd(resid_want).data(), wd(w).data(),
                                 wd(bias).data(), N, C, eps);
      F ra[2] = {a, a}, resid[2] = {F(len, NAN), F(len, NAN)}, ln[2] = {F(len, NAN), F(len, NAN)};
      F mean[2] = {F(size_t(N), NAN), F(size_t(N), NAN)}, rstd[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
      for (int r = 0; r < 2; r++) {
        float* rout = alias ? ra[r].data() : resid[r].data();
        hw::cuda::launch_residual_layernorm_forward(kStream, rout + off, ln[r].data() + off, mean[r].data(),
                                                    rstd[r].data(), ra[r].data() + off, b.data() + off, w.data(),
                                                    bias.data(), N, C, eps);
      }
      CHECK(same_bits(part(alias ? ra[0] : resid[0], off, NC), resid_want));
      CHECK(fp32_ok(rel_err(part(ln[0], off, NC), ln_ref)));
      CHECK(fp32_ok(rel_err(mean[0], mean_ref)));
      CHECK(fp32_ok(rel_err(rstd[0], rstd_ref)));
      CHECK((same_bits(ln[0], ln[1]) && same_bits(mean[0], mean[1]) && same_bits(rstd[0], rstd[1])));

      // bf16: the residual is stored rounded, and LayerNorm normalises that rounded value
      const B ab = randb(len, 35, sh.scale), bb = randb(len, 36, 0.3 * sh.scale);
      const B bresid_want = rounded_sum(part(ab, off, NC), part(bb, off, NC));
      D bln_ref(NC), bmean_ref(static_cast<size_t>(N)), brstd_ref(static_cast<size_t>(N));
      hw::cpu::layernorm_forward(bln_ref.data(), bmean_ref.data(), brstd_ref.data(), wd(bresid_want).data(),
                                 wd(w).data(), wd(bias).data(), N, C, eps);
      B bra[2] = {ab, ab}, bresid[2] = {B(len), B(len)}, bln[2] = {B(len), B(len)};
      F bmean[2] = {F(size_t(N), NAN), F(size_t(N), NAN)}, brstd[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
      for (int r = 0; r < 2; r++) {
        bf16* rout = alias ? bra[r].data() : bresid[r].data();
        hw::cuda::launch_residual_layernorm_forward(kStream, rout + off, bln[r].data() + off, bmean[r].data(),
                                                    brstd[r].data(), bra[r].data() + off, bb.data() + off, w.data(),
                                                    bias.data(), N, C, eps);
      }
      CHECK(same_bits(part(alias ? bra[0] : bresid[0], off, NC), bresid_want));
      CHECK(bf16_ok(rel_err(part(bln[0], off, NC), bln_ref)));
      CHECK(fp32_ok(rel_err(bmean[0], bmean_ref)));
      CHECK(fp32_ok(rel_err(brstd[0], brstd_ref)));
      CHECK((same_bits(bln[0], bln[1]) && same_bits(bmean[0], bmean[1]) && same_bits(brstd[0], brstd[1])));
    }
  }
}

TEST_CASE("emulated ops: encoder forward and backward fp32 and bf16") {
  const int64_t Bn = 2, T = 5, V = 7;  // repeated tokens
  std::mt19937 gen(41);
  std::vector<int32_t> tokens(size_t(Bn * T));
  for (auto& t : tokens) t = static_cast<int32_t>(gen() % V);
  for (const auto& [C, off] : {std::pair<int64_t, size_t>{67, 0}, {64, 0}, {64, 1}}) {
    const size_t NC = size_t(Bn * T * C), wte_n = size_t(V * C), wpe_n = size_t(T * C);
    for (bool with_wpe : {true, false}) {
      INFO("C=" << C << " offset=" << off << " wpe=" << with_wpe);
      const F wte = randf(wte_n + off, 42), wpe = randf(wpe_n + off, 43);
      D out_ref(NC);
      hw::cpu::encoder_forward(out_ref.data(), tokens.data(), wd(part(wte, off, wte_n)).data(),
                               with_wpe ? wd(part(wpe, off, wpe_n)).data() : nullptr, Bn, T, C);
      F out[2] = {F(NC + off, NAN), F(NC + off, NAN)};
      for (int r = 0; r < 2; r++)
        hw::cuda::launch_encoder_forward(kStream, out[r].data() + off, tokens.data(), wte.data() + off,
                                         with_wpe ? wpe.data() + off : nullptr, Bn, T, C);
      CHECK(fp32_ok(rel_err(part(out[0], off, NC), out_ref)));
      CHECK(same_bits(out[0], out[1]));

      const B bwte = randb(wte_n + off, 44), bwpe = randb(wpe_n + off, 45);
      D bout_ref(NC);
      hw::cpu::encoder_forward(bout_ref.data(), tokens.data(), wd(part(bwte, off, wte_n)).data(),
                               with_wpe ? wd(part(bwpe, off, wpe_n)).data() : nullptr, Bn, T, C);
      B bout[2] = {B(NC + off), B(NC + off)};
      for (int r = 0; r < 2; r++)
        hw::cuda::launch_encoder_forward(kStream, bout[r].data() + off, tokens.data(), bwte.data() + off,
                                         with_wpe ? bwpe.data() + off : nullptr, Bn, T, C);
      B bwant(NC);  // one fp32 add, rounded once
      for (size_t i = 0; i < NC; i++) {
        const size_t bt = i / size_t(C), c = i % size_t(C);
        const float e = hw::to_float(bwte[off + size_t(tokens[bt]) * size_t(C) + c]);
        bwant[i] = hw::to_bf16(with_wpe ? e + hw::to_float(bwpe[off + (bt % size_t(T)) * size_t(C) + c]) : e);
      }
      CHECK(bf16_ok(rel_err(part(bout[0], off, NC), bout_ref)));
      CHECK(same_bits(part(bout[0], off, NC), bwant));
      CHECK(same_bits(bout[0], bout[1]));
    }
    // Backward: dwte[token] += dout rows, dwpe[t] += sum over b; both start non-zero.
    INFO("backward C=" << C << " offset=" << off);
    const F dout = randf(NC + off, 46), dwte0 = randf(wte_n, 47), dwpe0 = randf(wpe_n, 48);
    D dwte_ref = wd(dwte0), dwpe_ref = wd(dwpe0);
    hw::cpu::encoder_backward(dwte_ref.data(), dwpe_ref.data(), wd(part(dout, off, NC)).data(), tokens.data(), Bn, T,
                              C);
    F dwte[2] = {dwte0, dwte0}, dwpe[2] = {dwpe0, dwpe0};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_encoder_backward(kStream, dwte[r].data(), dwpe[r].data(), dout.data() + off, tokens.data(), Bn,
                                        T, C);
    CHECK(fp32_ok(rel_err(dwte[0], dwte_ref)));
    CHECK(fp32_ok(rel_err(dwpe[0], dwpe_ref)));
    CHECK((same_bits(dwte[0], dwte[1]) && same_bits(dwpe[0], dwpe[1])));

    const B bdout = randb(NC + off, 49);
    D bdwte_ref = wd(dwte0), bdwpe_ref = wd(dwpe0);
    hw::cpu::encoder_backward(bdwte_ref.data(), bdwpe_ref.data(), wd(part(bdout, off, NC)).data(), tokens.data(), Bn,
                              T, C);
    F bdwte[2] = {dwte0, dwte0}, bdwpe[2] = {dwpe0, dwpe0};
    for (int r = 0; r < 2; r++)
      hw::cuda::launch_encoder_backward(kStream, bdwte[r].data(), bdwpe[r].data(), bdout.data() + off, tokens.data(),
                                        Bn, T, C);
    CHECK(fp32_ok(rel_err(bdwte[0], bdwte_ref)));
    CHECK(fp32_ok(rel_err(bdwpe[0], bdwpe_ref)));
    CHECK((same_bits(bdwte[0], bdwte[1]) && same_bits(bdwpe[0], bdwpe[1])));
  }
}

TEST_CASE("emulated ops: encoder backward over many token tiles equals the CPU float op bit for bit") {
  const int64_t Bn = 4, T = 300, C = 96, V = 50;  // repeated tokens, several token tiles
  std::mt19937 gen(55);
  std::vector<int32_t> tokens(size_t(Bn * T));
  for (auto& t : tokens) t = static_cast<int32_t>(gen() % V);
  const size_t NC = size_t(Bn * T * C);
  const F dout = randf(NC, 56), dwte0 = randf(size_t(V * C), 57), dwpe0 = randf(size_t(T * C), 58);
  const B bdout = randb(NC, 59);
  // The claim (encoder_backward.cu): each element adds its rows in the CPU op's order, in fp32.
  F dwte_f = dwte0, dwpe_f = dwpe0, bdwte_f = dwte0, bdwpe_f = dwpe0;
  hw::cpu::encoder_backward(dwte_f.data(), dwpe_f.data(), dout.data(), tokens.data(), Bn, T, C);
  hw::cpu::encoder_backward(bdwte_f.data(), bdwpe_f.data(), wf(bdout).data(), tokens.data(), Bn, T, C);
  D dwte_ref = wd(dwte0), dwpe_ref = wd(dwpe0);
  hw::cpu::encoder_backward(dwte_ref.data(), dwpe_ref.data(), wd(dout).data(), tokens.data(), Bn, T, C);
  F dwte = dwte0, dwpe = dwpe0, bdwte = dwte0, bdwpe = dwpe0;
  hw::cuda::launch_encoder_backward(kStream, dwte.data(), dwpe.data(), dout.data(), tokens.data(), Bn, T, C);
  hw::cuda::launch_encoder_backward(kStream, bdwte.data(), bdwpe.data(), bdout.data(), tokens.data(), Bn, T, C);
  CHECK(fp32_ok(rel_err(dwte, dwte_ref)));
  CHECK(fp32_ok(rel_err(dwpe, dwpe_ref)));
  CHECK(same_bits(dwte, dwte_f));
  CHECK(same_bits(dwpe, dwpe_f));
  CHECK(same_bits(bdwte, bdwte_f));
  CHECK(same_bits(bdwpe, bdwpe_f));
}

namespace {

struct RopeShape {
  int64_t T, n_heads, hd, col0, row_stride;
};

}  // namespace

TEST_CASE("emulated ops: rope forward and backward fp32 and bf16") {
  const int64_t Bn = 2;
  const double theta = 10000.0;
  // A strided qkv-like row with odd everything, an aligned one, and long sequences (large angles).
  for (const RopeShape& sh : {RopeShape{5, 2, 10, 3, 61}, RopeShape{5, 2, 16, 32, 96}, RopeShape{257, 3, 64, 0, 192}}) {
    const int64_t T = sh.T;
    const size_t total = size_t(Bn * T * sh.row_stride);
    auto outside = [&](size_t i) {
      const int64_t col = static_cast<int64_t>(i) % sh.row_stride;
      return col < sh.col0 || col >= sh.col0 + sh.n_heads * sh.hd;
    };
    for (bool forward : {true, false}) {
      INFO("T=" << T << " hd=" << sh.hd << " col0=" << sh.col0 << " row_stride=" << sh.row_stride << " forward=" << forward);
      // One storage type (fp32 or bf16): against the double CPU op, rerun bits, and every element
      // outside the rotated heads untouched (bit for bit).
      auto check_rope = [&](const auto& x) {
        using V = std::decay_t<decltype(x)>;
        D want = wd(x);
        if (forward)
          hw::cpu::rope_forward(want.data(), Bn, T, sh.row_stride, sh.col0, sh.n_heads, sh.hd, theta);
        else
          hw::cpu::rope_backward(want.data(), Bn, T, sh.row_stride, sh.col0, sh.n_heads, sh.hd, theta);
        V got[2] = {x, x};
        for (V& g : got) {
          if (forward)
            hw::cuda::launch_rope_forward(kStream, g.data(), Bn, T, sh.row_stride, sh.col0, sh.n_heads, sh.hd, theta);
          else
            hw::cuda::launch_rope_backward(kStream, g.data(), Bn, T, sh.row_stride, sh.col0, sh.n_heads, sh.hd, theta);
        }
        if constexpr (std::is_same_v<V, F>)
          CHECK(fp32_ok(rel_err(got[0], want)));
        else
          CHECK(bf16_ok(rel_err(got[0], want)));
        CHECK(same_bits(got[0], got[1]));
        size_t changed = 0;
        for (size_t i = 0; i < total; i++)
          changed += outside(i) && std::memcmp(&got[0][i], &x[i], sizeof(x[i])) != 0;
        CHECK(changed == 0);
      };
      check_rope(randf(total, 51));
      check_rope(randb(total, 52));
    }
  }
}

TEST_CASE("emulated ops: cross-entropy fp32 and bf16 with an ignored row and a bad target") {
  const int64_t N = 5;
  const double dloss = 1.0 / 8.0;
  for (int64_t V : {int64_t{67}, int64_t{64}, int64_t{600}, int64_t{5003}}) {  // scalar, vector, 64 and 512 threads
    for (bool in_place : {true, false}) {
      INFO("V=" << V << " in_place=" << in_place);
      const size_t NV = size_t(N * V);
      std::mt19937 gen(61);
      std::vector<int32_t> targets(static_cast<size_t>(N));
      for (auto& t : targets) t = static_cast<int32_t>(gen() % V);
      targets[2] = hw::cpu::kIgnoreTarget;
      std::vector<double> partials(hw::cuda::kReductionPartials, NAN), result(1, NAN);
      const hw::cuda::ReductionScratch scratch{partials.data(), result.data()};

      // fp32
      const F logits = randf(NV, 62, 3.0);
      D loss_ref(static_cast<size_t>(N)), dl_ref(NV);
      const double total_ref = hw::cpu::crossentropy_forward_backward(loss_ref.data(), dl_ref.data(),
                                                                      wd(logits).data(), targets.data(), N, V, dloss);
      F lg[2] = {logits, logits}, sep[2] = {F(NV, NAN), F(NV, NAN)}, losses[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
      double total[2];
      for (int r = 0; r < 2; r++) {
        float* dl = in_place ? lg[r].data() : sep[r].data();
        hw::cuda::launch_crossentropy_forward_backward(kStream, losses[r].data(), dl, lg[r].data(), targets.data(), N,
                                                       V, dloss, scratch);
        total[r] = result[0];
      }
      const F& dl0 = in_place ? lg[0] : sep[0];
      CHECK(fp32_ok(rel_err(dl0, dl_ref)));
      CHECK(fp32_ok(rel_err(losses[0], loss_ref)));
      CHECK(fp32_ok(std::abs(total[0] - total_ref) / std::abs(total_ref)));
      CHECK(losses[0][2] == 0.0f);
      size_t nonzero = 0;
      for (int64_t v = 0; v < V; v++) nonzero += dl0[size_t(2 * V + v)] != 0.0f;
      CHECK(nonzero == 0);
      if (!in_place) CHECK(same_bits(lg[0], logits));
      CHECK(std::memcmp(&total[0], &total[1], sizeof(double)) == 0);
      CHECK((same_bits(lg[0], lg[1]) && same_bits(sep[0], sep[1]) && same_bits(losses[0], losses[1])));

      // A target outside [0, V): that row's loss, its gradient and the total are NaN, other rows fine.
      std::vector<int32_t> bad = targets;
      bad[4] = static_cast<int32_t>(V);
      F lg_bad = logits, dl_bad(NV, 0.0f), loss_bad(size_t(N), 0.0f);
      hw::cuda::launch_crossentropy_forward_backward(kStream, loss_bad.data(), dl_bad.data(), lg_bad.data(),
                                                     bad.data(), N, V, dloss, scratch);
      CHECK(std::isnan(result[0]));
      CHECK(std::isnan(loss_bad[4]));
      CHECK(std::isnan(dl_bad[size_t(4 * V)]));
      CHECK(fp32_ok(rel_err(part(loss_bad, 0, 4), part(loss_ref, 0, 4))));

      // bf16 logits and dlogits, fp32 losses
      const B blogits = randb(NV, 63, 3.0);
      D bloss_ref(static_cast<size_t>(N)), bdl_ref(NV);
      const double btotal_ref = hw::cpu::crossentropy_forward_backward(
          bloss_ref.data(), bdl_ref.data(), wd(blogits).data(), targets.data(), N, V, dloss);
      B blg[2] = {blogits, blogits}, bsep[2] = {B(NV), B(NV)};
      F blosses[2] = {F(size_t(N), NAN), F(size_t(N), NAN)};
      double btotal[2];
      for (int r = 0; r < 2; r++) {
        bf16* dl = in_place ? blg[r].data() : bsep[r].data();
        hw::cuda::launch_crossentropy_forward_backward(kStream, blosses[r].data(), dl, blg[r].data(), targets.data(),
                                                       N, V, dloss, scratch);
        btotal[r] = result[0];
      }
      const B& bdl0 = in_place ? blg[0] : bsep[0];
      CHECK(bf16_ok(rel_err(bdl0, bdl_ref)));
      CHECK(fp32_ok(rel_err(blosses[0], bloss_ref)));
      CHECK(fp32_ok(std::abs(btotal[0] - btotal_ref) / std::abs(btotal_ref)));
      nonzero = 0;
      for (int64_t v = 0; v < V; v++) nonzero += bdl0[size_t(2 * V + v)].bits != 0;
      CHECK(nonzero == 0);
      if (!in_place) CHECK(same_bits(blg[0], blogits));
      CHECK(std::memcmp(&btotal[0], &btotal[1], sizeof(double)) == 0);
      CHECK((same_bits(blg[0], blg[1]) && same_bits(bsep[0], bsep[1]) && same_bits(blosses[0], blosses[1])));
      B blg_bad = blogits, bdl_bad(NV);
      hw::cuda::launch_crossentropy_forward_backward(kStream, loss_bad.data(), bdl_bad.data(), blg_bad.data(),
                                                     bad.data(), N, V, dloss, scratch);
      CHECK(std::isnan(result[0]));
      CHECK(std::isnan(loss_bad[4]));
      CHECK(std::isnan(hw::to_float(bdl_bad[size_t(4 * V)])));
    }
  }
}

TEST_CASE("emulated ops: sum of squares in double over several blocks") {
  std::vector<double> partials(hw::cuda::kReductionPartials, NAN), result(1, NAN);
  const hw::cuda::ReductionScratch scratch{partials.data(), result.data()};
  for (size_t n : {size_t{1001}, size_t{64}, size_t{9001}, size_t{300007}}) {  // several partial blocks, tails
    for (size_t off : {size_t{0}, size_t{1}}) {
      INFO("n=" << n << " offset=" << off);
      const F x = randf(n + off, 71, 3.0);
      double want = 0.0;
      for (size_t i = 0; i < n; i++) want += double(x[off + i]) * double(x[off + i]);
      double got[2];
      for (double& g : got) {
        result[0] = NAN;
        hw::cuda::launch_sum_squares(kStream, x.data() + off, static_cast<int64_t>(n), scratch);
        g = result[0];
      }
      // Squares and sums are in double: only the summation order differs from the reference.
      CHECK(std::abs(got[0] - want) <= 1e-12 * want);
      g_worst.fp32 = hw::test::worse(g_worst.fp32, hw::test::ratio(hw::test::abs_err(got[0], want), want));
      CHECK(std::memcmp(&got[0], &got[1], sizeof(double)) == 0);
    }
  }
  result[0] = NAN;  // an empty range sums to 0
  const F one = randf(1, 72);
  hw::cuda::launch_sum_squares(kStream, one.data(), 0, scratch);
  CHECK(result[0] == 0.0);
}

TEST_CASE("emulated ops: bias column sum fp32 and bf16 accumulates") {
  for (const auto& [N, O] : {std::pair<int64_t, int64_t>{37, 77}, {37, 64}, {1000, 1024}, {1001, 33}}) {
    INFO("N=" << N << " O=" << O);
    const size_t NO = size_t(N * O), Os = size_t(O);
    const F dout = randf(NO, 81), dbias0 = randf(Os, 82);
    const B bdout = randb(NO, 83);
    D want = wd(dbias0), bwant = wd(dbias0);
    for (size_t o = 0; o < Os; o++)
      for (size_t n = 0; n < size_t(N); n++) {
        want[o] += double(dout[n * Os + o]);
        bwant[o] += double(hw::to_float(bdout[n * Os + o]));
      }
    F got[2] = {dbias0, dbias0}, bgot[2] = {dbias0, dbias0};
    for (int r = 0; r < 2; r++) {
      hw::cuda::launch_bias_column_sum(kStream, got[r].data(), dout.data(), N, O);
      hw::cuda::launch_bias_column_sum(kStream, bgot[r].data(), bdout.data(), N, O);
    }
    CHECK(fp32_ok(rel_err(got[0], want)));
    CHECK(fp32_ok(rel_err(bgot[0], bwant)));
    CHECK(same_bits(got[0], got[1]));
    CHECK(same_bits(bgot[0], bgot[1]));
  }
}

TEST_CASE("emulated ops: round_to_bf16 rounds to nearest even") {
  for (size_t n : {size_t{1001}, size_t{64}}) {
    for (size_t off : {size_t{0}, size_t{1}}) {
      INFO("n=" << n << " offset=" << off);
      F src = randf(n + off, 91, 10.0);
      // Edge values: ties both ways, subnormals, the largest finite floats, infinities.
      const float edge[] = {1.0f + 1.0f / 256.0f,  // exact tie, rounds down to even
                            1.0f + 3.0f / 256.0f,  // exact tie, rounds up to even
                            -(1.0f + 3.0f / 256.0f),
                            1e-40f,
                            -3e-39f,
                            std::numeric_limits<float>::max(),
                            std::numeric_limits<float>::infinity(),
                            -std::numeric_limits<float>::infinity(),
                            0.0f,
                            -0.0f};
      for (size_t i = 0; i < std::size(edge); i++) src[off + 3 * i] = edge[i];
      src[off + n - 1] = std::numeric_limits<float>::quiet_NaN();
      B dst[2] = {B(n + 1), B(n + 1)};
      for (B& d : dst) hw::cuda::launch_round_to_bf16(kStream, d.data() + off, src.data() + off, int64_t(n));
      size_t wrong = 0;
      for (size_t i = 0; i + 1 < n; i++) wrong += dst[0][off + i].bits != nearest_even_bf16(src[off + i]);
      CHECK(wrong == 0);
      CHECK(std::isnan(hw::to_float(dst[0][off + n - 1])));
      CHECK(same_bits(dst[0], dst[1]));
    }
  }
}

namespace {

// AdamW on one float element as adamw_step.hpp defines it: p *= decay; m = b1 m + (1 - b1) g;
// v = b2 v + (1 - b2) g^2; p -= step_size * m / (sqrt(v) / bc2_sqrt + eps), in that order.
void adamw_float(float& p, float g, float& m, float& v, const hw::AdamWStep& s) {
  p = p * s.decay;
  m = s.beta1 * m + (1.0f - s.beta1) * g;
  v = s.beta2 * v + (1.0f - s.beta2) * g * g;
  p = p - s.step_size * (m / (std::sqrt(v) / s.bc2_sqrt + s.eps));
}

// The stochastic bf16 rounding of element i from its definition (bf16_stochastic.hpp), written
// out here rather than calling the device's helpers: the random word is the hash
// h(lo ^ h(seed ^ h(hi + 0x9e3779b9))) of the index halves, h the xorshift-multiply mix with
// constants 0x7feb352d and 0x846ca68b; x keeps its upper 16 bits and rounds up in magnitude (the
// next bf16 pattern) exactly when its 16 dropped bits plus the word's low 16 bits reach 2^16.
uint16_t stochastic_bf16_bits(float x, uint32_t seed, uint64_t i) {
  const auto h = [](uint32_t z) {
    z = (z ^ (z >> 16)) * 0x7feb352dU;
    z = (z ^ (z >> 15)) * 0x846ca68bU;
    return z ^ (z >> 16);
  };
  const uint32_t word = h(uint32_t(i) ^ h(seed ^ h(uint32_t(i >> 32) + 0x9e3779b9U)));
  const uint32_t bits = std::bit_cast<uint32_t>(x), dropped = bits & 0xffffU;
  return static_cast<uint16_t>((bits >> 16) + (dropped + (word & 0xffffU) >= 0x10000U ? 1U : 0U));
}

}  // namespace

TEST_CASE("emulated ops: adamw fp32 and with bf16 stochastic rounding") {
  hw::AdamWStep s;
  s.decay = 1.0f - 6e-4f * 0.1f;
  s.bc2_sqrt = 0.2f;
  s.step_size = 6e-4f / 0.3f;
  const uint32_t seed = 4242;
  for (size_t n : {size_t{1001}, size_t{64}, size_t{100003}}) {
    for (size_t off : {size_t{0}, size_t{1}}) {  // float4 path, then the misaligned scalar path
      INFO("n=" << n << " offset=" << off);
      const auto n64 = static_cast<int64_t>(n);
      const F p = randf(n + off, 101), g = randf(n + off, 102, 0.01), m = randf(n + off, 103, 0.01);
      F v = randf(n + off, 104, 0.03);
      for (auto& x : v) x = x * x;
      // Independent reference in double, and the float formula written out here from its
      // definition (kernels/adamw_step.hpp), not the device's adamw_element: the bit-exact target.
      D pd = wd(part(p, off, n)), md = wd(part(m, off, n)), vd = wd(part(v, off, n));
      hw::cpu::adamw_update(pd.data(), wd(part(g, off, n)).data(), md.data(), vd.data(), n64, s);
      F pe = part(p, off, n), me = part(m, off, n), ve = part(v, off, n);
      for (size_t i = 0; i < n; i++) adamw_float(pe[i], g[off + i], me[i], ve[i], s);

      F pp[2] = {p, p}, mm[2] = {m, m}, vv[2] = {v, v};
      for (int r = 0; r < 2; r++)
        hw::cuda::launch_adamw_update(kStream, pp[r].data() + off, g.data() + off, mm[r].data() + off,
                                      vv[r].data() + off, n64, s);
      CHECK(fp32_ok(rel_err(part(pp[0], off, n), pd)));
      CHECK(fp32_ok(rel_err(part(mm[0], off, n), md)));
      CHECK(fp32_ok(rel_err(part(vv[0], off, n), vd)));
      CHECK((same_bits(part(pp[0], off, n), pe) && same_bits(part(mm[0], off, n), me) &&
             same_bits(part(vv[0], off, n), ve)));
      CHECK((same_bits(pp[0], pp[1]) && same_bits(mm[0], mm[1]) && same_bits(vv[0], vv[1])));

      F sp[2] = {p, p}, sm[2] = {m, m}, sv[2] = {v, v};
      B bf[2] = {B(n + off), B(n + off)};
      for (int r = 0; r < 2; r++)
        hw::cuda::launch_adamw_update_bf16_sr(kStream, sp[r].data() + off,
                                              reinterpret_cast<__nv_bfloat16*>(bf[r].data() + off), g.data() + off,
                                              sm[r].data() + off, sv[r].data() + off, n64, s, seed);
      CHECK(same_bits(sp[0], pp[0]));  // the same element math as the plain update
      CHECK(same_bits(sm[0], mm[0]));
      CHECK(same_bits(sv[0], vv[0]));
      size_t mismatches = 0, not_neighbour = 0;
      double bias = 0.0, spread = 0.0;
      for (size_t i = 0; i < n; i++) {
        const float x = sp[0][off + i];
        const uint16_t got = bf[0][off + i].bits;
        mismatches += got != stochastic_bf16_bits(x, seed, i);
        // One of the two bf16 values around x: the truncation or the next one up in magnitude.
        const uint16_t lo = static_cast<uint16_t>(std::bit_cast<uint32_t>(x) >> 16);
        not_neighbour += got != lo && got != lo + 1;
        const double err = double(hw::tiles::bf16_bits_to_float(got)) - x;
        bias += err;
        spread += std::abs(err);
      }
      // Unbiased: over many elements the signed errors cancel far better than their magnitudes add.
      if (n > 10000) CHECK(std::abs(bias) < 0.02 * spread);
      CHECK(mismatches == 0);
      CHECK(not_neighbour == 0);
      CHECK(same_bits(bf[0], bf[1]));
    }
  }
}
