// SAF calibration reads the model only through its read-backs and copies: with the model on a
// guarded backend (host access to its memory crashes, see train/guarded_backend.hpp) the
// statistics and Gate-Taylor scores equal the plain CPU model's exactly, and the gradient
// arena comes back unchanged.
#include <catch2/catch.hpp>
#include <cstring>

#include "headwise/core/rng.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/methods/saf/calibration.hpp"
#include "train/guarded_backend.hpp"

using namespace hw;

namespace {

constexpr int kT = 16;

ModelConfig calib_config() {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 64;
  mc.block_size = 16;
  mc.vocab_size = 48;
  mc.init_std = 0.2;
  return mc;
}

saf::CalibSource source() {
  return [](int64_t i, int32_t* x, int32_t* y) {
    Rng r(77 + uint64_t(i));
    for (int t = 0; t < kT; ++t) x[t] = int32_t(r.below(48));
    for (int t = 0; t < kT; ++t) y[t] = t % 5 == 0 ? -1 : int32_t(r.below(48));
  };
}

}  // namespace

TEST_CASE("SAF calibration on a guarded backend equals the CPU model's, touching memory only by copies",
          "[saf][calib][device]") {
  test::GuardedBackend guard;
  Model<float> plain(calib_config(), cpu_backend<float>()), guarded(calib_config(), guard);
  plain.init_weights(9);
  guarded.init_weights(9);
  saf::CaptureOptions opt;
  opt.n_seqs = 5;
  opt.seq_len = kT;
  opt.batch = 2;
  opt.needs.kl = true;
  opt.needs.logit_variance = true;
  // Each pass's activation shape is allocated before arming (arenas must not move while armed):
  // calibration's forward-only one (its stream keeps the mode it finds), then the Gate-Taylor
  // pass's training one; some gradient contents the Gate-Taylor pass must restore.
  guarded.set_forward_only(true);
  guarded.reserve_activations(opt.batch, opt.seq_len);
  Rng rng(1);
  std::vector<float> g0(size_t(guarded.grads().bytes() / sizeof(float)));
  for (auto& v : g0) v = float(rng.normal());
  guard.copy_to_device(guarded.grads().base(), g0.data(), guarded.grads().bytes());
  std::memcpy(plain.grads().base(), g0.data(), plain.grads().bytes());
  auto watch_all = [&] {
    for (const Arena* a : {&guarded.params(), &guarded.grads(), &guarded.buffers(), &guarded.activations()})
      guard.watch(*a);
  };
  watch_all();
  REQUIRE(guard.guarded_bytes() > 200 * 1024);

  dist::LocalComm comm;
  std::vector<saf::HeadStatsAccumulator> stats_g, stats_p;
  saf::ScoreGrid gate_g, gate_p;
  {
    test::Armed armed(guard);
    stats_g = saf::capture_layers(guarded, source(), opt, 0, 2, comm);
  }
  guard.unwatch_all();
  guarded.set_forward_only(false);
  guarded.reserve_activations(opt.batch, opt.seq_len);
  watch_all();
  {
    test::Armed armed(guard);
    gate_g = saf::gate_taylor_scores(guarded, source(), opt, comm);
  }
  stats_p = saf::capture_layers(plain, source(), opt, 0, 2, comm);
  gate_p = saf::gate_taylor_scores(plain, source(), opt, comm);
  REQUIRE(stats_g.size() == stats_p.size());
  for (size_t i = 0; i < stats_g.size(); ++i) {
    CHECK(stats_g[i].count() == 5);
    CHECK(stats_g[i].mean_packed() == stats_p[i].mean_packed());
    CHECK(stats_g[i].logit_m2_packed() == stats_p[i].logit_m2_packed());
    CHECK(stats_g[i].variance_score() == stats_p[i].variance_score());
    CHECK(stats_g[i].kl_score() == stats_p[i].kl_score());
  }
  CHECK(gate_g == gate_p);
  CHECK(gate_g[1][2] > 0.0);
  CHECK(std::memcmp(guarded.grads().base(), g0.data(), guarded.grads().bytes()) == 0);
}
