// Calibration streams windows layer by layer (WindowStream): the memory a capture holds does not
// grow with the number of layers (forward-only activations: one layer's tensors shared by all
// layers; the windows' layer inputs: 2 x B*T x n_embd per batch), and what it reads equals an
// ordinary forward's QKV bit for bit, on GPT-2 and on a Qwen3-style (GQA, RoPE, SwiGLU, q/k norm) model.
#include <catch2/catch.hpp>
#include <cstring>

#include "headwise/calibration/window_stream.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/oal/capture.hpp"
#include "headwise/methods/saf/calibration.hpp"

using namespace hw;

namespace {

constexpr int kT = 24;

std::unique_ptr<Model<float>> model_of(int n_layer, bool qwen) {
  ModelConfig mc = ModelConfig::for_family(qwen ? "qwen3" : "gpt2");  // qwen3: GQA, RoPE, SwiGLU, q/k norm
  mc.n_layer = n_layer;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 32;
  mc.vocab_size = 48;
  mc.init_std = 0.25;
  if (qwen) {
    mc.n_kv_head = 2;
    mc.intermediate_size = 48;
  }
  auto m = std::make_unique<Model<float>>(mc, cpu_backend<float>());
  m->init_weights(5);
  return m;
}

void fill(int64_t i, int32_t* x, int32_t* y) {
  Rng r(977 + uint64_t(i));
  for (int t = 0; t < kT; ++t) x[t] = int32_t(r.below(48));
  for (int t = 0; t < kT; ++t) y[t] = t + 1 < kT ? x[t + 1] : 0;
}

std::vector<int32_t> batch_tokens(int64_t first, int64_t B) {
  std::vector<int32_t> x(static_cast<size_t>(B * kT)), y(static_cast<size_t>(kT));
  for (int64_t r = 0; r < B; ++r) fill(first + r, x.data() + r * kT, y.data());
  return x;
}

}  // namespace

TEST_CASE("a window stream reads every layer's QKV bit for bit as the ordinary forward does, also a last layer's QKV alone", "[calib][stream]") {
  for (const bool qwen : {false, true}) {
    INFO((qwen ? "qwen3" : "gpt2"));
    auto ref = model_of(3, qwen), m = model_of(3, qwen);
    const int64_t B = 2;
    std::vector<std::vector<int32_t>> batches = {batch_tokens(0, B), batch_tokens(2, B), batch_tokens(4, B)};
    // Reference: one ordinary forward per batch, every layer's QKV kept.
    std::vector<std::vector<std::vector<float>>> want(batches.size());
    for (size_t b = 0; b < batches.size(); ++b) {
      ref->forward(batches[b].data(), nullptr, B, kT);
      for (int l = 0; l < 3; ++l) {
        std::vector<float> q;
        ref->read_layer_qkv(l, q);
        want[b].push_back(q);
      }
    }
    WindowStream s(*m, B, kT, batches);
    int seen = 0;
    auto visit = [&](int l, size_t b, const std::vector<float>& qkv) {
      REQUIRE(qkv.size() == want[b][size_t(l)].size());
      CHECK(std::memcmp(qkv.data(), want[b][size_t(l)].data(), qkv.size() * sizeof(float)) == 0);
      ++seen;
    };
    s.advance(1, visit);  // layer 0, then the batches wait at layer 1's input...
    CHECK(s.held_bytes() == batches.size() * 2 * size_t(B * kT * 32) * sizeof(float));
    s.visit_qkv(visit);   // layer 1's QKV alone (a stream's last layer), the stream left at layer 1...
    CHECK(s.layer() == 1);
    s.advance(3, visit);  // ... and go on from there
    CHECK(seen == 12);
    CHECK(s.held_bytes() == 0);
  }
}

TEST_CASE("calibration memory does not grow with the number of layers", "[calib][stream][memory]") {
  // The same widths with 2 and 6 layers: the activation arena while SAF's capture and OAL's
  // stream run, and the stream's held layer inputs, must be the same; an ordinary forward's
  // arena grows with the layers (the property would be vacuous otherwise).
  dist::LocalComm comm;
  saf::CaptureOptions opt;
  opt.n_seqs = 5;
  opt.seq_len = kT;
  opt.batch = 2;
  opt.needs.kl = true;
  std::vector<size_t> saf_acts, saf_held, oal_acts, ordinary;
  for (const int L : {2, 6}) {
    auto m = model_of(L, true);
    {
      saf::CaptureStream stream(*m, fill, opt, comm);
      for (int l0 = 0; l0 < L; ++l0) {
        const auto acc = stream.capture(l0 + 1);
        CHECK(acc.size() == 4);  // one layer's heads, not the model's
        if (l0 == 0) {
          saf_acts.push_back(m->activation_bytes());
          saf_held.push_back(stream.held_bytes());
        }
        CHECK(m->activation_bytes() == saf_acts.back());
      }
    }
    CHECK_FALSE(m->forward_only());  // the stream gave the model its own mode back
    oal::stream_qkv(*m, fill, {0, 1, 2}, kT, 2, {0, L - 1}, [&](const oal::CapturedQkv& c) {
      CHECK(c.layers.size() == 1);  // one layer's QKV at a time
      oal_acts.push_back(m->activation_bytes());
    });
    std::vector<int32_t> x = batch_tokens(0, 2);
    m->forward(x.data(), nullptr, 2, kT);
    ordinary.push_back(m->activation_bytes());
  }
  CHECK(saf_acts[0] == saf_acts[1]);
  CHECK(saf_held[0] == saf_held[1]);
  CHECK(saf_held[0] == 3 * 2 * size_t(2 * kT * 32) * sizeof(float));  // 3 batches of 2 windows
  REQUIRE(oal_acts.size() == 4);
  CHECK(oal_acts[0] == oal_acts[3]);
  CHECK(ordinary[1] > ordinary[0] + ordinary[0] / 2);
  CHECK(saf_acts[1] < ordinary[1] / 2);
}
