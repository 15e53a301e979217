#include "headwise/methods/saf/capture.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"

namespace hw::saf {

namespace {

template <typename Out>
void causal_attention_impl(const float* q, int64_t q_stride, const float* k, int64_t k_stride,
                           int T, int head_dim, Out* logits, Out* probs) {
  check(T >= 1 && head_dim >= 1, "saf::causal_attention: T (" + std::to_string(T) +
                                     ") and head_dim (" + std::to_string(head_dim) +
                                     ") must be positive");
  check(q != nullptr && k != nullptr, "saf::causal_attention: null q or k");
  check(q_stride >= head_dim && k_stride >= head_dim,
        "saf::causal_attention: row stride smaller than head_dim");
  const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
  ParallelErrors errors;  // the per-thread row's allocation is what can throw
#pragma omp parallel
  {
    std::vector<double> s;  // one row of logits, per thread
    errors.run([&] { s.resize(static_cast<size_t>(T)); });
#pragma omp for schedule(static)
    for (int i = 0; i < T; ++i) {
      if (errors.failed()) continue;  // (every thread still meets the worksharing loop)
      const float* qi = q + int64_t(i) * q_stride;
      double row_max = -INFINITY;
      for (int j = 0; j <= i; ++j) {
        const float* kj = k + int64_t(j) * k_stride;
        double dot = 0.0;
        for (int d = 0; d < head_dim; ++d) dot += double(qi[d]) * double(kj[d]);
        s[j] = dot * scale;
        row_max = std::max(row_max, s[j]);
      }
      const int64_t row = int64_t(i) * T;
      if (logits) {
        for (int j = 0; j <= i; ++j) logits[row + j] = static_cast<Out>(s[j]);
        for (int j = i + 1; j < T; ++j) logits[row + j] = Out(0);
      }
      if (probs) {
        double sum = 0.0;
        for (int j = 0; j <= i; ++j) {
          s[j] = std::exp(s[j] - row_max);
          sum += s[j];
        }
        const double inv = 1.0 / sum;
        for (int j = 0; j <= i; ++j) probs[row + j] = static_cast<Out>(s[j] * inv);
        for (int j = i + 1; j < T; ++j) probs[row + j] = Out(0);
      }
    }
  }
  errors.rethrow();
}

}  // namespace

void causal_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T,
                      int head_dim, double* logits, double* probs) {
  causal_attention_impl(q, q_stride, k, k_stride, T, head_dim, logits, probs);
}

void causal_attention(const float* q, int64_t q_stride, const float* k, int64_t k_stride, int T,
                      int head_dim, float* logits, float* probs) {
  causal_attention_impl(q, q_stride, k, k_stride, T, head_dim, logits, probs);
}

}  // namespace hw::saf
