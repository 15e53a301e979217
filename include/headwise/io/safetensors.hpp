#pragma once
// safetensors files: an 8-byte little-endian header length, a JSON header
// {name: {dtype, shape, data_offsets: [begin, end]}, "__metadata__": {str: str}}, then the data.
#include <cstdint>
#include <functional>
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

// Where a streamed tensor's bytes go, in order, in pieces of any size.
using ByteSink = std::function<void(const void* data, size_t n)>;

class SafetensorsReader {
 public:
  // Reads and validates the header: JSON, dtypes, offsets inside the file, sizes matching
  // shapes, no overlaps. Throws hw::Error naming the file and the problem. The file is mapped
  // read-only (mmap) and tensors are copied out of the mapping by read / read_f32 / stream,
  // which give the pages they touched back right after (madvise): a checkpoint's bytes are never
  // resident twice (file pages and model weights), however large it is. Before each copy the
  // file's size is checked again, so a file that shrank since it was opened is an error, not a
  // fault.
  explicit SafetensorsReader(const std::string& path);
  ~SafetensorsReader();
  SafetensorsReader(const SafetensorsReader&) = delete;
  SafetensorsReader& operator=(const SafetensorsReader&) = delete;
  const std::string& path() const { return path_; }
  std::vector<std::string> names() const;
  bool has(const std::string& name) const;
  const TensorInfo& info(const std::string& name) const;  // throws naming the tensor
  // Copy a tensor into dst, checking dtype and shape (throws naming tensor, expected, got).
  void read(const std::string& name, DType dtype, const std::vector<int64_t>& shape, void* dst) const;
  // A float tensor (F32, BF16, F16 or F64) widened (or F64 rounded) to float; shape checked.
  void read_f32(const std::string& name, const std::vector<int64_t>& shape, float* dst) const;
  // Elements [begin, begin + n) of a float tensor (any shape), widened to float like read_f32.
  void read_f32_range(const std::string& name, int64_t begin, int64_t n, float* dst) const;
  // A tensor's bytes as they are in the file (its dtype), handed to `out` in pieces.
  void stream(const std::string& name, const ByteSink& out) const;
  const std::map<std::string, std::string>& metadata() const { return metadata_; }
  // Bytes of the data section (what all tensors together can hold at most).
  uint64_t data_bytes() const { return data_bytes_; }

 private:
  std::string path_;
  std::map<std::string, TensorInfo> infos_;
  std::map<std::string, std::string> metadata_;
  uint64_t data_start_ = 0;  // file offset of the data section
  uint64_t data_bytes_ = 0;  // size of the data section
  int fd_ = -1;
  const unsigned char* map_ = nullptr;  // the whole file, read-only
  uint64_t map_bytes_ = 0;
  // The file's bytes [data_start_ + offset, + n), checked against the file's current size.
  const unsigned char* bytes_at(uint64_t offset, uint64_t n) const;
  // Drops the mapping's pages of that range from this process (the page cache keeps them).
  void release(uint64_t offset, uint64_t n) const;
  void read_bytes(uint64_t offset, uint64_t n, void* dst) const;
};

class SafetensorsWriter {
 public:
  // Copies the bytes; tensors are written in insertion order.
  void add(const std::string& name, DType dtype, const std::vector<int64_t>& shape, const void* data);
  // A tensor whose bytes `produce` hands to its sink when write() reaches it (exactly the
  // dtype-and-shape's byte count, in order, in pieces of any size): nothing is held meanwhile,
  // so a writer of a model's weights costs one piece of memory, not the model's size.
  using Producer = std::function<void(const ByteSink& sink)>;
  void add_stream(const std::string& name, DType dtype, const std::vector<int64_t>& shape, Producer produce);
  void set_metadata(const std::string& key, const std::string& value);
  // Writes path atomically (path + ".tmp", fsync, rename).
  void write(const std::string& path) const;

 private:
  struct Entry {
    std::string name;
    DType dtype;
    std::vector<int64_t> shape;
    uint64_t nbytes = 0;
    std::vector<uint8_t> bytes;  // add(): a copy
    Producer produce;            // add_stream(): filled at write()
  };
  void check_new(const std::string& name, DType dtype, const std::vector<int64_t>& shape, uint64_t& nbytes) const;
  std::vector<Entry> entries_;
  std::map<std::string, std::string> metadata_;
};

}  // namespace hw::io
