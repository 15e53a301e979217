#pragma once
// Gradient all-reduce in per-layer buckets, started while backward is still running.
//
// Backward finishes the transformer layers' gradients from the last layer to the first, then
// the rest (embeddings, final norm). The model reports each point through a hook: on_ready(l)
// for l = L-1, ..., 0 once layer l's gradients are final, then on_ready(-1) once the rest is.
// Layers are grouped, in that order, into buckets of at least min_bucket_bytes (the last group
// may be smaller); a bucket's asynchronous all-reduce (Comm::allreduce_sum_async) starts when
// its last layer is reported, and one more bucket holds the rest. finish() starts whatever has
// not started and waits for everything.
//
// Result: every float of the block reduced exactly once, the same float as one blocking
// allreduce_sum of the whole block (bit for bit with world <= 2, see comm.hpp). The buckets
// depend only on the ranges and min_bucket_bytes, so every rank starts the same collectives in
// the same order.
//
// Trainer use (one GradBuckets per gradient layout; rebuild it after a plan change moves the
// block):
//   GradBuckets buckets(comm, grads_block, grads_floats, layer_ranges);
//   per step: micro-steps 0..accum-2 run backward without the hook (local accumulation);
//   the last micro-step's backward calls buckets.on_ready(l) for l = L-1..0 and -1;
//   then buckets.finish() before the gradient norm.
// The trainer scales each micro-step's loss by 1 / (accum * world), so the sums already are
// the mean: finish() without averaging gives exactly what allreduce_sum of the block gives.
// GPU ranks: bind the compute stream first (comm.bind_stream); the hook runs on the host right
// after the kernels that finish layer l's gradients are enqueued, and finish() returns without
// blocking the host (the compute stream waits for the collectives).
// ZeRO-1 is not bucketed: it keeps one reduce_scatter_sum of the block after backward.
#include <cstdint>
#include <vector>

#include "headwise/dist/comm.hpp"

namespace hw::dist {

class GradBuckets {
 public:
  static constexpr std::int64_t kDefaultMinBucketBytes = std::int64_t{25} << 20;  // 25 MiB

  // block: the gradient block, `count` floats (host memory for a CPU communicator, device memory
  // for a GPU one). layers[l]: the floats of layer l's gradients, [begin, end) within
  // [0, count), disjoint (empty allowed); everything else in the block is the rest. Give ranges
  // that include the alignment padding after each layer's tensors (e.g. from the offset of
  // layer l's first tensor to that of layer l+1's), or each gap becomes a tiny collective of
  // its own in the rest bucket. Throws hw::Error naming the layer for a bad range.
  GradBuckets(Comm& comm, float* block, std::int64_t count, std::vector<Range> layers,
              std::int64_t min_bucket_bytes = kDefaultMinBucketBytes);
  GradBuckets(const GradBuckets&) = delete;
  GradBuckets& operator=(const GradBuckets&) = delete;

  // The hook: layer `layer` (or -1, the rest) is final. Throws hw::Error, starting nothing,
  // when it comes out of order (not L-1, ..., 0, -1) or twice in one step; the step can still
  // be completed with finish().
  void on_ready(int layer);
  // Starts the buckets not started yet (in on_ready's order), waits for all, and with
  // `average` multiplies every float by 1 / world (CPU communicators only: a GPU communicator's
  // block is device memory; fold the factor into the loss scale instead). Then the next step
  // may begin with on_ready(L-1).
  void finish(bool average = false);

  int layers() const { return static_cast<int>(layers_.size()); }
  // Buckets in the order they start; the last one is the rest.
  int buckets() const { return static_cast<int>(buckets_.size()); }
  // The coalesced ranges of bucket b (one collective each; the rest may have several).
  const std::vector<Range>& bucket_ranges(int b) const { return buckets_.at(static_cast<std::size_t>(b)).ranges; }
  // The bucket that layer l (or -1) belongs to.
  int bucket_of(int layer) const;

 private:
  struct Bucket {
    std::vector<Range> ranges;
    int last_layer = -1;  // starts when this layer is reported (-1: the rest bucket)
    int first_request = 0;  // index into requests_ of ranges[0]
    bool started = false;
  };
  void start(Bucket& b);

  Comm& comm_;
  float* block_;
  std::int64_t count_;
  std::vector<Range> layers_;
  std::vector<Bucket> buckets_;
  std::vector<int> bucket_of_layer_;  // per layer
  std::vector<Request> requests_;  // one per range of every bucket, reused every step
  int expected_;  // the next layer on_ready accepts; -1 the rest; -2 all reported
};

}  // namespace hw::dist
