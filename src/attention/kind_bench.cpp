// Timing one head of each kind through the layer entry point (forward + backward, float).
#include "headwise/attention/kind_bench.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"

namespace hw::attn {
namespace {

struct KindCase {
  std::string name;
  HeadSpec spec;
};

std::vector<KindCase> kinds_for(int64_t T) {
  const int32_t w = static_cast<int32_t>(std::min<int64_t>(256, std::max<int64_t>(1, T / 4)));
  HeadSpec window{HeadKind::Window, w, 0}, sink{HeadKind::SinkWindow, w, 4};
  return {{"softmax", {}},
          {window.str(), window},
          {sink.str(), sink},
          {"static", {HeadKind::Static, 0, 0}},
          {"linear", {HeadKind::Linear, 0, 0}},
          {"pruned", {HeadKind::Pruned, 0, 0}}};
}

// Median milliseconds of forward+backward of a one-head layer.
double time_head(const HeadSpec& spec, int64_t T, int D, int64_t B, int repeats, Rng& rng) {
  const LayerPlan plan{spec};
  const LayerLayout layout = LayerLayout::build(plan, 1, 1, D);
  const AttnDims dims{B, T};
  auto fill = [&](std::vector<float>& v, double sd) {
    for (auto& x : v) x = float(sd * rng.normal());
  };
  std::vector<float> qkv(size_t(B * T * layout.qkv_width())), dqkv(qkv.size());
  std::vector<float> out(size_t(B * T * layout.out_width())), dout(out.size());
  std::vector<float> stats(size_t(row_stats_size(layout, dims)));
  std::vector<float> ws(size_t(workspace_size(plan, layout, dims, attention_threads())));
  fill(qkv, 1.0);
  fill(dout, 1.0);
  // static head: a recency-biased fixed pattern
  const auto nT = static_cast<size_t>(T);
  std::vector<float> alpha(nT), rho(nT), log_z(nT), dalpha(nT), drho(nT);
  fill(alpha, 0.1);
  for (int64_t d = 0; d < T; ++d) rho[size_t(d)] = -0.05f * float(d);
  static_log_normalisers(log_z.data(), alpha.data(), rho.data(), T);
  // linear head: G = 3 groups round-robin over the dimensions, L = identity + small noise
  const int G = std::min(3, D), G1 = G + 1;
  std::vector<int32_t> groups(static_cast<size_t>(D));
  for (int r = 0; r < D; ++r) groups[size_t(r)] = 1 + r % G;
  std::vector<float> L(static_cast<size_t>(G1 * G1)), dL(L.size());
  for (int r = 0; r < G1; ++r)
    for (int c = 0; c <= r; ++c) L[size_t(r * G1 + c)] = (r == c ? 1.0f : 0.0f) + float(0.1 * rng.normal());

  LayerHeadParams<float> params;
  params.statics.push_back({alpha.data(), rho.data(), log_z.data(), dalpha.data(), drho.data()});
  params.linears.push_back({L.data(), dL.data(), groups.data(), G});

  auto once = [&] {
    layer_forward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), ws.data());
    layer_backward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), dout.data(), dqkv.data(),
                   ws.data());
  };
  once();  // warm-up: page in buffers
  std::vector<double> ms;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    once();
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

nlohmann::json bench_attention_kinds(const std::vector<int64_t>& Ts, int head_dim, int64_t batch, int repeats) {
  check(!Ts.empty(), "bench-attention: no sequence lengths given");
  for (int64_t T : Ts) check(T >= 1, "bench-attention: sequence length " + std::to_string(T) + " must be >= 1");
  check(head_dim >= 1, "bench-attention: head_dim must be >= 1");
  check(batch >= 1, "bench-attention: batch must be >= 1");
  check(repeats >= 1, "bench-attention: repeats must be >= 1");
  Rng rng(1234);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : Ts) {
    double softmax_ms = 0;
    for (const KindCase& k : kinds_for(T)) {
      const double ms = time_head(k.spec, T, head_dim, batch, repeats, rng);
      if (k.spec.kind == HeadKind::Softmax) softmax_ms = ms;
      rows.push_back({{"kind", k.name},
                      {"T", T},
                      {"ms_fwd_bwd", ms},
                      {"relative_to_softmax", softmax_ms > 0 ? ms / softmax_ms : 0.0}});
    }
  }
  return rows;
}

std::string bench_attention_markdown(const nlohmann::json& rows) {
  std::string s = "| kind | T | ms fwd+bwd | relative to softmax |\n|---|---:|---:|---:|\n";
  char line[256];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %lld | %.3f | %.3f |\n", r.at("kind").get<std::string>().c_str(),
                  static_cast<long long>(r.at("T").get<int64_t>()), r.at("ms_fwd_bwd").get<double>(),
                  r.at("relative_to_softmax").get<double>());
    s += line;
  }
  return s;
}

}  // namespace hw::attn
