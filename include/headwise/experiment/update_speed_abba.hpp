#pragma once
// The SAF paper's update-speed protocol: two head plans on one config, timed in fresh
// processes in the order A B B A (one round; rounds repeat it), each process doing 1 warm-up
// and 4 timed optimizer updates (accumulation x (forward + loss + backward), clipping, AdamW)
// on random tokens made in memory: no data loading, no calibration, no fit. A process's time is
// the mean of its timed updates; a pair is an A process and the B process next to it (round r:
// processes 4r with 4r+1, and 4r+3 with 4r+2); the speedup is the median over pairs of
// t_A / t_B (A is the baseline, e.g. ordinary attention). Alternating in fresh processes keeps
// the drift of a machine (clocks, other jobs) and one process's allocator state out of the ratio.
//
// Each process is `EXE bench --config FILE [--set k=v]... --time-plan PLAN --warmup W --steps S
// --result FILE` (cmd_bench.cpp), its output going to a log beside its result.
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace hw {

struct AbbaOptions {
  std::string exe;                // the headwise binary the processes run
  std::string config;             // the run config file every process reads
  std::vector<std::string> sets;  // --set overrides passed to every process
  int rounds = 2;                 // A B B A rounds, two pairs each
  int warmup = 1, steps = 4;      // per process (the paper's protocol)
  std::string work_dir;           // per-process logs and results (created)
};

// Which plan process k (from 0) of the sequence times: 0 = A, 1 = B (A B B A A B B A ...).
int abba_side(int k);
// The (A ms, B ms) pairs of per-process times listed in sequence order (a whole number of rounds).
std::vector<std::pair<double, double>> abba_pairs(const std::vector<double>& process_ms);
// Median over pairs of a / b (an even count: the mean of the middle two).
double median_pair_ratio(const std::vector<std::pair<double, double>>& pairs);

// Runs the 4 x rounds processes one after the other. Returns {"plan_a", "plan_b", "rounds",
// "warmup", "steps", "processes": [{"side", "plan", "pid", "update_ms", "mean_ms"}...],
// "pair_ratios", "speedup"}. A process that cannot start or fails is an error naming it and
// quoting its own error line.
nlohmann::json run_abba(const AbbaOptions& opt, const std::string& plan_a, const std::string& plan_b);

}  // namespace hw
