// The experiment table: per-seed ratios against the reference branch, then mean and standard
// deviation over seeds, in the paper's columns.
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/experiment/experiment.hpp"

namespace hw {

namespace {

// Mean and sample standard deviation (null for a single value).
nlohmann::json stat(const std::vector<double>& v) {
  if (v.empty()) return nullptr;
  double mean = 0.0;
  for (double x : v) mean += x;
  mean /= double(v.size());
  nlohmann::json j = {{"mean", mean}, {"values", v}};
  if (v.size() > 1) {
    double ss = 0.0;
    for (double x : v) ss += (x - mean) * (x - mean);
    j["std"] = std::sqrt(ss / double(v.size() - 1));
  } else {
    j["std"] = nullptr;
  }
  return j;
}

std::string describe(const nlohmann::json& method) {
  if (method.is_array()) {  // a stack: its methods in order
    std::string out;
    for (const auto& m : method) out += (out.empty() ? "" : " + ") + describe(m);
    return out.empty() ? "ordinary attention" : out;
  }
  if (!method.is_object()) return "ordinary attention";
  const std::string name = method.value("name", "none");
  if (name == "none") return "ordinary attention";
  if (name != "saf") return name;
  const std::string selector = method.value("selector", "variance"), mode = method.value("mode", "freeze");
  char ratio[32];
  std::snprintf(ratio, sizeof ratio, "%g%%", 100.0 * method.value("ratio", 0.0));
  if (mode == "prune") {
    if (selector == "gate_taylor") return std::string("Gate-Taylor pruning ") + ratio;
    return "same-head pruning (" + selector + ") " + ratio;
  }
  const std::string pattern = method.value("pattern", "mean");
  if (selector == "random") return std::string("random heads, ") + pattern + " pattern " + ratio;
  return "SAF (" + selector + ", " + pattern + ") " + ratio;
}

std::string cell(const nlohmann::json& s, const char* fmt, const char* suffix = "") {
  if (s.is_null()) return "-";
  char buf[96];
  std::snprintf(buf, sizeof buf, fmt, s["mean"].get<double>());
  std::string out = std::string(buf) + suffix;
  if (!s["std"].is_null()) {
    std::snprintf(buf, sizeof buf, fmt, s["std"].get<double>());
    std::string sd = buf;
    if (!sd.empty() && sd[0] == '+') sd.erase(0, 1);
    out += " ± " + sd + suffix;
  }
  return out;
}

}  // namespace

nlohmann::json summarize_experiment(const nlohmann::json& per_seed, const std::vector<ExperimentBranch>& branches) {
  nlohmann::json summary = nlohmann::json::array();
  for (size_t b = 0; b < branches.size(); ++b) {
    std::vector<double> ppl, change, speedup, speedup_median, memory, rss, capture, fit, updates, intervention;
    std::string rss_scope = "branch";
    nlohmann::json method, fire_step, branch_step;
    for (const auto& seed : per_seed) {
      const auto& rows = seed["branches"];
      check(rows.size() == branches.size(), "experiment summary: a seed has a different number of branches");
      const auto& ref = rows[0];
      const auto& r = rows[b];
      method = r["method"];
      fire_step = r.value("fire_step", nlohmann::json(nullptr));  // the same for every seed
      branch_step = r.value("branch_step", nlohmann::json(nullptr));
      ppl.push_back(r["val_ppl"].get<double>());
      change.push_back(100.0 * (r["val_ppl"].get<double>() / ref["val_ppl"].get<double>() - 1.0));
      if (!ref["mean_update_ms"].is_null() && !r["mean_update_ms"].is_null())
        speedup.push_back(ref["mean_update_ms"].get<double>() / r["mean_update_ms"].get<double>());
      if (!ref["median_update_ms"].is_null() && !r["median_update_ms"].is_null())
        speedup_median.push_back(ref["median_update_ms"].get<double>() / r["median_update_ms"].get<double>());
      memory.push_back(100.0 * (r["memory_bytes"].get<double>() / ref["memory_bytes"].get<double>() - 1.0));
      const nlohmann::json rp = r.value("peak_rss_bytes", nlohmann::json(nullptr)),
                           fp = ref.value("peak_rss_bytes", nlohmann::json(nullptr));
      if (rp.is_number() && fp.is_number() && fp.get<double>() > 0)
        rss.push_back(100.0 * (rp.get<double>() / fp.get<double>() - 1.0));
      if (r.value("peak_rss_scope", std::string("branch")) != "branch") rss_scope = "process";
      if (r.contains("capture_seconds")) capture.push_back(r["capture_seconds"].get<double>());
      if (r.contains("fit_seconds")) fit.push_back(r["fit_seconds"].get<double>());
      updates.push_back(r["steps"].get<double>());
      if (r.contains("intervention_seconds") && r["fire_step"].is_number())
        intervention.push_back(r["intervention_seconds"].get<double>());
    }
    summary.push_back({{"branch", branches[b].name},
                       {"method", describe(method)},
                       {"fire_step", fire_step},
                       {"branch_step", branch_step},
                       {"val_ppl", stat(ppl)},
                       {"ppl_change_pct", stat(change)},
                       {"update_speedup", stat(speedup)},
                       {"update_speedup_median", stat(speedup_median)},
                       {"memory_change_pct", stat(memory)},
                       {"peak_rss_change_pct", stat(rss)},
                       {"peak_rss_scope", rss_scope},
                       {"capture_seconds", stat(capture)},
                       {"fit_seconds", stat(fit)},
                       {"intervention_seconds", stat(intervention)},
                       {"updates", stat(updates)},
                       {"seeds", per_seed.size()}});
  }
  return summary;
}

std::string experiment_table_markdown(const nlohmann::json& results) {
  std::ostringstream o;
  const auto& cfg = results["config"];
  std::vector<int64_t> seeds;
  for (const auto& s : results["seeds"]) seeds.push_back(s["seed"].get<int64_t>());
  // One intervention step for all: in the caption; several: a column (train.steps = after the
  // last update).
  const nlohmann::json fire_steps = results.value("fire_steps", nlohmann::json::array({results["fire_step"]}));
  const bool per_branch = fire_steps.size() > 1;
  std::string when = "intervention at update " + results["fire_step"].dump();
  if (per_branch) {
    when = "interventions at updates ";
    for (size_t i = 0; i < fire_steps.size(); ++i) when += (i ? ", " : "") + fire_steps[i].dump();
  }
  std::vector<std::string> notes;
  if (fire_steps.back() == cfg["train"]["steps"]) notes.push_back(cfg["train"]["steps"].dump() + " = after the last update");
  if (per_branch) notes.push_back("column Intervention");
  for (size_t i = 0; i < notes.size(); ++i) when += (i ? "; " : " (") + notes[i] + (i + 1 == notes.size() ? ")" : "");
  o << "SAF experiment: " << cfg["model"]["n_layer"] << " layers x " << cfg["model"]["n_head"] << " heads x "
    << cfg["model"]["n_embd"] << " wide, T = " << cfg["train"]["seq_len"] << ", " << cfg["train"]["steps"]
    << " updates, " << when << ", budget matched in "
    << results["budget"].get<std::string>() << ", seeds " << nlohmann::json(seeds).dump() << ".\n"
    << "PPL change = 100 (p / p_ordinary - 1); update speedup (A-B-B-A) = the paper's protocol: ordinary's "
       "and the branch's plans timed in alternating fresh processes (1 warm-up + 4 timed updates on random "
       "tokens each), median of per-pair ratios, first seed's plans (- where not measured); in-run speedup = "
       "ordinary's mean update time after the intervention / the branch's in the quality runs (median: the "
       "same with medians, robust to stalls of a shared machine); intervention time = the wall time of every act of "
       "the branch's methods (capture, fit, selection), excluded from a time budget (which counts updates only, "
       "as the paper's main table); arena memory = parameter + gradient + buffer + activation + AdamW arena bytes after the intervention; peak RSS = the process's resident-set high-water mark during the branch (reset at its start; scope \"process\" in results.json where the reset was refused), baseline included.\n\n";
  o << "| Branch | Method | " << (per_branch ? "Intervention | " : "")
    << "Val PPL | PPL change (%) | Update speedup (A-B-B-A) | In-run speedup | (median) | Arena memory change (%) | "
       "Peak RSS change (%) | Calibration (s) | Fit (s) | Intervention time (s) | Updates |\n";
  o << (per_branch ? "|---" : "") << "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";
  for (const auto& r : results["summary"]) {
    o << "| " << r["branch"].get<std::string>() << " | " << r["method"].get<std::string>() << " | ";
    if (per_branch) {
      const nlohmann::json f = r.value("fire_step", nlohmann::json(nullptr));
      o << (f.is_number() ? f.dump() : std::string("-")) << " | ";
    }
    o << cell(r["val_ppl"], "%.3f") << " | " << cell(r["ppl_change_pct"], "%+.3f") << " | "
      << cell(r.value("abba_update_speedup", nlohmann::json(nullptr)), "%.3f", "x") << " | "
      << cell(r["update_speedup"], "%.3f", "x") << " | " << cell(r["update_speedup_median"], "%.3f", "x") << " | "
      << cell(r["memory_change_pct"], "%+.2f") << " | "
      << cell(r.value("peak_rss_change_pct", nlohmann::json(nullptr)), "%+.2f")
      << (r.value("peak_rss_scope", std::string("branch")) == "branch" ? "" : " (process)") << " | "
      << cell(r["capture_seconds"], "%.2f") << " | " << cell(r["fit_seconds"], "%.2f") << " | "
      << cell(r.value("intervention_seconds", nlohmann::json(nullptr)), "%.2f") << " | "
      << cell(r["updates"], "%.0f") << " |\n";
  }
  return o.str();
}

}  // namespace hw
