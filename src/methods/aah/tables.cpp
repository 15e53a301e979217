#include "headwise/methods/aah/tables.hpp"

#include <cstdio>
#include <filesystem>
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/core/json_fields.hpp"

namespace hw::aah {

namespace {

double number(const nlohmann::json& j, const char* key, const std::string& where) {
  check(j.contains(key) && j[key].is_number(), where + ": missing number '" + key + "'");
  return j[key].get<double>();
}

}  // namespace

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
