// Llama 3 scaling: wavelengths above original_max_position_embeddings / low_freq_factor are
// divided by `factor`, those below original / high_freq_factor are kept, and the band between
// interpolates linearly in original / wavelength.
#include "headwise/model/rope_freqs.hpp"

#include <cmath>
#include <numbers>

namespace hw {

std::vector<double> rope_inv_freq(const ModelConfig& cfg) {
  const int hd = cfg.head_dim();
  std::vector<double> f(size_t(hd / 2));
  for (int i = 0; i < hd / 2; ++i) f[size_t(i)] = std::pow(cfg.rope_theta, -2.0 * double(i) / double(hd));
  const RopeScaling& r = cfg.rope_scaling;
  if (r.type != "llama3") return f;
  const double old_len = r.original_max_position_embeddings;
  const double low_wavelen = old_len / r.low_freq_factor, high_wavelen = old_len / r.high_freq_factor;
  for (double& x : f) {
    const double wavelen = 2.0 * std::numbers::pi / x;
    if (wavelen > low_wavelen) {
      x /= r.factor;
    } else if (wavelen >= high_wavelen) {  // medium band (transformers: neither < high nor > low)
      const double smooth = (old_len / wavelen - r.low_freq_factor) / (r.high_freq_factor - r.low_freq_factor);
      x = (1.0 - smooth) * x / r.factor + smooth * x;
    }
  }
  return f;
}

}  // namespace hw
