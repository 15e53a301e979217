// Checkpoints and resume: the trainer state's JSON, a run started from another run's weights
// (init_from), resume (weights, optimizer moments or ZeRO-1 shards, data position, planners'
// states), and the collective checkpoint write (DIR.tmp, then renamed).
#include <spdlog/spdlog.h>

#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/adapter_files.hpp"
#include "headwise/model/checkpoint.hpp"
#include "headwise/model/device_copy.hpp"
#include "headwise/train/run_folder.hpp"
#include "headwise/train/trainer.hpp"
#include "train/trainer_blocks.hpp"

namespace hw {

namespace fs = std::filesystem;
using trainer_detail::block_of;
using trainer_detail::floats_of;
using trainer_detail::shard_file;

nlohmann::json TrainerState::to_json() const {
  nlohmann::json j = {{"step", step}, {"next_batch", next_batch}, {"tokens", tokens}};
  if (best_step >= 0) j["best"] = {{"step", best_step}, {"val_loss", best_val_loss}};
  return j;
}

TrainerState TrainerState::from_json(const nlohmann::json& j, const std::string& path) {
  TrainerState s;
  for (const char* k : {"step", "next_batch", "tokens"})
    check(j.contains(k) && j[k].is_number_integer(), path + ": missing integer '" + k + "'");
  // Counters, never negative (a negative step or data position would index before the start).
  s.step = json_int(j["step"], path + ": step", 0);
  s.next_batch = json_int(j["next_batch"], path + ": next_batch", 0);
  s.tokens = json_int(j["tokens"], path + ": tokens", 0);
  if (j.contains("best")) {  // train.keep_best: absent before the first evaluation
    const nlohmann::json& b = j["best"];
    check(b.is_object() && b.contains("step") && b["step"].is_number_integer() && b.contains("val_loss") &&
              b["val_loss"].is_number(),
          path + ": 'best' must hold an integer step and a number val_loss");
    s.best_step = json_int(b["step"], path + ": best.step", 0);
    s.best_val_loss = b["val_loss"].get<double>();
  }
  return s;
}

void Trainer::init_from(const std::string& dir, const attn::HeadPlan* plan) {
  const ModelConfig ck = read_checkpoint_config(dir);
  check(ck.n_layer == cfg_.model.n_layer && ck.n_head == cfg_.model.n_head && ck.n_embd == cfg_.model.n_embd &&
            ck.vocab_size == cfg_.model.vocab_size && ck.block_size == cfg_.model.block_size &&
            ck.kv_heads() == cfg_.model.kv_heads() && ck.pos == cfg_.model.pos && ck.bias == cfg_.model.bias,
        "--init-from " + dir + ": checkpoint shape (n_layer " + std::to_string(ck.n_layer) + ", n_head " +
            std::to_string(ck.n_head) + ", n_embd " + std::to_string(ck.n_embd) + ", vocab " +
            std::to_string(ck.vocab_size) + ", block " + std::to_string(ck.block_size) +
            ") does not match the config's model section");
  // Adapters: the checkpoint's own (read back), or the config's on a checkpoint without any
  // (fine-tuning a base model: fresh adapters, base weights as saved).
  // Their shape (rank, alpha, layers, targets) is the checkpoint's; dropout and freeze_base are the
  // run's to choose.
  const LoraConfig wanted = cfg_.model.lora;  // (a copy: cfg_.model becomes the checkpoint's)
  const bool same_shape = ck.lora.rank == wanted.rank && ck.lora.alpha == wanted.alpha &&
                          ck.lora.layers == wanted.layers && ck.lora.targets == wanted.targets;
  check(!ck.lora.enabled() || !wanted.enabled() || same_shape,
        "--init-from " + dir + ": the checkpoint's LoRA adapters (" + ck.lora.to_json().dump() +
            ") differ from the config's model.lora (" + wanted.to_json().dump() + "); merge them first (headwise merge)");
  io::SafetensorsSet st(dir);
  ModelConfig ck_run = ck;
  if (ck.lora.enabled() && wanted.enabled()) {
    ck_run.lora.dropout = wanted.dropout;
    ck_run.lora.freeze_base = wanted.freeze_base;
  }
  cfg_.model = ck_run;
  const HeadExtras extras = read_head_extras(st, ck);
  opt_.reset();  // free the fresh model's memory before the checkpoint's is allocated
  model_.reset();
  model_ = make_model(ck_run, extras);
  load_weights(*model_, st);
  // The run's own plan on the pretrained weights (new heads take their defaults).
  if (plan && *plan != model_->config().head_plan) model_->install_plan(*plan, model_->head_extras());
  if (ck.lora.enabled())
    load_adapter_files(*model_, dir);
  else if (wanted.enabled())
    model_->add_adapters(wanted, uint64_t(cfg_.train.seed));
  cfg_.model = model_->config();
  make_buckets();
  make_optimizer();
  model_->reserve_activations(cfg_.train.micro_batch, cfg_.train.seq_len);
}

void Trainer::resume(const std::string& dir) {
  init_from(dir);
  const std::string path = dir + "/trainer.json";
  check(fs::exists(path), "checkpoint " + dir + ": missing trainer.json");
  const nlohmann::json j = read_json(path, path);
  check(j.is_object(), path + ": not a JSON object");
  state_ = TrainerState::from_json(j, path);
  // A full optimizer.safetensors resumes on any number of ranks, with or without ZeRO-1 (each
  // rank then uses its shard of it). Sharded state only fits the shards it was cut into.
  check(!j.contains("zero1") || j["zero1"].is_boolean(), path + ": 'zero1' must be true or false");
  if (j.value("zero1", false)) {
    check(j.contains("world"), path + ": missing integer 'world'");
    const int saved = int(json_int(j["world"], path + ": world", 1, INT32_MAX));
    check(saved == comm_.world(), path + ": the optimizer state is sharded over " + std::to_string(saved) +
                                      " ranks (train.zero1); resume on " + std::to_string(saved) + " ranks, not " +
                                      std::to_string(comm_.world()));
    check(zero1_, path + ": the optimizer state is sharded (train.zero1); resume with --set train.zero1=true");
    load_optimizer_shard(shard_file(dir, comm_.rank()));
  } else if (zero1_) {
    // A full optimizer.safetensors on ZeRO-1 ranks: load it laid out like the parameter block
    // (temporarily full size), then keep this rank's slice.
    auto full_m = arena_like(model_->params(), "adam.m.full");
    auto full_v = arena_like(model_->params(), "adam.v.full");
    load_moments(*model_, *full_m, *full_v, dir + "/optimizer.safetensors");
    keep_own_shard(*full_m, opt_->m());
    keep_own_shard(*full_v, opt_->v());
  } else {
    load_moments(*model_, opt_->m(), opt_->v(), dir + "/optimizer.safetensors");
  }
  restore_planners(j, path);
  // A stop right after the resume needs no new checkpoint when the one resumed is this run's own.
  std::error_code ec;
  const std::string own = out_dir_ + "/checkpoints/step_" + std::to_string(state_.step);
  resumed_step_ = !out_dir_.empty() && fs::exists(own, ec) && fs::equivalent(dir, own, ec) ? state_.step : -1;
  spdlog::info("resumed from {} at step {}", dir, state_.step);
  // The run's record continues from the checkpoint: what the earlier run logged past it (the
  // updates about to be redone) goes, so every step appears once.
  if (!out_dir_.empty() && comm_.rank() == 0) {
    const int64_t dropped = truncate_run_record(out_dir_, state_.step, cfg_.train.steps);
    if (dropped > 0)
      spdlog::info("{}/metrics.jsonl: kept the lines before step {}, dropped {} after it", out_dir_, state_.step,
                   dropped);
  }
}

nlohmann::json Trainer::planner_states() const {
  nlohmann::json a = nlohmann::json::array();
  for (const auto& p : planners_) a.push_back({{"name", p->name()}, {"state", p->state()}});
  return a;
}

void Trainer::restore_planners(const nlohmann::json& trainer_json, const std::string& path) {
  const nlohmann::json saved = trainer_json.value("planners", nlohmann::json::array());
  check(saved.is_array(), path + ": 'planners' must be a list, got " + json_brief(saved));
  auto entry = [&](size_t k) -> const nlohmann::json& {
    check(saved[k].is_object(), path + ": planners[" + std::to_string(k) + "] must be an object, got " +
                                    json_brief(saved[k]));
    return saved[k];
  };
  bool any_state = false;
  for (size_t k = 0; k < saved.size(); ++k) any_state = any_state || !entry(k).value("state", nlohmann::json()).is_null();
  if (!any_state && saved.size() != planners_.size()) return;  // nothing to carry over
  check(saved.size() == planners_.size(),
        path + ": the checkpoint holds the state of " + std::to_string(saved.size()) +
            " planners, this run has " + std::to_string(planners_.size()) + " (resume with the same method list)");
  for (size_t k = 0; k < planners_.size(); ++k) {
    const std::string where = path + ": planners[" + std::to_string(k) + "]";
    const nlohmann::json& e = entry(k);
    const std::string name = e.contains("name") ? json_string(e["name"], where + ".name") : "";
    check(name == planners_[k]->name(), path + ": planner " + std::to_string(k) + " is '" + text_brief(name) +
                                            "' in the checkpoint and '" + planners_[k]->name() + "' in this run");
    try {
      planners_[k]->restore(e.value("state", nlohmann::json()));
    } catch (const Error& err) {
      fail(where + ".state: " + err.what());
    }
  }
}

// Every rank writes into DIR.tmp, then rank 0 renames it to DIR once all have finished, so DIR
// is always either the previous complete checkpoint or the new complete one. Collective.
void Trainer::save_checkpoint(const std::string& dir) {
  const bool main_rank = comm_.rank() == 0;
  // Rank 0 speaks for every replica: make sure they really are replicas (a rank that drifted
  // would otherwise be lost silently).
  if (comm_.world() > 1) {
    const Arena& p = model_->params();
    const std::vector<float> host = read_device(*ops_, block_of(p), floats_of(p));
    check(comm_.all_equal(host.data(), int64_t(p.bytes())),
          "ranks hold different parameters at step " + std::to_string(state_.step) + " (checkpoint " + dir + ")");
  }
  const std::string tmp = dir + ".tmp";
  if (main_rank) {
    io::ensure_dir(fs::path(dir).parent_path().string());  // RUN/checkpoints: not a link to elsewhere
    io::fresh_dir(tmp);
  }
  comm_.barrier();
  if (main_rank) {
    save_model_files(*model_, tmp);
    if (!zero1_) save_moments(*model_, opt_->m(), opt_->v(), tmp + "/optimizer.safetensors");
    nlohmann::json tj = state_.to_json();
    tj["world"] = comm_.world();
    tj["zero1"] = zero1_;
    tj["run_config"] = config().to_json();
    tj["planners"] = planner_states();
    io::write_file_atomic(tmp + "/trainer.json", tj.dump(2) + "\n");
    if (!tokenizer_json_.empty()) {  // as save_pretrained does: generate and transformers find it
      io::copy_file_atomic(tokenizer_json_, tmp + "/tokenizer.json");
    }
  }
  if (zero1_) save_optimizer_shard(shard_file(tmp, comm_.rank()));
  comm_.barrier();
  if (main_rank) io::replace_dir_atomic(tmp, dir);
  comm_.barrier();
}

}  // namespace hw
