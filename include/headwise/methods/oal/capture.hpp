#pragma once
// What OAL reads from a live model: the fused post-RoPE Q|K|V activations of chosen layers for
// a set of sequences (one forward per batch, no weight update, no training data), views of one
// head in them, a layer's frozen output projection, and the contribution statistics of every
// query head of the chosen layers. Every data-parallel rank reads the same sequences (the
// fits downstream are then identical on every rank without reduction).
#include <cstdint>
#include <functional>
#include <vector>

#include "headwise/methods/oal/contribution.hpp"
#include "headwise/methods/oal/kernel.hpp"
#include "headwise/model/model.hpp"

namespace hw::oal {

// Sequence `index` of T tokens: fills inputs[T] and targets[T].
using SequenceSource = std::function<void(int64_t index, int32_t* inputs, int32_t* targets)>;

struct CapturedQkv {
  int T = 0;
  std::vector<int> layers;                          // model layer of each slot
  std::vector<std::vector<std::vector<float>>> qkv;  // [slot][sequence] -> [T, qkv_width]
  int slot_of(int layer) const;                     // -1 when not captured
};

// Sequences `indices` (each T tokens) through the model in batches of `batch`: every head's
// columns of the layers (a head that reads no Q/K has none worth reading). Overwrites activations only.
CapturedQkv capture_qkv(Model<float>& model, const SequenceSource& source, const std::vector<int64_t>& indices, int T,
                        int batch, const std::vector<int>& layers);

// capture_qkv's streaming form (WindowStream): the sequences run through the model layer by
// layer and `each` gets every one of `layers` (ascending) captured alone, in turn, so that one
// layer's QKV is held at a time; the same numbers as capture_qkv's slot of that layer.
void stream_qkv(Model<float>& model, const SequenceSource& source, const std::vector<int64_t>& indices, int T,
                int batch, const std::vector<int>& layers, const std::function<void(const CapturedQkv&)>& each);

// Query head h of captured layer slot `slot`, sequence `seq` (V of its KV head).
HeadRows head_rows(const Model<float>& model, const CapturedQkv& c, int slot, int seq, int h);

// Layer l's attention output projection W_O as [out_width, n_embd] (parameters or frozen buffers).
std::vector<double> out_projection(const Model<float>& model, int l);

// Contribution statistics of every softmax query head of the captured layers (one per prompt =
// sequence): the heads OAL converts. Heads of other kinds (an earlier method's) are left out.
std::vector<HeadContribution> contributions(const Model<float>& model, const CapturedQkv& c);

}  // namespace hw::oal
