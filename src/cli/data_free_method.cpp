#include "cli/data_free_method.hpp"

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/method_registry.hpp"

namespace hw::cli {

namespace {
std::string method_names() {
  std::string names;
  for (const auto& e : method_table()) names += (names.empty() ? "" : ", ") + e.name;
  return names.empty() ? "none" : names;
}
}  // namespace

DataFreeMethod prepare_data_free_method(const ModelConfig& mc, const std::string& method,
                                        const std::vector<std::string>& sets, const std::string& who,
                                        const std::string& calib_glob, int64_t seq_len) {
  for (const auto& s : sets)
    check(s.rfind("method.", 0) == 0,
          "--set takes method.<key>=value (no data is read and nothing is trained), got '" + s + "'");
  check(seq_len >= 0 && seq_len <= mc.block_size, who + ": --seq-len " + std::to_string(seq_len) +
                                                     " is outside [1, model.block_size = " +
                                                     std::to_string(mc.block_size) + "]");
  // The run the planner is built for: the model's own, no data, default schedule length.
  nlohmann::json doc = {{"model", mc.to_json()},
                        {"train", {{"seq_len", seq_len > 0 ? seq_len : int64_t(mc.block_size)}, {"micro_batch", 1}}},
                        {"method", {{"name", method}}}};
  if (!calib_glob.empty()) doc["data"] = {{"calib", calib_glob}};  // calibration only: nothing trains
  for (const auto& s : sets) apply_override(doc, s);
  check(doc["method"]["name"] == method, "--set method.name is --method's job");
  DataFreeMethod out;
  out.name = method;
  out.who = who;
  out.cfg = RunConfig::from_json(doc);
  check(out.cfg.methods.size() == 1, who + ": not a method (available: " + method_names() + ")");
  try {
    out.planner = find_method(method, "method").make(out.cfg.methods[0], "method", out.cfg);
    for (int64_t s = 0; s <= out.cfg.train.steps && out.step < 0; ++s) {
      check(!out.planner->observes_at(s), "the method observes training forwards (it needs data); none run here");
      if (out.planner->acts_at(s)) out.step = s;
    }
    check(out.step >= 0, "the method never acts within train.steps = " + std::to_string(out.cfg.train.steps));
  } catch (const Error& e) {
    fail(who + ": " + e.what());
  }
  return out;
}

DataFreeChange apply_data_free_method(Model<float>& model, DataFreeMethod& prepared) {
  DataFreeChange out;
  out.step = prepared.step;
  dist::LocalComm comm;
  Stopwatch stage;
  try {
    PlannerContext ctx{model, prepared.cfg, comm, prepared.step};
    out.change = prepared.planner->act(ctx);
    out.method = prepared.planner->config();
  } catch (const Error& e) {
    fail(prepared.who + ": " + e.what());
  }
  out.act_seconds = stage.seconds();
  stage.restart();
  if (out.change) {
    out.layout_kept = model.install_plan(out.change->plan, out.change->extras);
    if (out.change->adapters) {  // fresh adapters (B = 0), drawn as a run's at this step would be
      model.add_adapters(*out.change->adapters, adapter_init_seed(prepared.cfg.train.seed, prepared.step));
      out.layout_kept = false;
    }
  }
  out.install_seconds = stage.seconds();
  return out;
}

DataFreeChange apply_data_free_method(Model<float>& model, const std::string& method,
                                      const std::vector<std::string>& sets, const std::string& who,
                                      const std::string& calib_glob, int64_t seq_len) {
  DataFreeMethod prepared = prepare_data_free_method(model.config(), method, sets, who, calib_glob, seq_len);
  return apply_data_free_method(model, prepared);
}

}  // namespace hw::cli
