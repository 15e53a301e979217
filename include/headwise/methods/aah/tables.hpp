#pragma once
// The paper's Table 4 layout (Method | Val. loss | ACR | Token/s | Memory) from a finished
// `headwise experiment` directory (e.g. configs/experiment_aah_cpu.json's): per branch, in the
// order of results.json's summary, the mean over seeds of OUT/seed_<s>/<branch>/result.json's
// val_loss, of ACR (the mean "acr" of the branch's control-update reports,
// OUT/seed_<s>/<branch>/interventions/*.aah.json; 1 by definition for a branch without AAH
// reports, the paper's rule for full attention), of tokens/s (tokens per
// update / mean update time) and of the arena memory and peak RSS. A branch list of ablations
// gives Table 5's rows (read its val loss column).
#include <nlohmann/json.hpp>
#include <string>

namespace hw::aah {

// [{"branch", "val_loss", "acr", "tok_per_s", "memory_mb", "peak_rss_mb", "seeds"}, ...]
nlohmann::json table4_rows(const std::string& experiment_dir);
std::string table4_markdown(const nlohmann::json& rows);

}  // namespace hw::aah
