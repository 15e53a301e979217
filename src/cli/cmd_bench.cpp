// headwise bench --config FILE [--steps N] [--warmup N] [--set k=v]... [--observer MODE]...
// Times whole optimizer updates (accumulation x (forward + loss + backward), clip, AdamW) on
// random tokens already in memory, after warm-up, and prints one JSON line. The device is the
// config's train.device (--set train.device=cuda), as for train.
//
// --observer (repeatable) measures what observing training forwards costs: one trainer per
// mode, none (no planner), idle (a planner that observes no update) and every (a planner that
// observes every update and computes head_forward_stats for every layer), timed in turn update
// by update so that the machine's drift hits all of them alike; one JSON line per mode.
//
// --plan (repeatable) compares head plans on the config's model side by side: "softmax" (every
// head softmax), a JSON file holding a head plan, or a run's intervention report (its
// "head_plan", e.g. RUN/interventions/step_20.0.aah.json). One trainer per plan, updates
// alternated; then each plan's attention alone (forward + backward of every layer's plan through
// the layer entry point, batch micro_batch, summed over layers). One JSON line per plan: ms per
// update, update speedup and attention-time ratio against the first plan, ACR and attention
// multiply-adds relative to full attention (attn::plan_cost).
//
// --abba A --abba B [--rounds N] [--abba-dir DIR]: the SAF paper's update-speed protocol
// (experiment/update_speed_abba.hpp): plans A (the baseline) and B timed in fresh processes of this
// binary in the order A B B A per round (default 2 rounds), each 1 warm-up + 4 timed updates
// (--warmup / --steps override); prints one JSON line whose "speedup" is the median over pairs
// of t_A / t_B. A plan is "softmax", a head-plan JSON file, an intervention report, or a
// checkpoint directory (its config.json's head plan). Each process is this command with
// --time-plan PLAN --result FILE: one plan, its update times written to FILE.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>

#include "cli/commands.hpp"
#include "cli/layer_attention_bench.hpp"
#include "cli/run_setup.hpp"
#include <omp.h>
#include "headwise/attention/cost.hpp"
#include "headwise/calibration/head_forward_stats.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/experiment/update_speed_abba.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/cuda_backend.hpp"
#include "headwise/model/param_layout.hpp"
#include "headwise/train/trainer.hpp"

namespace hw::cli {

namespace {
// Training FLOPs per token of the config's model shape with every head softmax, as llm.c and
// PaLM count them: 6 per parameter (forward + backward) plus causal attention's QK^T and PV,
// 6 * n_layer * T * n_embd. Plans that skip work get the same count, so their MFU reads as
// dense-equivalent and compares directly with the all-softmax run and with PyTorch.
double dense_flops_per_token(const ModelConfig& mc, int64_t T) {
  ModelConfig dense = mc;
  dense.head_plan = attn::HeadPlan::uniform(mc.n_layer, mc.n_head);
  double params = 0.0;
  for (const ParamSpec& s : param_specs(dense, {})) {
    if (s.role != ParamRole::Param) continue;
    double n = 1.0;
    for (int64_t d : s.shape) n *= double(d);
    params += n;
  }
  return 6.0 * params + 6.0 * double(mc.n_layer) * double(T) * double(mc.n_embd);
}

// The run config of FILE with its overrides; an experiment file's "experiment" section is left
// out, so the paper configs (configs/saf_124m_*.json) time as they are.
RunConfig bench_config(const std::string& path, const std::vector<std::string>& sets) {
  nlohmann::json doc = read_json_file(path);
  doc.erase("experiment");
  for (const auto& o : sets) apply_override(doc, o);
  try {
    return RunConfig::from_json(doc);
  } catch (const Error& e) {
    fail(path + ": " + e.what());
  }
}

struct BenchArgs {
  std::string config;
  std::vector<std::string> sets;
  std::vector<std::string> observers;
  std::vector<std::string> plans;
  std::vector<std::string> abba;  // --abba A --abba B
  std::string time_plan, result, abba_dir;
  int rounds = 2;
  int64_t steps = 10, warmup = 2;
};

// The planner of --observer idle / every: never acts; observes no update or every update.
class ObserverProbe final : public Planner, public AttentionObserver {
 public:
  explicit ObserverProbe(bool every) : every_(every) {}
  std::string name() const override { return every_ ? "observe_every" : "observe_idle"; }
  nlohmann::json config() const override { return {{"name", name()}}; }
  bool acts_at(int64_t) const override { return false; }
  std::optional<PlanChange> act(PlannerContext&) override { return std::nullopt; }
  bool observes_at(int64_t) const override { return every_; }
  AttentionObserver* observer() override { return this; }
  void on_forward(const AttentionView& v) override {
    for (const HeadForwardStats& s : head_forward_stats(v)) checksum_ += s.entropy;
  }

 private:
  bool every_;
  double checksum_ = 0;  // keeps the statistics from being optimised away
};

Planners observer_planners(const std::string& mode) {
  Planners p;
  if (mode == "idle" || mode == "every") p.push_back(std::make_unique<ObserverProbe>(mode == "every"));
  return p;
}

double mean_of(const std::vector<double>& v) {
  double m = 0.0;
  for (double x : v) m += x / double(v.size());
  return m;
}

// --observer: the modes' trainers side by side.
void bench_observers(const RunConfig& cfg, const BenchArgs& a) {
  dist::LocalComm comm;
  std::vector<std::unique_ptr<Trainer>> trainers;
  for (const auto& mode : a.observers) {
    check(mode == "none" || mode == "idle" || mode == "every",
          "--observer must be none, idle or every (got '" + mode + "')");
    trainers.push_back(std::make_unique<Trainer>(cfg, "", comm, observer_planners(mode), /*synthetic_data=*/true));
  }
  for (int64_t i = 0; i < a.warmup; ++i)
    for (auto& t : trainers) t->train_step();
  std::vector<std::vector<double>> ms(trainers.size(), std::vector<double>(size_t(a.steps)));
  for (int64_t i = 0; i < a.steps; ++i)
    for (size_t k = 0; k < trainers.size(); ++k) trainers[k]->train_step(nullptr, &ms[k][size_t(i)]);
  const double base = mean_of(ms.front());
  for (size_t k = 0; k < trainers.size(); ++k) {
    std::vector<double> sorted = ms[k];
    std::sort(sorted.begin(), sorted.end());
    const double mean = mean_of(ms[k]);
    std::printf("%s\n", nlohmann::json({{"observer", a.observers[k]},
                                        {"ms_per_step", mean},
                                        {"ms_per_step_median", sorted[sorted.size() / 2]},
                                        {"ms_min", sorted.front()},
                                        {"ms_max", sorted.back()},
                                        {"relative_to_first", mean / base}})
                             .dump()
                             .c_str());
  }
}
attn::HeadPlan plan_of(const std::string& arg, const ModelConfig& mc, const std::string& option = "--plan") {
  if (arg == "softmax") return attn::HeadPlan::uniform(mc.n_layer, mc.n_head);
  attn::HeadPlan p;
  try {
    if (std::filesystem::is_directory(arg)) {  // a checkpoint: the head plan its model was saved with
      p = ModelConfig::from_hf_config(read_json_file(arg + "/config.json"), arg + "/config.json").head_plan;
    } else {
      nlohmann::json j = read_json_file(arg);
      if (j.is_object() && j.contains("head_plan")) j = j["head_plan"];
      p = attn::HeadPlan::from_json(j);
    }
    p.validate(mc.n_layer, mc.n_head);
  } catch (const Error& e) {
    fail(option + " " + arg + ": " + e.what());
  }
  return p;
}

// --time-plan: one process of the A-B-B-A protocol, one plan, its update times to --result.
void bench_one_plan(const RunConfig& cfg, const BenchArgs& a) {
  check(!a.result.empty(), "bench --time-plan needs --result FILE");
  RunConfig c = cfg;
  c.model.head_plan = plan_of(a.time_plan, cfg.model, "--time-plan");
  dist::LocalComm comm;
  Trainer trainer(c, "", comm, Planners{}, /*synthetic_data=*/true);
  for (int64_t i = 0; i < a.warmup; ++i) trainer.train_step();
  std::vector<double> ms(size_t(a.steps));
  for (auto& m : ms) trainer.train_step(nullptr, &m);
  const nlohmann::json out = {{"plan", a.time_plan},  {"pid", int64_t(getpid())}, {"warmup", a.warmup},
                              {"update_ms", ms},      {"mean_ms", mean_of(ms)},   {"device", c.train.device},
                              {"parameters", trainer.model().num_parameters()},
                              {"static_heads", c.model.head_plan.count(attn::HeadKind::Static)},
                              {"pruned_heads", c.model.head_plan.count(attn::HeadKind::Pruned)},
                              // A fresh process: its peaks are this plan's alone.
                              {"peak_rss_bytes", peak_rss_bytes()},
                              {"arena_peak_bytes", arena_peak_bytes(trainer.ops().device())}};
  io::write_file_atomic(a.result, out.dump() + "\n");
  std::printf("%s\n", out.dump().c_str());
}

// --abba A --abba B: the plans in alternating fresh processes of this binary.
void bench_abba(const RunConfig& cfg, const BenchArgs& a) {
  check(a.abba.size() == 2, "bench --abba takes exactly two plans: --abba A --abba B (A is the baseline)");
  check(a.rounds >= 1, "--rounds must be >= 1");
  for (const auto& p : a.abba) plan_of(p, cfg.model, "--abba");  // bad input fails before any process starts
  AbbaOptions o;
  o.exe = std::filesystem::read_symlink("/proc/self/exe").string();
  o.config = a.config;
  o.sets = a.sets;
  o.rounds = a.rounds;
  o.warmup = int(a.warmup);
  o.steps = int(a.steps);
  const bool keep = !a.abba_dir.empty();
  o.work_dir = keep ? a.abba_dir
                    : (std::filesystem::temp_directory_path() / ("headwise_abba_" + std::to_string(getpid()))).string();
  const nlohmann::json r = run_abba(o, a.abba[0], a.abba[1]);
  if (!keep) std::filesystem::remove_all(o.work_dir);
  std::printf("%s\n", r.dump().c_str());
}

// --plan: the plans' trainers side by side, then their attention alone.
void bench_plans(const RunConfig& cfg, const BenchArgs& a) {
  dist::LocalComm comm;
  std::vector<std::unique_ptr<Trainer>> trainers;
  std::vector<attn::HeadPlan> plans;
  for (const auto& arg : a.plans) {
    RunConfig c = cfg;
    c.model.head_plan = plan_of(arg, cfg.model);
    plans.push_back(c.model.head_plan);
    trainers.push_back(std::make_unique<Trainer>(c, "", comm, Planners{}, /*synthetic_data=*/true));
  }
  for (int64_t i = 0; i < a.warmup; ++i)
    for (auto& t : trainers) t->train_step();
  std::vector<std::vector<double>> ms(trainers.size(), std::vector<double>(size_t(a.steps)));
  for (int64_t i = 0; i < a.steps; ++i)
    for (size_t k = 0; k < trainers.size(); ++k) trainers[k]->train_step(nullptr, &ms[k][size_t(i)]);
  LayerBenchOptions lo;
  lo.n_head = cfg.model.n_head;
  lo.head_dim = cfg.model.head_dim();
  lo.batch = cfg.train.micro_batch;
  lo.repeats = int(std::max<int64_t>(3, a.steps));
  const int64_t T = cfg.train.seq_len;
  std::vector<double> attn_ms(plans.size(), 0.0);
  for (size_t k = 0; k < plans.size(); ++k)
    for (const auto& layer : plans[k].layers) attn_ms[k] += time_layer_plan(trainers[k]->ops(), layer, T, lo);
  const double base = mean_of(ms.front());
  for (size_t k = 0; k < trainers.size(); ++k) {
    const double mean = mean_of(ms[k]);
    const auto cost = attn::plan_cost(plans[k], T, cfg.model.head_dim());
    std::printf("%s\n", nlohmann::json({{"plan", a.plans[k]},
                                        {"T", T},
                                        {"ms_per_step", mean},
                                        {"update_speedup", base / mean},
                                        {"attn_ms", attn_ms[k]},
                                        {"attn_time_ratio", attn_ms[k] / attn_ms.front()},
                                        {"acr", cost.acr},
                                        {"attn_flops_relative", cost.relative()}})
                             .dump()
                             .c_str());
  }
}
}  // namespace

void add_bench_command(CLI::App& app) {
  auto a = std::make_shared<BenchArgs>();
  CLI::App* cmd = app.add_subcommand("bench", "Time optimizer updates of a config's model on random tokens");
  cmd->add_option("--config", a->config, "JSON config")->required();
  cmd->add_option("--set", a->sets, "Override a config key: section.key=value (repeatable)");
  cmd->add_option("--steps", a->steps, "Timed updates (default 10)");
  cmd->add_option("--warmup", a->warmup, "Untimed warm-up updates (default 2)");
  cmd->add_option("--observer", a->observers,
                  "Compare observation modes side by side (repeatable): none, idle (a planner observing no "
                  "update), every (observing every update)");
  cmd->add_option("--plan", a->plans,
                  "Compare head plans side by side (repeatable): softmax, a head-plan JSON file or a run's "
                  "intervention report; prints update speedup and attention-time ratio beside ACR");
  cmd->add_option("--abba", a->abba,
                  "The paper's update-speed protocol: --abba A --abba B times plan A (baseline) and B in fresh "
                  "processes A B B A per round, 1 warm-up + 4 timed updates each; prints the median of per-pair "
                  "ratios t_A / t_B. A plan: softmax, a head-plan JSON file, an intervention report or a checkpoint");
  cmd->add_option("--rounds", a->rounds, "A B B A rounds for --abba (default 2: 8 processes, 4 pairs)");
  cmd->add_option("--abba-dir", a->abba_dir, "Keep the --abba processes' logs and results here (default: a temp dir, removed)");
  cmd->add_option("--time-plan", a->time_plan, "One process of --abba: time this plan alone, write to --result");
  cmd->add_option("--result", a->result, "With --time-plan: the JSON file its update times go to");
  cmd->callback([a, cmd] {
    const bool abba_mode = !a->abba.empty() || !a->time_plan.empty();
    if (abba_mode && cmd->count("--warmup") == 0) a->warmup = 1;  // the paper's protocol
    if (abba_mode && cmd->count("--steps") == 0) a->steps = 4;
    check(a->steps > 0 && a->warmup >= 0, "--steps must be positive and --warmup >= 0");
    RunConfig cfg = bench_config(a->config, a->sets);
    cfg.train.steps = std::max<int64_t>(cfg.train.steps, a->steps + a->warmup);
    // Random tokens in memory: no data is read, and nothing is evaluated.
    cfg.data.val.clear();
    cfg.data.calib.clear();
    set_threads(cfg.train.threads);
    const int modes = int(!a->observers.empty()) + int(!a->plans.empty()) + int(!a->abba.empty()) +
                      int(!a->time_plan.empty());
    check(modes <= 1, "bench: --observer, --plan, --abba and --time-plan do not combine");
    if (!a->abba.empty()) return bench_abba(cfg, *a);
    if (!a->time_plan.empty()) return bench_one_plan(cfg, *a);
    if (!a->observers.empty()) return bench_observers(cfg, *a);
    if (!a->plans.empty()) return bench_plans(cfg, *a);
    dist::LocalComm comm;
    Trainer trainer(cfg, "", comm, nullptr, /*synthetic_data=*/true);
    for (int64_t i = 0; i < a->warmup; ++i) trainer.train_step();
    std::vector<double> ms(size_t(a->steps));
    for (auto& m : ms) trainer.train_step(nullptr, &m);
    std::sort(ms.begin(), ms.end());
    double mean = 0.0;
    for (double m : ms) mean += m / double(ms.size());
    const double tokens = double(cfg.train.micro_batch * cfg.train.seq_len * cfg.grad_accum());
    const auto cost = attn::plan_cost(cfg.model.head_plan, cfg.train.seq_len, cfg.model.head_dim());
    const double flops_per_token = dense_flops_per_token(cfg.model, cfg.train.seq_len);
    const double achieved_tflops = flops_per_token * tokens / (mean / 1000.0) / 1e12;
    nlohmann::json out = {{"ms_per_step", mean},
                          {"ms_per_step_median", ms[ms.size() / 2]},
                          {"tok_per_s", tokens / (mean / 1000.0)},
                          {"peak_bytes", arena_peak_bytes(trainer.ops().device())},
                          {"device", cfg.train.device},
                          {"precision", cfg.train.precision},
                          {"parameters", trainer.model().num_parameters()},
                          {"threads", omp_get_max_threads()},
                          {"tokens_per_step", int64_t(tokens)},
                          {"acr", cost.acr},
                          {"attn_flops_relative", cost.relative()},
                          {"flops_per_token", flops_per_token},
                          {"achieved_gflops", achieved_tflops * 1e3},
                          {"peak_rss_bytes", peak_rss_bytes()}};
    if (trainer.ops().device() == Device::CUDA) {
      // MFU against the card's measured bf16 GEMM rate (printed alongside), as the PyTorch
      // baseline (scripts/bench_pytorch_gpu.py) reports it.
      const double bf16 = measure_bf16_gemm_tflops(), tf32 = measure_tf32_gemm_tflops();
      out["achieved_tflops"] = achieved_tflops;
      out["bf16_gemm_tflops"] = bf16;
      out["tf32_gemm_tflops"] = tf32;
      out["mfu"] = bf16 > 0 ? achieved_tflops / bf16 : 0.0;
      out["tf32"] = cfg.train.tf32;
    }
    std::printf("%s\n", out.dump().c_str());
  });
}

}  // namespace hw::cli
