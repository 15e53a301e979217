// The attention observer and the per-head forward statistics, against quantities the test
// computes itself: the observed tensors are the layer's QKV and attention output (read back
// through the model's own accessors), and every statistic equals a naive formula over them
// (dense softmax per row with its own mask, entropy as -sum p log p, one-pass moments).
#include <cmath>
#include <vector>

#include <catch2/catch.hpp>

#include "headwise/calibration/head_forward_stats.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/model.hpp"

using namespace hw;

namespace {

struct Captured {
  int layer;
  std::vector<double> qkv, out, dout;
};

class Recorder : public AttentionObserver {
 public:
  explicit Recorder(bool want_backward) : backward_(want_backward) {}
  void on_forward(const AttentionView& v) override {
    forward.push_back({v.layer, *v.qkv, *v.out, {}});
    stats.push_back(head_forward_stats(v));
    REQUIRE(v.dout == nullptr);
  }
  bool wants_backward() const override { return backward_; }
  void on_backward(const AttentionView& v) override {
    REQUIRE(v.dout != nullptr);
    backward.push_back({v.layer, *v.qkv, *v.out, *v.dout});
  }
  std::vector<Captured> forward, backward;
  std::vector<std::vector<HeadForwardStats>> stats;

 private:
  bool backward_;
};

ModelConfig observed_config() {
  ModelConfig c;
  c.n_layer = 2;
  c.n_head = 4;
  c.n_kv_head = 2;
  c.n_embd = 32;
  c.block_size = 12;
  c.vocab_size = 29;
  c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
      R"([["softmax", "window:3", "sink_window:1:2", "static"], ["pruned", "linear", "softmax", "window:1"]])"));
  c.validate();
  return c;
}

// Whether key j is visible to query i for a softmax-family head, written from the plan's text
// form: window:W sees i-W < j <= i, sink_window:S:W adds j < S.
bool visible(const attn::HeadSpec& s, int64_t i, int64_t j) {
  if (j > i) return false;
  if (s.kind == attn::HeadKind::Softmax) return true;
  const bool in_window = j > i - s.window;
  return s.kind == attn::HeadKind::SinkWindow ? in_window || j < s.sink : in_window;
}

}  // namespace

TEST_CASE("an attention observer sees each layer's QKV and output, and the forward statistics equal naive formulas",
          "[methods][observe]") {
  const ModelConfig cfg = observed_config();
  Model<float> m(cfg, cpu_backend<float>());
  m.init_weights(3);
  const int64_t B = 2, T = 12;
  std::vector<int32_t> x(size_t(B * T)), y(x.size());
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((11 * i + 3) % 29), y[i] = int32_t((5 * i + 1) % 29);

  Recorder rec(/*backward=*/true);
  m.set_attention_observer(&rec);
  m.forward_backward(x.data(), y.data(), B, T, 1.0);
  m.set_attention_observer(nullptr);
  REQUIRE(rec.forward.size() == 2);
  REQUIRE(rec.backward.size() == 2);
  CHECK(rec.backward[0].layer == 1);  // backward visits layers in reverse
  CHECK(rec.backward[1].layer == 0);

  // The same forward again, unobserved, and the model's own read-backs.
  m.forward(x.data(), y.data(), B, T);
  const double rs = 1.0 / std::sqrt(double(cfg.head_dim()));
  for (int l = 0; l < cfg.n_layer; ++l) {
    INFO("layer " << l);
    const Captured& c = rec.forward[size_t(l)];
    CHECK(c.layer == l);
    std::vector<float> qkv, out;
    m.read_layer_qkv(l, qkv);
    m.read_layer_attn_out(l, out);
    REQUIRE(c.qkv.size() == qkv.size());
    REQUIRE(c.out.size() == out.size());
    for (size_t i = 0; i < qkv.size(); ++i) REQUIRE(c.qkv[i] == double(qkv[i]));
    for (size_t i = 0; i < out.size(); ++i) REQUIRE(c.out[i] == double(out[i]));
    // The backward view of this layer holds the same forward tensors.
    const Captured& bw = rec.backward[size_t(1 - l)];
    CHECK(bw.out == c.out);
    CHECK(bw.dout.size() == c.out.size());

    const auto& lay = m.layouts()[size_t(l)];
    const int64_t W = lay.qkv_width(), O = lay.out_width(), D = cfg.head_dim(), N = B * T;
    auto moments = [&](int64_t col, double& mean_abs, double& stdev) {
      double s = 0, s2 = 0, sa = 0;  // one pass (fine in double at these sizes)
      for (int64_t r = 0; r < N; ++r)
        for (int64_t d = 0; d < D; ++d) {
          const double e = qkv[size_t(r * W + col + d)];
          s += e, s2 += e * e, sa += std::fabs(e);
        }
      const double n = double(N * D);
      mean_abs = sa / n;
      stdev = std::sqrt(s2 / n - (s / n) * (s / n));
    };
    for (int h = 0; h < cfg.n_head; ++h) {
      INFO("head " << h << " " << cfg.head_plan.layers[size_t(l)][size_t(h)].str());
      const HeadForwardStats& st = rec.stats[size_t(l)][size_t(h)];
      const attn::HeadSpec& spec = cfg.head_plan.layers[size_t(l)][size_t(h)];
      const int g = h / (cfg.n_head / cfg.kv_heads());
      double ma = 0, sd = 0;
      if (lay.q_slot[size_t(h)] >= 0) {
        moments(lay.q_col(h), ma, sd);
        CHECK(st.mean_abs_q == Approx(ma).epsilon(1e-12));
        CHECK(st.std_q == Approx(sd).epsilon(1e-9));
      } else {
        CHECK(st.mean_abs_q == 0);
      }
      if (lay.k_slot[size_t(g)] >= 0) {
        moments(lay.k_col(g), ma, sd);
        CHECK(st.mean_abs_k == Approx(ma).epsilon(1e-12));
        CHECK(st.std_k == Approx(sd).epsilon(1e-9));
      }
      if (lay.v_slot[size_t(g)] >= 0) {
        moments(lay.v_col(g), ma, sd);
        CHECK(st.mean_abs_v == Approx(ma).epsilon(1e-12));
        CHECK(st.std_v == Approx(sd).epsilon(1e-9));
      }
      double norm = 0;
      if (lay.o_slot[size_t(h)] >= 0)
        for (int64_t r = 0; r < N; ++r) {
          double sq = 0;
          for (int64_t d = 0; d < D; ++d) sq += std::pow(double(out[size_t(r * O + lay.out_col(h) + d)]), 2);
          norm += std::sqrt(sq) / double(N);
        }
      CHECK(st.output_norm == Approx(norm).epsilon(1e-12));
      if (spec.kind == attn::HeadKind::Pruned) CHECK(st.output_norm == 0);
      // Dense probabilities per row: entropy / log T and the weight on key i.
      double ent = 0, last = 0;
      if (spec.softmax_family()) {
        for (int64_t b = 0; b < B; ++b)
          for (int64_t i = 0; i < T; ++i) {
            std::vector<double> p(size_t(T), 0.0);
            double z = 0;
            for (int64_t j = 0; j < T; ++j) {
              if (!visible(spec, i, j)) continue;
              double dot = 0;
              for (int64_t d = 0; d < D; ++d)
                dot += double(qkv[size_t((b * T + i) * W + lay.q_col(h) + d)]) *
                       double(qkv[size_t((b * T + j) * W + lay.k_col(g) + d)]);
              z += p[size_t(j)] = std::exp(rs * dot);
            }
            double H = 0;
            for (double& pj : p)
              if (pj > 0) pj /= z, H -= pj * std::log(pj);
            ent += H / std::log(double(T)) / double(B * T);
            last += p[size_t(i)] / double(B * T);
          }
        if (!(spec.kind == attn::HeadKind::Window && spec.window == 1)) CHECK(st.entropy > 0);
      }
      CHECK(st.entropy == Approx(ent).margin(1e-12));
      CHECK(st.last_key_weight == Approx(last).margin(1e-12));
      if (spec.kind == attn::HeadKind::Window && spec.window == 1) CHECK(st.last_key_weight == Approx(1.0));
    }
  }
}

TEST_CASE("observing changes no result, and a model with no observer calls none", "[methods][observe]") {
  const ModelConfig cfg = observed_config();
  Model<float> a(cfg, cpu_backend<float>()), b(cfg, cpu_backend<float>());
  a.init_weights(4);
  b.init_weights(4);
  std::vector<int32_t> x(24), y(24);
  for (size_t i = 0; i < x.size(); ++i) x[i] = int32_t((7 * i) % 29), y[i] = int32_t((3 * i + 2) % 29);
  Recorder rec(true);
  a.set_attention_observer(&rec);
  const double la = a.forward_backward(x.data(), y.data(), 2, 12, 1.0);
  const double lb = b.forward_backward(x.data(), y.data(), 2, 12, 1.0);
  CHECK(la == lb);
  const auto* ga = static_cast<const unsigned char*>(a.grads().base());
  const auto* gb = static_cast<const unsigned char*>(b.grads().base());
  CHECK(std::vector<unsigned char>(ga, ga + a.grads().bytes()) == std::vector<unsigned char>(gb, gb + b.grads().bytes()));
  a.set_attention_observer(nullptr);
  a.forward(x.data(), y.data(), 2, 12);
  CHECK(rec.forward.size() == 2);  // nothing after the observer was removed
  Recorder forward_only(false);
  b.set_attention_observer(&forward_only);
  b.forward_backward(x.data(), y.data(), 2, 12, 1.0);
  CHECK(forward_only.forward.size() == 2);
  CHECK(forward_only.backward.empty());  // wants_backward() false: no gradient read back
}
