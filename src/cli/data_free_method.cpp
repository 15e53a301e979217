#include "cli/data_free_method.hpp"

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
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

DataFreeChange apply_data_free_method(Model<float>& model, const std::string& method,
                                      const std::vector<std::string>& sets, const std::string& who,
                                      const std::string& calib_glob, int64_t seq_len) {
  for (const auto& s : sets)
    check(s.rfind("method.", 0) == 0,
          "--set takes method.<key>=value (no data is read and nothing is trained), got '" + s + "'");
  const ModelConfig& mc = model.config();
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
  const RunConfig cfg = RunConfig::from_json(doc);
  check(cfg.methods.size() == 1, who + ": not a method (available: " + method_names() + ")");

  DataFreeChange out;
  dist::LocalComm comm;
  try {
    std::unique_ptr<Planner> planner = find_method(method, "method").make(cfg.methods[0], "method", cfg);
    for (int64_t s = 0; s <= cfg.train.steps && out.step < 0; ++s) {
      check(!planner->observes_at(s), "the method observes training forwards (it needs data); none run here");
      if (planner->acts_at(s)) out.step = s;
    }
    check(out.step >= 0, "the method never acts within train.steps = " + std::to_string(cfg.train.steps));
    PlannerContext ctx{model, cfg, comm, out.step};
    out.change = planner->act(ctx);
    out.method = planner->config();
  } catch (const Error& e) {
    fail(who + ": " + e.what());
  }
  if (out.change) {
    out.layout_kept = model.install_plan(out.change->plan, out.change->extras);
    if (out.change->adapters) {  // fresh adapters (B = 0), drawn as a run's at this step would be
      model.add_adapters(*out.change->adapters, adapter_init_seed(cfg.train.seed, out.step));
      out.layout_kept = false;
    }
  }
  return out;
}

}  // namespace hw::cli
