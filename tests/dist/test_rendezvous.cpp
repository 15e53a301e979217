// The file rendezvous for launches without PMIx (rendezvous.hpp), with threads standing in for
// the ranks of one launch and a stand-in id: every rank gets rank 0's id; a rank that never
// arrives, or one that disagrees about the world, is one error on every rank within the
// timeout (nothing waits forever).
#include <catch2/catch.hpp>

#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/dist/rendezvous.hpp"

using namespace hw::dist;
using Catch::Matchers::Contains;
namespace fs = std::filesystem;

namespace {

NcclId stand_in(int seed) {
  NcclId id{};
  for (std::size_t i = 0; i < id.size(); ++i) id[i] = static_cast<std::uint8_t>(i * 7 + seed);
  return id;
}

struct TempDir {
  std::string path;
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "hw_rendezvous_XXXXXX").string();
    REQUIRE(::mkdtemp(tmpl.data()) != nullptr);
    path = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

LaunchInfo rank_of(int rank, int world) {
  LaunchInfo li;
  li.launcher = "slurm";
  li.rank = rank;
  li.world = world;
  li.rank_var = "SLURM_PROCID";
  li.world_var = "SLURM_NTASKS";
  return li;
}

struct Outcome {
  bool ok = false;
  NcclId id{};
  std::string error;
  double seconds = 0;
};

// Ranks `present` of `world` meet in dir under tag (each started on its own thread); `worlds`
// overrides the world a rank believes in.
std::vector<Outcome> meet(const std::string& dir, const std::string& tag, int world, const std::vector<int>& present,
                          double timeout_s, std::vector<int> worlds = {}) {
  std::vector<std::future<Outcome>> futures;
  for (int r : present) {
    const int w = worlds.empty() ? world : worlds[size_t(r)];
    futures.push_back(std::async(std::launch::async, [=] {
      Outcome o;
      const auto t0 = std::chrono::steady_clock::now();
      try {
        o.id = rendezvous_through_files(rank_of(r, w), dir, tag, timeout_s, [] { return stand_in(42); });
        o.ok = true;
      } catch (const hw::Error& e) {
        o.error = e.what();
      }
      o.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
      return o;
    }));
  }
  std::vector<Outcome> out;
  for (auto& f : futures) out.push_back(f.get());
  return out;
}

}  // namespace

TEST_CASE("every rank gets rank 0's id through the folder", "[dist][rendezvous]") {
  TempDir d;
  const auto out = meet(d.path, "77.0", 4, {3, 1, 0, 2}, 20.0);
  for (const auto& o : out) {
    INFO(o.error);
    REQUIRE(o.ok);
    CHECK(o.id == stand_in(42));
  }
  // A later launch in the same folder (another tag) is not confused by this one's files.
  const auto next = meet(d.path, "78.0", 2, {0, 1}, 20.0);
  CHECK((next[0].ok && next[1].ok));
}

TEST_CASE("a rank that never arrives is one error on every rank after the timeout", "[dist][rendezvous]") {
  TempDir d;
  const auto out = meet(d.path, "90.1", 3, {0, 1}, 1.0);  // rank 2 never starts
  REQUIRE(out.size() == 2);
  CHECK_FALSE(out[0].ok);
  CHECK_THAT(out[0].error, Contains("rank 2 of 3 never arrived") && Contains("within 1 s"));
  CHECK_FALSE(out[1].ok);
  CHECK_THAT(out[1].error, Contains("rank 0 gave up: rank 2 of 3 never arrived"));
  for (const auto& o : out) CHECK(o.seconds < 5.0);  // rank 1 stops with rank 0, not after a timeout of its own
}

TEST_CASE("rank 0 that never comes is an error on the others, not a hang", "[dist][rendezvous]") {
  TempDir d;
  const auto out = meet(d.path, "91.0", 2, {1}, 0.5);
  CHECK_FALSE(out[0].ok);
  CHECK_THAT(out[0].error, Contains("rank 0 wrote no id") && Contains("within 1 s"));
}

TEST_CASE("ranks that disagree about the world are refused, naming both", "[dist][rendezvous]") {
  TempDir d;
  const auto out = meet(d.path, "92.0", 2, {0, 1}, 5.0, {2, 3});
  CHECK_THAT(out[0].error, Contains("rank 1") && Contains("says the world has 3 ranks, rank 0 says 2 (SLURM_NTASKS)"));
  CHECK_THAT(out[1].error, Contains("rank 0 gave up"));
}

TEST_CASE("a launch tag that could leave the folder is refused", "[dist][rendezvous]") {
  TempDir d;
  CHECK_THROWS_WITH(rendezvous_through_files(rank_of(0, 1), d.path, "../x", 1.0, [] { return stand_in(1); }),
                    Contains("launch tag '../x' may hold only"));
}
