// layer_forward against the dense reference, for mixed plans (every kind in one layer), MHA
// and GQA, sequence lengths that are not multiples of the tile or chunk length, windows
// and sinks longer than the sequence.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "attention/layer_fixture.hpp"
#include "support/rel_err.hpp"

namespace {

struct Config {
  std::vector<const char*> kinds;
  int KV;
};

std::vector<Config> configs() {
  const std::vector<const char*> all = {"softmax", "window:70", "sink_window:3:40", "static", "linear", "pruned"};
  const std::vector<const char*> big = {"linear", "static", "window:200", "sink_window:300:4"};
  const std::vector<const char*> holes = {"pruned", "pruned", "static", "static"};
  const std::vector<const char*> tiny = {"window:1", "sink_window:1:1", "softmax", "linear"};
  const std::vector<const char*> edges = {"sink_window:70:5", "window:64", "window:65", "softmax"};
  return {{all, 6}, {all, 3}, {all, 2}, {all, 1}, {big, 4},  {big, 2},
          {big, 1}, {holes, 2}, {tiny, 2}, {tiny, 1}, {edges, 1}, {edges, 4}};
}

std::vector<fx::HeadSpec> specs(const Config& c) {
  std::vector<fx::HeadSpec> p;
  for (const char* k : c.kinds) p.push_back(fx::spec(k));
  return p;
}

std::string name(const Config& c, int64_t T) {
  std::string s = "T=" + std::to_string(T) + " KV=" + std::to_string(c.KV) + " [";
  for (const char* k : c.kinds) s += std::string(k) + " ";
  return s + "]";
}

// Largest |layer - reference| over every output element, scaled by max(1, |reference|).
template <class F>
double max_out_error(fx::Packed<F>& p, const ref::Layer& l, const std::vector<std::vector<ref::Mat>>& want) {
  double err = 0;
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h) {
      if (l.plan[size_t(h)].kind == fx::HeadKind::Pruned) continue;
      for (int64_t t = 0; t < l.T; ++t)
        for (int d = 0; d < l.D; ++d) {
          const double w = want[size_t(b)][size_t(h)][size_t(t * l.D + d)];
          const double e = hw::test::abs_err(double(p.out_at(b, h, t, d)), w);
          err = hw::test::worse(err, hw::test::ratio(e, std::max(1.0, std::abs(w))));
        }
    }
  return err;
}

}  // namespace

TEST_CASE("layer_forward in double matches the dense reference for mixed plans") {
  for (const Config& c : configs())
    for (int64_t T : {1, 7, 67, 130}) {
      INFO(name(c, T));
      const ref::Layer l = fx::make_layer(specs(c), c.KV, 8, 2, T, 11u + unsigned(T));
      const auto want = ref::forward(l);
      fx::Packed<double> p(l);
      p.forward();
      CHECK(max_out_error(p, l, want) < 1e-10);
    }
}

TEST_CASE("layer_forward in float matches the dense reference for mixed plans") {
  for (const Config& c : configs())
    for (int64_t T : {1, 7, 67, 130}) {
      INFO(name(c, T));
      const ref::Layer l = fx::make_layer(specs(c), c.KV, 8, 2, T, 23u + unsigned(T));
      const auto want = ref::forward(l);
      fx::Packed<float> p(l);
      p.forward();
      CHECK(max_out_error(p, l, want) < 2e-5);
    }
}

TEST_CASE("row statistics: log-sum-exp for softmax heads, kernel sum for linear heads") {
  const std::vector<fx::HeadSpec> plan = {fx::spec("softmax"), fx::spec("sink_window:3:40"), fx::spec("linear"),
                                          fx::spec("static")};
  const int64_t T = 130;
  const ref::Layer l = fx::make_layer(plan, 2, 8, 1, T, 5u);
  fx::Packed<double> p(l);
  p.forward();
  for (int h = 0; h < 4; ++h)
    for (int64_t i = 0; i < T; ++i) {
      INFO("head " << h << " row " << i);
      const double got = p.stats[size_t(h * T + i)];
      const double* qi = &l.q[0][size_t(h)][size_t(i * l.D)];
      if (plan[size_t(h)].softmax_family()) {
        std::vector<double> logits;
        for (int64_t j = 0; j <= i; ++j) {
          if (!ref::softmax_visible(plan[size_t(h)], i, j)) continue;
          double s = 0;
          for (int d = 0; d < l.D; ++d) s += qi[d] * l.k[0][size_t(l.kv_of(h))][size_t(j * l.D + d)];
          logits.push_back(s / std::sqrt(double(l.D)));
        }
        CHECK(got == Approx(ref::logsumexp_row(logits)).epsilon(1e-12));
      } else if (plan[size_t(h)].kind == fx::HeadKind::Linear) {
        double z = 0;
        std::vector<double> s, t;
        for (int64_t j = 0; j <= i; ++j) z += ref::oal_kernel(l, h, qi, &l.k[0][size_t(l.kv_of(h))][size_t(j * l.D)], s, t);
        CHECK(got == Approx(z).epsilon(1e-12));
        CHECK(got >= double(i + 1) * l.eps);
      } else {
        CHECK(got == 0.0);
      }
    }
}

TEST_CASE("layer_forward is deterministic across calls") {
  const std::vector<fx::HeadSpec> plan = {fx::spec("softmax"), fx::spec("window:70"), fx::spec("linear"),
                                          fx::spec("static")};
  const ref::Layer l = fx::make_layer(plan, 2, 8, 3, 130, 9u);
  fx::Packed<float> a(l), b(l);
  a.forward();
  b.forward();
  CHECK(a.out == b.out);
  CHECK(a.stats == b.stats);
}

TEST_CASE("head dimensions other than 8: wide heads and a single dimension") {
  for (int D : {1, 64}) {
    INFO("D=" << D);
    const std::vector<fx::HeadSpec> plan = {fx::spec("softmax"), fx::spec("sink_window:2:9"), fx::spec("linear"),
                                            fx::spec("static")};
    const ref::Layer l = fx::make_layer(plan, 2, D, 1, 67, 77u);
    const auto want = ref::forward(l);
    fx::Packed<double> p(l);
    p.forward();
    CHECK(max_out_error(p, l, want) < 1e-10);
  }
}
