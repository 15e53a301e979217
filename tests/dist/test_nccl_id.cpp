// NCCL id exchange without CUDA: through the communicator and through a shared folder.
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <future>
#include <string>

#include "dist/process_comm.hpp"
#include "headwise/core/error.hpp"
#include "headwise/dist/nccl_id.hpp"

using namespace hw::dist;
namespace fs = std::filesystem;

namespace {

NcclId pattern(int seed) {
  NcclId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(i * 31 + seed);
  return id;
}

// A fresh folder under the system temp folder, removed at scope end.
struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hw_nccl_id_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

std::string read_error(const std::string& dir, const std::string& tag, double timeout_s) {
  try {
    read_nccl_id_file(dir, tag, timeout_s);
  } catch (const hw::Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("share_nccl_id gives every rank rank 0's id") {
  auto comm = test::process_comm();
  NcclId id = comm->rank() == 0 ? pattern(7) : NcclId{};
  share_nccl_id(*comm, id);
  CHECK(id == pattern(7));
}

TEST_CASE("the id file round-trips, leaves no temporary behind and ignores another launch's file") {
  TempDir dir;
  const std::string sub = dir.path + "/job/ids";  // created on demand
  write_nccl_id_file(sub, pattern(1), "41.0");
  REQUIRE(read_nccl_id_file(sub, "41.0", 1.0) == pattern(1));
  std::size_t files = 0;
  for (const auto& e : fs::directory_iterator(sub)) {
    REQUIRE(e.path().filename() == "nccl_id");
    ++files;
  }
  REQUIRE(files == 1);

  // A reader of launch 42 waits past launch 41's file until rank 0 of 42 writes its own.
  auto reader = std::async(std::launch::async, [&] { return read_nccl_id_file(sub, "42.0", 60.0); });
  write_nccl_id_file(sub, pattern(2), "42.0");
  REQUIRE(reader.get() == pattern(2));
}

TEST_CASE("reading the id file fails clearly on a timeout or a foreign file") {
  TempDir dir;
  std::string e = read_error(dir.path, "7.0", 0.05);
  REQUIRE(e.find("no NCCL id for launch '7.0'") != std::string::npos);
  REQUIRE(e.find("shared by every node") != std::string::npos);

  write_nccl_id_file(dir.path, pattern(3), "6.0");
  e = read_error(dir.path, "7.0", 0.05);
  REQUIRE(e.find("found one of launch '6.0'") != std::string::npos);

  std::ofstream(nccl_id_path(dir.path), std::ios::trunc) << "not an id file at all";
  REQUIRE(read_error(dir.path, "7.0", 5.0).find("is not a headwise NCCL id file") != std::string::npos);
}

TEST_CASE("the id file carries rank 0's id to the other ranks") {
  auto comm = test::process_comm();
  // Rank 0 makes the folder and tells the others where it is.
  char path[512] = {};
  std::string made;
  if (comm->rank() == 0) {
    std::string tmpl = (fs::temp_directory_path() / "hw_nccl_ranks_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    made = tmpl;
    REQUIRE(made.size() < sizeof path);
    std::memcpy(path, made.c_str(), made.size());
  }
  comm->broadcast(path, sizeof path, 0);
  const std::string tag = "test." + std::to_string(comm->world());
  NcclId id{};
  std::string error;
  try {
    if (comm->rank() == 0) {
      id = pattern(9);
      write_nccl_id_file(path, id, tag);
    } else {
      id = read_nccl_id_file(path, tag, 60.0);
    }
  } catch (const hw::Error& e) {
    error = e.what();
  }
  CHECK(error.empty());
  CHECK(id == pattern(9));
  comm->barrier();  // every reader is done before the folder goes
  if (comm->rank() == 0) fs::remove_all(made);
}
