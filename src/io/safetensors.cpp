#include "headwise/io/safetensors.hpp"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <optional>

#include <nlohmann/json.hpp>

#include "headwise/core/error.hpp"
#include "headwise/core/json_parse.hpp"
#include "io/atomic_file.hpp"

namespace hw::io {

static_assert(std::endian::native == std::endian::little, "safetensors data is little-endian");

namespace {

// The reference implementation refuses headers above 100 MB; a larger value means corruption.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr const char* kMetadataKey = "__metadata__";

struct DTypeSpelling {
  const char* name;
  size_t size;
  std::optional<DType> dtype;  // empty: valid safetensors dtype that headwise cannot load
};

// I64 files are accepted (their layout is checked) but those tensors are not loadable.
constexpr DTypeSpelling kDTypes[] = {
    {"F32", 4, DType::F32}, {"BF16", 2, DType::BF16}, {"I32", 4, DType::I32}, {"U16", 2, DType::U16},
    {"F64", 8, DType::F64}, {"F16", 2, DType::F16},   {"I64", 8, std::nullopt},
};

const DTypeSpelling* find_dtype(const std::string& s) {
  for (const auto& d : kDTypes)
    if (s == d.name) return &d;
  return nullptr;
}

std::string shape_str(const std::vector<int64_t>& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

// numel * elem_size, or nullopt on overflow.
std::optional<uint64_t> byte_size(const std::vector<int64_t>& shape, uint64_t elem) {
  uint64_t n = elem;
  for (int64_t d : shape) {
    if (d < 0) return std::nullopt;
    if (d != 0 && n > std::numeric_limits<uint64_t>::max() / static_cast<uint64_t>(d)) return std::nullopt;
    n *= static_cast<uint64_t>(d);
  }
  return n;
}

float bf16_bits_to_float(uint16_t h) {
  const uint32_t bits = uint32_t(h) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// IEEE half: 1 sign, 5 exponent (bias 15), 10 mantissa bits; subnormals, inf and NaN kept.
float f16_bits_to_float(uint16_t h) {
  const uint32_t sign = uint32_t(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff;
  uint32_t bits = 0;
  if (exp == 0x1f) {
    bits = sign | 0x7f800000u | (man << 13);
  } else if (exp != 0) {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  } else if (man == 0) {
    bits = sign;
  } else {  // subnormal: man * 2^-24
    const float v = std::ldexp(float(man), -24);
    std::memcpy(&bits, &v, 4);
    bits |= sign;
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

bool is_nonneg_int(const nlohmann::json& v) { return v.is_number_unsigned() || (v.is_number_integer() && v.get<int64_t>() >= 0); }

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

SafetensorsReader::SafetensorsReader(const std::string& path) : path_(path) {
  const std::string where = "safetensors file '" + path + "'";
  std::error_code ec;
  check(std::filesystem::is_regular_file(path, ec), where + " does not exist");
  const uint64_t file_size = std::filesystem::file_size(path, ec);
  check(!ec, where + ": cannot get size: " + ec.message());
  check(file_size >= 8, where + ": " + std::to_string(file_size) + " bytes is too short for the 8-byte header length");

  std::ifstream in(path, std::ios::binary);
  check(in.good(), where + ": cannot open");
  uint64_t header_len = 0;
  in.read(reinterpret_cast<char*>(&header_len), 8);
  check(in.good(), where + ": cannot read the header length");
  check(header_len <= kMaxHeaderBytes, where + ": header length " + std::to_string(header_len) + " is implausibly large");
  check(header_len <= file_size - 8, where + ": header length " + std::to_string(header_len) +
                                         " exceeds the file size " + std::to_string(file_size));
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  check(in.good(), where + ": cannot read the header");

  const nlohmann::json j = parse_json(header, where + ": header");
  check(j.is_object(), where + ": header is not a JSON object");

  const uint64_t data_size = file_size - 8 - header_len;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;  // [begin, end) for the overlap check
  std::vector<std::string> range_names;
  for (auto it = j.begin(); it != j.end(); ++it) {
    const std::string& key = it.key();
    const nlohmann::json& v = it.value();
    if (key == kMetadataKey) {
      check(v.is_object(), where + ": __metadata__ is not an object");
      for (auto m = v.begin(); m != v.end(); ++m) {
        check(m.value().is_string(), where + ": __metadata__ value '" + text_brief(m.key()) + "' is not a string");
        metadata_[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    const std::string tw = where + ": tensor '" + text_brief(key, 96) + "'";
    check(v.is_object(), tw + " entry is not an object");
    check(v.contains("dtype") && v["dtype"].is_string(), tw + " has no dtype string");
    const std::string dname = v["dtype"].get<std::string>();
    const DTypeSpelling* dt = find_dtype(dname);
    check(dt != nullptr, tw + " has unsupported dtype '" + text_brief(dname) + "'");

    check(v.contains("shape") && v["shape"].is_array(), tw + " has no shape array");
    std::vector<int64_t> shape;
    for (const auto& d : v["shape"]) {
      check(is_nonneg_int(d), tw + " has a shape entry that is not a non-negative integer");
      check(d.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int64_t>::max()), tw + " has a shape entry that is too large");
      shape.push_back(d.get<int64_t>());
    }
    const std::optional<uint64_t> want = byte_size(shape, dt->size);
    check(want.has_value(), tw + " shape " + shape_str(shape) + " overflows");

    const auto& offs = v.contains("data_offsets") ? v["data_offsets"] : nlohmann::json();
    check(offs.is_array() && offs.size() == 2 && is_nonneg_int(offs[0]) && is_nonneg_int(offs[1]),
          tw + " needs data_offsets [begin, end] of non-negative integers");
    const uint64_t begin = offs[0].get<uint64_t>(), end = offs[1].get<uint64_t>();
    check(begin <= end && end <= data_size, tw + " data_offsets [" + std::to_string(begin) + ", " +
                                                std::to_string(end) + "] lie outside the data section of " +
                                                std::to_string(data_size) + " bytes");
    check(end - begin == *want, tw + " holds " + std::to_string(end - begin) + " bytes but dtype " + dname +
                                    " shape " + shape_str(shape) + " needs " + std::to_string(*want));
    ranges.emplace_back(begin, end);
    range_names.push_back(key);
    if (!dt->dtype) continue;  // layout checked, but headwise has no such dtype to load it as
    TensorInfo info;
    info.name = key;
    info.dtype = *dt->dtype;
    info.shape = std::move(shape);
    info.offset = begin;
    info.nbytes = end - begin;
    infos_.emplace(key, std::move(info));
  }

  // Two tensors must never share bytes (zero-size tensors occupy none).
  std::vector<size_t> order(ranges.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return ranges[a] < ranges[b]; });
  bool have_prev = false;
  size_t prev = 0;
  for (size_t idx : order) {
    if (ranges[idx].first == ranges[idx].second) continue;
    check(!have_prev || ranges[idx].first >= ranges[prev].second,
          where + ": tensors '" + text_brief(range_names[prev], 96) + "' and '" + text_brief(range_names[idx], 96) + "' overlap");
    have_prev = true;
    prev = idx;
  }

  data_start_ = 8 + header_len;
  data_bytes_ = data_size;
  // Tensors are copied out of a read-only mapping when asked for, and their pages released
  // after (release): a checkpoint is never resident twice (file pages and model weights).
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  check(fd_ >= 0, where + ": cannot open: " + std::strerror(errno));
  map_bytes_ = file_size;
  void* m = ::mmap(nullptr, size_t(file_size), PROT_READ, MAP_PRIVATE, fd_, 0);
  if (m == MAP_FAILED) {
    ::close(fd_);
    fd_ = -1;
    fail(where + ": cannot map " + std::to_string(file_size) + " bytes: " + std::strerror(errno));
  }
  map_ = static_cast<const unsigned char*>(m);
}

SafetensorsReader::~SafetensorsReader() {
  if (map_) ::munmap(const_cast<unsigned char*>(map_), size_t(map_bytes_));
  if (fd_ >= 0) ::close(fd_);
}

const unsigned char* SafetensorsReader::bytes_at(uint64_t offset, uint64_t n) const {
  // A mapped page past the end of a file that shrank would fault (SIGBUS): the size is checked
  // before every copy instead.
  struct stat st {};
  check(::fstat(fd_, &st) == 0 && uint64_t(st.st_size) >= data_start_ + offset + n && data_start_ + offset + n <= map_bytes_,
        "safetensors file '" + path_ + "': cannot read " + std::to_string(n) + " bytes at " +
            std::to_string(data_start_ + offset) + " (the file changed or shrank?)");
  return map_ + data_start_ + offset;
}

void SafetensorsReader::release(uint64_t offset, uint64_t n) const {
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t a = reinterpret_cast<uintptr_t>(map_ + data_start_ + offset) / page * page;
  const uintptr_t e = reinterpret_cast<uintptr_t>(map_ + data_start_ + offset + n);
  if (e > a) ::madvise(reinterpret_cast<void*>(a), size_t(e - a), MADV_DONTNEED);  // best effort
}

void SafetensorsReader::read_bytes(uint64_t offset, uint64_t n, void* dst) const {
  if (n == 0) return;
  // In pieces, each released once copied: the file's pages never pile up beside the copy.
  constexpr uint64_t kPiece = uint64_t(4) << 20;
  for (uint64_t o = 0; o < n; o += kPiece) {
    const uint64_t k = std::min(kPiece, n - o);
    std::memcpy(static_cast<char*>(dst) + o, bytes_at(offset + o, k), size_t(k));
    release(offset + o, k);
  }
}

void SafetensorsReader::stream(const std::string& name, const ByteSink& out) const {
  const TensorInfo& t = info(name);
  constexpr uint64_t kPiece = uint64_t(4) << 20;
  for (uint64_t o = 0; o < t.nbytes; o += kPiece) {
    const uint64_t k = std::min(kPiece, t.nbytes - o);
    out(bytes_at(t.offset + o, k), size_t(k));
    release(t.offset + o, k);
  }
}

std::vector<std::string> SafetensorsReader::names() const {
  std::vector<std::string> out;
  out.reserve(infos_.size());
  for (const auto& kv : infos_) out.push_back(kv.first);
  return out;
}

bool SafetensorsReader::has(const std::string& name) const { return infos_.count(name) != 0; }

const TensorInfo& SafetensorsReader::info(const std::string& name) const {
  auto it = infos_.find(name);
  check(it != infos_.end(), "safetensors file '" + path_ + "' has no loadable tensor '" + name + "'");
  return it->second;
}

void SafetensorsReader::read(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                             void* dst) const {
  const TensorInfo& t = info(name);
  const std::string tw = "safetensors file '" + path_ + "': tensor '" + name + "'";
  check(t.dtype == dtype, tw + " expected dtype " + dtype_name(dtype) + ", got " + dtype_name(t.dtype));
  check(t.shape == shape, tw + " expected shape " + shape_str(shape) + ", got " + shape_str(t.shape));
  read_bytes(t.offset, t.nbytes, dst);
}

void SafetensorsReader::read_f32(const std::string& name, const std::vector<int64_t>& shape, float* dst) const {
  const TensorInfo& t = info(name);
  const std::string tw = "safetensors file '" + path_ + "': tensor '" + name + "'";
  check(t.shape == shape, tw + " expected shape " + shape_str(shape) + ", got " + shape_str(t.shape));
  read_f32_range(name, 0, t.numel(), dst);
}

void SafetensorsReader::read_f32_range(const std::string& name, int64_t begin, int64_t n, float* dst) const {
  const TensorInfo& t = info(name);
  const std::string tw = "safetensors file '" + path_ + "': tensor '" + name + "'";
  check(begin >= 0 && n >= 0 && begin + n <= t.numel(), tw + ": elements [" + std::to_string(begin) + ", " +
                                                         std::to_string(begin + n) + ") are outside its " +
                                                         std::to_string(t.numel()));
  if (t.dtype != DType::F32 && t.dtype != DType::BF16 && t.dtype != DType::F16 && t.dtype != DType::F64)
    fail(tw + " has dtype " + dtype_name(t.dtype) + ", which is not a float type (F32, BF16, F16 or F64)");
  const uint64_t elem = dtype_size(t.dtype);
  if (t.dtype == DType::F32) return read_bytes(t.offset + uint64_t(begin) * elem, uint64_t(n) * elem, dst);
  // Widened a block at a time straight from the mapping, each block's pages released after.
  constexpr int64_t kBlock = int64_t(1) << 20;
  for (int64_t i0 = 0; i0 < n; i0 += kBlock) {
    const int64_t k = std::min(kBlock, n - i0);
    const uint64_t off = t.offset + uint64_t(begin + i0) * elem;
    const unsigned char* src = bytes_at(off, uint64_t(k) * elem);
    float* d = dst + i0;
    if (t.dtype == DType::F64) {
      for (int64_t i = 0; i < k; ++i) {
        double v = 0;
        std::memcpy(&v, src + 8 * i, 8);
        d[i] = static_cast<float>(v);
      }
    } else if (t.dtype == DType::BF16) {
      for (int64_t i = 0; i < k; ++i) {
        uint16_t h = 0;
        std::memcpy(&h, src + 2 * i, 2);
        d[i] = bf16_bits_to_float(h);
      }
    } else {
      for (int64_t i = 0; i < k; ++i) {
        uint16_t h = 0;
        std::memcpy(&h, src + 2 * i, 2);
        d[i] = f16_bits_to_float(h);
      }
    }
    release(off, uint64_t(k) * elem);
  }
}

void SafetensorsWriter::check_new(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                  uint64_t& nbytes) const {
  check(!name.empty() && name != kMetadataKey, "safetensors writer: invalid tensor name '" + name + "'");
  for (const auto& e : entries_) check(e.name != name, "safetensors writer: tensor '" + name + "' added twice");
  const std::optional<uint64_t> n = byte_size(shape, dtype_size(dtype));
  check(n.has_value(), "safetensors writer: tensor '" + name + "' has invalid shape " + shape_str(shape));
  nbytes = *n;
}

void SafetensorsWriter::add(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                            const void* data) {
  uint64_t n = 0;
  check_new(name, dtype, shape, n);
  check(n == 0 || data != nullptr, "safetensors writer: tensor '" + name + "' has no data");
  Entry e{name, dtype, shape, n, std::vector<uint8_t>(n), {}};
  if (n > 0) std::memcpy(e.bytes.data(), data, n);
  entries_.push_back(std::move(e));
}

void SafetensorsWriter::add_stream(const std::string& name, DType dtype, const std::vector<int64_t>& shape,
                                   Producer produce) {
  uint64_t n = 0;
  check_new(name, dtype, shape, n);
  check(n == 0 || bool(produce), "safetensors writer: tensor '" + name + "' has no producer");
  entries_.push_back(Entry{name, dtype, shape, n, {}, std::move(produce)});
}

void SafetensorsWriter::set_metadata(const std::string& key, const std::string& value) { metadata_[key] = value; }

void SafetensorsWriter::write(const std::string& path) const {
  // ordered_json keeps the header in insertion order, matching the data order.
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  if (!metadata_.empty()) {
    nlohmann::ordered_json m = nlohmann::ordered_json::object();
    for (const auto& [k, v] : metadata_) m[k] = v;
    header[kMetadataKey] = std::move(m);
  }
  uint64_t offset = 0;
  for (const auto& e : entries_) {
    header[e.name] = {{"dtype", dtype_name(e.dtype)},
                      {"shape", e.shape},
                      {"data_offsets", {offset, offset + e.nbytes}}};
    offset += e.nbytes;
  }
  std::string text = header.dump();
  // Pad with spaces so the data section starts 8-byte aligned, as the HF writer does.
  text.append((8 - text.size() % 8) % 8, ' ');
  const uint64_t len = text.size();

  AtomicFile f(path);
  f.write(&len, 8);
  f.write(text.data(), text.size());
  for (const auto& e : entries_) {
    if (!e.produce) {
      f.write(e.bytes.data(), e.bytes.size());
      continue;
    }
    uint64_t written = 0;
    e.produce([&](const void* data, size_t n) {
      check(written + n <= e.nbytes, "safetensors writer: tensor '" + e.name + "' produced more than its " +
                                         std::to_string(e.nbytes) + " bytes");
      f.write(data, n);
      written += n;
    });
    check(written == e.nbytes, "safetensors writer: tensor '" + e.name + "' produced " + std::to_string(written) +
                                   " of its " + std::to_string(e.nbytes) + " bytes");
  }
  f.commit();
}

}  // namespace hw::io
