// Answer-only fine-tuning on a task file (task_finetune.hpp).
#include "headwise/eval/task_finetune.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <numeric>

#include "headwise/core/error.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/eval/loglikelihood.hpp"
#include "headwise/kernels/cpu.hpp"
#include "headwise/optim/adamw.hpp"

namespace hw::eval {

AnswerSequence answer_sequence(const McExample& ex, const EvalTokenizer& tok, int64_t T) {
  const size_t k = size_t(ex.label);
  const LlRequest r = encode_pair(tok, ex.contexts[k], ex.continuations[k]);
  check(!r.context.empty() && !r.continuation.empty(), "line " + std::to_string(ex.line) + ": the answer has no tokens");
  check(int64_t(r.continuation.size()) <= T, "line " + std::to_string(ex.line) + ": the answer has " +
                                                  std::to_string(r.continuation.size()) +
                                                  " tokens, more than the context of " + std::to_string(T));
  std::vector<int32_t> full = r.context;
  full.insert(full.end(), r.continuation.begin(), r.continuation.end());
  if (int64_t(full.size()) > T + 1) full.erase(full.begin(), full.end() - (T + 1));
  AnswerSequence s;
  s.inputs.assign(size_t(T), 0);
  s.targets.assign(size_t(T), cpu::kIgnoreTarget);
  const size_t n = full.size() - 1, first_answer = n - r.continuation.size();
  for (size_t i = 0; i < n; ++i) {
    s.inputs[i] = full[i];
    if (i >= first_answer) s.targets[i] = full[i + 1];
  }
  return s;
}

std::vector<double> finetune_on_task(Model<float>& model, const TaskFile& task, const EvalTokenizer& tok,
                                     const FinetuneOptions& opt, const std::string& metrics_path) {
  check(opt.steps >= 1 && opt.batch >= 1, "fine-tuning needs steps >= 1 and batch >= 1");
  const int64_t block = model.config().block_size;
  int64_t T = opt.context > 0 ? opt.context : block;
  check(T <= block, "--context " + std::to_string(T) + " exceeds the model's block size " + std::to_string(block));
  std::vector<AnswerSequence> seqs;
  int64_t longest = 1;
  int64_t skipped = 0;
  for (const McExample& ex : task.examples) {
    const LlRequest r = encode_pair(tok, ex.contexts[size_t(ex.label)], ex.continuations[size_t(ex.label)]);
    if (int64_t(r.continuation.size()) > T) {  // the answer alone does not fit: nothing to learn from
      ++skipped;
      continue;
    }
    try {
      seqs.push_back(answer_sequence(ex, tok, T));
    } catch (const Error& e) {
      fail(task.path + ": " + e.what());
    }
    const auto& t = seqs.back().targets;
    longest = std::max<int64_t>(longest, int64_t(std::find_if(t.rbegin(), t.rend(), [](int32_t v) {
                                                   return v != cpu::kIgnoreTarget;
                                                 }).base() - t.begin()));
  }
  check(!seqs.empty(), task.path + ": no example's answer fits the context of " + std::to_string(T) + " tokens");
  if (skipped > 0)
    spdlog::info("finetune: skipped {} of {} examples whose answer alone is longer than {} tokens", skipped,
                 task.examples.size(), T);
  T = std::min(T, longest);  // no step runs over padding every sequence has
  AdamW adam(AdamWConfig{0.9, 0.95, 1e-8, opt.weight_decay}, model.ops(), model.params());
  const LrSchedule schedule{opt.lr, opt.min_lr, opt.warmup_steps, opt.steps};
  std::ofstream metrics;
  if (!metrics_path.empty()) metrics.open(metrics_path, std::ios::app);
  std::vector<size_t> order(seqs.size());
  std::iota(order.begin(), order.end(), size_t(0));
  Rng rng(opt.seed);
  size_t next = order.size();  // start with a shuffle
  std::vector<int32_t> x(size_t(opt.batch * T)), y(size_t(opt.batch * T));
  std::vector<double> losses;
  for (int64_t step = 0; step < opt.steps; ++step) {
    for (int64_t b = 0; b < opt.batch; ++b) {
      if (next == order.size()) {  // Fisher-Yates per epoch
        for (size_t i = order.size(); i-- > 1;) std::swap(order[i], order[size_t(rng.below(uint64_t(i + 1)))]);
        next = 0;
      }
      const AnswerSequence& s = seqs[order[next++]];
      std::copy_n(s.inputs.begin(), T, x.begin() + b * T);
      std::copy_n(s.targets.begin(), T, y.begin() + b * T);
    }
    model.zero_grads();
    const double loss = model.forward_backward(x.data(), y.data(), opt.batch, T, 1.0);
    check(std::isfinite(loss), "fine-tuning: loss is " + std::to_string(loss) + " at update " + std::to_string(step) +
                                   " (lower --lr)");
    const double norm = grad_global_norm(model.ops(), model.grads());
    clip_grads(model.ops(), model.grads(), norm, opt.grad_clip);
    const double lr = schedule.at(step);
    adam.step(model.params(), model.grads(), lr, step + 1);
    losses.push_back(loss);
    if (metrics.is_open())
      metrics << nlohmann::json{{"step", step}, {"loss", loss}, {"lr", lr}, {"grad_norm", norm}}.dump() << "\n";
    if (step % opt.log_every == 0 || step + 1 == opt.steps)
      spdlog::info("finetune update {:>5}/{} | answer loss {:.4f} | lr {:.2e} | norm {:.3f}", step + 1, opt.steps, loss,
                   lr, norm);
  }
  return losses;
}

}  // namespace hw::eval
