// The linearization baselines (performer, dijiang, taylorshift): text form, the chunked
// linear-time evaluation against the dense O(T^2) definition (tests/attention/dense_reference.hpp),
// the backward against central finite differences in double (q, k, v, log_w, tau), MHA and GQA,
// and the errors for missing parameters and bad denominators.
#include <catch2/catch.hpp>

#include <cmath>

#include "attention/layer_fixture.hpp"
#include "headwise/core/error.hpp"
#include "support/central_difference.hpp"
#include "support/rel_err.hpp"

namespace {

using Grid = std::vector<std::vector<ref::Mat>>;

double max_rel(const std::vector<double>& a, const std::vector<double>& b) { return hw::test::max_rel_err_floor(a, b, 1.0); }

// The entry point's output of (b, h) as a T x D matrix.
template <class F>
std::vector<double> out_of(fx::Packed<F>& p, const ref::Layer& l, int64_t b, int h) {
  std::vector<double> o;
  for (int64_t t = 0; t < l.T; ++t)
    for (int d = 0; d < l.D; ++d) o.push_back(double(p.out_at(b, h, t, d)));
  return o;
}

template <class F>
void check_forward(const std::vector<fx::HeadSpec>& plan, int KV, int D, int64_t B, int64_t T, unsigned seed,
                   double tol) {
  const ref::Layer l = fx::make_layer(plan, KV, D, B, T, seed);
  fx::Packed<F> p(l);
  p.forward();
  const Grid want = ref::forward(l);
  for (int64_t b = 0; b < B; ++b)
    for (int h = 0; h < l.H; ++h) {
      INFO("T " << T << " KV " << KV << " head " << h << " (" << plan[size_t(h)].str() << ") sequence " << b);
      CHECK(max_rel(out_of(p, l, b, h), want[size_t(b)][size_t(h)]) <= tol);
    }
}

double objective(fx::Packed<double>& p, const ref::Layer& l, const Grid& R) {
  p.forward();
  double f = 0;
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      for (int64_t t = 0; t < l.T; ++t)
        for (int d = 0; d < l.D; ++d) f += p.out_at(b, h, t, d) * R[size_t(b)][size_t(h)][size_t(t * l.D + d)];
  return f;
}

bool close(double got, double want, double tol) { return std::abs(got - want) <= tol * std::max(1.0, std::abs(want)); }

// Every gradient of layer_backward against central differences of the forward (`stride` thins
// the QKV entries); the forward itself is checked against the dense definition above.
void check_fd(const ref::Layer& l, int stride, unsigned seed) {
  const Grid R = fx::random_r(l, seed);
  fx::Packed<double> p(l);
  for (int64_t b = 0; b < l.B; ++b)
    for (int h = 0; h < l.H; ++h)
      for (int64_t t = 0; t < l.T; ++t)
        for (int d = 0; d < l.D; ++d) p.dout_at(b, h, t, d) = R[size_t(b)][size_t(h)][size_t(t * l.D + d)];
  p.forward();
  std::fill(p.dqkv.begin(), p.dqkv.end(), std::nan(""));
  p.backward();
  const std::vector<double> dqkv = p.dqkv;
  const std::vector<std::vector<double>> dlog_w = p.dlog_w;
  const std::vector<double> dtau = p.dtau;
  const double h = 1e-5, tol = 1e-6;
  int checked = 0;
  for (size_t e = seed % unsigned(stride); e < p.qkv.size(); e += size_t(stride)) {
    const double fd = hw::test::central_difference(p.qkv[e], [&] { return objective(p, l, R); }, h);
    INFO("qkv element " << e << " (column " << e % size_t(p.layout.qkv_width()) << ")");
    CHECK(close(dqkv[e], fd, tol));
    ++checked;
  }
  CHECK(checked > 0);
  for (int hd = 0; hd < l.H; ++hd) {
    const auto kind = l.plan[size_t(hd)].kind;
    if (kind == fx::HeadKind::DiJiang)
      for (int f = 0; f < l.D; ++f) {
        auto& x = p.log_w[size_t(hd)][size_t(f)];
        const double fd = hw::test::central_difference(x, [&] { return objective(p, l, R); }, h);
        INFO("head " << hd << " log_w[" << f << "]");
        CHECK(close(dlog_w[size_t(hd)][size_t(f)], fd, tol));
      }
    if (kind == fx::HeadKind::TaylorShift) {
      auto& x = p.tau[size_t(hd)];
      const double fd = hw::test::central_difference(x, [&] { return objective(p, l, R); }, h);
      INFO("head " << hd << " tau");
      CHECK(close(dtau[size_t(hd)], fd, tol));
    }
  }
}

std::vector<fx::HeadSpec> baselines() {
  return {fx::spec("performer:24"), fx::spec("dijiang"), fx::spec("taylorshift"), fx::spec("softmax"),
          fx::spec("linear"),       fx::spec("dijiang")};
}

}  // namespace

TEST_CASE("baseline kinds: text form round-trips and bad numbers are errors") {
  using hw::attn::HeadKind;
  CHECK(fx::spec("performer").kind == HeadKind::Performer);
  CHECK(fx::spec("performer").features == 250);
  CHECK(fx::spec("performer").str() == "performer");
  CHECK(fx::spec("performer:64").features == 64);
  CHECK(fx::spec("performer:64").str() == "performer:64");
  CHECK(fx::spec("performer:250").str() == "performer");
  CHECK(fx::spec("dijiang").kind == HeadKind::DiJiang);
  CHECK(fx::spec("dijiang").str() == "dijiang");
  CHECK(fx::spec("taylorshift").kind == HeadKind::TaylorShift);
  CHECK(fx::spec("taylorshift").str() == "taylorshift");
  for (const char* bad : {"performer:0", "performer:-3", "performer:x", "performer:12a", "performer:9000",
                          "performer:", "performer:4:4", "dijiang:64", "taylorshift:2", "Performer"})
    CHECK_THROWS_AS(fx::spec(bad), hw::Error);
  CHECK_THROWS_WITH(fx::spec("performer:0"), Catch::Contains("bad feature count") && Catch::Contains("performer:0"));
  CHECK(fx::spec("taylorshift").reads_qk());
  CHECK(fx::spec("performer").kernel_normalised());
  CHECK_FALSE(fx::spec("softmax").kernel_normalised());
}

TEST_CASE("baseline heads in double equal their dense definitions (MHA and GQA, across chunks)") {
  for (int64_t T : {1, 7, 64, 65, 130})
    for (int KV : {6, 3, 1}) check_forward<double>(baselines(), KV, 8, 2, T, 300u + unsigned(T) + unsigned(KV), 1e-11);
  check_forward<double>({fx::spec("performer"), fx::spec("taylorshift"), fx::spec("dijiang")}, 1, 16, 1, 150, 311u,
                        1e-11);
}

TEST_CASE("baseline heads in float agree with the double definitions") {
  for (int64_t T : {7, 130}) check_forward<float>(baselines(), 2, 8, 1, T, 320u + unsigned(T), 2e-5);
}

TEST_CASE("baseline heads: backward matches finite differences, every input at T = 7, MHA and GQA") {
  for (int KV : {6, 3, 1}) {
    INFO("KV " << KV);
    check_fd(fx::make_layer(baselines(), KV, 4, 2, 7, 330u + unsigned(KV)), 1, 3u);
  }
}

TEST_CASE("baseline heads: backward matches finite differences across chunk boundaries (T = 67, 130)") {
  for (int64_t T : {67, 130}) {
    INFO("T " << T);
    check_fd(fx::make_layer(baselines(), 2, 4, 1, T, 340u + unsigned(T)), 13, 5u);
  }
}

TEST_CASE("taylorshift denominators are at least (i+1)/2: the kernel 1 + s + s^2/2 is >= 1/2") {
  ref::Layer l = fx::make_layer({fx::spec("taylorshift"), fx::spec("taylorshift")}, 1, 8, 1, 100, 350u);
  l.tau = {4.0, -3.0};
  fx::Packed<float> p(l);
  p.forward();
  for (size_t e = 0; e < p.stats.size(); ++e) CHECK(p.stats[e] >= 0.5f * float(int64_t(e) % 100 + 1) * (1 - 1e-5f));
  // a zero query row: s = 0 for every key, so the row is the causal mean of V
  ref::Layer z = fx::make_layer({fx::spec("taylorshift")}, 1, 4, 1, 5, 351u);
  for (int d = 0; d < 4; ++d) z.q[0][0][size_t(3 * 4 + d)] = 0.0;
  fx::Packed<double> pz(z);
  pz.forward();
  for (int d = 0; d < 4; ++d) {
    double mean = 0;
    for (int j = 0; j <= 3; ++j) mean += z.v[0][0][size_t(j * 4 + d)] / 4;
    CHECK(pz.out_at(0, 0, 3, d) == Approx(mean).epsilon(1e-12));
  }
}

TEST_CASE("baseline heads: missing parameters and non-finite denominators are one hw::Error each") {
  const ref::Layer l = fx::make_layer({fx::spec("performer:8"), fx::spec("dijiang"), fx::spec("taylorshift")}, 1, 4, 2,
                                      70, 360u);
  {
    fx::Packed<double> p(l);
    p.params.performers[0].n_features = 7;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("performer:8") && Catch::Contains("7 rows"));
    p.params.performers[0].W = nullptr;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("head 0 is a performer head but has no random features"));
  }
  {
    fx::Packed<double> p(l);
    p.params.dijiangs[1].log_w = nullptr;
    CHECK_THROWS_WITH(p.forward(), Catch::Contains("head 1 is a dijiang head"));
  }
  {
    fx::Packed<double> p(l);
    p.params.taylorshifts.resize(2);
    CHECK_THROWS_WITH(p.backward(), Catch::Contains("head 2 is a taylorshift head"));
    fx::Packed<double> q(l);
    q.tau[2] = INFINITY;
    CHECK_THROWS_WITH(q.forward(), Catch::Contains("temperature is not finite"));
  }
  for (int h = 0; h < 3; ++h) {
    fx::Packed<float> p(l);
    p.qkv_at(1, 66, p.layout.q_col(h) + 1) = INFINITY;
    INFO("head " << h);
    CHECK_THROWS_WITH(p.forward(), Catch::Contains(l.plan[size_t(h)].str() + " head " + std::to_string(h)) &&
                                       Catch::Contains("sequence 1") && Catch::Contains("position 66") &&
                                       Catch::Contains("denominator"));
  }
}
