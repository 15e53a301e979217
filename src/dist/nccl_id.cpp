// NCCL unique-id exchange (see nccl_id.hpp). File layout: the 8 magic bytes "HWNCCLID", the tag
// length as 4 little-endian bytes, the tag, then the 128 id bytes.
#include "headwise/dist/nccl_id.hpp"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <thread>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/dist/comm.hpp"
#include "headwise/io/files.hpp"

namespace hw::dist {
namespace {

constexpr char kMagic[8] = {'H', 'W', 'N', 'C', 'C', 'L', 'I', 'D'};

std::vector<char> encode(const NcclId& id, const std::string& tag) {
  std::vector<char> out(kMagic, kMagic + sizeof kMagic);
  const auto n = static_cast<std::uint32_t>(tag.size());
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  out.insert(out.end(), tag.begin(), tag.end());
  out.insert(out.end(), id.begin(), id.end());
  return out;
}

enum class Parsed { kIncomplete, kForeign, kOk };

// Parses a whole file; `tag` receives the file's tag.
Parsed decode(const std::vector<char>& bytes, std::string& tag, NcclId& id) {
  if (bytes.size() < sizeof kMagic + 4) return Parsed::kIncomplete;
  if (!std::equal(kMagic, kMagic + sizeof kMagic, bytes.begin())) return Parsed::kForeign;
  std::uint32_t n = 0;
  for (int i = 0; i < 4; ++i) n |= static_cast<std::uint32_t>(static_cast<unsigned char>(bytes[8 + i])) << (8 * i);
  const std::size_t want = sizeof kMagic + 4 + n + kNcclIdBytes;
  if (bytes.size() < want) return Parsed::kIncomplete;
  if (bytes.size() > want) return Parsed::kForeign;
  tag.assign(bytes.begin() + 12, bytes.begin() + 12 + n);
  std::copy(bytes.begin() + 12 + n, bytes.end(), id.begin());
  return Parsed::kOk;
}

}  // namespace

void share_nccl_id(Comm& comm, NcclId& id) { comm.broadcast(id.data(), static_cast<std::int64_t>(id.size()), 0); }

std::string nccl_id_path(const std::string& dir) { return (std::filesystem::path(dir) / "nccl_id").string(); }

std::string default_nccl_id_tag() {
  const char* job = std::getenv("SLURM_JOB_ID");
  const char* step = std::getenv("SLURM_STEP_ID");
  if (job == nullptr) return "";
  std::string tag = std::string(job) + "." + (step != nullptr ? step : "");
  // A requeued job keeps its id and numbers its steps from 0 again: without the restart count its
  // launch would take the files of the attempt before (an id of a dead NCCL group, a failure).
  const char* restart = std::getenv("SLURM_RESTART_COUNT");
  if (restart != nullptr && *restart != '\0' && std::string(restart) != "0") tag += ".r" + std::string(restart);
  return tag;
}

void write_nccl_id_file(const std::string& dir, const NcclId& id, const std::string& tag) {
  namespace fs = std::filesystem;
  std::error_code ec;
  fs::create_directories(dir, ec);
  check(!ec, "cannot create NCCL id folder " + dir + ": " + ec.message());
  const std::vector<char> bytes = encode(id, tag);
  // A fresh temp name beside the target (one filesystem for the rename), never a planted link.
  io::write_file_atomic(nccl_id_path(dir), std::string(bytes.begin(), bytes.end()));
}

NcclId read_nccl_id_file(const std::string& dir, const std::string& tag, double timeout_s) {
  const std::string path = nccl_id_path(dir);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  std::string seen_tag;
  bool seen_other = false;
  for (;;) {
    std::ifstream f(path, std::ios::binary);
    if (f) {
      const std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
      NcclId id{};
      const Parsed p = decode(bytes, seen_tag, id);
      check(p != Parsed::kForeign, path + " is not a headwise NCCL id file");
      if (p == Parsed::kOk) {
        if (seen_tag == tag) return id;
        seen_other = true;  // left by another launch; rank 0 of this one will replace it
      }
    }
    if (std::chrono::steady_clock::now() >= deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  char seconds[32];
  std::snprintf(seconds, sizeof seconds, "%g", timeout_s);
  fail("no NCCL id for launch '" + tag + "' in " + path + " after " + seconds + " s" +
       (seen_other ? " (found one of launch '" + seen_tag + "')" : "") +
       ": rank 0 writes it; check that the folder is shared by every node");
}

}  // namespace hw::dist
