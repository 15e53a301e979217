#include "headwise/methods/oal/pipeline.hpp"

#include <exception>
#include <numeric>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/core/process_stats.hpp"
#include "kernels/cpu/cblas.hpp"
#include "spdlog/spdlog.h"

namespace hw::oal {

uint64_t bootstrap_seed(uint64_t seed, int flat) { return data::derive_seed(seed, data::Stream::OalBootstrap, uint64_t(flat)); }
uint64_t random_grouping_seed(uint64_t seed, int flat) {
  return data::derive_seed(seed, data::Stream::OalRandomGrouping, uint64_t(flat));
}
uint64_t calibration_seed(uint64_t seed, int flat) {
  return data::derive_seed(seed, data::Stream::OalCalibration, 16 + uint64_t(flat));
}

Grouping group_head(const HeadContribution& c, const GroupingSpec& spec, const GroupingOptions& opt, uint64_t seed,
                    int n_head) {
  const int flat = c.layer * n_head + c.head;
  switch (spec.kind) {
    case GroupingKind::Bootstrap: return bootstrap_grouping(c.per_prompt, opt, bootstrap_seed(seed, flat));
    case GroupingKind::Fixed: return fixed_grouping(c.chi(), spec.n_groups, opt.tail_fraction, opt.eps);
    case GroupingKind::Random:
      return random_grouping(bootstrap_grouping(c.per_prompt, opt, bootstrap_seed(seed, flat)),
                             random_grouping_seed(seed, flat));
  }
  fail("OAL: unknown grouping");
}

HeadSamples head_samples(const Model<float>& model, const CapturedQkv& c, int slot, int h, int n_fit) {
  HeadSamples s;
  const int n = int(c.qkv[size_t(slot)].size());
  check(n_fit >= 1 && n_fit < n, "OAL: needs fit and validation sequences");
  for (int q = 0; q < n; ++q) (q < n_fit ? s.fit : s.val).push_back(head_rows(model, c, slot, q, h));
  s.prepare_targets();
  return s;
}

nlohmann::json PipelineResult::to_json() const {
  nlohmann::json heads_j = nlohmann::json::array();
  for (size_t i = 0; i < heads.size(); ++i) {
    const HeadResult& r = heads[i];
    nlohmann::json j = {{"layer", r.layer}, {"head", r.head}, {"grouping", r.grouping.to_json()},
                        {"calibration", r.calibration.to_json()}};
    if (i < contributions.size()) j["contribution"] = oal::to_json(contributions[i]);
    heads_j.push_back(std::move(j));
  }
  return {{"layers", layers}, {"heads", heads_j}, {"stats_seconds", stats_seconds}, {"calib_seconds", calib_seconds}};
}

PipelineResult run_pipeline(Model<float>& model, const OalConfig& cfg, const Sources& src, uint64_t seed, int batch) {
  const ModelConfig& mc = model.config();
  PipelineResult out;
  out.layers = cfg.layers(mc.n_layer);
  const GroupingSpec spec = cfg.grouping_spec(mc.head_dim());
  const int H = mc.n_head;
  CalibOptions co = cfg.calib;
  co.eps = mc.linear_eps;  // the kernel the model's linear heads will compute

  Stopwatch stage;
  std::vector<int64_t> prompts(size_t(cfg.stats_prompts));
  std::iota(prompts.begin(), prompts.end(), 0);
  // Layer by layer: one layer's QKV of the prompts at a time (capture.hpp, stream_qkv).
  const size_t n_layers = out.layers.size();
  size_t done = 0;
  stream_qkv(model, src.stats, prompts, int(src.stats_T), batch, out.layers, [&](const CapturedQkv& c) {
    std::vector<HeadContribution> part = contributions(model, c);
    for (auto& hc : part) out.contributions.push_back(std::move(hc));
    spdlog::info("OAL statistics: layer {} ({}/{}), {:.1f} s", c.layers[0], ++done, n_layers, stage.seconds());
  });
  out.heads.resize(out.contributions.size());
  ParallelErrors errors;
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < int64_t(out.heads.size()); ++i)
    errors.run([&] {
      const HeadContribution& c = out.contributions[size_t(i)];
      out.heads[size_t(i)].layer = c.layer;
      out.heads[size_t(i)].head = c.head;
      out.heads[size_t(i)].grouping = group_head(c, spec, cfg.group, seed, H);
    });
  errors.rethrow();
  out.stats_seconds = stage.seconds();

  stage.restart();
  done = 0;
  std::vector<int64_t> seqs(size_t(cfg.fit_seqs + cfg.val_seqs));
  std::iota(seqs.begin(), seqs.end(), 0);
  // Each layer's heads are fitted while its QKV is the one held (each fit reads its own head only).
  stream_qkv(model, src.calib, seqs, int(src.calib_T), batch, out.layers, [&](const CapturedQkv& cap) {
    std::vector<size_t> mine;
    for (size_t i = 0; i < out.heads.size(); ++i)
      if (out.heads[i].layer == cap.layers[0]) mine.push_back(i);
    ParallelErrors fit_errors;
    const blas::SingleThreaded blas_on_calling_thread;  // heads are the parallel dimension
#pragma omp parallel for schedule(dynamic)
    for (int64_t j = 0; j < int64_t(mine.size()); ++j)
      fit_errors.run([&] {
        HeadResult& r = out.heads[mine[size_t(j)]];
        const HeadSamples s = head_samples(model, cap, 0, r.head, int(cfg.fit_seqs));
        const uint64_t hs = calibration_seed(seed, r.layer * H + r.head);
        // One grouping's moments serve both fits: the global kernel's are sums of them.
        const int G = r.grouping.n_groups;
        if (G == 1) {
          r.calibration = calibrate_global(s, co, hs);
          calibrate_grouped(r.calibration, s, G, r.grouping.groups, co, hs);
        } else {
          const SampleMoments grouped = sample_moments(s, r.grouping.groups, G);
          r.calibration = calibrate_global(s, global_moments(grouped), co, hs);
          calibrate_grouped(r.calibration, s, grouped, G, r.grouping.groups, co, hs);
        }
      });
    fit_errors.rethrow();
    spdlog::info("OAL fit: layer {} ({}/{}), {} heads, {:.1f} s", cap.layers[0], ++done, n_layers, mine.size(),
                 stage.seconds());
  });
  out.calib_seconds = stage.seconds();
  return out;
}

}  // namespace hw::oal
