#include "headwise/methods/aah/features.hpp"

#include <cmath>
#include <cstdio>
#include <cstring>

#include "headwise/calibration/head_forward_stats.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/methods/aah/policy.hpp"

namespace hw::aah {

std::string doubles_to_hex(const std::vector<double>& x) {
  std::string s;
  s.reserve(x.size() * 16);
  char buf[17];
  for (double v : x) {
    uint64_t u = 0;
    std::memcpy(&u, &v, sizeof u);
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(u));
    s += buf;
  }
  return s;
}

std::vector<double> doubles_from_hex(const std::string& s) {
  check(s.size() % 16 == 0, "a hex list of doubles must have 16 digits per value, got " + std::to_string(s.size()) +
                                " digits");
  std::vector<double> x(s.size() / 16);
  for (size_t i = 0; i < x.size(); ++i) {
    uint64_t u = 0;
    for (size_t k = i * 16; k < i * 16 + 16; ++k) {
      const char c = s[k];
      const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
      check(d >= 0, "a hex list of doubles holds a character that is not a hex digit at " + std::to_string(k));
      u = (u << 4) | uint64_t(d);
    }
    std::memcpy(&x[i], &u, sizeof u);
  }
  return x;
}

FeatureTracker::FeatureTracker(int n_layer, int n_head)
    : L_(n_layer),
      H_(n_head),
      sum_(size_t(n_layer) * size_t(n_head) * kFeatures, 0.0),
      count_(size_t(n_layer), 0.0),
      ema_(sum_.size(), 0.0) {}

void FeatureTracker::observe(const AttentionView& v, int64_t row_stride) {
  check(v.layer >= 0 && v.layer < L_, "aah: observed layer out of range");
  const auto stats = head_forward_stats(v, row_stride);
  check(int(stats.size()) == H_, "aah: observed a layer with another head count");
  for (int h = 0; h < H_; ++h) {
    const auto f = stats[size_t(h)].features();
    for (int d = 0; d < kFeatures; ++d) sum_[(size_t(v.layer) * size_t(H_) + size_t(h)) * kFeatures + size_t(d)] += f[size_t(d)];
  }
  count_[size_t(v.layer)] += 1;
}

bool FeatureTracker::pending() const {
  for (double c : count_)
    if (c > 0) return true;
  return false;
}

void FeatureTracker::fold(dist::Comm& comm, double beta) {
  std::vector<double> buf(sum_);
  buf.insert(buf.end(), count_.begin(), count_.end());
  if (comm.world() > 1) comm.allreduce_sum(buf.data(), int64_t(buf.size()));
  for (int l = 0; l < L_; ++l) {
    const double n = buf[sum_.size() + size_t(l)];
    if (n <= 0) continue;
    for (size_t i = size_t(l) * size_t(H_) * kFeatures; i < size_t(l + 1) * size_t(H_) * kFeatures; ++i)
      ema_[i] = have_ ? beta * ema_[i] + (1.0 - beta) * (buf[i] / n) : buf[i] / n;
  }
  have_ = true;
  std::fill(sum_.begin(), sum_.end(), 0.0);
  std::fill(count_.begin(), count_.end(), 0.0);
}

std::vector<Vec> FeatureTracker::layer(int l) const {
  std::vector<Vec> out(static_cast<size_t>(H_), Vec(kFeatures));
  for (int h = 0; h < H_; ++h)
    for (int d = 0; d < kFeatures; ++d) out[size_t(h)][size_t(d)] = ema_[(size_t(l) * size_t(H_) + size_t(h)) * kFeatures + size_t(d)];
  return out;
}

nlohmann::json FeatureTracker::state() const {
  return {{"have", have_}, {"ema", doubles_to_hex(ema_)}, {"sum", doubles_to_hex(sum_)}, {"count", doubles_to_hex(count_)}};
}

void FeatureTracker::restore(const nlohmann::json& s) {
  auto doubles = [&](const char* key, size_t n) {
    const std::string where = std::string("features.") + key;
    std::vector<double> x;
    try {
      x = doubles_from_hex(json_string(json_at(s, key, "features"), where));
    } catch (const Error& e) {
      fail(where + ": " + e.what());
    }
    check(x.size() == n, where + ": holds " + std::to_string(x.size()) + " values, the model's " + std::to_string(L_) +
                             " layers x " + std::to_string(H_) + " heads need " + std::to_string(n));
    for (double v : x) check(std::isfinite(v), where + ": holds a value that is not finite");
    return x;
  };
  const bool have = json_bool(json_at(s, "have", "features"), "features.have");
  auto e = doubles("ema", ema_.size());
  auto su = doubles("sum", sum_.size());
  auto c = doubles("count", count_.size());
  for (double v : c) check(v >= 0, "features.count: holds a negative count");
  have_ = have;
  ema_ = std::move(e);
  sum_ = std::move(su);
  count_ = std::move(c);
}

}  // namespace hw::aah
