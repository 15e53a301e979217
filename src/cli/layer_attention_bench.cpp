// One layer's attention timed through a Backend: inputs live in arenas on the backend's device,
// filled once from host random values; only the forward+backward calls are inside the timing.
#include "cli/layer_attention_bench.hpp"

#include <algorithm>
#include <cstdio>
#include <type_traits>

#include "headwise/attention/cost.hpp"
#include "headwise/core/arena.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"

namespace hw::cli {
namespace {

struct Composition {
  std::string name;
  attn::LayerPlan plan;
};

std::vector<Composition> compositions(int64_t T, int H) {
  using attn::HeadKind;
  using attn::HeadSpec;
  const int32_t w8 = int32_t(std::max<int64_t>(1, T / 8)), w4 = int32_t(std::max<int64_t>(1, T / 4));
  auto with = [&](int n_first, HeadSpec first, HeadSpec rest = {}) {
    attn::LayerPlan p(size_t(H), rest);
    for (int h = 0; h < n_first && h < H; ++h) p[size_t(h)] = first;
    return p;
  };
  const HeadSpec stat{HeadKind::Static, 0, 0}, win8{HeadKind::Window, w8, 0}, win4{HeadKind::Window, w4, 0},
      sink{HeadKind::SinkWindow, w8, 4}, lin{HeadKind::Linear, 0, 0};
  attn::LayerPlan mix = with(H / 4, stat);
  for (int h = H / 4; h < H / 2; ++h) mix[size_t(h)] = win8;
  return {{"softmax", with(0, {})},           {"static 25%", with(H / 4, stat)}, {"static 50%", with(H / 2, stat)},
          {win8.str(), with(H, win8)},        {win4.str(), with(H, win4)},       {sink.str(), with(H, sink)},
          {"linear", with(H, lin)},           {"mix 25% static + 25% " + win8.str(), mix}};
}

// Host values in the activations' storage type.
template <class A>
std::vector<A> stored_as(const std::vector<float>& h) {
  if constexpr (std::is_same_v<A, float>) {
    return h;
  } else {
    std::vector<A> out(h.size());
    for (size_t i = 0; i < h.size(); ++i) out[i] = to_bf16(h[i]);
    return out;
  }
}

// `mem_ops` owns the device and its copies; `ops` runs the attention with activations in A.
template <class A>
double time_plan(const Backend<float>& mem_ops, const ComputeOps<A, float>& ops, const attn::LayerPlan& plan,
                 int64_t T, const LayerBenchOptions& o, Rng& rng) {
  const int H = o.n_head, D = o.head_dim;
  const attn::LayerLayout layout = attn::LayerLayout::build(plan, H, H, D);
  const attn::AttnDims dims{o.batch, T};
  const int64_t N = o.batch * T;
  const int G = std::min(3, D), G1 = G + 1;
  constexpr DType at = dtype_of<A>();
  Arena mem("bench.attention", mem_ops.device());
  Tensor* qkv = mem.declare("qkv", {N, layout.qkv_width()}, at);
  Tensor* dqkv = mem.declare("dqkv", {N, layout.qkv_width()}, at);
  Tensor* out = mem.declare("out", {N, std::max<int64_t>(1, layout.out_width())}, at);
  Tensor* dout = mem.declare("dout", {N, std::max<int64_t>(1, layout.out_width())}, at);
  Tensor* stats = mem.declare("row_stats", {std::max<int64_t>(1, attn::row_stats_size(layout, dims))});
  Tensor* ws = mem.declare("workspace", {std::max<int64_t>(1, ops.attention_workspace_size(plan, layout, dims))});
  // One static pattern and one linear head's parameters, shared by every head of that kind.
  Tensor* alpha = mem.declare("alpha", {T});
  Tensor* rho = mem.declare("rho", {T});
  Tensor* log_z = mem.declare("log_z", {T});
  Tensor* L = mem.declare("L", {G1 * G1});
  Tensor* dL = mem.declare("dL", {G1 * G1});
  Tensor* groups = mem.declare("groups", {D}, DType::I32);
  mem.allocate();

  auto upload_random = [&](Tensor* t, double sd) {
    std::vector<float> h(size_t(t->numel()));
    for (auto& x : h) x = float(sd * rng.normal());
    const std::vector<A> stored = stored_as<A>(h);
    mem_ops.copy_to_device(t->data, stored.data(), stored.size() * sizeof(A));
  };
  upload_random(qkv, 1.0);
  upload_random(dout, 1.0);
  const auto nT = static_cast<size_t>(T);
  std::vector<float> a(nT), r(nT), z(nT);
  for (auto& x : a) x = float(0.1 * rng.normal());
  for (int64_t d = 0; d < T; ++d) r[size_t(d)] = -0.05f * float(d);
  attn::static_log_normalisers(z.data(), a.data(), r.data(), T);
  mem_ops.copy_to_device(alpha->data, a.data(), a.size() * sizeof(float));
  mem_ops.copy_to_device(rho->data, r.data(), r.size() * sizeof(float));
  mem_ops.copy_to_device(log_z->data, z.data(), z.size() * sizeof(float));
  std::vector<float> l(size_t(G1 * G1), 0.0f);
  for (int i = 0; i < G1; ++i)
    for (int j = 0; j <= i; ++j) l[size_t(i * G1 + j)] = (i == j ? 1.0f : 0.0f) + float(0.1 * rng.normal());
  mem_ops.copy_to_device(L->data, l.data(), l.size() * sizeof(float));
  std::vector<int32_t> g(static_cast<size_t>(D));
  for (int d = 0; d < D; ++d) g[size_t(d)] = 1 + d % G;
  mem_ops.copy_to_device(groups->data, g.data(), g.size() * sizeof(int32_t));

  attn::LayerHeadParams<float> params;
  params.statics.assign(size_t(H), {alpha->f32(), rho->f32(), log_z->f32(), nullptr, nullptr});
  params.linears.assign(size_t(H), {L->f32(), dL->f32(), groups->i32(), G});

  auto once = [&] {
    ops.attention_forward(plan, layout, dims, params, qkv->as<A>(), out->as<A>(), stats->f32(), ws->f32());
    ops.attention_backward(plan, layout, dims, params, qkv->as<A>(), out->as<A>(), stats->f32(), dout->as<A>(),
                           dqkv->as<A>(), ws->f32());
  };
  once();
  mem_ops.synchronize();
  std::vector<double> ms;
  for (int rep = 0; rep < o.repeats; ++rep) {
    const Stopwatch timer;
    once();
    mem_ops.synchronize();
    ms.push_back(timer.ms());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

const ComputeOps<bf16, float>& bf16_ops_of(const Backend<float>& ops) {
  const ComputeOps<bf16, float>* b = ops.bf16_ops();
  check(b != nullptr, std::string("bench-attention: backend ") + ops.name() + " has no bf16 ops");
  return *b;
}

}  // namespace

double time_layer_plan(const Backend<float>& ops, const attn::LayerPlan& plan, int64_t T, const LayerBenchOptions& o,
                       uint64_t seed) {
  check(T >= 1 && o.head_dim >= 1 && o.batch >= 1 && o.repeats >= 1, "bench: T, head_dim, batch, repeats must be >= 1");
  check(int(plan.size()) == o.n_head, "bench: the layer plan has " + std::to_string(plan.size()) + " heads, expected " +
                                          std::to_string(o.n_head));
  Rng rng(seed);
  return o.bf16 ? time_plan<bf16>(ops, bf16_ops_of(ops), plan, T, o, rng) : time_plan<float>(ops, ops, plan, T, o, rng);
}

nlohmann::json bench_layer_attention(const Backend<float>& ops, const LayerBenchOptions& o) {
  check(!o.Ts.empty(), "bench-attention: no sequence lengths given");
  for (int64_t T : o.Ts) check(T >= 1, "bench-attention: sequence length " + std::to_string(T) + " must be >= 1");
  check(o.n_head >= 4, "bench-attention --layer: --heads must be >= 4 (the compositions use quarters)");
  check(o.head_dim >= 1 && o.batch >= 1 && o.repeats >= 1, "bench-attention: head_dim, batch, repeats must be >= 1");
  Rng rng(4321);
  nlohmann::json rows = nlohmann::json::array();
  for (int64_t T : o.Ts) {
    double softmax_ms = 0.0;
    for (const Composition& c : compositions(T, o.n_head)) {
      const double ms = o.bf16 ? time_plan<bf16>(ops, bf16_ops_of(ops), c.plan, T, o, rng)
                               : time_plan<float>(ops, ops, c.plan, T, o, rng);
      if (c.name == "softmax") softmax_ms = ms;
      attn::HeadPlan one;
      one.layers.push_back(c.plan);
      rows.push_back({{"plan", c.name},
                      {"T", T},
                      {"ms_fwd_bwd", ms},
                      {"relative_to_softmax", softmax_ms > 0 ? ms / softmax_ms : 0.0},
                      {"acr", attn::plan_cost(one, T, o.head_dim).acr},
                      {"device", ops.name()},
                      {"precision", o.bf16 ? "bf16" : "fp32"}});
    }
  }
  return rows;
}

std::string layer_bench_markdown(const nlohmann::json& rows) {
  std::string s = "| plan | T | ms fwd+bwd | relative to softmax | ACR |\n|---|---:|---:|---:|---:|\n";
  char line[320];
  for (const auto& r : rows) {
    std::snprintf(line, sizeof line, "| %s | %lld | %.3f | %.3f | %.3f |\n", r.at("plan").get<std::string>().c_str(),
                  static_cast<long long>(r.at("T").get<int64_t>()), r.at("ms_fwd_bwd").get<double>(),
                  r.at("relative_to_softmax").get<double>(), r.at("acr").get<double>());
    s += line;
  }
  return s;
}

}  // namespace hw::cli
