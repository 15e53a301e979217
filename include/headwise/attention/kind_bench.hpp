#pragma once
// CPU timing of one attention head of each kind (forward + backward through the layer entry
// point), to show that skipped work is really skipped. `headwise bench-attention` prints it.
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace hw::attn {

// For each T in Ts: the rows each kind's CPU entry gives (src/attention/kind_table.hpp; softmax,
// window:W, sink_window:4:W with W = min(256, max(1, T/4)), static, linear with G = 3, pruned),
// one head each, head_dim wide, batch sequences; the median over `repeats` timed forward+backward passes after one warm-up.
// Returns an array of rows {kind, T, ms_fwd_bwd, relative_to_softmax}. Throws hw::Error on
// bad arguments (empty Ts, T < 1, head_dim < 1, batch < 1, repeats < 1).
nlohmann::json bench_attention_kinds(const std::vector<int64_t>& Ts, int head_dim, int64_t batch, int repeats);

// The rows as a markdown table (one line per row, a header first).
std::string bench_attention_markdown(const nlohmann::json& rows);

// The OAL paper's Fig. 3 with our kernels: for each T, one head (batch 1, head_dim wide, run on
// the calling thread with single-threaded BLAS) of the curve rows the kinds' CPU entries give:
// softmax, linear G = 1, linear G = 4 ("OAL") and each linearization baseline
// (HeadSpec::baseline_linear) at its default spec, forward + backward, median of `repeats`
// after a warm-up. Rows {kind, T, ms_fwd_bwd (wall), cpu_ms_fwd_bwd (the calling thread's CPU
// time: robust on a shared machine), relative_to_softmax (of the CPU times), workspace_bytes (the entry
// point's scratch), total_bytes (scratch + q/k/v, outputs, their gradients, row statistics and
// parameters)}. Throws hw::Error on bad arguments.
// kinds: the curve kinds to time, by name ("softmax", "linear G=4", ...); empty: all of them. One
// kind per process lets a script alternate kinds in fresh processes (scripts/reproduce/oal.sh).
nlohmann::json bench_attention_curve(const std::vector<int64_t>& Ts, int head_dim, int repeats,
                                     const std::vector<std::string>& kinds = {});
std::string bench_curve_markdown(const nlohmann::json& rows);
std::string bench_curve_csv(const nlohmann::json& rows);  // header line, then one line per row

}  // namespace hw::attn
