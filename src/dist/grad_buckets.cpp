// GradBuckets (see grad_buckets.hpp): the bucket plan is fixed at construction; each step only
// starts and waits for preallocated requests.
#include "headwise/dist/grad_buckets.hpp"

#include <algorithm>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::dist {
namespace {

// Sorted by begin, touching or overlapping pieces merged, empty ones dropped.
std::vector<Range> coalesce(std::vector<Range> rs) {
  std::sort(rs.begin(), rs.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  std::vector<Range> out;
  for (const Range& r : rs) {
    if (r.size() == 0) continue;
    if (!out.empty() && r.begin <= out.back().end)
      out.back().end = std::max(out.back().end, r.end);
    else
      out.push_back(r);
  }
  return out;
}

// [0, count) minus the (sorted, disjoint) ranges.
std::vector<Range> complement(const std::vector<Range>& sorted, std::int64_t count) {
  std::vector<Range> out;
  std::int64_t at = 0;
  for (const Range& r : sorted) {
    if (r.begin > at) out.push_back({at, r.begin});
    at = r.end;
  }
  if (at < count) out.push_back({at, count});
  return out;
}

std::string layer_name(int layer) { return layer < 0 ? "the rest (-1)" : "layer " + std::to_string(layer); }

}  // namespace

GradBuckets::GradBuckets(Comm& comm, float* block, std::int64_t count, std::vector<Range> layers,
                         std::int64_t min_bucket_bytes)
    : comm_(comm), block_(block), count_(count), layers_(std::move(layers)) {
  check(count >= 0, "GradBuckets: block size " + std::to_string(count) + " is negative");
  check(count == 0 || block != nullptr, "GradBuckets: null gradient block");
  check(min_bucket_bytes >= 0, "GradBuckets: min_bucket_bytes " + std::to_string(min_bucket_bytes) + " is negative");
  const int L = static_cast<int>(layers_.size());
  for (int l = 0; l < L; ++l) {
    const Range& r = layers_[static_cast<std::size_t>(l)];
    check(r.begin >= 0 && r.begin <= r.end && r.end <= count,
          "GradBuckets: layer " + std::to_string(l) + " range [" + std::to_string(r.begin) + ", " +
              std::to_string(r.end) + ") is not inside the gradient block [0, " + std::to_string(count) + ")");
  }
  // Disjointness: after sorting by begin, each range must end before the next begins.
  std::vector<int> order(static_cast<std::size_t>(L));
  for (int l = 0; l < L; ++l) order[static_cast<std::size_t>(l)] = l;
  std::sort(order.begin(), order.end(), [this](int a, int b) {
    return layers_[static_cast<std::size_t>(a)].begin < layers_[static_cast<std::size_t>(b)].begin;
  });
  const Range* prev = nullptr;
  int prev_layer = -1;
  for (int l : order) {
    const Range& r = layers_[static_cast<std::size_t>(l)];
    if (r.size() == 0) continue;
    check(prev == nullptr || prev->end <= r.begin,
          "GradBuckets: the ranges of layers " + std::to_string(prev_layer) + " and " + std::to_string(l) + " overlap");
    prev = &r;
    prev_layer = l;
  }

  // Layers in readiness order (L-1 down to 0), grouped until a group reaches the minimum size.
  bucket_of_layer_.assign(static_cast<std::size_t>(L), -1);
  std::vector<Range> group;
  std::int64_t group_bytes = 0;
  for (int l = L - 1; l >= 0; --l) {
    const Range& r = layers_[static_cast<std::size_t>(l)];
    group.push_back(r);
    group_bytes += r.size() * static_cast<std::int64_t>(sizeof(float));
    bucket_of_layer_[static_cast<std::size_t>(l)] = static_cast<int>(buckets_.size());
    if (group_bytes >= min_bucket_bytes || l == 0) {
      buckets_.push_back(Bucket{coalesce(group), l, 0, false});
      group.clear();
      group_bytes = 0;
    }
  }
  buckets_.push_back(Bucket{complement(coalesce(layers_), count), -1, 0, false});

  int n_requests = 0;
  for (Bucket& b : buckets_) {
    b.first_request = n_requests;
    n_requests += static_cast<int>(b.ranges.size());
  }
  requests_.resize(static_cast<std::size_t>(n_requests));
  expected_ = L - 1;
}

int GradBuckets::bucket_of(int layer) const {
  check(layer >= -1 && layer < layers(), "GradBuckets: " + layer_name(layer) + " outside [-1, " +
                                             std::to_string(layers()) + ")");
  return layer < 0 ? buckets() - 1 : bucket_of_layer_[static_cast<std::size_t>(layer)];
}

void GradBuckets::start(Bucket& b) {
  for (std::size_t i = 0; i < b.ranges.size(); ++i)
    requests_[static_cast<std::size_t>(b.first_request) + i] =
        comm_.allreduce_sum_async(block_ + b.ranges[i].begin, b.ranges[i].size());
  b.started = true;
}

void GradBuckets::on_ready(int layer) {
  check(layer >= -1 && layer < layers(), "GradBuckets: hook for " + layer_name(layer) + " outside [-1, " +
                                             std::to_string(layers()) + ")");
  if (layer != expected_) {
    // Layers count down to -1, so one above the expected one has been reported already.
    const bool repeated = expected_ == -2 || layer > expected_;
    check(!repeated, "GradBuckets: " + layer_name(layer) + " reported ready twice in one step");
    fail("GradBuckets: " + layer_name(layer) + " reported ready before " + layer_name(expected_) +
         " (backward must report layers L-1 down to 0, then -1 for the rest)");
  }
  Bucket& b = buckets_[static_cast<std::size_t>(bucket_of(layer))];
  if (b.last_layer == layer) start(b);
  expected_ = layer == -1 ? -2 : layer - 1;
}

void GradBuckets::finish(bool average) {
  check(!average || !comm_.device_buffers(),
        "GradBuckets: averaging device gradients is not supported: scale the loss by 1 / world instead");
  for (Bucket& b : buckets_)
    if (!b.started) start(b);
  for (Request& r : requests_) comm_.wait(r);
  for (Bucket& b : buckets_) b.started = false;
  expected_ = layers() - 1;
  if (average && comm_.world() > 1) {
    const float inv = 1.0f / static_cast<float>(comm_.world());
    for (std::int64_t i = 0; i < count_; ++i) block_[i] *= inv;
  }
}

}  // namespace hw::dist
