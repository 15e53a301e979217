#include "headwise/methods/aah/tables.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/data/loader.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/aah/report.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/train/trainer.hpp"

namespace hw::aah {

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.contains(key) && j[key].is_number(), where + ": missing number '" + key + "'");
  return j[key].get<double>();
}

const nlohmann::json& experiment_results(const std::string& dir, nlohmann::json& holder) {
  const std::string results_path = dir + "/results.json";
  check(std::filesystem::exists(results_path), results_path + ": not found (a finished `headwise experiment` directory)");
  holder = read_json_file(results_path);
  check(holder.contains("summary") && holder.contains("seeds"), results_path + ": missing 'summary' or 'seeds'");
  check(!holder["summary"].empty() && !holder["seeds"].empty(), results_path + ": no branches or no seeds");
  return holder;
}

// The branch's last checkpoint directory (the highest step_<N>).
std::string final_checkpoint(const std::string& branch_dir) {
  const std::string dir = branch_dir + "/checkpoints";
  check(std::filesystem::is_directory(dir), dir + ": not found (the branch wrote no checkpoint)");
  int64_t best = -1;
  std::string path;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    const std::string name = e.path().filename().string();
    if (name.rfind("step_", 0) != 0) continue;
    const std::string digits = name.substr(5);
    if (digits.empty() || digits.find_first_not_of("0123456789") != std::string::npos) continue;
    const int64_t step = std::stoll(digits);
    if (step > best) best = step, path = e.path().string();
  }
  check(best >= 0, dir + ": no step_<N> checkpoint");
  return path;
}

}  // namespace

nlohmann::json table5_rows(const std::string& dir) {
  nlohmann::json holder;
  const nlohmann::json& results = experiment_results(dir, holder);
  nlohmann::json rows = nlohmann::json::array();
  double first = 0;
  for (const auto& s : results["summary"]) {
    const std::string branch = s.at("branch").get<std::string>();
    double loss = 0;
    int n = 0;
    for (const auto& seed : results["seeds"]) {
      const std::string path = dir + "/seed_" + seed.at("seed").dump() + "/" + branch + "/result.json";
      check(std::filesystem::exists(path), path + ": not found");
      loss += number(read_json_file(path), "val_loss", path);
      ++n;
    }
    loss /= n;
    if (rows.empty()) first = loss;
    rows.push_back({{"branch", branch}, {"val_loss", loss}, {"delta_vs_first", loss - first}, {"seeds", n}});
  }
  return rows;
}

std::string table5_markdown(const nlohmann::json& rows) {
  std::ostringstream o;
  o << "| Row | Val. loss | vs " << (rows.empty() ? "" : rows[0]["branch"].get<std::string>())
    << " |\n|---|---|---|\n";
  char buf[256];
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "| %s | %.4f | %+.4f |\n", r["branch"].get<std::string>().c_str(),
                  r["val_loss"].get<double>(), r["delta_vs_first"].get<double>());
    o << buf;
  }
  return o.str();
}

nlohmann::json table6_rows(const std::string& dir, int64_t batches, int64_t micro_batch) {
  check(batches >= 1 && micro_batch >= 1, "Table 6: --batches and --micro-batch must be >= 1");
  nlohmann::json holder;
  const nlohmann::json& results = experiment_results(dir, holder);
  nlohmann::json rows = nlohmann::json::array();
  dist::LocalComm comm;
  for (const auto& s : results["summary"]) {
    const std::string branch = s.at("branch").get<std::string>();
    double loss = 0, ppl = 0, acr = 0, tps = 0;
    int n = 0;
    for (const auto& seed : results["seeds"]) {
      const std::string branch_dir = dir + "/seed_" + seed.at("seed").dump() + "/" + branch;
      // A `headwise train` layout (config.json, checkpoints/step_<N>) or `headwise experiment`'s
      // own: no config.json per branch (the run config is results.json's "config") and the final
      // checkpoint in final/ (experiment.save_final).
      std::string cfg_path = branch_dir + "/config.json";
      nlohmann::json cfg;
      if (std::filesystem::exists(cfg_path)) {
        cfg = read_json_file(cfg_path);
      } else {
        check(results.contains("config"), cfg_path + ": not found, and " + dir + "/results.json has no 'config'");
        cfg = results["config"];
        cfg_path = dir + "/results.json (config)";
      }
      check(cfg.contains("data") && cfg["data"].contains("val") && cfg["data"]["val"].is_string(),
            cfg_path + ": missing data.val");
      check(cfg.contains("train") && cfg["train"].contains("seq_len"), cfg_path + ": missing train.seq_len");
      const std::string val = cfg["data"]["val"].get<std::string>();
      const int64_t T = cfg["train"]["seq_len"].get<int64_t>();
      const std::string ckpt = std::filesystem::exists(branch_dir + "/final/model.safetensors")
                                   ? branch_dir + "/final"
                                   : final_checkpoint(branch_dir);
      auto model = load_model(ckpt, cpu_backend<float>(), /*trainable=*/false);
      data::TokenLoader loader(val, micro_batch, T, false, 0);
      check(batches <= loader.batches_per_epoch(), "Table 6: --batches " + std::to_string(batches) + " exceeds the " +
                                                       std::to_string(loader.batches_per_epoch()) + " batches in " + val);
      const Stopwatch timer;
      const EvalResult r = evaluate(*model, loader, batches, micro_batch, T, comm);
      const double sec = timer.seconds();
      loss += r.loss;
      ppl += r.ppl;
      tps += double(r.tokens) / std::max(sec, 1e-9);
      acr += plan_report(model->config().head_plan, T, model->config().head_dim(), {})["acr"].get<double>();
      ++n;
    }
    rows.push_back({{"branch", branch},
                    {"val_loss", loss / n},
                    {"val_ppl", ppl / n},
                    {"acr", acr / n},
                    {"tok_per_s", tps / n},
                    {"seeds", n}});
  }
  return rows;
}

std::string table6_markdown(const nlohmann::json& rows) {
  std::ostringstream o;
  o << "| Method | Val. loss | Val. ppl | ACR | Token/s |\n|---|---|---|---|---|\n";
  char buf[256];
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "| %s | %.4f | %.2f | %.4f | %.0f |\n", r["branch"].get<std::string>().c_str(),
                  r["val_loss"].get<double>(), r["val_ppl"].get<double>(), r["acr"].get<double>(),
                  r["tok_per_s"].get<double>());
    o << buf;
  }
  return o.str();
}

nlohmann::json table4_rows(const std::string& dir) {
  const std::string results_path = dir + "/results.json";
  check(std::filesystem::exists(results_path), results_path + ": not found (a finished `headwise experiment` directory)");
  const nlohmann::json results = read_json_file(results_path);
  check(results.contains("summary") && results.contains("seeds"), results_path + ": missing 'summary' or 'seeds'");
  nlohmann::json rows = nlohmann::json::array();
  for (const auto& s : results["summary"]) {
    const std::string branch = s.at("branch").get<std::string>();
    double loss = 0, acr = 0, tps = 0, mem = 0, rss = 0;
    int n = 0;
    for (const auto& seed : results["seeds"]) {
      const std::string path = dir + "/seed_" + seed.at("seed").dump() + "/" + branch + "/result.json";
      check(std::filesystem::exists(path), path + ": not found");
      const nlohmann::json r = read_json_file(path);
      loss += number(r, "val_loss", path);
      // The branch's own AAH reports (RUN/interventions/step_<N>.<k>.aah.json).
      double a = 0;
      int reports = 0;
      const std::string iv = dir + "/seed_" + seed.at("seed").dump() + "/" + branch + "/interventions";
      if (std::filesystem::is_directory(iv))
        for (const auto& e : std::filesystem::directory_iterator(iv)) {
          const std::string name = e.path().filename().string();
          if (name.size() < 9 || name.compare(name.size() - 9, 9, ".aah.json") != 0) continue;
          const nlohmann::json rep = read_json_file(e.path().string());
          if (!rep.value("control_update", false)) continue;
          a += number(rep, "acr", e.path().string());
          ++reports;
        }
      acr += reports > 0 ? a / reports : 1.0;
      const double steps = number(r, "steps", path), ms = r.value("mean_update_ms", nlohmann::json()).is_number()
                                                             ? r["mean_update_ms"].get<double>()
                                                             : 0.0;
      tps += ms > 0 && steps > 0 ? number(r, "tokens", path) / steps / (ms / 1000.0) : 0.0;
      mem += r.value("memory_bytes", nlohmann::json()).is_number() ? r["memory_bytes"].get<double>() / 1e6 : 0.0;
      rss += r.value("peak_rss_bytes", nlohmann::json()).is_number() ? r["peak_rss_bytes"].get<double>() / 1e6 : 0.0;
      ++n;
    }
    check(n > 0, results_path + ": no seeds");
    rows.push_back({{"branch", branch},
                    {"val_loss", loss / n},
                    {"acr", acr / n},
                    {"tok_per_s", tps / n},
                    {"memory_mb", mem / n},
                    {"peak_rss_mb", rss / n},
                    {"seeds", n}});
  }
  return rows;
}

std::string table4_markdown(const nlohmann::json& rows) {
  std::ostringstream o;
  o << "| Method | Val. loss | ACR | Token/s | Memory (MB) | Peak RSS (MB) |\n|---|---|---|---|---|---|\n";
  char buf[256];
  for (const auto& r : rows) {
    std::snprintf(buf, sizeof buf, "| %s | %.4f | %.4f | %.0f | %.1f | %.1f |\n", r["branch"].get<std::string>().c_str(),
                  r["val_loss"].get<double>(), r["acr"].get<double>(), r["tok_per_s"].get<double>(),
                  r["memory_mb"].get<double>(), r["peak_rss_mb"].get<double>());
    o << buf;
  }
  return o.str();
}

}  // namespace hw::aah
