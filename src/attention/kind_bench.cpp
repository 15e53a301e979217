// Timing one head of each kind through the layer entry point (forward + backward, float).
#include "headwise/attention/kind_bench.hpp"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <vector>

#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"

namespace hw::attn {
namespace {

struct KindCase {
  std::string name;
  HeadSpec spec;
  int groups = 3;  // linear heads: G, dimensions round-robin over the groups
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

// The curve's kinds: the OAL paper's Fig. 3 set with our kernels.
std::vector<KindCase> curve_kinds() {
  return {{"softmax", {}},
          {"linear G=1", {HeadKind::Linear, 0, 0}, 1},
          {"linear G=4", {HeadKind::Linear, 0, 0}, 4},
          {"performer", HeadSpec::parse("performer")},
          {"dijiang", HeadSpec::parse("dijiang")},
          {"taylorshift", HeadSpec::parse("taylorshift")}};
}

struct Timed {
  double ms = 0;
  double cpu_ms = 0;  // CPU time of the calling thread (all the work at one head, batch 1)
  int64_t workspace_bytes = 0, total_bytes = 0;
};

// Median milliseconds of forward+backward of a one-head layer, and the bytes it uses.
Timed time_head(const KindCase& kc, int64_t T, int D, int64_t B, int repeats, Rng& rng) {
  const HeadSpec& spec = kc.spec;
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
  LayerHeadParams<float> params;
  // static head: a recency-biased fixed pattern
  const auto nT = static_cast<size_t>(spec.kind == HeadKind::Static ? T : 0);
  std::vector<float> alpha(nT), rho(nT), log_z(nT), dalpha(nT), drho(nT);
  if (spec.kind == HeadKind::Static) {
    fill(alpha, 0.1);
    for (int64_t d = 0; d < T; ++d) rho[size_t(d)] = -0.05f * float(d);
    static_log_normalisers(log_z.data(), alpha.data(), rho.data(), T);
  }
  params.statics.push_back({alpha.data(), rho.data(), log_z.data(), dalpha.data(), drho.data()});
  // linear head: G groups round-robin over the dimensions, L = identity + small noise
  const int G = std::min(kc.groups, D), G1 = G + 1;
  std::vector<int32_t> groups(static_cast<size_t>(D));
  for (int r = 0; r < D; ++r) groups[size_t(r)] = 1 + r % G;
  std::vector<float> L(static_cast<size_t>(G1 * G1)), dL(L.size());
  for (int r = 0; r < G1; ++r)
    for (int c = 0; c <= r; ++c) L[size_t(r * G1 + c)] = (r == c ? 1.0f : 0.0f) + float(0.1 * rng.normal());
  params.linears.push_back({L.data(), dL.data(), groups.data(), G});
  // baselines: Gaussian projections (timing does not depend on their orthogonality), unit weights
  const size_t nD = size_t(D);
  std::vector<float> W(size_t(std::max(spec.features, 0)) * nD), log_w(nD, 0.f), dlog_w(nD, 0.f);
  fill(W, 1.0);
  float tau = 1.f, dtau = 0.f;
  params.performers.push_back({W.data(), spec.features});
  params.dijiangs.push_back({log_w.data(), dlog_w.data()});
  params.taylorshifts.push_back({&tau, &dtau});

  auto once = [&] {
    layer_forward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), ws.data());
    layer_backward(plan, layout, dims, params, qkv.data(), out.data(), stats.data(), dout.data(), dqkv.data(),
                   ws.data());
  };
  once();  // warm-up: page in buffers
  std::vector<double> ms, cpu;
  auto thread_ms = [] {
    timespec ts{};
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return double(ts.tv_sec) * 1e3 + double(ts.tv_nsec) * 1e-6;
  };
  for (int r = 0; r < repeats; ++r) {
    const Stopwatch wall;
    const double c0 = thread_ms();
    once();
    cpu.push_back(thread_ms() - c0);
    ms.push_back(wall.ms());
  }
  std::sort(ms.begin(), ms.end());
  std::sort(cpu.begin(), cpu.end());
  Timed t;
  t.ms = ms[ms.size() / 2];
  t.cpu_ms = cpu[cpu.size() / 2];
  t.workspace_bytes = int64_t(ws.size() * sizeof(float));
  const size_t floats = qkv.size() + dqkv.size() + out.size() + dout.size() + stats.size() + ws.size() + alpha.size() * 5 +
                        L.size() * 2 + W.size() + log_w.size() * 2 + 2;
  t.total_bytes = int64_t(floats * sizeof(float) + groups.size() * sizeof(int32_t));
  return t;
}

void check_args(const std::vector<int64_t>& Ts, int head_dim, int64_t batch, int repeats) {
  check(!Ts.empty(), "bench-attention: no sequence lengths given");
  for (int64_t T : Ts) check(T >= 1, "bench-attention: sequence length " + std::to_string(T) + " must be >= 1");
  check(head_dim >= 1, "bench-attention: head_dim must be >= 1");
  check(batch >= 1, "bench-attention: batch must be >= 1");
  check(repeats >= 1, "bench-attention: repeats must be >= 1");
}

}  // namespace

nlohmann::json bench_attention_kinds(const std::vector<int64_t>& Ts, int head_dim, int64_t batch, int repeats) {
  check_args(Ts, head_dim, batch, repeats);
  Rng rng(1234);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : Ts) {
    double softmax_ms = 0;
    for (const KindCase& k : kinds_for(T)) {
      const double ms = time_head(k, T, head_dim, batch, repeats, rng).ms;
      if (k.spec.kind == HeadKind::Softmax) softmax_ms = ms;
      rows.push_back({{"kind", k.name},
                      {"T", T},
                      {"ms_fwd_bwd", ms},
                      {"relative_to_softmax", softmax_ms > 0 ? ms / softmax_ms : 0.0}});
    }
  }
  return rows;
}

nlohmann::json bench_attention_curve(const std::vector<int64_t>& Ts, int head_dim, int repeats,
                                     const std::vector<std::string>& kinds) {
  check_args(Ts, head_dim, 1, repeats);
  std::vector<KindCase> cases;
  for (const KindCase& k : curve_kinds())
    if (kinds.empty() || std::find(kinds.begin(), kinds.end(), k.name) != kinds.end()) cases.push_back(k);
  for (const std::string& name : kinds)
    check(std::any_of(cases.begin(), cases.end(), [&](const KindCase& k) { return k.name == name; }),
          "bench-attention --kinds: '" + name + "' is not a curve kind (softmax, linear G=1, linear G=4, performer, "
          "dijiang, taylorshift)");
  Rng rng(1234);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : Ts) {
    double softmax_cpu = 0;
    for (const KindCase& k : cases) {
      const Timed t = time_head(k, T, head_dim, 1, repeats, rng);
      if (k.spec.kind == HeadKind::Softmax) softmax_cpu = t.cpu_ms;
      rows.push_back({{"kind", k.name},
                      {"T", T},
                      {"ms_fwd_bwd", t.ms},
                      {"cpu_ms_fwd_bwd", t.cpu_ms},
                      {"relative_to_softmax", softmax_cpu > 0 ? t.cpu_ms / softmax_cpu : 0.0},
                      {"workspace_bytes", t.workspace_bytes},
                      {"total_bytes", t.total_bytes}});
    }
  }
  return rows;
}

std::string bench_curve_markdown(const nlohmann::json& rows) {
  std::string s =
      "| kind | T | wall ms fwd+bwd | CPU ms fwd+bwd | CPU time relative to softmax | attention workspace (MiB) | "
      "with inputs and outputs (MiB) |\n"
      "|---|---:|---:|---:|---:|---:|---:|\n";
  char line[320];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %lld | %.2f | %.2f | %.3f | %.2f | %.2f |\n", r.at("kind").get<std::string>().c_str(),
                  static_cast<long long>(r.at("T").get<int64_t>()), r.at("ms_fwd_bwd").get<double>(),
                  r.at("cpu_ms_fwd_bwd").get<double>(),
                  r.at("relative_to_softmax").get<double>(), double(r.at("workspace_bytes").get<int64_t>()) / 1048576.0,
                  double(r.at("total_bytes").get<int64_t>()) / 1048576.0);
    s += line;
  }
  return s;
}

std::string bench_curve_csv(const nlohmann::json& rows) {
  std::string s = "kind,T,ms_fwd_bwd,cpu_ms_fwd_bwd,relative_to_softmax,workspace_bytes,total_bytes\n";
  char line[320];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "%s,%lld,%.4f,%.4f,%.5f,%lld,%lld\n", r.at("kind").get<std::string>().c_str(),
                  static_cast<long long>(r.at("T").get<int64_t>()), r.at("ms_fwd_bwd").get<double>(),
                  r.at("cpu_ms_fwd_bwd").get<double>(),
                  r.at("relative_to_softmax").get<double>(),
                  static_cast<long long>(r.at("workspace_bytes").get<int64_t>()),
                  static_cast<long long>(r.at("total_bytes").get<int64_t>()));
    s += line;
  }
  return s;
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
