#pragma once
// SAF calibration on a live model: run calibration sequences through the model (no weight
// update, no optimizer, no training data), capture every softmax head's attention and reduce
// the statistics over data-parallel ranks, so that every rank ends with the statistics of all
// calibration sequences. Also the Gate-Taylor scores (one forward/backward per batch with the
// gradient arena saved and restored).
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "headwise/calibration/window_stream.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/methods/saf/select.hpp"
#include "headwise/methods/saf/stats.hpp"
#include "headwise/model/model.hpp"

namespace hw::saf {

// Calibration sequence `index` (of T tokens): fills inputs[T] and targets[T]. Targets equal
// to -1 are left out of the Gate-Taylor loss (MQAR: only query positions count).
using CalibSource = std::function<void(int64_t index, int32_t* inputs, int32_t* targets)>;

// Where each head's T x T attention is computed for the statistics (method.capture):
//   Backend: the CPU backend's softmax tiles in fp32 (attn::softmax_probabilities), moments in
//            float64; the CUDA backend has no such op, so this path stops with an error there.
//   Reference: the host's float64 recomputation from the QKV activations (capture.hpp), on any
//            backend. This struct defaults to the reference (the tests' double path); the
//            method key defaults to "backend".
enum class CapturePath { Backend, Reference };
// "backend" | "reference"; anything else is an error naming `where`.
CapturePath parse_capture_path(const std::string& name, const std::string& where);

struct CaptureOptions {
  int64_t n_seqs = 32;   // calibration sequences over all ranks
  int64_t seq_len = 0;   // T
  int64_t batch = 8;     // rows per forward; a short last batch is padded (padding is not counted)
  StatsNeeds needs;      // what each head's accumulator keeps besides mean and M2
  CapturePath path = CapturePath::Reference;
};

// The calibration sequences of `rank`: indices rank, rank + world, ... below n.
std::vector<int64_t> rank_indices(int64_t n, int rank, int world);

// Bytes one head's accumulator holds at length T with these needs (the memory budget unit).
int64_t head_stats_bytes(int T, const StatsNeeds& needs);
// Layers whose statistics are captured per replay of the calibration batches, so that the
// statistics of one group fit `budget_mb` (at least one layer; a single layer may exceed it).
int layers_per_group(int n_layer, int n_head, int T, const StatsNeeds& needs, double budget_mb);

// Where a capture's time goes (added to, so replays accumulate): the model's forwards and the
// host's computation of every head's T x T attention (fp32 backend tiles or the float64
// reference, CaptureOptions::path) with its float64 moment updates.
struct CaptureTimes {
  double forward_seconds = 0.0, host_seconds = 0.0;
};

// This rank's calibration batches streamed through the model layer by layer (WindowStream):
// capture(l1) takes the statistics of layers [layer(), l1) and leaves the batches at layer l1,
// so that groups of layers are captured one after the other with one forward per batch in all.
// Memory: the batches' layer inputs (held_bytes), one layer's activations, one head's T x T and
// the group's accumulators. The model's activations are forward-only while this lives.
class CaptureStream {
 public:
  CaptureStream(Model<float>& model, const CalibSource& source, const CaptureOptions& opt, dist::Comm& comm);
  ~CaptureStream();
  CaptureStream(const CaptureStream&) = delete;
  CaptureStream& operator=(const CaptureStream&) = delete;
  int layer() const;
  size_t held_bytes() const;
  void skip_to(int l0);  // run the batches to layer l0 without measuring
  // Statistics of every head of layers [layer(), l1), index (l - layer()) * n_head + h, combined
  // over ranks (reduce_across_ranks). Only softmax heads are measured.
  std::vector<HeadStatsAccumulator> capture(int l1, CaptureTimes* times = nullptr);

 private:
  Model<float>& model_;
  CaptureOptions opt_;
  dist::Comm& comm_;
  std::vector<int64_t> real_;  // per batch: rows that are calibration sequences (the rest pad)
  std::unique_ptr<WindowStream> stream_;
};

// Statistics of every head of layers [l0, l1), index (l - l0) * n_head + h, over this rank's
// calibration sequences, then combined over ranks (reduce_across_ranks). Only softmax heads are
// measured; the accumulators of other kinds stay empty. Overwrites activations only (one
// CaptureStream: layers before l0 run unmeasured).
std::vector<HeadStatsAccumulator> capture_layers(Model<float>& model, const CalibSource& source,
                                                 const CaptureOptions& opt, int l0, int l1, dist::Comm& comm,
                                                 CaptureTimes* times = nullptr);

// Combine the ranks' accumulators in place so that every rank holds the statistics of the
// union of their samples, without gathering: counts, n_r * mean_r and the plain sums are
// summed over ranks; the second moments are summed with Chan's correction
// M2 = sum_r (M2_r + n_r (mean_r - mean)^2), computed per rank against the global mean.
// Identical on every rank (one deterministic allreduce per block). A no-op for world 1.
void reduce_across_ranks(HeadStatsAccumulator& acc, dist::Comm& comm);

// Gate-Taylor raw scores [layer][head]: mean over calibration sequences of
// |d loss_seq / d gate_h| (loss_seq = the sequence's mean loss over its counted targets),
// summed over ranks. Runs forward_backward on each batch; the gradient arena's contents are
// saved before and restored after, and parameters are never touched.
ScoreGrid gate_taylor_scores(Model<float>& model, const CalibSource& source, const CaptureOptions& opt,
                             dist::Comm& comm);

}  // namespace hw::saf
