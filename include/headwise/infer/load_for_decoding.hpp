#pragma once
// A checkpoint loaded for cached decoding (generate): on the CPU backend, without gradients,
// LoRA adapters merged. With fp32 weights the decoder's layer matrices are re-laid [out, in] in
// place as they are read (cached_decoder.hpp's Fp32Layout; a checkpoint with adapters keeps [in, out]).
// With 16-bit weights each decoder matrix is rounded as it is read and its
// fp32 tensor discarded at once (Arena::discard), so the fp32 model and its 16-bit copy never
// sit in memory together: peak memory is the 16-bit weights plus one fp32 matrix. (A checkpoint
// with adapters is merged in fp32 first, so it holds both for a moment.) The model's discarded
// matrices read as zeros afterwards (re-laid ones as garbage): use it only through the CachedDecoder
// built from `half` and `fp32_layout`.
#include <memory>
#include <string>

#include "headwise/infer/cached_decoder.hpp"
#include "headwise/model/model.hpp"

namespace hw::infer {

struct DecodingModel {
  std::unique_ptr<Model<float>> model;
  HalfWeights half;  // empty for fp32 (and for a model with adapters: the CachedDecoder rounds)
  Fp32Layout fp32_layout = Fp32Layout::InOut;  // for the CachedDecoder
};

DecodingModel load_for_decoding(const std::string& dir, WeightPrecision weights);

// An already loaded model (adapters merged) made ready as load_for_decoding makes it: with fp32
// weights its decoder layer matrices are re-laid [out, in] in place (the model then serves only a
// decoder built with the layout returned); otherwise nothing changes (InOut). bench-infer times
// the products generate runs.
Fp32Layout relay_for_decoding(Model<float>& model, WeightPrecision weights);

}  // namespace hw::infer
