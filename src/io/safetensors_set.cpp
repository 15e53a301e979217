#include "headwise/io/safetensors_set.hpp"

#include <filesystem>

#include <nlohmann/json.hpp>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "headwise/io/files.hpp"

namespace hw::io {

namespace fs = std::filesystem;

namespace {
// An index lists names and file names only: anything near this size is not one.
constexpr uintmax_t kMaxIndexBytes = 64u << 20;

// A shard is a plain file name inside the checkpoint directory.
bool plain_file_name(const std::string& n) {
  return !n.empty() && n.size() < 256 && n.find('/') == std::string::npos && n.find('\\') == std::string::npos &&
         n != "." && n != ".." && n.find('\0') == std::string::npos;
}
}  // namespace

SafetensorsSet::SafetensorsSet(const std::string& dir) : dir_(dir) {
  const std::string single = dir + "/" + kWeightsFile, index = dir + "/" + kWeightsIndexFile;
  std::error_code ec;
  if (fs::is_regular_file(single, ec)) {
    path_ = single;
    readers_[kWeightsFile] = std::make_unique<SafetensorsReader>(single);
    return;
  }
  check(fs::is_regular_file(index, ec), "checkpoint " + dir + ": missing " + kWeightsFile + " (and no " +
                                            kWeightsIndexFile + " of shards)");
  path_ = index;
  const uintmax_t size = fs::file_size(index, ec);
  check(!ec && size <= kMaxIndexBytes, index + ": " + std::to_string(size) + " bytes is too large for a shard index");
  const nlohmann::json j = parse_json(read_file(index), index);
  check(j.is_object(), index + ": not a JSON object");
  check(j.contains("weight_map") && j["weight_map"].is_object() && !j["weight_map"].empty(),
        index + ": needs a non-empty \"weight_map\" object (tensor name -> shard file)");
  for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
    check(it.value().is_string(), index + ": weight_map entry '" + text_brief(it.key()) + "' is not a file name");
    const std::string file = it.value().get<std::string>();
    check(plain_file_name(file), index + ": weight_map entry '" + text_brief(it.key()) + "' names '" + text_brief(file) +
                                     "', not a file in the checkpoint directory");
    shard_of_[it.key()] = file;
  }
  // Every shard must be there before anything is read.
  std::map<std::string, bool> seen;
  for (const auto& [name, file] : shard_of_)
    if (!seen[file]) {
      seen[file] = true;
      check(fs::is_regular_file(dir + "/" + file, ec),
            index + ": shard '" + text_brief(file) + "' (of tensor '" + text_brief(name) + "') is missing");
      shard_bytes_ += fs::file_size(dir + "/" + file, ec);
    }
}

SafetensorsSet::~SafetensorsSet() = default;

const SafetensorsReader& SafetensorsSet::reader_of(const std::string& name) const {
  if (!sharded()) return *readers_.begin()->second;
  auto it = shard_of_.find(name);
  check(it != shard_of_.end(), path_ + ": no tensor '" + name + "' in the weight_map");
  auto& r = readers_[it->second];
  if (!r) r = std::make_unique<SafetensorsReader>(dir_ + "/" + it->second);
  check(r->has(name), "shard '" + r->path() + "' has no loadable tensor '" + name + "', which " + path_ + " maps to it");
  return *r;
}

std::vector<std::string> SafetensorsSet::names() const {
  if (!sharded()) return readers_.begin()->second->names();
  std::vector<std::string> out;
  for (const auto& kv : shard_of_) out.push_back(kv.first);
  return out;
}

bool SafetensorsSet::has(const std::string& name) const {
  return sharded() ? shard_of_.count(name) > 0 : readers_.begin()->second->has(name);
}

uint64_t SafetensorsSet::data_bytes() const {
  return sharded() ? shard_bytes_ : readers_.begin()->second->data_bytes();
}

const TensorInfo& SafetensorsSet::info(const std::string& name) const { return reader_of(name).info(name); }

void SafetensorsSet::read(const std::string& name, DType dtype, const std::vector<int64_t>& shape, void* dst) const {
  reader_of(name).read(name, dtype, shape, dst);
}

void SafetensorsSet::read_f32(const std::string& name, const std::vector<int64_t>& shape, float* dst) const {
  reader_of(name).read_f32(name, shape, dst);
}

}  // namespace hw::io

namespace hw::io {

void SafetensorsSet::read_f32_range(const std::string& name, int64_t begin, int64_t n, float* dst) const {
  reader_of(name).read_f32_range(name, begin, n, dst);
}

void SafetensorsSet::stream(const std::string& name, const ByteSink& out) const { reader_of(name).stream(name, out); }

}  // namespace hw::io
