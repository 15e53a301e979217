#pragma once
// The weights of a checkpoint directory as one set of tensors: DIR/model.safetensors, or the
// shards that DIR/model.safetensors.index.json maps every tensor to (Hugging Face's
// save_pretrained layout). Shards are opened when a tensor of theirs is first read.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "headwise/io/safetensors.hpp"

namespace hw::io {

inline constexpr const char* kWeightsFile = "model.safetensors";
inline constexpr const char* kWeightsIndexFile = "model.safetensors.index.json";

class SafetensorsSet {
 public:
  // Throws naming the directory when it has neither file, and naming the index, the tensor or
  // the shard when the index is malformed, names a shard outside the directory or a missing one.
  explicit SafetensorsSet(const std::string& dir);
  ~SafetensorsSet();
  // The directory's weight file, or its index (what errors name).
  const std::string& path() const { return path_; }
  bool sharded() const { return !shard_of_.empty(); }
  std::vector<std::string> names() const;  // every loadable tensor, sorted
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;
  // Bytes of tensor data in the weight files (sharded: the shards' sizes, headers included), for
  // comparing what a config.json asks for with what is there before allocating it.
  uint64_t data_bytes() const;
  void read(const std::string& name, DType dtype, const std::vector<int64_t>& shape, void* dst) const;
  void read_f32(const std::string& name, const std::vector<int64_t>& shape, float* dst) const;
  void read_f32_range(const std::string& name, int64_t begin, int64_t n, float* dst) const;
  void stream(const std::string& name, const ByteSink& out) const;  // the bytes as stored

 private:
  const SafetensorsReader& reader_of(const std::string& name) const;
  std::string dir_, path_;
  std::map<std::string, std::string> shard_of_;  // tensor -> shard file name (sharded only)
  uint64_t shard_bytes_ = 0;                     // sum of the shards' file sizes (sharded only)
  mutable std::map<std::string, std::unique_ptr<SafetensorsReader>> readers_;  // by file name
};

}  // namespace hw::io
