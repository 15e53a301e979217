#include "headwise/methods/oal/tables.hpp"

#include <algorithm>
#include <cmath>
#include <exception>
#include <filesystem>
#include <functional>
#include <map>
#include <numeric>
#include <sstream>

#include "data/seed_mix.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/core/rng.hpp"
#include "headwise/io/files.hpp"
#include "headwise/methods/oal/approximators.hpp"
#include "headwise/methods/oal/baseline_fit.hpp"
#include "headwise/methods/oal/baselines.hpp"
#include "headwise/methods/oal/metrics.hpp"
#include "kernels/cpu/cblas.hpp"

namespace hw::oal {

namespace {

namespace fs = std::filesystem;

// Runs body(i) for i in [0, n) on OpenMP threads; the first exception is rethrown.
template <class Fn>
void parallel_for(int64_t n, Fn&& body) {
  ParallelErrors errors;
  const blas::SingleThreaded blas_on_calling_thread;  // heads are the parallel dimension
#pragma omp parallel for schedule(dynamic)
  for (int64_t i = 0; i < n; ++i) errors.run([&] { body(i); });
  errors.rethrow();
}

std::vector<int64_t> first_n(int64_t n) {
  std::vector<int64_t> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

// ---- Table 2 / Fig. 2: frozen-attention errors of fitted kernels ----

struct Variant {
  std::string name;
  int G = 1;
};

// One approximation's causal outputs of head `head` (slot * n_head + query head) at every
// position of rows r: out[T * d].
using HeadOutputs = std::function<void(size_t head, const HeadRows& r, double* out)>;

// Pre- and post-projection metrics of an approximation on every position of `ev`.
std::pair<FrozenMetrics, FrozenMetrics> frozen_metrics(const Model<float>& model, const CapturedQkv& ev,
                                                       const std::vector<std::vector<double>>& W_o,
                                                       const HeadOutputs& approx) {
  const ModelConfig& mc = model.config();
  const int H = mc.n_head, d = mc.head_dim(), T = ev.T;
  const int64_t C = mc.n_embd;
  const size_t S = ev.qkv.front().size();
  std::vector<SequenceError> pre(S), post(S);
  parallel_for(int64_t(S), [&](int64_t seq) {
    std::vector<double> ah(size_t(T * d));
    for (size_t slot = 0; slot < ev.layers.size(); ++slot) {
      const auto& lay = model.layouts()[size_t(ev.layers[slot])];
      const int64_t OW = lay.out_width();
      std::vector<double> yh(size_t(T * OW), 0.0), y(size_t(T * OW), 0.0);
      for (int h = 0; h < H; ++h) {
        const HeadRows r = head_rows(model, ev, int(slot), int(seq), h);
        approx(slot * size_t(H) + size_t(h), r, ah.data());
        for (int i = 0; i < T; ++i) {
          double* a = yh.data() + int64_t(i) * OW + lay.out_col(h);
          double* e = y.data() + int64_t(i) * OW + lay.out_col(h);
          std::copy(ah.begin() + int64_t(i) * d, ah.begin() + int64_t(i + 1) * d, a);
          softmax_output(r, i, e);
          pre[size_t(seq)].add(a, e, d);
        }
      }
      std::vector<double> ph(size_t(T * C)), pe(size_t(T * C));
      project(yh.data(), T, OW, W_o[slot].data(), C, ph.data());
      project(y.data(), T, OW, W_o[slot].data(), C, pe.data());
      post[size_t(seq)].add(ph.data(), pe.data(), int64_t(T) * C);
    }
  });
  return {aggregate(pre), aggregate(post)};
}

// The grouped kernels[head][variant] as an approximation.
HeadOutputs kernel_outputs(const std::vector<std::vector<GroupedKernel>>& kernels, size_t variant) {
  return [&kernels, variant](size_t head, const HeadRows& r, double* out) {
    for (int i = 0; i < r.T; ++i) kernel_output(r, kernels[head][variant], i, out + int64_t(i) * r.d);
  };
}

// Mean over the validation sequences, positions and channels of a baseline's squared error.
double baseline_val_mse(const HeadSamples& s, const BaselineHead& b) {
  double err = 0;
  int64_t n = 0;
  for (size_t q = 0; q < s.val.size(); ++q) {
    const HeadRows& r = s.val[q];
    std::vector<double> y(size_t(r.T) * size_t(r.d));
    baseline_outputs(r, b, y.data());
    for (size_t c = 0; c < y.size(); ++c) {
      const double e = y[c] - s.val_targets[q][c];
      err += e * e;
    }
    n += int64_t(y.size());
  }
  return err / double(std::max<int64_t>(1, n));
}

// ---- Table 1: error kept when only some dimensions are approximated ----

// Mean squared output error of head rows r at `pos` when the dimensions S are approximated by a.
double subset_error(const HeadRows& r, const SubsetApprox& a, const std::vector<int>& S, const std::vector<int>& pos,
                    uint64_t seed, int features) {
  std::vector<double> w(size_t(r.T)), y(size_t(r.d)), t(size_t(r.d));
  double err = 0;
  for (int i : pos) {
    mixed_weights(r, a, S, i, seed, features, w.data());
    double z = 0;
    std::fill(y.begin(), y.end(), 0.0);
    for (int j = 0; j <= i; ++j) {
      z += w[size_t(j)];
      for (int c = 0; c < r.d; ++c) y[size_t(c)] += w[size_t(j)] * double(r.v[int64_t(j) * r.v_stride + c]);
    }
    check(z > 0 && std::isfinite(z), "OAL Table 1: approximation '" + a.name + "' gave a non-positive or non-finite "
                                     "denominator");
    softmax_output(r, i, t.data());
    for (int c = 0; c < r.d; ++c) {
      const double e = y[size_t(c)] / z - t[size_t(c)];
      err += e * e;
    }
  }
  return err / double(pos.size() * size_t(r.d));
}

// The query positions of (layer slot, sequence): `n` distinct causal positions from the seed.
std::vector<int> sample_positions(int T, int n, uint64_t seed) {
  std::vector<int> p(static_cast<size_t>(T));
  std::iota(p.begin(), p.end(), 0);
  Rng rng(seed);
  const int m = std::min(n, T);
  for (int i = 0; i < m; ++i) std::swap(p[size_t(i)], p[size_t(i) + size_t(rng.below(uint64_t(T - i)))]);
  p.resize(static_cast<size_t>(m));
  std::sort(p.begin(), p.end());
  return p;
}

std::vector<int> non_bulk(const Grouping& g) {
  std::vector<int> s;
  for (size_t r = 0; r < g.groups.size(); ++r)
    if (g.groups[r] != 1) s.push_back(int(r));
  return s;
}

struct Intervention {
  const Model<float>* model;
  const CapturedQkv* ev;
  const TablesOptions* opt;
  int H = 0;
  // E_S per (slot, seq) for the head sets sets[slot * H + h]; seeds: the approximation's draws.
  std::vector<double> errors(const SubsetApprox& a, const std::vector<std::vector<int>>& sets,
                             const std::vector<uint64_t>& seeds) const {
    const size_t L = ev->layers.size(), S = ev->qkv.front().size();
    std::vector<double> out(L * S, 0.0);
    parallel_for(int64_t(L * S), [&](int64_t cell) {
      const size_t slot = size_t(cell) / S, seq = size_t(cell) % S;
      const std::vector<int> pos = sample_positions(ev->T, opt->positions,
                                                    data::derive_seed(opt->seed, data::Stream::OalCalibration,
                                                                      1000 + uint64_t(cell)));
      double e = 0;
      for (int h = 0; h < H; ++h) {
        const HeadRows r = head_rows(*model, *ev, int(slot), int(seq), h);
        for (uint64_t s : seeds)
          e += subset_error(r, a, sets[slot * size_t(H) + size_t(h)], pos, s, opt->performer_features);
      }
      out[size_t(cell)] = e / double(H * seeds.size());
    });
    return out;
  }
};

double mean_ratio(const std::vector<double>& num, const std::vector<double>& den) {
  double s = 0;
  for (size_t i = 0; i < num.size(); ++i) s += num[i] / std::max(den[i], 1e-300);
  return s / double(num.size());
}

// The eval activations with every head's Q and K replaced by N(0, 1) draws (V kept).
CapturedQkv gaussian_qk(const Model<float>& model, CapturedQkv ev, uint64_t seed) {
  Rng rng(seed);
  for (size_t slot = 0; slot < ev.layers.size(); ++slot) {
    const auto& lay = model.layouts()[size_t(ev.layers[slot])];
    const int64_t W = lay.qkv_width(), qk = int64_t(lay.n_q + lay.n_k) * lay.head_dim;  // Q | K columns
    for (auto& rows : ev.qkv[slot])
      for (int t = 0; t < ev.T; ++t)
        for (int64_t c = 0; c < qk; ++c) rows[size_t(t * W + c)] = float(rng.normal());
  }
  return ev;
}

nlohmann::json table1(const Model<float>& model, const CapturedQkv& ev, const std::vector<Grouping>& groupings,
                      const TablesOptions& opt) {
  const ModelConfig& mc = model.config();
  const int H = mc.n_head, d = mc.head_dim();
  const size_t heads = groupings.size();
  std::vector<std::vector<int>> all(heads), top(heads);
  std::vector<int> all_dims(static_cast<size_t>(d));
  std::iota(all_dims.begin(), all_dims.end(), 0);
  int selected = 0;
  for (size_t i = 0; i < heads; ++i) {
    all[i] = all_dims;
    top[i] = non_bulk(groupings[i]);
    selected += int(top[i].size());
  }
  // Gaussian control: the grouping redone on N(0, 1) Q/K (the held-out sequences as prompts).
  const CapturedQkv gauss = gaussian_qk(model, ev, data::derive_seed(opt.seed, data::Stream::OalCalibration, 2000));
  const std::vector<HeadContribution> gc = contributions(model, gauss);
  std::vector<std::vector<int>> gtop(heads);
  int gselected = 0;
  for (size_t i = 0; i < heads; ++i) {
    gtop[i] = non_bulk(bootstrap_grouping(gc[i].per_prompt, opt.cfg.group,
                                          bootstrap_seed(opt.seed, gc[i].layer * H + gc[i].head)));
    gselected += int(gtop[i].size());
  }
  const Intervention real{&model, &ev, &opt, H}, gaus{&model, &gauss, &opt, H};
  nlohmann::json rows = nlohmann::json::array();
  for (const SubsetApprox& a : subset_approximators()) {
    std::vector<uint64_t> seeds;
    for (int s = 0; s < (a.randomized ? opt.performer_seeds : 1); ++s)
      seeds.push_back(data::derive_seed(opt.seed, data::Stream::OalCalibration, 3000 + uint64_t(s)));
    const std::vector<double> full = real.errors(a, all, seeds), kept = real.errors(a, top, seeds);
    const double R = mean_ratio(kept, full);
    const double Rg = mean_ratio(gaus.errors(a, gtop, seeds), gaus.errors(a, all, seeds));
    // Random-dimension control: as many dimensions per head, drawn from its bulk.
    int exceed = 0;
    double rsum = 0;
    for (int b = 0; b < opt.random_draws; ++b) {
      Rng rng(data::derive_seed(opt.seed, data::Stream::OalRandomGrouping, 100000 + uint64_t(b)));
      std::vector<std::vector<int>> rnd(heads);
      for (size_t i = 0; i < heads; ++i) {
        std::vector<int> bulk;
        for (int r = 0; r < d; ++r)
          if (groupings[i].groups[size_t(r)] == 1) bulk.push_back(r);
        for (size_t k = 0; k < top[i].size() && !bulk.empty(); ++k) {
          const size_t pick = k + size_t(rng.below(uint64_t(bulk.size() - k)));
          std::swap(bulk[k], bulk[pick]);
          rnd[i].push_back(bulk[k]);
        }
      }
      const std::vector<uint64_t> one = {data::derive_seed(opt.seed, data::Stream::OalCalibration, 4000 + uint64_t(b))};
      const double Rr = mean_ratio(real.errors(a, rnd, one), full);
      rsum += Rr;
      exceed += Rr >= R;
    }
    rows.push_back({{"method", a.name},
                    {"error_kept_top", R},
                    {"error_kept_gaussian", Rg},
                    {"error_kept_random_mean", opt.random_draws > 0 ? rsum / opt.random_draws : 0.0},
                    {"random_draws", opt.random_draws},
                    {"p_value", (1.0 + exceed) / (1.0 + opt.random_draws)},
                    {"seeds", seeds.size()}});
  }
  return {{"rows", rows},
          {"dims_selected", selected},
          {"dims_total", int64_t(heads) * d},
          {"dims_selected_gaussian", gselected},
          {"positions", opt.positions}};
}

}  // namespace

nlohmann::json run_tables(Model<float>& model, const Sources& src, const SequenceSource& eval, int eval_T,
                          const TablesOptions& opt) {
  const Stopwatch total;
  const ModelConfig& mc = model.config();
  const int H = mc.n_head, d = mc.head_dim();
  const std::vector<int> layers = opt.cfg.layers(mc.n_layer);
  check(opt.max_G >= 1 && opt.max_G <= d, "--max-groups must be in 1..head_dim (" + std::to_string(d) + ")");
  check(opt.fixed_G >= 1 && opt.fixed_G <= d, "--fixed-groups must be in 1..head_dim (" + std::to_string(d) + ")");
  check(opt.eval_seqs >= 1 && opt.positions >= 1 && opt.random_draws >= 0 && opt.performer_seeds >= 1 &&
            opt.performer_features >= 1,
        "oal-tables: --eval-seqs, --positions, --performer-seeds and --performer-features must be >= 1, --random-draws >= 0");
  CalibOptions co = opt.cfg.calib;
  co.eps = mc.linear_eps;

  // Stage 1 and 2: contributions and bootstrap groupings.
  std::vector<HeadContribution> contrib;
  {
    const CapturedQkv st = capture_qkv(model, src.stats, first_n(opt.cfg.stats_prompts), int(src.stats_T), opt.batch, layers);
    contrib = contributions(model, st);
  }
  const size_t heads = contrib.size();
  std::vector<Grouping> boot(heads);
  parallel_for(int64_t(heads), [&](int64_t i) {
    boot[size_t(i)] = bootstrap_grouping(contrib[size_t(i)].per_prompt, opt.cfg.group,
                                         bootstrap_seed(opt.seed, contrib[size_t(i)].layer * H + contrib[size_t(i)].head));
  });

  // Stage 3: every variant's kernel per head.
  std::vector<Variant> variants = {{"taylor", 1}, {"global", 1}, {"oal_bootstrap", 0}, {"random", 0}};
  for (int G = 2; G <= std::max(opt.max_G, opt.fixed_G); ++G) variants.push_back({"fixed:" + std::to_string(G), G});
  const CapturedQkv cal = capture_qkv(model, src.calib, first_n(opt.cfg.fit_seqs + opt.cfg.val_seqs), int(src.calib_T),
                                      opt.batch, layers);
  std::vector<std::vector<GroupedKernel>> kernels(heads, std::vector<GroupedKernel>(variants.size()));
  std::vector<std::vector<double>> val_mse(heads, std::vector<double>(variants.size()));
  std::vector<std::string> chosen(heads);
  // Table 2's baseline rows: each head with its conversion's starting values (baselines.hpp), then
  // DiJiang and TaylorShift with those values fitted as L is (baseline_fit.hpp).
  struct BaselineRow {
    std::string name;
    KernelKind kind;
    bool fitted;
  };
  const std::vector<BaselineRow> baseline_table = {{"performer", KernelKind::Performer, false},
                                                   {"dijiang", KernelKind::DiJiang, false},
                                                   {"taylorshift", KernelKind::TaylorShift, false},
                                                   {"dijiang_fitted", KernelKind::DiJiang, true},
                                                   {"taylorshift_fitted", KernelKind::TaylorShift, true}};
  std::vector<std::vector<BaselineHead>> baselines(heads);
  std::vector<std::vector<double>> baseline_val(heads, std::vector<double>(baseline_table.size()));
  parallel_for(int64_t(heads), [&](int64_t ii) {
    const size_t i = size_t(ii);
    const HeadContribution& c = contrib[i];
    const int flat = c.layer * H + c.head;
    const HeadSamples s = head_samples(model, cal, cal.slot_of(c.layer), c.head, int(opt.cfg.fit_seqs));
    const uint64_t hs = calibration_seed(opt.seed, flat);
    const HeadCalibration global = calibrate_global(s, co, hs);
    const Grouping rnd = random_grouping(boot[i], random_grouping_seed(opt.seed, flat));
    const std::vector<double> chi = c.chi();
    for (size_t b = 0; b < baseline_table.size(); ++b) {
      const BaselineRow& row = baseline_table[b];
      const BaselineHead start = baseline_head(row.kind, d, opt.performer_features, opt.seed, c.layer, c.head, H);
      if (row.fitted) {
        const BaselineFit f =
            fit_baseline(s, start, co, data::derive_seed(opt.seed, data::Stream::OalBaselineFit, uint64_t(flat)));
        baselines[i].push_back(f.head);
        baseline_val[i][b] = f.val_mse;
      } else {
        baselines[i].push_back(start);
        baseline_val[i][b] = baseline_val_mse(s, start);
      }
    }
    for (size_t v = 0; v < variants.size(); ++v) {
      if (variants[v].name == "taylor") {
        kernels[i][v] = {1, taylor_L(1), std::vector<int32_t>(size_t(d), 1), co.eps};
        val_mse[i][v] = global.taylor_val_mse;
        continue;
      }
      Grouping g;
      if (variants[v].name == "global") g = fixed_grouping(chi, 1, opt.cfg.group.tail_fraction);
      else if (variants[v].name == "oal_bootstrap") g = boot[i];
      else if (variants[v].name == "random") g = rnd;
      else g = fixed_grouping(chi, variants[v].G, opt.cfg.group.tail_fraction, opt.cfg.group.eps);
      HeadCalibration hc = global;
      calibrate_grouped(hc, s, g.n_groups, g.groups, co, hs);
      kernels[i][v] = hc.kernel.kernel;
      val_mse[i][v] = hc.kernel.val_mse;
      if (variants[v].name == "oal_bootstrap") chosen[i] = hc.chosen;
    }
  });
  const double calib_seconds = total.seconds();

  // Held-out sequences and the layers' output projections.
  const CapturedQkv ev = capture_qkv(model, eval, first_n(opt.eval_seqs), eval_T, opt.batch, layers);
  std::vector<std::vector<double>> W_o;
  for (int l : layers) W_o.push_back(out_projection(model, l));

  nlohmann::json t2 = nlohmann::json::array(), f2 = nlohmann::json::array();
  std::map<std::string, nlohmann::json> by_name;
  for (size_t v = 0; v < variants.size(); ++v) {
    const auto [pre, post] = frozen_metrics(model, ev, W_o, kernel_outputs(kernels, v));
    double vm = 0;
    for (size_t i = 0; i < heads; ++i) vm += val_mse[i][v] / double(heads);
    by_name[variants[v].name] = {{"method", variants[v].name}, {"mse_pre", pre.mse},   {"relmse_pre", pre.rel_mse},
                                 {"mse_post", post.mse},       {"relmse_post", post.rel_mse}, {"val_mse", vm}};
  }
  for (const std::string& n :
       std::vector<std::string>{"taylor", "global", "random", "fixed:" + std::to_string(opt.fixed_G), "oal_bootstrap"})
    if (by_name.count(n)) t2.push_back(by_name[n]);
  for (size_t b = 0; b < baseline_table.size(); ++b) {
    const auto [pre, post] = frozen_metrics(model, ev, W_o, [&](size_t head, const HeadRows& r, double* out) {
      baseline_outputs(r, baselines[head][b], out);
    });
    double vm = 0;
    for (size_t i = 0; i < heads; ++i) vm += baseline_val[i][b] / double(heads);
    t2.push_back({{"method", baseline_table[b].name}, {"mse_pre", pre.mse},   {"relmse_pre", pre.rel_mse},
                  {"mse_post", post.mse},       {"relmse_post", post.rel_mse}, {"val_mse", vm}});
  }
  for (int G = 1; G <= opt.max_G; ++G) {
    const nlohmann::json& r = by_name[G == 1 ? "global" : "fixed:" + std::to_string(G)];
    f2.push_back({{"G", G}, {"heldout_mse", r["mse_pre"]}, {"val_mse", r["val_mse"]}, {"params_per_head", (G + 1) * (G + 2) / 2}});
  }
  const double t2_seconds = total.seconds() - calib_seconds;
  const nlohmann::json t1 = table1(model, ev, boot, opt);

  nlohmann::json groups = nlohmann::json::array();
  for (size_t i = 0; i < heads; ++i)
    groups.push_back({{"layer", contrib[i].layer}, {"head", contrib[i].head}, {"sizes", boot[i].sizes()},
                      {"chosen_init", chosen[i]}});
  return {{"layers", layers},
          {"heads", heads},
          {"head_dim", d},
          {"eval_seqs", opt.eval_seqs},
          {"eval_seq_len", eval_T},
          {"calib_seq_len", src.calib_T},
          {"stats_seq_len", src.stats_T},
          {"table1", t1},
          {"table2", t2},
          {"fig2", f2},
          {"bootstrap_groups", groups},
          {"seconds", {{"calibration", calib_seconds}, {"table2", t2_seconds}, {"total", total.seconds()}}}};
}

std::string tables_markdown(const nlohmann::json& r) {
  std::ostringstream o;
  char buf[512];
  const auto& t1 = r["table1"];
  o << "### Table 1: share of the full-output error kept when only the top-contribution dimensions are approximated\n\n";
  o << "Selected " << t1["dims_selected"] << " of " << t1["dims_total"] << " dimensions (Gaussian control: "
    << t1["dims_selected_gaussian"] << ").\n\n";
  o << "| approximation | error kept (top dims) | error kept (Gaussian Q/K) | random bulk dims (mean) | p (random >= top) |\n";
  o << "|---|---|---|---|---|\n";
  for (const auto& row : t1["rows"]) {
    std::snprintf(buf, sizeof buf, "| %s | %.1f%% | %.1f%% | %.1f%% | %.4f (%d draws) |\n",
                  row["method"].get<std::string>().c_str(), 100 * row["error_kept_top"].get<double>(),
                  100 * row["error_kept_gaussian"].get<double>(), 100 * row["error_kept_random_mean"].get<double>(),
                  row["p_value"].get<double>(), row["random_draws"].get<int>());
    o << buf;
  }
  o << "\n### Table 2: frozen-attention error (held-out sequences, every position)\n\n";
  o << "| method | MSE pre | RelMSE pre | MSE post | RelMSE post | validation MSE |\n|---|---|---|---|---|---|\n";
  for (const auto& row : r["table2"]) {
    std::snprintf(buf, sizeof buf, "| %s | %.4g | %.4f | %.4g | %.4f | %.4g |\n", row["method"].get<std::string>().c_str(),
                  row["mse_pre"].get<double>(), row["relmse_pre"].get<double>(), row["mse_post"].get<double>(),
                  row["relmse_post"].get<double>(), row["val_mse"].get<double>());
    o << buf;
  }
  o << "\n### Fig. 2: held-out MSE vs fixed group count\n\n| G | held-out MSE | validation MSE | parameters per head |\n|---|---|---|---|\n";
  for (const auto& row : r["fig2"]) {
    std::snprintf(buf, sizeof buf, "| %d | %.4g | %.4g | %d |\n", row["G"].get<int>(), row["heldout_mse"].get<double>(),
                  row["val_mse"].get<double>(), row["params_per_head"].get<int>());
    o << buf;
  }
  return o.str();
}

void write_tables(const nlohmann::json& r, const std::string& dir) {
  const std::string tmp = dir + ".tmp";
  io::fresh_dir(tmp);
  std::ostringstream c1, c2, c3;
  c1 << "method,error_kept_top,error_kept_gaussian,error_kept_random_mean,p_value,random_draws\n";
  for (const auto& x : r["table1"]["rows"])
    c1 << x["method"].get<std::string>() << "," << x["error_kept_top"] << "," << x["error_kept_gaussian"] << ","
       << x["error_kept_random_mean"] << "," << x["p_value"] << "," << x["random_draws"] << "\n";
  c2 << "method,mse_pre,relmse_pre,mse_post,relmse_post,val_mse\n";
  for (const auto& x : r["table2"])
    c2 << x["method"].get<std::string>() << "," << x["mse_pre"] << "," << x["relmse_pre"] << "," << x["mse_post"] << ","
       << x["relmse_post"] << "," << x["val_mse"] << "\n";
  c3 << "G,heldout_mse,val_mse,params_per_head\n";
  for (const auto& x : r["fig2"])
    c3 << x["G"] << "," << x["heldout_mse"] << "," << x["val_mse"] << "," << x["params_per_head"] << "\n";
  io::write_file_atomic(tmp + "/table1.csv", c1.str());
  io::write_file_atomic(tmp + "/table2.csv", c2.str());
  io::write_file_atomic(tmp + "/fig2.csv", c3.str());
  io::write_file_atomic(tmp + "/tables.md", tables_markdown(r));
  io::write_file_atomic(tmp + "/tables.json", r.dump(2) + "\n");
  io::replace_dir_atomic(tmp, dir);
}

}  // namespace hw::oal
