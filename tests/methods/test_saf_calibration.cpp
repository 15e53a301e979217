// SAF calibration on a live model: statistics against a naive dense reference, invariance to
// batching, layer groups and data-parallel ranks, and Gate-Taylor scores against finite
// differences of the loss.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <filesystem>
#include <cstring>

#include "headwise/data/loader.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/methods/saf/planner.hpp"
#include "headwise/train/trainer.hpp"
#include "headwise/dist/local_comm.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/methods/saf/calibration.hpp"
#include "methods/methods_test_util.hpp"
#include "methods/reference_attention.hpp"

using namespace hw;

namespace {

constexpr int kT = 16;

// A model whose heads attend unevenly (larger init), so head statistics differ.
std::unique_ptr<Model<float>> sharp_model(uint64_t seed = 3) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 24;
  mc.vocab_size = 32;
  mc.init_std = 0.25;
  auto m = std::make_unique<Model<float>>(mc, cpu_backend<float>());
  m->init_weights(seed);
  return m;
}

saf::CalibSource random_source(int vocab, uint64_t seed) {
  return [vocab, seed](int64_t i, int32_t* x, int32_t* y) {
    Rng r(seed * 1000003ull + uint64_t(i));
    for (int t = 0; t < kT; ++t) x[t] = int32_t(r.below(uint64_t(vocab)));
    for (int t = 0; t < kT; ++t) y[t] = t + 1 < kT ? x[t + 1] : int32_t(r.below(uint64_t(vocab)));
  };
}

saf::CaptureOptions options(int64_t n, int64_t batch, saf::StatsNeeds needs = {}) {
  saf::CaptureOptions o;
  o.n_seqs = n;
  o.seq_len = kT;
  o.batch = batch;
  o.needs = needs;
  return o;
}

void check_same_stats(const saf::HeadStatsAccumulator& a, const saf::HeadStatsAccumulator& b, double tol) {
  REQUIRE(a.count() == b.count());
  CHECK(a.variance_score() == Approx(b.variance_score()).epsilon(tol));
  const auto& ma = a.mean_packed();
  const auto& mb = b.mean_packed();
  for (size_t i = 0; i < ma.size(); ++i) REQUIRE(ma[i] == Approx(mb[i]).margin(tol));
  for (size_t i = 0; i < a.cell_m2_packed().size(); ++i)
    REQUIRE(a.cell_m2_packed()[i] == Approx(b.cell_m2_packed()[i]).margin(tol));
  for (size_t i = 0; i < a.logit_m2_packed().size(); ++i)
    REQUIRE(a.logit_m2_packed()[i] == Approx(b.logit_m2_packed()[i]).epsilon(tol).margin(tol));
  if (a.needs().kl) CHECK(a.kl_score() == Approx(b.kl_score()).epsilon(tol).margin(tol));
}

}  // namespace

TEST_CASE("captured statistics equal the dense mean, Eq. (1) variance and forward KL", "[saf][calib]") {
  auto m = sharp_model();
  const auto src = random_source(32, 11);
  const int N = 5;
  saf::StatsNeeds needs;
  needs.kl = true;
  dist::LocalComm comm;
  const auto acc = saf::capture_layers(*m, src, options(N, 1, needs), 0, 2, comm);
  std::vector<std::vector<std::vector<double>>> A;  // [seq][head]
  for (int i = 0; i < N; ++i) A.push_back(test::reference_attention(*m, src, i, kT));
  REQUIRE(acc.size() == 8);
  std::vector<double> variances;
  for (size_t hh = 0; hh < acc.size(); ++hh) {
    std::vector<double> mean(size_t(kT * kT), 0.0);
    for (int i = 0; i < N; ++i)
      for (size_t c = 0; c < mean.size(); ++c) mean[c] += A[size_t(i)][hh][c] / N;
    double sq = 0.0, kl = 0.0;
    for (int i = 0; i < N; ++i)
      for (size_t c = 0; c < mean.size(); ++c) {
        const double a = A[size_t(i)][hh][c];
        sq += (a - mean[c]) * (a - mean[c]);
        if (a > 0) kl += a * std::log(a / mean[c]);
      }
    std::vector<double> got(mean.size());
    acc[hh].mean_matrix(got.data());
    for (size_t c = 0; c < mean.size(); ++c) REQUIRE(got[c] == Approx(mean[c]).margin(1e-12));
    const double var_ref = sq / (double(N - 1) * kT * kT);
    CHECK(acc[hh].variance_score() == Approx(var_ref).epsilon(1e-10));
    CHECK(acc[hh].kl_score() == Approx(kl / (double(N) * kT)).epsilon(1e-9).margin(1e-14));
    variances.push_back(var_ref);
  }
  // The heads really differ (otherwise ranking them would test nothing).
  CHECK(*std::max_element(variances.begin(), variances.end()) > 1.2 * *std::min_element(variances.begin(), variances.end()));
}

namespace {

// Batching, padding and layer groups must not change what is accumulated: each capture equals
// the dense double reference of the sequences forwarded in the same batches. (Between batch
// sizes the statistics do differ, by ~1e-6 relative, because an fp32 GEMM may round q and k by a
// row's place in the batch: that is the BLAS, not the capture, and the reference shows it.)
void check_against_reference(const saf::HeadStatsAccumulator& acc, const std::vector<std::vector<test::DenseHead>>& ref,
                             size_t head) {
  const int N = int(ref.size());
  REQUIRE(acc.count() == N);
  std::vector<double> mean, logit_mean, cell_m2, logit_m2;
  double m2_total = 0.0, kl = 0.0;
  for (int i = 0; i < kT; ++i)
    for (int j = 0; j <= i; ++j) {  // packed lower triangle, row by row
      const size_t c = size_t(i * kT + j);
      double a = 0.0, l = 0.0;
      for (const auto& seq : ref) a += seq[head].probs[c] / N, l += seq[head].logits[c] / N;
      double sa = 0.0, sl = 0.0;
      for (const auto& seq : ref) {
        sa += (seq[head].probs[c] - a) * (seq[head].probs[c] - a);
        sl += (seq[head].logits[c] - l) * (seq[head].logits[c] - l);
        if (seq[head].probs[c] > 0) kl += seq[head].probs[c] * std::log(seq[head].probs[c] / a);
      }
      mean.push_back(a);
      cell_m2.push_back(sa);
      logit_m2.push_back(sl);
      m2_total += sa;
    }
  for (size_t c = 0; c < mean.size(); ++c) {
    REQUIRE(acc.mean_packed()[c] == Approx(mean[c]).margin(1e-12));
    REQUIRE(acc.cell_m2_packed()[c] == Approx(cell_m2[c]).margin(1e-12));
    REQUIRE(acc.logit_m2_packed()[c] == Approx(logit_m2[c]).epsilon(1e-10).margin(1e-12));
  }
  CHECK(acc.variance_score() == Approx(m2_total / (double(N - 1) * kT * kT)).epsilon(1e-10));
  CHECK(acc.kl_score() == Approx(kl / (double(N) * kT)).epsilon(1e-9).margin(1e-14));
}

}  // namespace

TEST_CASE("batched, padded and layer-grouped capture equals the dense reference of the same batches",
          "[saf][calib]") {
  auto m = sharp_model();
  const auto src = random_source(32, 12);
  saf::StatsNeeds needs;
  needs.cell_variance = needs.logit_variance = needs.kl = true;
  dist::LocalComm comm;
  const auto whole = saf::capture_layers(*m, src, options(7, 1, needs), 0, 2, comm);
  // 7 sequences in batches of 3 (the last one padded), layers captured in two replays.
  const auto g0 = saf::capture_layers(*m, src, options(7, 3, needs), 0, 1, comm);
  const auto g1 = saf::capture_layers(*m, src, options(7, 3, needs), 1, 2, comm);
  const auto ref1 = test::reference_heads(*m, src, 7, kT, 1), ref3 = test::reference_heads(*m, src, 7, kT, 3);
  for (size_t h = 0; h < 4; ++h) {
    INFO("head " << h);
    check_against_reference(whole[h], ref1, h);
    check_against_reference(whole[4 + h], ref1, 4 + h);
    check_against_reference(g0[h], ref3, h);
    check_against_reference(g1[h], ref3, 4 + h);
  }
}

TEST_CASE("memory budget splits the layers into replay groups", "[saf][calib]") {
  saf::StatsNeeds none;
  const int64_t per_head = saf::head_stats_bytes(4096, none);
  CHECK(per_head == 8 * (5 + int64_t(4096) * 4097 / 2 + 4096));
  // 12 heads per layer at 4K: one layer is ~805 MB.
  CHECK(saf::layers_per_group(12, 12, 4096, none, 1024) == 1);
  CHECK(saf::layers_per_group(12, 12, 4096, none, 4 * 806) == 4);
  CHECK(saf::layers_per_group(12, 12, 4096, none, 1e9) == 12);
  CHECK(saf::layers_per_group(12, 12, 4096, none, 0) == 1);
  saf::StatsNeeds gauss;
  gauss.logit_variance = true;  // mean + logit mean + logit M2: three blocks
  CHECK(saf::head_stats_bytes(64, gauss) == 8 * (5 + 3 * 64 * 65 / 2 + 64));
}

TEST_CASE("two data-parallel ranks reduce to the statistics of all sequences", "[saf][calib][dist]") {
  const auto src = random_source(32, 13);
  saf::StatsNeeds needs;
  needs.cell_variance = needs.logit_variance = needs.kl = true;
  dist::LocalComm local;
  auto m = sharp_model();
  const auto single = saf::capture_layers(*m, src, options(7, 1, needs), 0, 2, local);
  std::vector<std::vector<saf::HeadStatsAccumulator>> per_rank(2);
  test::run_ranks(2, [&](dist::Comm& comm) {
    auto mr = sharp_model();
    per_rank[size_t(comm.rank())] = saf::capture_layers(*mr, src, options(7, 1, needs), 0, 2, comm);
  });
  for (size_t h = 0; h < single.size(); ++h) {
    check_same_stats(single[h], per_rank[0][h], 1e-12);
    // Every rank holds bit-identical statistics.
    std::vector<double> a(size_t(per_rank[0][h].packed_size())), b(a.size());
    per_rank[0][h].pack(a.data());
    per_rank[1][h].pack(b.data());
    CHECK(std::memcmp(a.data(), b.data(), a.size() * sizeof(double)) == 0);
  }
  CHECK(saf::rank_indices(7, 1, 2) == std::vector<int64_t>{1, 3, 5});
  CHECK(saf::rank_indices(1, 1, 2).empty());
}

TEST_CASE("Gate-Taylor scores equal finite differences of each sequence's loss", "[saf][calib][gate]") {
  auto m = sharp_model(4);
  const auto src = random_source(32, 14);
  const int N = 3;
  dist::LocalComm comm;
  // The gradient arena must come back exactly as it was.
  for (auto& t : m->grads().tensors())
    for (int64_t i = 0; i < t->numel(); ++i) t->as<float>()[i] = 0.001f * float(i % 7);
  std::vector<unsigned char> before(m->grads().bytes());
  std::memcpy(before.data(), m->grads().base(), before.size());
  const auto raw = saf::gate_taylor_scores(*m, src, options(N, 2), comm);
  CHECK(std::memcmp(before.data(), m->grads().base(), before.size()) == 0);
  // Reference: a gate g on head h's output is the same as scaling its rows of c_proj.weight.
  const int H = 4, hd = 8, C = 32;
  std::vector<int32_t> x(kT), y(kT);
  for (int l = 0; l < 2; ++l)
    for (int h = 0; h < H; ++h) {
      float* w = m->params().get("h." + std::to_string(l) + ".attn.c_proj.weight").as<float>();
      const auto& lay = m->layouts()[size_t(l)];
      std::vector<float> saved(w + lay.out_col(h) * C, w + (lay.out_col(h) + hd) * C);
      auto loss_at = [&](double g, int64_t i) {
        for (size_t k = 0; k < saved.size(); ++k) w[lay.out_col(h) * C + int64_t(k)] = float(double(saved[k]) * g);
        src(i, x.data(), y.data());
        return m->forward(x.data(), y.data(), 1, kT);
      };
      double ref = 0.0;
      const double eps = 1e-2;
      for (int i = 0; i < N; ++i) ref += std::abs(loss_at(1 + eps, i) - loss_at(1 - eps, i)) / (2 * eps) / N;
      for (size_t k = 0; k < saved.size(); ++k) w[lay.out_col(h) * C + int64_t(k)] = saved[k];
      CHECK(raw[size_t(l)][size_t(h)] == Approx(ref).epsilon(0.03).margin(2e-5));
    }
}

// data.val_split = "halves": the readers' halves by hand, then the trainer's evaluation and
// SAF's calibration against runs on shards holding those halves written out here.
TEST_CASE("data parts: the halves split the token stream at its middle, cutting the shard there", "[saf][calib][data]") {
  const std::string dir = test::methods_dir("parts");
  std::vector<uint16_t> a(100), b(60);  // token value = its position in the stream
  for (int i = 0; i < 100; ++i) a[size_t(i)] = uint16_t(i);
  for (int i = 0; i < 60; ++i) b[size_t(i)] = uint16_t(100 + i);
  data::write_shard(dir + "/v_000.bin", a);
  data::write_shard(dir + "/v_001.bin", b);
  const std::string glob = dir + "/v_*.bin";
  std::vector<int32_t> x(9), y(9);
  // 160 tokens: halves [0, 80) and [80, 160), the second made of a[80..100) and b.
  const data::TokenLoader all(glob, 1, 9, false, 0), first(glob, 1, 9, false, 0, data::Part::FirstHalf),
      second(glob, 1, 9, false, 0, data::Part::SecondHalf);
  CHECK(all.batches_per_epoch() == 11 + 6);  // (100 - 1) / 9, (60 - 1) / 9
  CHECK(first.total_tokens() == 80);
  CHECK(first.batches_per_epoch() == 8);  // (80 - 1) / 9
  CHECK(second.total_tokens() == 80);
  CHECK(second.batches_per_epoch() == 2 + 6);  // (20 - 1) / 9 in a, (60 - 1) / 9 in b
  auto expect_run = [&](int first_token) {
    for (int t = 0; t < 9; ++t) {
      CHECK(x[size_t(t)] == first_token + t);
      CHECK(y[size_t(t)] == first_token + t + 1);
    }
  };
  first.fetch(7, x.data(), y.data());
  expect_run(63);
  second.fetch(0, x.data(), y.data());
  expect_run(80);
  second.fetch(1, x.data(), y.data());
  expect_run(89);
  second.fetch(2, x.data(), y.data());
  expect_run(100);
  // Calibration windows (T + 1 = 10 tokens): the first half's lie in [0, 80), the second's in
  // a[80..100) or b, never across the cut or the shard boundary.
  const data::CalibSampler c1(glob, 9, 11, data::Part::FirstHalf), c2(glob, 9, 11, data::Part::SecondHalf);
  int lo1 = 1000, hi1 = -1, lo2 = 1000, hi2 = -1;
  for (int64_t i = 0; i < 400; ++i) {
    c1.fetch(i, x.data(), y.data());
    REQUIRE(y[8] == x[0] + 9);  // contiguous
    lo1 = std::min(lo1, x[0]);
    hi1 = std::max(hi1, int(y[8]));
    c2.fetch(i, x.data(), y.data());
    REQUIRE(y[8] == x[0] + 9);
    REQUIRE(((x[0] >= 80 && y[8] <= 99) || (x[0] >= 100 && y[8] <= 159)));
    lo2 = std::min(lo2, x[0]);
    hi2 = std::max(hi2, int(y[8]));
  }
  CHECK(lo1 == 0);
  CHECK(hi1 == 79);
  CHECK(lo2 == 80);
  CHECK(hi2 == 159);
  // Too short a half is an error naming it.
  CHECK_THROWS_WITH(data::TokenLoader(glob, 1, 90, false, 0, data::Part::SecondHalf), Catch::Contains("(second half)"));
}

TEST_CASE("data.val_split: parsed, validated, and halves hold the evaluation out of calibration", "[saf][calib][data]") {
  const std::string dir = test::methods_dir("val_split");
  auto doc = test::tiny_saf_doc(dir);  // val: one shard of 2000 tokens
  CHECK(RunConfig::from_json(doc).data.val_split == "none");
  auto bad = doc;
  bad["data"]["val_split"] = "thirds";
  CHECK_THROWS_WITH(RunConfig::from_json(bad), Catch::Contains("data.val_split"));
  bad["data"]["val_split"] = "halves";
  bad["data"].erase("val");
  CHECK_THROWS_WITH(RunConfig::from_json(bad), Catch::Contains("data.val_split"));
  // The halves written out as their own shards: tokens [0, 1000) and [1000, 2000).
  const std::vector<uint16_t> val = data::read_shard(dir + "/val_000.bin");
  REQUIRE(val.size() == 2000);
  std::filesystem::create_directories(dir + "/h1");
  std::filesystem::create_directories(dir + "/h2");
  data::write_shard(dir + "/h1/val_000.bin", std::vector<uint16_t>(val.begin(), val.begin() + 1000));
  data::write_shard(dir + "/h2/val_000.bin", std::vector<uint16_t>(val.begin() + 1000, val.end()));
  doc["data"].erase("calib");  // calibration reads data.val
  auto halves = doc;
  halves["data"]["val_split"] = "halves";
  const RunConfig cfg = RunConfig::from_json(halves);
  CHECK(cfg.to_json()["data"]["val_split"] == "halves");
  CHECK(RunConfig::from_json(cfg.to_json()).data.val_split == "halves");
  dist::LocalComm comm;
  auto report_of = [&](const RunConfig& rc, double* ppl) {
    Trainer tr(rc, "", comm);
    tr.run(4);
    *ppl = tr.eval(8).ppl;
    SafPlanner p(saf::SafConfig::from_json(rc.methods.at(0)), rc);
    PlannerContext ctx{tr.model(), rc, tr.comm(), tr.state().step};
    return p.act(ctx).value().report;
  };
  double ppl_halves = 0, ppl_second = 0, ppl_whole = 0;
  const auto rep = report_of(cfg, &ppl_halves);
  // Evaluation = the second half alone; calibration = the first half alone (val_split none).
  auto second = doc;
  second["data"]["val"] = dir + "/h2/val_*.bin";
  second["data"]["calib"] = dir + "/h1/val_*.bin";
  const auto rep_ref = report_of(RunConfig::from_json(second), &ppl_second);
  CHECK(ppl_halves == ppl_second);
  REQUIRE(rep["heads"].size() == 8);
  for (size_t k = 0; k < 8; ++k) {
    CHECK(rep["heads"][k]["scores"]["variance"].get<double>() == rep_ref["heads"][k]["scores"]["variance"].get<double>());
    CHECK(rep["heads"][k]["scores"]["kl"].get<double>() == rep_ref["heads"][k]["scores"]["kl"].get<double>());
  }
  CHECK(rep["selected"] == rep_ref["selected"]);
  // Without the split, evaluation starts at the first token: another PPL.
  const auto rep_whole = report_of(RunConfig::from_json(doc), &ppl_whole);
  CHECK(ppl_whole != ppl_halves);
  CHECK(rep_whole["heads"][0]["scores"]["variance"].get<double>() != rep["heads"][0]["scores"]["variance"].get<double>());
}

namespace {

// Layer 0's causal attention of every head for one sequence, in double from the weights alone:
// x = wte[token] (RoPE models have no wpe), ln_1, c_attn, then q and k rotated by RoPE as
// Hugging Face's rotate_half writes it (pair (e, e + d/2) turns by t * theta^(-2e/d)), then
// the causal softmax of q.k / sqrt(d). With rotate = false the rotation is left out.
std::vector<std::vector<double>> rope_layer0_reference(Model<float>& m, const std::vector<int32_t>& tokens,
                                                       bool rotate) {
  const auto& c = m.config();
  const int T = int(tokens.size()), C = c.n_embd, H = c.n_head, hd = c.head_dim();
  const auto& lay = m.layouts()[0];
  const int64_t W = lay.qkv_width();
  const float* wte = m.params().get("wte.weight").as<float>();
  const float* g = m.params().get("h.0.ln_1.weight").as<float>();
  const Tensor* bt = m.params().find("h.0.ln_1.bias");
  const float* wq = m.params().get("h.0.attn.c_attn.weight").as<float>();
  const Tensor* qb = m.params().find("h.0.attn.c_attn.bias");
  std::vector<double> qkv(size_t(T) * size_t(W), 0.0);
  for (int t = 0; t < T; ++t) {
    std::vector<double> x(static_cast<size_t>(C));
    double mean = 0.0, var = 0.0;
    for (int e = 0; e < C; ++e) mean += (x[size_t(e)] = double(wte[int64_t(tokens[size_t(t)]) * C + e])) / C;
    for (int e = 0; e < C; ++e) var += (x[size_t(e)] - mean) * (x[size_t(e)] - mean) / C;
    for (int e = 0; e < C; ++e)
      x[size_t(e)] = (x[size_t(e)] - mean) / std::sqrt(var + c.layer_norm_epsilon) * double(g[e]) +
                     (bt ? double(bt->as<float>()[e]) : 0.0);
    for (int64_t o = 0; o < W; ++o) {
      double acc = qb ? double(qb->as<float>()[o]) : 0.0;
      for (int e = 0; e < C; ++e) acc += x[size_t(e)] * double(wq[int64_t(e) * W + o]);
      qkv[size_t(t) * size_t(W) + size_t(o)] = acc;
    }
  }
  auto rotated = [&](int t, int64_t col) {
    std::vector<double> v(qkv.begin() + t * W + col, qkv.begin() + t * W + col + hd);
    if (!rotate) return v;
    std::vector<double> r(v.size());
    for (int e = 0; e < hd / 2; ++e) {
      const double angle = double(t) * std::pow(c.rope_theta, -2.0 * e / hd);
      r[size_t(e)] = v[size_t(e)] * std::cos(angle) - v[size_t(e + hd / 2)] * std::sin(angle);
      r[size_t(e + hd / 2)] = v[size_t(e + hd / 2)] * std::cos(angle) + v[size_t(e)] * std::sin(angle);
    }
    return r;
  };
  std::vector<std::vector<double>> out;
  for (int h = 0; h < H; ++h) {
    std::vector<double> P(size_t(T) * size_t(T), 0.0);
    for (int i = 0; i < T; ++i) {
      const auto q = rotated(i, lay.q_col(h));
      std::vector<double> s(size_t(i + 1));
      double mx = -1e300, z = 0.0;
      for (int j = 0; j <= i; ++j) {
        const auto k = rotated(j, lay.k_col(lay.kv_head_of(h)));
        double d = 0.0;
        for (int e = 0; e < hd; ++e) d += q[size_t(e)] * k[size_t(e)];
        mx = std::max(mx, s[size_t(j)] = d / std::sqrt(double(hd)));
      }
      for (int j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - mx);
      for (int j = 0; j <= i; ++j) P[size_t(i) * size_t(T) + size_t(j)] = std::exp(s[size_t(j)] - mx) / z;
    }
    out.push_back(std::move(P));
  }
  return out;
}

}  // namespace

TEST_CASE("RoPE models: captured statistics are those of the rotated q and k", "[saf][calib][rope]") {
  // The capture reads the model's QKV activations, which RoPE rotates in place: the statistics
  // must be those of the rotated q, k (what the heads attend with), checked against attention
  // recomputed from the weights with the rotation written out here.
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 4;
  mc.n_embd = 32;
  mc.block_size = 24;
  mc.vocab_size = 32;
  mc.pos = "rope";
  mc.bias = false;  // the SAF recipe's model
  mc.init_std = 0.25;
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(7);
  const auto src = random_source(32, 15);
  const int N = 4;
  saf::StatsNeeds needs;
  needs.kl = true;
  dist::LocalComm comm;
  const auto acc = saf::capture_layers(m, src, options(N, 2, needs), 0, 1, comm);
  REQUIRE(acc.size() == 4);
  std::vector<std::vector<std::vector<double>>> ref, plain;  // [seq][head] T x T
  std::vector<int32_t> x(kT), y(kT);
  for (int i = 0; i < N; ++i) {
    src(i, x.data(), y.data());
    ref.push_back(rope_layer0_reference(m, x, true));
    plain.push_back(rope_layer0_reference(m, x, false));
  }
  double rotation_matters = 0.0;
  for (size_t h = 0; h < 4; ++h) {
    INFO("head " << h);
    std::vector<double> mean(size_t(kT * kT), 0.0), mean_plain(mean.size(), 0.0);
    for (int i = 0; i < N; ++i)
      for (size_t c = 0; c < mean.size(); ++c) {
        mean[c] += ref[size_t(i)][h][c] / N;
        mean_plain[c] += plain[size_t(i)][h][c] / N;
      }
    double sq = 0.0, kl = 0.0;
    for (int i = 0; i < N; ++i)
      for (size_t c = 0; c < mean.size(); ++c) {
        const double a = ref[size_t(i)][h][c];
        sq += (a - mean[c]) * (a - mean[c]);
        if (a > 0) kl += a * std::log(a / mean[c]);
      }
    std::vector<double> got(mean.size());
    acc[h].mean_matrix(got.data());
    // fp32 activations against a double forward: agreement to fp32 rounding of q and k.
    for (size_t c = 0; c < mean.size(); ++c) {
      REQUIRE(got[c] == Approx(mean[c]).margin(2e-5));
      rotation_matters = std::max(rotation_matters, std::abs(mean[c] - mean_plain[c]));
    }
    CHECK(acc[h].variance_score() == Approx(sq / (double(N - 1) * kT * kT)).epsilon(1e-3));
    CHECK(acc[h].kl_score() == Approx(kl / (double(N) * kT)).epsilon(1e-3).margin(1e-7));
  }
  // Without the rotation the patterns are far from these: the check above can tell them apart.
  CHECK(rotation_matters > 1e-2);
}
