#pragma once
// A naive double-precision GPT-2 forward (learned positions, MHA) written from the formulas,
// reading the model's weights by name. Static heads use a dense T x T pattern that the caller
// builds from alpha/rho; pruned heads contribute nothing. The independent reference for "the
// loss after replacement equals the loss with the dense fitted pattern".
#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "headwise/model/model.hpp"

namespace hw::test {

using Dense = std::vector<double>;  // T x T row-major

// P(i, j) = exp(alpha_j + rho_{i-j}) / sum_{k<=i} exp(alpha_k + rho_{i-k}), j <= i; 0 above.
inline Dense dense_static_pattern(const std::vector<float>& alpha, const std::vector<float>& rho, int T) {
  Dense P(size_t(T) * size_t(T), 0.0);
  for (int i = 0; i < T; ++i) {
    double z = 0.0;
    for (int k = 0; k <= i; ++k) z += std::exp(double(alpha[size_t(k)]) + double(rho[size_t(i - k)]));
    for (int j = 0; j <= i; ++j)
      P[size_t(i) * size_t(T) + size_t(j)] = std::exp(double(alpha[size_t(j)]) + double(rho[size_t(i - j)])) / z;
  }
  return P;
}

class ReferenceGpt {
 public:
  explicit ReferenceGpt(Model<float>& m) : m_(m), c_(m.config()) {}

  // Mean cross-entropy over targets != -1. `statics` maps (layer, head) of every static head to
  // its dense T x T pattern.
  double loss(const std::vector<int32_t>& x, const std::vector<int32_t>& y, int B, int T,
              const std::map<std::pair<int, int>, Dense>& statics) {
    const int C = c_.n_embd, V = c_.vocab_size, H = c_.n_head, hd = c_.head_dim();
    const int64_t N = int64_t(B) * T;
    std::vector<double> h(size_t(N * C));
    const float* wte = w("wte.weight");
    const float* wpe = w("wpe.weight");
    for (int64_t n = 0; n < N; ++n)
      for (int c = 0; c < C; ++c)
        h[size_t(n * C + c)] = double(wte[int64_t(x[size_t(n)]) * C + c]) + double(wpe[(n % T) * C + c]);
    for (int l = 0; l < c_.n_layer; ++l) {
      const std::string p = "h." + std::to_string(l) + ".";
      const auto& lay = m_.layouts()[size_t(l)];
      const int64_t W = lay.qkv_width(), O = lay.out_width();
      auto ln1 = layernorm(h, N, C, w(p + "ln_1.weight"), w(p + "ln_1.bias"));
      auto qkv = linear(ln1, N, C, W, w(p + "attn.c_attn.weight"), wb(p + "attn.c_attn.bias"));
      std::vector<double> att(size_t(N * O), 0.0);
      for (int b = 0; b < B; ++b)
        for (int hh = 0; hh < H; ++hh) {
          const auto kind = c_.head_plan.layers[size_t(l)][size_t(hh)].kind;
          if (kind == attn::HeadKind::Pruned) continue;
          const int g = lay.kv_head_of(hh);
          Dense P(size_t(T) * size_t(T), 0.0);
          if (kind == attn::HeadKind::Static) {
            P = statics.at({l, hh});
          } else {
            for (int i = 0; i < T; ++i) {
              std::vector<double> s(size_t(i + 1));
              double mx = -1e300, z = 0.0;
              for (int j = 0; j <= i; ++j) {
                double d = 0.0;
                for (int e = 0; e < hd; ++e)
                  d += qkv[size_t((int64_t(b) * T + i) * W + lay.q_col(hh) + e)] *
                       qkv[size_t((int64_t(b) * T + j) * W + lay.k_col(g) + e)];
                s[size_t(j)] = d / std::sqrt(double(hd));
                mx = std::max(mx, s[size_t(j)]);
              }
              for (int j = 0; j <= i; ++j) z += std::exp(s[size_t(j)] - mx);
              for (int j = 0; j <= i; ++j) P[size_t(i) * size_t(T) + size_t(j)] = std::exp(s[size_t(j)] - mx) / z;
            }
          }
          for (int i = 0; i < T; ++i)
            for (int e = 0; e < hd; ++e) {
              double acc = 0.0;
              for (int j = 0; j <= i; ++j)
                acc += P[size_t(i) * size_t(T) + size_t(j)] * qkv[size_t((int64_t(b) * T + j) * W + lay.v_col(g) + e)];
              att[size_t((int64_t(b) * T + i) * O + lay.out_col(hh) + e)] = acc;
            }
        }
      auto proj = linear(att, N, O, C, w(p + "attn.c_proj.weight"), wb(p + "attn.c_proj.bias"));
      for (size_t i = 0; i < h.size(); ++i) h[i] += proj[i];
      auto ln2 = layernorm(h, N, C, w(p + "ln_2.weight"), w(p + "ln_2.bias"));
      auto fc = linear(ln2, N, C, 4 * C, w(p + "mlp.c_fc.weight"), wb(p + "mlp.c_fc.bias"));
      for (double& v : fc) v = 0.5 * v * (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v)));
      auto out = linear(fc, N, 4 * C, C, w(p + "mlp.c_proj.weight"), wb(p + "mlp.c_proj.bias"));
      for (size_t i = 0; i < h.size(); ++i) h[i] += out[i];
    }
    auto lnf = layernorm(h, N, C, w("ln_f.weight"), w("ln_f.bias"));
    double sum = 0.0;
    int64_t count = 0;
    for (int64_t n = 0; n < N; ++n) {
      if (y[size_t(n)] == -1) continue;
      std::vector<double> logit(static_cast<size_t>(V));
      double mx = -1e300;
      for (int v = 0; v < V; ++v) {
        double d = 0.0;
        for (int c = 0; c < C; ++c) d += lnf[size_t(n * C + c)] * double(wte[int64_t(v) * C + c]);
        logit[size_t(v)] = d;
        mx = std::max(mx, d);
      }
      double z = 0.0;
      for (double d : logit) z += std::exp(d - mx);
      sum += mx + std::log(z) - logit[size_t(y[size_t(n)])];
      ++count;
    }
    return sum / double(count);
  }

 private:
  const float* w(const std::string& name) { return m_.params().get(name).as<float>(); }
  const float* wb(const std::string& name) {
    Tensor* t = m_.params().find(name);
    return t ? t->as<float>() : nullptr;
  }
  std::vector<double> layernorm(const std::vector<double>& x, int64_t N, int C, const float* g, const float* b) {
    std::vector<double> out(x.size());
    for (int64_t n = 0; n < N; ++n) {
      double mean = 0.0, var = 0.0;
      for (int c = 0; c < C; ++c) mean += x[size_t(n * C + c)];
      mean /= C;
      for (int c = 0; c < C; ++c) var += (x[size_t(n * C + c)] - mean) * (x[size_t(n * C + c)] - mean);
      const double rstd = 1.0 / std::sqrt(var / C + c_.layer_norm_epsilon);
      for (int c = 0; c < C; ++c)
        out[size_t(n * C + c)] = (x[size_t(n * C + c)] - mean) * rstd * double(g[c]) + (b ? double(b[c]) : 0.0);
    }
    return out;
  }
  // y = x W + b with W stored [in, out] (Hugging Face Conv1D).
  static std::vector<double> linear(const std::vector<double>& x, int64_t N, int64_t I, int64_t Oc, const float* W,
                                    const float* b) {
    std::vector<double> y(size_t(N * Oc), 0.0);
    for (int64_t n = 0; n < N; ++n)
      for (int64_t o = 0; o < Oc; ++o) {
        double acc = b ? double(b[o]) : 0.0;
        for (int64_t i = 0; i < I; ++i) acc += x[size_t(n * I + i)] * double(W[i * Oc + o]);
        y[size_t(n * Oc + o)] = acc;
      }
    return y;
  }

  Model<float>& m_;
  const ModelConfig& c_;
};

}  // namespace hw::test
