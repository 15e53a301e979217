// AoH's scores from weights alone: the d_head route's singular values against the full
// d_model x d_model product (and a hand-built M with known singular values), effective ranks of
// hand-made spectra, the KV-granularity split against hand-worked examples, and the scores read
// from a model's compact weights against the checkpoint's stored (Hugging Face) weights.
#include <catch2/catch.hpp>
#include <map>
#include <cmath>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/aoh/heads.hpp"
#include "headwise/methods/aoh/spectrum.hpp"
#include "headwise/model/checkpoint.hpp"
#include "methods/aoh_reference.hpp"
#include "methods/methods_test_util.hpp"

using namespace hw;

namespace {

std::vector<double> gaussian(size_t n, uint64_t seed, double scale = 1.0) {
  Rng r(seed);
  std::vector<double> v(n);
  for (auto& x : v) x = scale * r.normal();
  return v;
}

// PyTorch layout (d x C) -> the transposed (C x d) columns the route takes.
std::vector<double> transpose(const std::vector<double>& w, int rows, int cols) {
  std::vector<double> t(w.size());
  for (int i = 0; i < rows; ++i)
    for (int j = 0; j < cols; ++j) t[size_t(j) * size_t(rows) + size_t(i)] = w[size_t(i) * size_t(cols) + size_t(j)];
  return t;
}

// The reference holds eigenvalues of M^T M, so compare squares: an eigenvalue's error is a few
// ulps of sigma_max^2 (its square root near a zero singular value is only ~1e-8 sigma_max).
void check_spectra_equal(const std::vector<double>& got, const std::vector<double>& want) {
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    INFO("singular value " << i << ": " << got[i] << " vs " << want[i]);
    CHECK(std::abs(got[i] * got[i] - want[i] * want[i]) <= 1e-12 * want[0] * want[0]);
  }
}

aoh::KvScore kv(int layer, int g, double score, bool scored = true) {
  aoh::KvScore k;
  k.layer = layer;
  k.kv_head = g;
  k.score = score;
  k.scored = scored;
  return k;
}

std::set<std::pair<int, int>> streaming_of(const std::vector<aoh::KvScore>& kvs) {
  std::set<std::pair<int, int>> out;
  for (const auto& k : kvs)
    if (k.streaming) out.insert({k.layer, k.kv_head});
  return out;
}

}  // namespace

TEST_CASE("AoH: the d_head route equals the full d_model SVD of W_K^T W_Q (MHA and GQA)", "[aoh]") {
  const int C = 32, d = 8;
  // MHA: each query head with its own K; GQA: two query heads share one K.
  const auto wk0 = gaussian(size_t(d * C), 1, 0.02), wk1 = gaussian(size_t(d * C), 2, 0.3);
  const auto wq0 = gaussian(size_t(d * C), 3, 0.02), wq1 = gaussian(size_t(d * C), 4, 1.5);
  const std::vector<std::pair<const std::vector<double>*, const std::vector<double>*>> pairs = {
      {&wq0, &wk0}, {&wq1, &wk1},  // MHA
      {&wq0, &wk1}, {&wq1, &wk1},  // GQA: one K, two Q
  };
  for (const auto& [wq, wk] : pairs) {
    const auto want = test::aoh_ref::full_qk_singular_values(*wq, *wk, C, d);
    const auto got = aoh::qk_singular_values(transpose(*wq, d, C), transpose(*wk, d, C), C, d);
    check_spectra_equal(got, want);
  }
  // A rank-deficient head (two Q channels equal, one zero): the route needs no inverse.
  auto wq = gaussian(size_t(d * C), 5);
  for (int i = 0; i < C; ++i) {
    wq[size_t(1 * C + i)] = wq[size_t(0 * C + i)];
    wq[size_t(2 * C + i)] = 0.0;
  }
  const auto got = aoh::qk_singular_values(transpose(wq, d, C), transpose(wk1, d, C), C, d);
  check_spectra_equal(got, test::aoh_ref::full_qk_singular_values(wq, wk1, C, d));
  CHECK(got[d - 1] <= 1e-12 * got[0]);
  CHECK(got[d - 2] <= 1e-12 * got[0]);
}

TEST_CASE("AoH: a hand-built M has the singular values it was built with", "[aoh]") {
  // W_K^T = U (orthonormal columns), W_Q^T = V S (orthonormal columns, S diagonal):
  // M = W_K^T W_Q = U S V^T, so sigma(M) = S.
  const int C = 6, d = 3;
  const double a = 0.3, b = 1.1;
  // Columns of U: e0 and e3 rotated by a, e1 and e4 by b, e5.
  std::vector<double> u(size_t(C * d), 0.0), v(size_t(C * d), 0.0);
  auto set = [&](std::vector<double>& m, int row, int col, double x) { m[size_t(row * d + col)] = x; };
  set(u, 0, 0, std::cos(a)), set(u, 3, 0, std::sin(a));
  set(u, 1, 1, std::cos(b)), set(u, 4, 1, -std::sin(b));
  set(u, 5, 2, 1.0);
  // Columns of V: e2, (e0 + e1)/sqrt2, (e0 - e1)/sqrt2; scaled by S.
  const double s[3] = {0.5, 5.0, 2.0};
  set(v, 2, 0, s[0]);
  set(v, 0, 1, s[1] / std::sqrt(2.0)), set(v, 1, 1, s[1] / std::sqrt(2.0));
  set(v, 0, 2, s[2] / std::sqrt(2.0)), set(v, 1, 2, -s[2] / std::sqrt(2.0));
  const auto got = aoh::qk_singular_values(v, u, C, d);
  REQUIRE(got.size() == 3);
  CHECK(got[0] == Approx(5.0).epsilon(1e-13));
  CHECK(got[1] == Approx(2.0).epsilon(1e-13));
  CHECK(got[2] == Approx(0.5).epsilon(1e-13));
  // Rank one: S = (3, 0, 0).
  std::vector<double> v1(size_t(C * d), 0.0);
  set(v1, 4, 0, 3.0);
  const auto one = aoh::qk_singular_values(v1, u, C, d);
  CHECK(one[0] == Approx(3.0).epsilon(1e-13));
  CHECK(one[1] == Approx(0.0).margin(1e-13));
  CHECK(aoh::effective_rank(one) == Approx(1.0).epsilon(1e-12));
  // The symmetric eigen routine on a matrix with known eigenvalues: Q diag(4, 1, -2) Q^T.
  const double c = std::cos(0.7), sn = std::sin(0.7);
  const double q[3][3] = {{c, -sn, 0}, {sn, c, 0}, {0, 0, 1}}, lam[3] = {1.0, 4.0, -2.0};
  std::vector<double> m(9, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 3; ++k) m[size_t(i * 3 + j)] += q[i][k] * lam[k] * q[j][k];
  const auto ev = aoh::symmetric_eigenvalues(m, 3);
  CHECK(ev[0] == Approx(4.0).epsilon(1e-13));
  CHECK(ev[1] == Approx(1.0).epsilon(1e-13));
  CHECK(ev[2] == Approx(-2.0).epsilon(1e-13));
}

TEST_CASE("AoH: effective rank of hand-made spectra", "[aoh]") {
  CHECK(aoh::effective_rank({1, 1, 1, 1}) == Approx(4.0).epsilon(1e-14));
  CHECK(aoh::effective_rank({1, 0, 0}) == Approx(1.0).epsilon(1e-14));
  CHECK(aoh::effective_rank({7, 7}) == Approx(2.0).epsilon(1e-14));   // scale-invariant
  CHECK(aoh::effective_rank({2, 2, 0}) == Approx(2.0).epsilon(1e-14));  // zeros add nothing
  // p = (3/4, 1/4): exp(H) = (3/4)^(-3/4) (1/4)^(-1/4).
  CHECK(aoh::effective_rank({3, 1}) == Approx(std::pow(0.75, -0.75) * std::pow(0.25, -0.25)).epsilon(1e-14));
  CHECK(aoh::effective_rank({0, 0}) == 0.0);
}

TEST_CASE("AoH: a KV head scores the minimum over its query heads", "[aoh]") {
  // One layer, 4 query heads, 2 KV heads (GQA, groups {0, 1} and {2, 3}); head 2 is skipped.
  std::vector<aoh::HeadScore> heads(4);
  const double rank[4] = {2.5, 1.2, 9.0, 3.0};
  for (int h = 0; h < 4; ++h) {
    heads[size_t(h)].head = h;
    heads[size_t(h)].scored = h != 2;
    heads[size_t(h)].effective_rank = rank[h];
  }
  auto kvs = aoh::kv_scores(heads, 1, 4, 2);
  REQUIRE(kvs.size() == 2);
  CHECK(kvs[0].scored);
  CHECK(kvs[0].score == 1.2);
  CHECK(kvs[1].score == 3.0);  // the skipped head's 9.0 does not count
  CHECK(kvs[1].query_heads == std::vector<int>{2, 3});
  heads[3].scored = false;
  kvs = aoh::kv_scores(heads, 1, 4, 2);
  CHECK(!kvs[1].scored);
}

TEST_CASE("AoH: the highest effective ranks stream, globally or per layer (hand-worked)", "[aoh]") {
  // Layer 0: g0 = 3.0, g1 = 1.5, g2 skipped; layer 1: g0 = 5.0, g1 = 4.0, g2 = 1.0.
  std::vector<aoh::KvScore> kvs = {kv(0, 0, 3.0), kv(0, 1, 1.5), kv(0, 2, 0.0, false),
                                   kv(1, 0, 5.0), kv(1, 1, 4.0), kv(1, 2, 1.0)};
  using Set = std::set<std::pair<int, int>>;
  // Global: 5 scored KV heads; 0.4 -> round(2.0) = 2 stream: 5.0 (1,0) and 4.0 (1,1).
  CHECK(aoh::classify(kvs, 0.4, false) == 2);
  CHECK(streaming_of(kvs) == Set{{1, 0}, {1, 1}});
  // Per layer at 0.4: layer 0 (2 scored) -> round(0.8) = 1: 3.0 (0,0); layer 1 (3) -> round(1.2) = 1: 5.0 (1,0).
  CHECK(aoh::classify(kvs, 0.4, true) == 2);
  CHECK(streaming_of(kvs) == Set{{0, 0}, {1, 0}});
  // Global at 0.5: round(2.5) = 3: adds 3.0 (0,0).
  CHECK(aoh::classify(kvs, 0.5, false) == 3);
  CHECK(streaming_of(kvs) == Set{{0, 0}, {1, 0}, {1, 1}});
  // Per layer at 0.5: layer 0 -> 1 (3.0); layer 1 -> round(1.5) = 2 (5.0, 4.0).
  CHECK(aoh::classify(kvs, 0.5, true) == 3);
  CHECK(streaming_of(kvs) == Set{{0, 0}, {1, 0}, {1, 1}});
  // 0.2: global round(1.0) = 1 (5.0); per layer round(0.4) = 0 in layer 0, round(0.6) = 1 in layer 1.
  CHECK(aoh::classify(kvs, 0.2, false) == 1);
  CHECK(streaming_of(kvs) == Set{{1, 0}});
  CHECK(aoh::classify(kvs, 0.2, true) == 1);
  CHECK(streaming_of(kvs) == Set{{1, 0}});
  // Ends: none, and every scored head (never the skipped one).
  CHECK(aoh::classify(kvs, 0.0, false) == 0);
  CHECK(streaming_of(kvs).empty());
  CHECK(aoh::classify(kvs, 1.0, true) == 5);
  CHECK(streaming_of(kvs) == Set{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}});
  CHECK_THROWS_WITH(aoh::classify(kvs, 1.5, false), Catch::Contains("sparsity must be in [0, 1]"));
}

TEST_CASE("AoH: the random control picks as many KV heads, uniformly, never a skipped one", "[aoh]") {
  std::vector<aoh::KvScore> kvs = {kv(0, 0, 3.0), kv(0, 1, 1.5), kv(0, 2, 0.0, false),
                                   kv(1, 0, 5.0), kv(1, 1, 4.0), kv(1, 2, 1.0)};
  // 0.4 of 5 scored: 2 per draw, each scored KV head with probability 2/5 over many seeds.
  std::map<std::pair<int, int>, int> chosen;
  const int draws = 4000;
  for (int seed = 0; seed < draws; ++seed) {
    CHECK(aoh::classify(kvs, 0.4, false, uint64_t(seed)) == 2);
    const auto s = streaming_of(kvs);
    CHECK(s.size() == 2);
    CHECK(s.count({0, 2}) == 0);
    for (const auto& p : s) ++chosen[p];
  }
  // Binomial(4000, 0.4): sd 31; 5 sd = 155.
  for (const auto& p : std::vector<std::pair<int, int>>{{0, 0}, {0, 1}, {1, 0}, {1, 1}, {1, 2}}) {
    INFO(p.first << "," << p.second);
    CHECK(std::abs(chosen[p] - 0.4 * draws) < 155);
  }
  // Per layer: 1 from layer 0's two, round(1.2) = 1 from layer 1's three; a seed reproduces its draw.
  CHECK(aoh::classify(kvs, 0.4, true, 7) == 2);
  const auto a = streaming_of(kvs);
  CHECK(aoh::classify(kvs, 0.4, true, 7) == 2);
  CHECK(streaming_of(kvs) == a);
  int layer0 = 0;
  for (const auto& p : a) layer0 += p.first == 0;
  CHECK(layer0 == 1);
}

TEST_CASE("AoH: scores of a model's compact weights equal the stored weights' (GQA, mixed plan)", "[aoh]") {
  const std::string dir = test::methods_dir("aoh_model_scores");
  for (const int kv_heads : {4, 2}) {  // MHA, GQA
    ModelConfig mc;
    mc.n_layer = 2;
    mc.n_head = 4;
    mc.n_kv_head = kv_heads;
    mc.n_embd = 32;
    mc.block_size = 24;
    mc.vocab_size = 32;
    mc.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(
        R"([["softmax", "static", "window:4", "pruned"], ["static", "linear", "softmax", "sink_window:2:4"]])"));
    mc.validate();
    Model<float> model(mc, cpu_backend<float>());
    model.init_weights(11 + uint64_t(kv_heads));
    const std::string ckpt = dir + "/kv" + std::to_string(kv_heads);
    save_model_files(model, ckpt);

    const aoh::HeadScores s = aoh::score_model(model);
    const int group = mc.n_head / kv_heads;
    for (int l = 0; l < mc.n_layer; ++l) {
      const auto stored = test::aoh_ref::read_stored_qk(ckpt, mc, l);
      for (int h = 0; h < mc.n_head; ++h) {
        INFO("kv heads " << kv_heads << " layer " << l << " head " << h);
        const auto& hs = s.head(l, h);
        CHECK(hs.kv_head == h / group);
        const bool softmax_family = mc.head_plan.layers[size_t(l)][size_t(h)].softmax_family();
        CHECK(hs.scored == softmax_family);
        if (!softmax_family) continue;
        const auto want = test::aoh_ref::full_qk_singular_values(stored.q(h), stored.k(h / group), mc.n_embd,
                                                                 mc.head_dim());
        check_spectra_equal(hs.sigma, want);
        CHECK(hs.effective_rank == Approx(test::aoh_ref::entropy_rank(want)).epsilon(1e-10));
      }
    }
    const auto ref = test::aoh_ref::kv_reference_scores(ckpt, mc);
    for (int l = 0; l < mc.n_layer; ++l)
      for (int g = 0; g < kv_heads; ++g) {
        const auto& k = s.kv_head(l, g);
        CHECK(k.scored == !std::isnan(ref[size_t(l)][size_t(g)]));
        if (k.scored) CHECK(k.score == Approx(ref[size_t(l)][size_t(g)]).epsilon(1e-10));
      }
    // The implied plan: every scored query head of a streaming KV head, and nothing else.
    aoh::HeadScores c = s;
    aoh::classify(c.kv, 0.5, false);
    const auto want = test::aoh_ref::reference_streaming(ref, 0.5, false);
    CHECK(streaming_of(c.kv) == want);
    const attn::HeadPlan plan = aoh::streaming_plan(mc.head_plan, c, 2, 4);
    for (int l = 0; l < mc.n_layer; ++l)
      for (int h = 0; h < mc.n_head; ++h) {
        const auto& before = mc.head_plan.layers[size_t(l)][size_t(h)];
        const bool streams = before.softmax_family() && want.count({l, h / group}) > 0;
        CHECK(plan.layers[size_t(l)][size_t(h)].str() == (streams ? std::string("sink_window:2:4") : before.str()));
      }
    CHECK(model.keeps_layout(plan, {}));
  }
}
