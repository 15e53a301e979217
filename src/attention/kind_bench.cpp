// Timing one head of each kind through the layer entry point (forward + backward, float).
#include "headwise/attention/kind_bench.hpp"

#include <algorithm>
#include <ctime>
#include <cstdio>
#include <utility>
#include <vector>

#include "attention/kind_table.hpp"
#include "headwise/attention/attention.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"

namespace hw::attn {
namespace {

using detail::BenchCase;

// The rows of the per-kind table at length T and of the curve: each kind's entry gives its own,
// in HeadKind order.
std::vector<BenchCase> kinds_for(int64_t T) {
  std::vector<BenchCase> all;
  for (const detail::CpuKind* k : detail::cpu_kinds())
    for (BenchCase& c : k->bench_rows(T)) all.push_back(std::move(c));
  return all;
}

std::vector<BenchCase> curve_kinds() {
  std::vector<BenchCase> all;
  for (const detail::CpuKind* k : detail::cpu_kinds())
    for (BenchCase& c : k->curve_rows()) all.push_back(std::move(c));
  return all;
}

struct Timed {
  double ms = 0;
  double cpu_ms = 0;  // CPU time of the calling thread (all the work at one head, batch 1)
  int64_t workspace_bytes = 0, total_bytes = 0;
};

// Median milliseconds of forward+backward of a one-head layer, and the bytes it uses.
Timed time_head(const BenchCase& kc, int64_t T, int D, int64_t B, int repeats, Rng& rng) {
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
  detail::BenchHead head;  // the kind's parameters (head 0)
  detail::cpu_kind(spec.kind).bench_params(kc, D, T, rng, head);
  const LayerHeadParams<float>& params = head.params;

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
  const size_t floats = qkv.size() + dqkv.size() + out.size() + dout.size() + stats.size() + ws.size();
  t.total_bytes = int64_t(floats * sizeof(float)) + head.bytes();
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
    for (const BenchCase& k : kinds_for(T)) {
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
  std::vector<BenchCase> cases;
  for (const BenchCase& k : curve_kinds())
    if (kinds.empty() || std::find(kinds.begin(), kinds.end(), k.name) != kinds.end()) cases.push_back(k);
  for (const std::string& name : kinds)
    if (std::none_of(cases.begin(), cases.end(), [&](const BenchCase& k) { return k.name == name; })) {
      std::string names;
      for (const BenchCase& k : curve_kinds()) names += (names.empty() ? "" : ", ") + k.name;
      fail("bench-attention --kinds: '" + name + "' is not a curve kind (" + names + ")");
    }
  Rng rng(1234);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : Ts) {
    double softmax_cpu = 0;
    for (const BenchCase& k : cases) {
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
