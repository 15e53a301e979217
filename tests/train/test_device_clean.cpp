// Device-clean training: the model, AdamW, the trainer and checkpoints reach model memory only
// through backend ops and copies. A GuardedBackend makes every other host access a crash, and
// the run must equal the plain CPU backend's bit for bit (the guard only forwards).
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <csignal>
#include <cstdio>
#include <cstring>

#include "headwise/dist/local_comm.hpp"
#include "headwise/io/files.hpp"
#include "headwise/train/trainer.hpp"
#include "train/guarded_backend.hpp"
#include "train/train_test_util.hpp"

using namespace hw;

namespace {

// Wide enough that every arena spans several guarded pages.
nlohmann::json guarded_run_doc(const std::string& dir, int64_t chunk_rows) {
  test::write_text_like_shard(dir, "train_000.bin", 6000, 1, 96);
  test::write_text_like_shard(dir, "val_000.bin", 2000, 2, 96);
  nlohmann::json doc = nlohmann::json::parse(R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 64, "block_size": 32, "vocab_size": 96, "pos": "rope"},
    "train": {"micro_batch": 2, "seq_len": 32, "total_batch_tokens": 128, "steps": 4, "lr": 1e-2,
              "warmup_steps": 1, "eval_batches": 2, "seed": 7, "grad_clip": 0.5, "threads": 1},
    "data": {}
  })");
  doc["train"]["classifier_chunk_rows"] = chunk_rows;
  doc["data"] = {{"train", dir + "/train_*.bin"}, {"val", dir + "/val_*.bin"}, {"shuffle", true}};
  return doc;
}

void watch_all(test::GuardedBackend& g, Trainer& t) {
  for (const Arena* a : {&t.model().params(), &t.model().grads(), &t.model().buffers(), &t.model().activations(),
                         &t.optimizer().m(), &t.optimizer().v()})
    g.watch(*a);
}

bool same_block(const Arena& a, const Arena& b) {
  return a.bytes() == b.bytes() && std::memcmp(a.base(), b.base(), a.bytes()) == 0;
}

}  // namespace

TEST_CASE("training touches model memory only through the backend and equals the CPU backend bit for bit",
          "[train][device]") {
  const int64_t chunk_rows = GENERATE(0, 24);
  const std::string dir = test::temp_dir("guarded_" + std::to_string(chunk_rows));
  const RunConfig cfg = RunConfig::from_json(guarded_run_doc(dir, chunk_rows));
  dist::LocalComm comm;
  test::GuardedBackend guard;
  Trainer plain(cfg, "", comm);
  Trainer guarded(cfg, "", comm, nullptr, false, &guard);
  watch_all(guard, guarded);
  REQUIRE(guard.guarded_bytes() > 200 * 1024);  // most of the model's memory is guarded
  {
    test::Armed armed(guard);
    bool clipped = false;
    for (int step = 0; step < 4; ++step) {
      guard.reset_counts();
      double norm_p = 0.0, norm_g = 0.0;
      const double loss_p = plain.train_step(&norm_p);
      const double loss_g = guarded.train_step(&norm_g);
      CHECK(loss_g == loss_p);
      CHECK(norm_g == norm_p);
      clipped = clipped || norm_p > cfg.train.grad_clip;
      // A step copies in exactly the inputs and targets of its two micro-batches, reads nothing back.
      const auto c = guard.counts();
      CHECK(c.to_device == 4);
      CHECK(c.bytes_to_device == size_t(4 * 2 * 32) * sizeof(int32_t));
      CHECK(c.to_host == 0);
    }
    CHECK(clipped);  // the clip path ran too
    // Evaluation and checkpoints go through copies too.
    CHECK(guarded.eval().loss == plain.eval().loss);
    guarded.save_checkpoint(dir + "/guarded");
    plain.save_checkpoint(dir + "/plain");
    CHECK(guard.counts().to_host > 0);
  }
  CHECK(same_block(guarded.model().params(), plain.model().params()));
  CHECK(same_block(guarded.optimizer().m(), plain.optimizer().m()));
  CHECK(same_block(guarded.optimizer().v(), plain.optimizer().v()));
  for (const char* f : {"model.safetensors", "optimizer.safetensors"})
    CHECK(io::read_file(dir + "/guarded/" + f) == io::read_file(dir + "/plain/" + f));
}

TEST_CASE("the guarded backend turns a host read of watched memory into a crash", "[train][device]") {
  Arena a("watched");
  a.declare("x", {64 * 1024});
  a.allocate();
  test::GuardedBackend guard;
  guard.watch(a);
  REQUIRE(guard.guarded_bytes() > 0);
  const volatile float* mid = a.get("x").f32() + 32 * 1024;
  auto read_in_child = [&](bool armed) {
    std::fflush(nullptr);
    const pid_t pid = fork();
    if (pid == 0) {
      std::signal(SIGSEGV, SIG_DFL);  // die of the fault itself, not through the test framework
      if (armed) guard.arm();
      const float x = *mid;
      _exit(x == 0.0f ? 0 : 1);
    }
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
  };
  const int unarmed = read_in_child(false);
  CHECK((WIFEXITED(unarmed) && WEXITSTATUS(unarmed) == 0));
  const int armed = read_in_child(true);
  CHECK((WIFSIGNALED(armed) && WTERMSIG(armed) == SIGSEGV));
  // Through a copy the same memory is readable while armed.
  test::Armed on(guard);
  float x = 1.0f;
  guard.copy_to_host(&x, a.get("x").f32() + 32 * 1024, sizeof(float));
  CHECK(x == 0.0f);
}
