#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data.
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "headwise/core/tensor.hpp"

namespace hw::io {

struct TensorInfo {
  std::string name;
  DType dtype = DType::F32;
  std::vector<int64_t> shape;
  uint64_t offset = 0;  // into the data section
  uint64_t nbytes = 0;
  int64_t numel() const;
};

class SafetensorsReader {
 public:
  // Reads and validates the header: JSON, dtypes, offsets inside the file, sizes matching
  // shapes, no overlaps. Throws hw::Error naming the file and the problem. Tensor bytes are read
  // from the file by read / read_f32 (the data section is not held in memory).
  explicit SafetensorsReader(const std::string& path);
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming the tensor
  // Copy a tensor into dst, checking dtype and shape (throws naming tensor, expected, got).
  void read(const std::string& name, DType dtype, const std::vector<int64_t>& shape, void* dst) const;
  // A float tensor (F32, BF16, F16 or F64) widened (or F64 rounded) to float; shape checked.
  void read_f32(const std::string& name, const std::vector<int64_t>& shape, float* dst) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Bytes of the data section (what all tensors together can hold at most).
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  std::string path_;
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_start_ = 0;  // file offset of the data section
  uint64_t data_bytes_ = 0;  // size of the data section
  void read_bytes(uint64_t offset, uint64_t n, void* dst) const;
};

class SafetensorsWriter {
 public:
  // Copies the bytes; tensors are written in insertion order.
  void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape, const void* data);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes path atomically (path + ".tmp", fsync, rename).
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    std::vector<uint8_t> bytes;
  };
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace hw::io
