// The calibration's own per-head evaluation against independent references: the model's
// linear and softmax heads (src/attention, prefix-state form) on the same activations, the
// closed forms of the Taylor and embedded kernels, and finite differences of the loss.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include "headwise/core/rng.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/oal/calibrate.hpp"
#include "headwise/methods/oal/kernel.hpp"
#include "headwise/methods/oal/kernel_moments.hpp"
#include "headwise/methods/oal/loss_moments.hpp"
#include "headwise/model/model.hpp"

using namespace hw;

namespace {

struct RandomHead {
  int T = 20, d = 8;
  std::vector<float> q, k, v;
  oal::HeadRows rows;
  explicit RandomHead(uint64_t seed, double q_scale = 1.0) {
    Rng rng(seed);
    q.resize(size_t(T * d));
    k.resize(q.size());
    v.resize(q.size());
    for (auto& x : q) x = float(q_scale * rng.normal());
    for (auto& x : k) x = float(rng.normal());
    for (auto& x : v) x = float(rng.normal());
    rows = {q.data(), k.data(), v.data(), d, d, d, T, d};
  }
};

oal::GroupedKernel random_kernel(int G, int d, uint64_t seed) {
  Rng rng(seed);
  oal::GroupedKernel k;
  k.G = G;
  k.L.assign(size_t((G + 1) * (G + 1)), 0.0);
  for (int a = 0; a <= G; ++a)
    for (int b = 0; b <= a; ++b) k.L[size_t(a * (G + 1) + b)] = 0.6 * rng.normal() + (a == b ? 0.5 : 0.0);
  for (int r = 0; r < d; ++r) k.groups.push_back(int32_t(1 + (r * 7 + 3) % G));
  return k;
}

}  // namespace

TEST_CASE("oal kernel output equals the model's linear head forward (and softmax its softmax head)", "[oal][kernel]") {
  ModelConfig c;
  c.n_layer = 1;
  c.n_head = 4;
  c.n_kv_head = 2;  // GQA: heads 0, 1 read KV head 0
  c.n_embd = 32;
  c.vocab_size = 29;
  c.block_size = 24;
  c.pos = "rope";
  c.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(R"([["softmax", "linear", "linear", "softmax"]])"));
  HeadExtras extras;
  const int d = c.head_dim();
  for (int h : {1, 2}) {
    const oal::GroupedKernel k = random_kernel(h == 1 ? 3 : 1, d, uint64_t(h));
    LinearHeadValues v;
    v.n_groups = k.G;
    v.L.assign(k.L.begin(), k.L.end());
    v.groups = k.groups;
    extras.linears[{0, h}] = v;
  }
  Model<float> model(c, cpu_backend<float>(), extras);
  model.init_weights(9);
  const int64_t B = 2, T = 24;
  std::vector<int32_t> x(size_t(B * T));
  Rng rng(4);
  for (auto& t : x) t = int32_t(rng.below(29));
  model.forward(x.data(), nullptr, B, T);
  std::vector<float> qkv, out;
  model.read_layer_qkv(0, qkv);
  model.read_layer_attn_out(0, out);
  const auto& lay = model.layouts()[0];
  const int64_t W = lay.qkv_width(), OW = lay.out_width();
  double worst = 0.0;
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < 4; ++h) {
      const float* rows = qkv.data() + b * T * W;
      const int g = lay.kv_head_of(h);
      const oal::HeadRows hr{rows + lay.q_col(h), rows + lay.k_col(g), rows + lay.v_col(g), W, W, W, int(T), d};
      oal::GroupedKernel k;
      if (h == 1 || h == 2) {
        const LinearHeadValues& v = extras.linears.at({0, h});
        k.G = v.n_groups;
        k.L.assign(v.L.begin(), v.L.end());
        k.groups = v.groups;
        k.eps = c.linear_eps;
      }
      std::vector<double> y(static_cast<size_t>(d));
      for (int i = 0; i < T; ++i) {
        if (h == 1 || h == 2)
          oal::kernel_output(hr, k, i, y.data());
        else
          oal::softmax_output(hr, i, y.data());
        for (int r = 0; r < d; ++r) {
          const double m = out[size_t((b * T + i) * OW + lay.out_col(h) + r)];
          worst = std::max(worst, std::fabs(m - y[size_t(r)]) / (1.0 + std::fabs(y[size_t(r)])));
        }
      }
    }
  CHECK(worst < 2e-5);  // float model vs double evaluation
}

TEST_CASE("oal taylor_L is 1 + s + s^2/2 and embed_global reproduces the global kernel", "[oal][kernel]") {
  for (int G : {1, 2, 5}) {
    RandomHead h(5, 0.7);
    oal::GroupedKernel t;
    t.G = G;
    t.L = oal::taylor_L(G);
    for (int r = 0; r < h.d; ++r) t.groups.push_back(int32_t(1 + r % G));
    t.eps = 0.0;
    // At query i, the kernel's weights are 1 + s + s^2/2 with s = q.k / sqrt(d).
    const int i = 9;
    std::vector<double> y(size_t(h.d)), ref(size_t(h.d), 0.0);
    double den = 0.0, z = 0.0;
    oal::kernel_output(h.rows, t, i, y.data(), &den);
    for (int j = 0; j <= i; ++j) {
      double s = 0.0;
      for (int r = 0; r < h.d; ++r) s += double(h.q[size_t(i * h.d + r)]) * h.k[size_t(j * h.d + r)];
      s /= std::sqrt(double(h.d));
      const double w = 1.0 + s + 0.5 * s * s;
      z += w;
      for (int r = 0; r < h.d; ++r) ref[size_t(r)] += w * h.v[size_t(j * h.d + r)];
    }
    CHECK(den == Approx(z).epsilon(1e-12));
    for (int r = 0; r < h.d; ++r) CHECK(y[size_t(r)] == Approx(ref[size_t(r)] / z).epsilon(1e-10));

    // A global kernel [[a, 0], [b, c]] embedded in G groups: the same outputs as G = 1.
    const std::vector<double> L1 = {0.8, 0.0, -0.3, 0.6};
    oal::GroupedKernel g1{1, L1, std::vector<int32_t>(size_t(h.d), 1), 1e-6};
    oal::GroupedKernel gG{G, oal::embed_global(L1, G), t.groups, 1e-6};
    std::vector<double> y1(size_t(h.d)), yG(size_t(h.d));
    oal::kernel_output(h.rows, g1, 13, y1.data());
    oal::kernel_output(h.rows, gG, 13, yG.data());
    for (int r = 0; r < h.d; ++r) CHECK(yG[size_t(r)] == Approx(y1[size_t(r)]).epsilon(1e-12));
  }
}

TEST_CASE("oal kernel loss gradient matches central finite differences", "[oal][kernel]") {
  RandomHead h(8);
  for (int G : {1, 3}) {
    oal::GroupedKernel k = random_kernel(G, h.d, 21);
    const std::vector<int> pos = {0, 4, 11, 19};
    std::vector<double> targets(pos.size() * size_t(h.d));
    for (size_t p = 0; p < pos.size(); ++p) oal::softmax_output(h.rows, pos[p], targets.data() + p * size_t(h.d));
    std::vector<double> grad(k.L.size(), 0.0);
    oal::kernel_loss(h.rows, k, pos.data(), int(pos.size()), targets.data(), grad.data());
    const int G1 = G + 1;
    for (int a = 0; a < G1; ++a)
      for (int b = 0; b < G1; ++b) {
        const size_t e = size_t(a * G1 + b);
        if (b > a) {
          CHECK(grad[e] == 0.0);  // the upper triangle is not a parameter
          continue;
        }
        const double step = 1e-6, orig = k.L[e];
        k.L[e] = orig + step;
        const double up = oal::kernel_loss(h.rows, k, pos.data(), int(pos.size()), targets.data(), nullptr);
        k.L[e] = orig - step;
        const double dn = oal::kernel_loss(h.rows, k, pos.data(), int(pos.size()), targets.data(), nullptr);
        k.L[e] = orig;
        CHECK(grad[e] == Approx((up - dn) / (2 * step)).margin(1e-8).epsilon(1e-5));
      }
  }
}

namespace {

// q, k and v of one head inside interleaved rows [q | k | v | pad], as captured activations are
// laid out: strides wider than d, and T across three query blocks of the moments (32 rows each).
struct StridedHead {
  int T = 70, d = 8;
  int64_t stride = 3 * 8 + 5;
  std::vector<float> rows_data;
  oal::HeadRows rows;
  explicit StridedHead(uint64_t seed) {
    Rng rng(seed);
    rows_data.resize(size_t(T) * size_t(stride));
    for (auto& x : rows_data) x = float(1.3 * rng.normal());
    rows = {rows_data.data(), rows_data.data() + d, rows_data.data() + 2 * d, stride, stride, stride, T, d};
  }
};

}  // namespace

TEST_CASE("oal kernel moments give kernel_loss's value and gradient at any positions", "[oal][kernel]") {
  const StridedHead h(31);
  std::vector<double> all(size_t(h.T) * size_t(h.d));  // the target of every position
  oal::softmax_outputs(h.rows, all.data());
  for (int G : {1, 3, 5}) {
    const oal::GroupedKernel k = random_kernel(G, h.d, 40 + uint64_t(G));
    const oal::LossMoments m = oal::loss_moments(oal::kernel_moments(h.rows, k.groups, G), all.data());
    const std::vector<int> pos = {0, 1, 31, 32, 33, 50, 63, 64, 69, 69};
    std::vector<double> targets(pos.size() * size_t(h.d));
    for (size_t p = 0; p < pos.size(); ++p) oal::softmax_output(h.rows, pos[p], targets.data() + p * size_t(h.d));
    std::vector<double> g_direct(k.L.size(), 0.0), g_moments(k.L.size(), 0.0);
    const double direct = oal::kernel_loss(h.rows, k, pos.data(), int(pos.size()), targets.data(), g_direct.data());
    const double moments = oal::moments_loss(m, k, pos.data(), int(pos.size()), g_moments.data());
    INFO("G = " << G);
    CHECK(moments == Approx(direct).epsilon(1e-10));
    for (size_t e = 0; e < k.L.size(); ++e) CHECK(g_moments[e] == Approx(g_direct[e]).margin(1e-14).epsilon(1e-9));
  }
  // Moments of another grouping are refused, not silently used.
  const oal::GroupedKernel k3 = random_kernel(3, h.d, 43);
  const oal::LossMoments m1 =
      oal::loss_moments(oal::kernel_moments(h.rows, std::vector<int32_t>(size_t(h.d), 1), 1), all.data());
  const int p0 = 5;
  CHECK_THROWS_WITH(oal::moments_loss(m1, k3, &p0, 1, nullptr),
                    Catch::Contains("not the one the moments were computed for"));
}

TEST_CASE("oal softmax_outputs equals softmax_output at every position", "[oal][kernel]") {
  const StridedHead h(32);
  std::vector<double> all(size_t(h.T) * size_t(h.d)), one(size_t(h.d));
  oal::softmax_outputs(h.rows, all.data());
  for (int i = 0; i < h.T; ++i) {
    oal::softmax_output(h.rows, i, one.data());
    for (int r = 0; r < h.d; ++r) CHECK(all[size_t(i) * size_t(h.d) + size_t(r)] == Approx(one[size_t(r)]).margin(1e-13).epsilon(1e-11));
  }
}

// The global kernel's moments summed from a grouping's (issue 55) equal the ones computed directly.
TEST_CASE("oal global moments from a grouping's equal the direct G = 1 moments", "[oal][kernel]") {
  const StridedHead h(33);
  std::vector<double> all(size_t(h.T) * size_t(h.d));
  oal::softmax_outputs(h.rows, all.data());
  const oal::LossMoments direct =
      oal::loss_moments(oal::kernel_moments(h.rows, std::vector<int32_t>(size_t(h.d), 1), 1), all.data());
  for (int G : {2, 3, 5}) {
    const oal::GroupedKernel k = random_kernel(G, h.d, 50 + uint64_t(G));
    const oal::LossMoments m = oal::global_moments(oal::loss_moments(oal::kernel_moments(h.rows, k.groups, G), all.data()));
    INFO("G = " << G);
    REQUIRE(m.G == 1);
    REQUIRE(m.pairs == 3);
    REQUIRE(m.groups == direct.groups);
    REQUIRE(m.Z.size() == direct.Z.size());
    REQUIRE(m.H.size() == direct.H.size());
    double zmax = 0, hmax = 0;
    for (double z : direct.Z) zmax = std::max(zmax, std::abs(z));
    for (double x : direct.H) hmax = std::max(hmax, std::abs(x));
    for (size_t i = 0; i < m.Z.size(); ++i) CHECK(std::abs(m.Z[i] - direct.Z[i]) <= 1e-12 * zmax);
    for (size_t i = 0; i < m.H.size(); ++i) CHECK(std::abs(m.H[i] - direct.H[i]) <= 1e-12 * hmax);
  }
}

// The chunked moments (running sums of feature products across chunks, pair weights within
// one) against the sums written out: Z_i^ab = sum_{j<=i} s_a s_b and P_i^ab = sum_{j<=i} s_a s_b
// v_j in long double, at every position, for chunks of one position (everything through the
// running sums), of sizes that do not divide T, and of one chunk holding every position. Each
// entry's error is bounded by 1e-12 times its terms' absolute mass (s_a s_b expanded into
// products of q and k entries, as the running sums hold them): float64 sums of 70 keys and at
// most 45 feature products sit near 1e-14 of it; a wrong term is of the order of the mass.
TEST_CASE("oal chunked kernel moments equal the sums over the keys at every position", "[oal][kernel]") {
  const StridedHead h(34);
  const int T = h.T, d = h.d;
  for (int G : {1, 3, 5}) {
    const oal::GroupedKernel k = random_kernel(G, d, 60 + uint64_t(G));
    const int G1 = G + 1, NP = G1 * (G1 + 1) / 2;
    // Reference: per (i, j) the group scores and their absolute masses, in long double.
    std::vector<long double> ref_Z(size_t(T) * size_t(NP), 0), ref_P(size_t(T) * size_t(NP) * size_t(d), 0);
    std::vector<long double> mass_Z(ref_Z.size(), 0), mass_P(ref_P.size(), 0);
    const long double rs = 1.0L / std::sqrt((long double)d);
    for (int i = 0; i < T; ++i)
      for (int j = 0; j <= i; ++j) {
        std::vector<long double> s(size_t(G1), 0), a(size_t(G1), 0);
        s[0] = a[0] = 1;
        for (int r = 0; r < d; ++r) {
          const long double x = rs * (long double)h.rows.q[i * h.stride + r] * (long double)h.rows.k[j * h.stride + r];
          s[size_t(k.groups[size_t(r)])] += x;
          a[size_t(k.groups[size_t(r)])] += std::abs(x);
        }
        for (int ga = 0, p = 0; ga < G1; ++ga)
          for (int gb = ga; gb < G1; ++gb, ++p) {
            const long double w = s[size_t(ga)] * s[size_t(gb)], wm = a[size_t(ga)] * a[size_t(gb)];
            const size_t zi = size_t(i) * size_t(NP) + size_t(p);
            ref_Z[zi] += w;
            mass_Z[zi] += wm;
            for (int r = 0; r < d; ++r) {
              const long double v = h.rows.v[j * h.stride + r];
              ref_P[zi * size_t(d) + size_t(r)] += w * v;
              mass_P[zi * size_t(d) + size_t(r)] += wm * std::abs(v);
            }
          }
      }
    for (int chunk : {1, 7, 16, 64, 100}) {
      const oal::KernelMoments m = oal::kernel_moments(h.rows, k.groups, G, chunk);
      INFO("G = " << G << ", chunk = " << chunk);
      REQUIRE(m.pairs == NP);
      int bad = 0;
      for (size_t e = 0; e < ref_Z.size(); ++e) bad += std::abs((long double)m.Z[e] - ref_Z[e]) > 1e-12L * mass_Z[e];
      for (size_t e = 0; e < ref_P.size(); ++e) bad += std::abs((long double)m.P[e] - ref_P[e]) > 1e-12L * mass_P[e];
      CHECK(bad == 0);
    }
  }
}
