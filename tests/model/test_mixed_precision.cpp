// Mixed precision (Precision::Bf16) on the CPU reference: bf16 activations and weight copies,
// fp32 master parameters and gradients. The reference for every number is a double-precision
// model on the same weights (an independent computation at full precision), and the checks
// are two-sided: bf16 must be close to it (within bf16's rounding), and measurably different
// from fp32 (so the bf16 path really rounded).
#include <catch2/catch.hpp>
#include <algorithm>
#include <cmath>

#include "headwise/core/bf16.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"
#include "model/model_test_util.hpp"

using namespace hw;

namespace {

ModelConfig mixed_config(bool rope) {
  ModelConfig cfg;
  cfg.n_layer = 2;
  cfg.n_head = 4;
  cfg.n_embd = 32;
  cfg.vocab_size = 37;
  cfg.block_size = 24;
  if (rope) {
    cfg.pos = "rope";
    cfg.n_kv_head = 2;
  }
  cfg.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:5", "static", "linear"], ["sink_window:1:4", "softmax", "pruned", "softmax"]])"));
  return cfg;
}

struct GradErrors {
  double loss = 0, worst = 0, linear = 0;  // worst: over every gradient but the linear heads' L
  std::string worst_name;
};

// One forward_backward of `m` (float) against the double model on the same weights and tokens.
GradErrors errors_against_double(Model<float>& m, Model<double>& ref, int64_t B, int64_t T, uint64_t seed) {
  Rng rng(seed);
  const int64_t N = B * T;
  std::vector<int32_t> x(static_cast<size_t>(N)), y(static_cast<size_t>(N));
  for (auto& v : x) v = int32_t(rng.below(uint64_t(m.config().vocab_size)));
  for (auto& v : y) v = int32_t(rng.below(uint64_t(m.config().vocab_size)));
  m.zero_grads();
  ref.zero_grads();
  GradErrors e;
  const double lf = m.forward_backward(x.data(), y.data(), B, T, 1.0);
  const double ld = ref.forward_backward(x.data(), y.data(), B, T, 1.0);
  e.loss = std::fabs(lf - ld) / std::fabs(ld);
  for (const auto& t : m.grads().tensors()) {
    const double err = test::max_rel_err(t->f32(), ref.grads().get(t->name).as<double>(), t->numel());
    if (t->name.find(".linear.") != std::string::npos) {
      e.linear = test::worse(e.linear, err);  // L's gradient: see the bounds in the test case
      continue;
    }
    if (!(err <= e.worst)) {  // also takes a NaN (max_rel_err makes it infinite anyway)
      e.worst = test::worse(e.worst, err);
      e.worst_name = t->name;
    }
  }
  return e;
}

// The L gradient of the linear head (layer 0, head 3 of mixed_config) from its pair sum, on the
// double model's own activations after a forward_backward (qkv after RoPE, the head's output
// and row denominators, and grad.atty, which holds layer 0's output gradient once the backward
// is done): dL[a][c] = sum_b sum_{j <= i} 2 dkappa_ij s_a t_c (a >= c), dkappa_ij =
// (dO_i . v_j - dO_i . O_i) / den_i, s = [1, rs sum_{r in group} q_ir k_jr], t = L_low^T s
// (tests/attention/dense_reference.hpp). Also the terms' RMS scale sqrt(sum term^2).
struct LinearTerms {
  std::vector<double> dL, rms;
};
LinearTerms linear_L_terms(Model<double>& ref, int64_t B, int64_t T) {
  const auto& lay = ref.layouts()[0];
  const int h = 3, D = lay.head_dim, H = lay.n_head, g = lay.kv_head_of(h);
  const double* qkv = ref.activations().get("h.0.qkv").as<double>();
  const double* atty = ref.activations().get("h.0.atty").as<double>();
  const double* stats = ref.activations().get("h.0.row_stats").as<double>();
  const Tensor& dO_t = ref.activations().get("grad.atty");
  const double* dO_all = dO_t.as<double>();
  const int64_t W = lay.qkv_width(), O = lay.out_width(), GW = dO_t.shape[1];
  const Tensor& Lt = ref.params().get("h.0.attn.linear.3.L");
  const double* L = Lt.as<double>();
  const int G1 = int(Lt.shape[0]);
  const Tensor* gt = ref.buffers().find("h.0.attn.linear.3.groups");
  REQUIRE(gt != nullptr);
  const int32_t* groups = gt->i32();
  const double rs = 1.0 / std::sqrt(double(D));
  LinearTerms r;
  r.dL.assign(size_t(G1 * G1), 0.0);
  r.rms.assign(size_t(G1 * G1), 0.0);
  std::vector<double> sv(static_cast<size_t>(G1)), tv(static_cast<size_t>(G1));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < T; ++i) {
      const double* q = qkv + (b * T + i) * W + lay.q_col(h);
      const double* o = atty + (b * T + i) * O + lay.out_col(h);
      const double* dO = dO_all + (b * T + i) * GW + lay.out_col(h);
      const double den = stats[b * H * T + h * T + i];
      double od = 0;
      for (int d = 0; d < D; ++d) od += dO[d] * o[d];
      for (int64_t j = 0; j <= i; ++j) {
        const double* k = qkv + (b * T + j) * W + lay.k_col(g);
        const double* v = qkv + (b * T + j) * W + lay.v_col(g);
        std::fill(sv.begin(), sv.end(), 0.0);
        std::fill(tv.begin(), tv.end(), 0.0);
        sv[0] = 1;
        double dv = 0;
        for (int d = 0; d < D; ++d) {
          sv[size_t(groups[d])] += rs * q[d] * k[d];
          dv += dO[d] * v[d];
        }
        for (int c = 0; c < G1; ++c)
          for (int a = c; a < G1; ++a) tv[size_t(c)] += L[a * G1 + c] * sv[size_t(a)];
        const double dk = (dv - od) / den;
        for (int a = 0; a < G1; ++a)
          for (int c = 0; c <= a; ++c) {
            const double term = 2 * dk * sv[size_t(a)] * tv[size_t(c)];
            r.dL[size_t(a * G1 + c)] += term;
            r.rms[size_t(a * G1 + c)] += term * term;
          }
      }
    }
  for (double& x : r.rms) x = std::sqrt(x);
  return r;
}

}  // namespace

TEST_CASE("bf16 conversion rounds to nearest even and keeps NaN and infinity", "[model][bf16]") {
  CHECK(to_bf16(1.0f).bits == 0x3f80);
  CHECK(to_float(to_bf16(1.0f)) == 1.0f);
  // 1 + 2^-8 lies exactly between 1 and 1 + 2^-7: ties go to the even mantissa (1.0).
  CHECK(to_float(to_bf16(1.0f + std::ldexp(1.0f, -8))) == 1.0f);
  // 1 + 3 * 2^-8 lies between 1 + 2^-7 (odd) and 1 + 2^-6 (even): up to the even one.
  CHECK(to_float(to_bf16(1.0f + 3 * std::ldexp(1.0f, -8))) == 1.0f + std::ldexp(1.0f, -6));
  CHECK(to_float(to_bf16(1.0f + std::ldexp(1.0f, -8) + std::ldexp(1.0f, -20))) == 1.0f + std::ldexp(1.0f, -7));
  CHECK(to_float(to_bf16(-2.5f)) == -2.5f);
  CHECK(std::isnan(to_float(to_bf16(std::nanf("")))));
  CHECK(std::isinf(to_float(to_bf16(INFINITY))));
  CHECK(std::isinf(to_float(to_bf16(3.4e38f))));  // beyond the largest finite bf16 (~3.39e38)
  // Every bf16 value survives a round trip through float.
  for (uint32_t b = 0; b < 0x10000; b += 7) {
    const bf16 v{uint16_t(b)};
    if (std::isnan(to_float(v))) continue;
    CHECK(to_bf16(to_float(v)).bits == v.bits);
  }
}

TEST_CASE("the CPU bf16 matmul is the double product rounded once", "[model][bf16]") {
  const ComputeOps<bf16, float>* ops = cpu_backend<float>().bf16_ops();
  REQUIRE(ops != nullptr);
  CHECK(cpu_backend<double>().bf16_ops() == nullptr);
  const int64_t N = 5, I = 19, O = 7;
  Rng rng(4);
  std::vector<bf16> x(size_t(N * I)), w(size_t(I * O)), b(static_cast<size_t>(O)), y(size_t(N * O));
  for (auto& v : x) v = to_bf16(float(rng.normal()));
  for (auto& v : w) v = to_bf16(float(rng.normal()));
  for (auto& v : b) v = to_bf16(float(rng.normal()));
  ops->matmul_forward(y.data(), x.data(), w.data(), b.data(), N, I, O);
  int off_by_more_than_one_ulp = 0;
  for (int64_t n = 0; n < N; ++n)
    for (int64_t o = 0; o < O; ++o) {
      double acc = to_float(b[size_t(o)]);
      for (int64_t i = 0; i < I; ++i) acc += double(to_float(x[size_t(n * I + i)])) * to_float(w[size_t(i * O + o)]);
      const float got = to_float(y[size_t(n * O + o)]);
      const float ulp = std::ldexp(1.0f, std::ilogb(float(acc)) - 7);
      off_by_more_than_one_ulp += std::fabs(double(got) - acc) > ulp;
    }
  CHECK(off_by_more_than_one_ulp == 0);
}

TEST_CASE("a bf16 step's loss and gradients match a double model within bf16 rounding", "[model][bf16]") {
  for (bool rope : {false, true}) {
    INFO("rope " << rope);
    const ModelConfig cfg = mixed_config(rope);
    Model<float> full(cfg, cpu_backend<float>()), half(cfg, cpu_backend<float>());
    Model<double> ref(cfg, cpu_backend<double>());
    full.init_weights(11);
    half.init_weights(11);
    half.set_precision(Precision::Bf16);
    test::copy_to_double(full, ref);
    const GradErrors ef = errors_against_double(full, ref, 2, 24, 3);
    const GradErrors eh = errors_against_double(half, ref, 2, 24, 3);
    INFO("fp32: loss " << ef.loss << ", worst gradient " << ef.worst << " (" << ef.worst_name << "), L " << ef.linear);
    INFO("bf16: loss " << eh.loss << ", worst gradient " << eh.worst << " (" << eh.worst_name << "), L " << eh.linear);
    CHECK(ef.worst < 1e-5);
    // L's gradient is a sum over position pairs that cancels: at this initialisation max |dL| is
    // 1/2000-1/3000 of the summed term magnitudes and kappa = max sqrt(sum term^2) / max |dL|
    // is 140-170 (computed here from the double model, whose own L gradient the pair sum must
    // reproduce, an independent check of the reference). Each term's inputs (q, k, v, dO, O of the
    // head) carry at most the run's worst gradient error e.worst plus a few fp32 roundings
    // (8 u, u = 2^-24); taken independent and of mean zero, Hoeffding bounds the sum's error by
    // lambda (e.worst + 8 u) sqrt(sum term^2), lambda = 6: relative to max |dL|,
    //   e.linear <= 6 (e.worst + 8 u) kappa   (7.7e-4 - 1.3e-3 here; measured 1.4e-5 - 3.4e-5),
    // about the 1e-3 this check had: a priori, that tolerance is not looser than the arithmetic.
    // The same model for bf16 (e.worst ~ 1e-2) gives more than 1, a useless bound: the bf16
    // roundings of shared inputs cancel along with the terms. There the check stays at 0.1
    // (measured 0.031 and 0.059, within 2x).
    const LinearTerms lt = linear_L_terms(ref, 2, 24);
    const double* dL_ref = ref.grads().get("h.0.attn.linear.3.L").as<double>();
    double max_dL = 0, kappa = 0;
    for (size_t e = 0; e < lt.dL.size(); ++e) max_dL = test::bigger_scale(max_dL, dL_ref[e]);
    for (size_t e = 0; e < lt.dL.size(); ++e) kappa = test::bigger_scale(kappa, lt.rms[e] / max_dL);
    CHECK(test::max_rel_err(lt.dL.data(), dL_ref, int64_t(lt.dL.size())) < 1e-9);
    INFO("L: max |dL| " << max_dL << ", kappa " << kappa);
    CHECK(kappa > 10);  // the cancellation the bound is about is really there
    CHECK(ef.linear <= 6 * (ef.worst + 8 * std::ldexp(1.0, -24)) * kappa);
    CHECK(eh.loss < 1e-3);
    // A whole two-layer step chains a dozen bf16 roundings; each op alone stays within 1e-2
    // (the op-level bound), the step's gradients within 2e-2 (measured: 0.3-1.3% per tensor).
    CHECK(eh.worst < 2e-2);
    CHECK(eh.linear < 1e-1);
    CHECK(eh.worst > 10 * ef.worst);  // the bf16 step rounded (it is not the fp32 step)
    // Parameters stay fp32 master weights; only the activations changed type.
    CHECK(half.params().tensors().front()->dtype == DType::F32);
    CHECK(half.grads().tensors().front()->dtype == DType::F32);
    CHECK(half.activations().get("h.0.qkv").dtype == DType::BF16);
    CHECK(half.activations().get("h.0.row_stats").dtype == DType::F32);
  }
}

TEST_CASE("bf16 logits and layer read-backs are the bf16 tensors widened", "[model][bf16]") {
  const ModelConfig cfg = mixed_config(false);
  Model<float> half(cfg, cpu_backend<float>());
  Model<double> ref(cfg, cpu_backend<double>());
  half.init_weights(5);
  half.set_precision(Precision::Bf16);
  test::copy_to_double(half, ref);
  std::vector<int32_t> x(48);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((i * 5) % 37);
  half.forward(x.data(), nullptr, 2, 24);
  ref.forward(x.data(), nullptr, 2, 24);
  std::vector<float> logits, qkv;
  std::vector<double> ref_logits, ref_qkv;
  half.read_logits(logits);
  ref.read_logits(ref_logits);
  REQUIRE(logits.size() == ref_logits.size());
  CHECK(test::max_rel_err(logits.data(), ref_logits.data(), int64_t(logits.size())) < 2e-2);
  for (float v : logits) CHECK(to_float(to_bf16(v)) == v);  // values are bf16 numbers
  half.read_layer_qkv(1, qkv);
  ref.read_layer_qkv(1, ref_qkv);
  CHECK(test::max_rel_err(qkv.data(), ref_qkv.data(), int64_t(qkv.size())) < 2e-2);
  CHECK_THROWS_WITH(half.layer_qkv(0), Catch::Contains("read_layer_qkv"));
}

TEST_CASE("precision bf16 is refused where it cannot run", "[model][bf16][errors]") {
  const ModelConfig cfg = mixed_config(false);
  Model<double> m(cfg, cpu_backend<double>());
  CHECK_THROWS_WITH(m.set_precision(Precision::Bf16), Catch::Contains("float model"));
  CHECK_THROWS_WITH(parse_precision("fp16", "train.precision"), Catch::Contains("train.precision"));
}

TEST_CASE("changing the precision drops the activations: read-backs ask for a forward", "[model][bf16][errors]") {
  const ModelConfig cfg = mixed_config(false);
  Model<float> m(cfg, cpu_backend<float>());
  m.init_weights(2);
  std::vector<int32_t> x(24, 3);
  m.forward(x.data(), nullptr, 1, 24);
  std::vector<float> host;
  m.read_layer_qkv(0, host);
  CHECK(!host.empty());
  m.set_precision(Precision::Bf16);
  CHECK_THROWS_WITH(m.read_layer_qkv(0, host), Catch::Contains("no forward pass"));
  CHECK_THROWS_WITH(m.read_logits(host), Catch::Contains("no forward pass"));
  m.forward(x.data(), nullptr, 1, 24);
  m.read_layer_qkv(0, host);  // and after a forward it reads again
  CHECK(!host.empty());
}
