#include "headwise/data/mqar/mqar_adapt.hpp"

#include "data/seed_mix.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstdio>
#include "headwise/io/files.hpp"
#include <sstream>

#include "headwise/core/error.hpp"
#include "headwise/methods/method_registry.hpp"
#include "headwise/optim/adamw.hpp"

namespace hw {

namespace {
// Separate example streams for adaptation, evaluation and calibration.
uint64_t eval_seed(uint64_t seed, int pairs) { return data::derive_seed(seed, data::Stream::MqarEval, uint64_t(pairs)); }
uint64_t calib_seed(uint64_t seed) { return data::derive_seed(seed, data::Stream::MqarCalib, 0); }
}  // namespace

void MqarOptions::validate(const ModelConfig& model) const {
  check(seq_len >= 4 && seq_len % 2 == 0 && seq_len <= model.block_size,
        "mqar: --seq-len " + std::to_string(seq_len) + " must be even and within the model's block size " +
            std::to_string(model.block_size));
  check(vocab >= 4 && vocab <= model.vocab_size, "mqar: --vocab " + std::to_string(vocab) +
                                                     " must be in [4, the model's vocab_size " +
                                                     std::to_string(model.vocab_size) + "]");
  check(train_pairs >= 1 && 4 * int64_t(train_pairs) <= seq_len,
        "mqar: --train-pairs " + std::to_string(train_pairs) + " must be in [1, seq_len / 4]");
  for (int p : eval_pairs)
    check(p >= 1 && 4 * int64_t(p) <= seq_len && p <= vocab / 2 - 1,
          "mqar: --eval-pairs value " + std::to_string(p) + " must be in [1, seq_len / 4] and fit the vocabulary");
  check(!eval_pairs.empty(), "mqar: --eval-pairs is empty");
  check(steps >= 0 && batch >= 1 && eval_examples >= 1 && eval_batch >= 1 && log_every >= 1,
        "mqar: --steps must be >= 0 and --batch, --eval-examples, --eval-batch positive");
  check(lr > 0 && weight_decay >= 0 && grad_clip >= 0, "mqar: --lr must be positive, --weight-decay and --grad-clip >= 0");
  check(warmup_steps >= 0, "mqar: --warmup-steps must be >= 0");
}

std::vector<int32_t> mqar_loss_targets(const data::MqarBatch& b) {
  std::vector<int32_t> t(b.targets.size(), -1);
  for (size_t i = 0; i < t.size(); ++i)
    if (b.query_mask[i]) t[i] = b.targets[i];
  return t;
}

std::optional<PlanChange> apply_method_on_mqar(Model<float>& model, nlohmann::json method, const MqarOptions& opt,
                                               dist::Comm& comm, const std::string& what) {
  opt.validate(model.config());
  check(method.is_object() && method.contains("name") && method["name"].is_string(),
        what + ": the method must be an object with a \"name\"");
  RunConfig rc;
  rc.model = model.config();
  rc.train.seq_len = opt.seq_len;
  rc.train.micro_batch = opt.batch;
  rc.train.steps = 1;  // one update long, so "acts at step 0" is inside the run
  if (!method.contains("at_step") && !method.contains("at_fraction")) method["at_step"] = 0;
  const std::string name = method["name"].get<std::string>();
  std::unique_ptr<Planner> planner = find_method(name, "method").make(method, "method", rc);
  check(planner->acts_at(0), what + ": method '" + name + "' does not act at step 0 with this schedule");
  const int64_t L = opt.seq_len;
  const int pairs = opt.train_pairs, vocab = opt.vocab;
  const uint64_t seed = calib_seed(opt.seed);
  CalibrationSequences sequences;
  sequences.seq_len = L;
  sequences.fetch = [L, pairs, vocab, seed](int64_t i, int32_t* x, int32_t* y) {
    const data::MqarBatch b = data::generate_mqar(1, L, pairs, vocab, seed, i);
    const std::vector<int32_t> t = mqar_loss_targets(b);
    std::copy(b.inputs.begin(), b.inputs.end(), x);
    std::copy(t.begin(), t.end(), y);
  };
  PlannerContext ctx{model, rc, comm, 0, &sequences};
  std::optional<PlanChange> change = planner->act(ctx);
  if (change) model.install_plan(change->plan, change->extras);
  return change;
}

std::vector<double> adapt_mqar(Model<float>& model, const MqarOptions& opt, const std::string& metrics_path) {
  opt.validate(model.config());
  AdamW adam(AdamWConfig{opt.beta1, opt.beta2, opt.eps, opt.weight_decay}, model.ops(), model.params());
  io::AppendFile metrics;
  if (!metrics_path.empty()) metrics = io::AppendFile(metrics_path, /*truncate=*/true);
  const LrSchedule schedule{opt.lr, /*min_lr=*/opt.lr, opt.warmup_steps, std::max<int64_t>(opt.steps, 1)};
  std::vector<double> losses;
  for (int64_t step = 0; step < opt.steps; ++step) {
    const data::MqarBatch b = data::generate_mqar(opt.batch, opt.seq_len, opt.train_pairs, opt.vocab, opt.seed,
                                                  step * opt.batch);
    const std::vector<int32_t> targets = mqar_loss_targets(b);
    model.zero_grads();
    const double loss = model.forward_backward(b.inputs.data(), targets.data(), opt.batch, opt.seq_len, 1.0);
    check(std::isfinite(loss), "mqar: loss is " + std::to_string(loss) + " at update " + std::to_string(step) +
                                   " (lower --lr)");
    const double norm = grad_global_norm(model.ops(), model.grads());
    clip_grads(model.ops(), model.grads(), norm, opt.grad_clip);
    adam.step(model.params(), model.grads(), schedule.at(step), step + 1);
    losses.push_back(loss);
    if (metrics.is_open()) metrics.write_line(nlohmann::json{{"step", step}, {"loss", loss}, {"grad_norm", norm}}.dump());
    if (step % opt.log_every == 0 || step + 1 == opt.steps)
      spdlog::info("mqar update {:>5}/{} | query loss {:.4f} | norm {:.3f}", step + 1, opt.steps, loss, norm);
  }
  return losses;
}

data::MqarBatch mqar_eval_examples(const MqarOptions& opt, int pairs, int64_t start, int64_t n) {
  return data::generate_mqar(n, opt.seq_len, pairs, opt.vocab, eval_seed(opt.seed, pairs), start);
}

std::vector<MqarAccuracy> evaluate_mqar(Model<float>& model, const MqarOptions& opt) {
  opt.validate(model.config());
  std::vector<MqarAccuracy> out;
  std::vector<float> logits;  // read back from the model's device
  for (int pairs : opt.eval_pairs) {
    MqarAccuracy a;
    a.pairs = pairs;
    for (int64_t start = 0; start < opt.eval_examples; start += opt.eval_batch) {
      const int64_t n = std::min(opt.eval_batch, opt.eval_examples - start);
      const data::MqarBatch b = mqar_eval_examples(opt, pairs, start, n);
      model.forward(b.inputs.data(), nullptr, n, opt.seq_len);
      model.read_logits(logits);
      const data::MqarScore s = data::score_mqar_logits(b, logits.data(), model.config().vocab_size);
      a.correct += s.correct;
      a.total += s.total;
    }
    out.push_back(a);
  }
  return out;
}

std::string mqar_table_markdown(const std::vector<MqarAccuracy>& acc, const std::string& label) {
  std::ostringstream o;
  o << "| Pairs | " << (label.empty() ? "Accuracy (%)" : label + " accuracy (%)") << " | Queries |\n|---|---|---|\n";
  for (const auto& a : acc) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2f", 100.0 * a.accuracy());
    o << "| " << a.pairs << " | " << buf << " | " << a.total << " |\n";
  }
  return o.str();
}

}  // namespace hw
