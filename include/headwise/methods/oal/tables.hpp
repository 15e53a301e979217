#pragma once
// The OAL paper's experiments at any scale, on a live model (`headwise oal-tables`):
//   Table 1: share of the full-output error kept when only the high-contribution dimensions
//            (the non-bulk groups of the bootstrap grouping) are approximated, per kernel
//            approximation (approximators.hpp), with the Gaussian Q/K control (grouping and
//            intervention redone on N(0, 1) queries and keys) and the random-dimension control
//            (as many bulk dimensions per head, random_draws times; p = (1 + #{R_rand >= R}) /
//            (1 + draws)); macro-averaged over (layer, held-out sequence), positions causal
//            query positions each; randomized approximations average their MSE over seeds first
//            (the random-dimension draws use one seed each);
//   Table 2: frozen-attention MSE / RelMSE before and after the output projection (metrics.hpp)
//            on every position of the held-out sequences, for the Taylor kernel (unfitted), the
//            learned global kernel (G = 1), OAL with the bootstrap grouping, OAL fixed:G, and the
//            random grouping (the bootstrap grouping's sizes, dimensions shuffled); then the
//            baselines performer, dijiang and taylorshift (baselines.hpp), each head with the
//            starting values a conversion gives it (performer: performer_features features
//            drawn from `seed`), unfitted (the paper calibrates only OAL and the global kernel),
//            and dijiang_fitted / taylorshift_fitted (their learnable values fitted as L is);
//   Fig. 2:  held-out and validation MSE and parameters per head vs the fixed group count.
// Every kernel is calibrated as the planner does (calibrate.hpp) on the calibration sequences.
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "headwise/methods/oal/pipeline.hpp"

namespace hw::oal {

struct TablesOptions {
  OalConfig cfg;  // layers, grouping options, stats prompts, fit/val sequences, the fit of L
  int eval_seqs = 4;
  int positions = 32;
  int random_draws = 100;
  int performer_features = 250;  // Table 1's and Table 2's performer
  int performer_seeds = 5;
  int fixed_G = 4;  // Table 2's fixed:G row
  int max_G = 5;    // Fig. 2: G = 1..max_G
  uint64_t seed = 1;
  int batch = 8;
};

nlohmann::json run_tables(Model<float>& model, const Sources& calib, const SequenceSource& eval, int eval_T,
                          const TablesOptions& opt);

// table1.csv, table2.csv, fig2.csv, tables.md and tables.json into `dir` (a new directory,
// written under dir.tmp and renamed at the end).
void write_tables(const nlohmann::json& result, const std::string& dir);
std::string tables_markdown(const nlohmann::json& result);

}  // namespace hw::oal
