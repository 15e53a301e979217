#pragma once
// The paper's Table 4 layout (Method | Val. loss | ACR | Token/s | Memory) from a finished
// `headwise experiment` directory (e.g. configs/experiment_aah_cpu.json's): per branch, in the
// order of results.json's summary, the mean over seeds of OUT/seed_<s>/<branch>/result.json's
// val_loss, of ACR (the mean "acr" of the branch's control-update reports,
// OUT/seed_<s>/<branch>/interventions/*.aah.json; 1 by definition for a branch without AAH
// reports, the paper's rule for full attention), of tokens/s (tokens per
// update / mean update time) and of the arena memory and peak RSS.
// Table 5 (screening ablations): per branch the mean val loss and its change against the first
// branch (the reference row), from the same files.
// Table 6 (inference): per branch the final checkpoint (the highest
// OUT/seed_<s>/<branch>/checkpoints/step_<N>) evaluated forward-only on the first `batches`
// micro-batches of the branch's validation shards (its config.json's data.val) at its
// train.seq_len: val loss, val PPL, ACR of the final plan (attention/cost.hpp's rectangle
// definition) and tokens/s of that forward-only pass; means over seeds.
#include <nlohmann/json.hpp>
#include <string>

namespace hw::aah {

// [{"branch", "val_loss", "acr", "tok_per_s", "memory_mb", "peak_rss_mb", "seeds"}, ...]
nlohmann::json table4_rows(const std::string& experiment_dir);
std::string table4_markdown(const nlohmann::json& rows);

// [{"branch", "val_loss", "delta_vs_first", "seeds"}, ...]
nlohmann::json table5_rows(const std::string& experiment_dir);
std::string table5_markdown(const nlohmann::json& rows);

// [{"branch", "val_loss", "val_ppl", "acr", "tok_per_s", "seeds"}, ...]; batches, micro_batch >= 1.
nlohmann::json table6_rows(const std::string& experiment_dir, int64_t batches, int64_t micro_batch);
std::string table6_markdown(const nlohmann::json& rows);

}  // namespace hw::aah
