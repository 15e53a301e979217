// Atomic file and directory replacement helpers.
#include <catch2/catch.hpp>

#include <filesystem>

#include "headwise/core/error.hpp"
#include "headwise/io/files.hpp"
#include "io/io_test_files.hpp"

namespace fs = std::filesystem;
using Catch::Contains;

TEST_CASE("write_file_atomic then read_file round trips bytes, including NULs", "[files]") {
  hw::test::TempDir dir;
  const std::string path = dir.file("a.bin");
  const std::string content("x\0y\n\xff z", 7);
  hw::io::write_file_atomic(path, content);
  CHECK(hw::io::read_file(path) == content);
  hw::io::write_file_atomic(path, "second");
  CHECK(hw::io::read_file(path) == "second");
  CHECK_FALSE(fs::exists(path + ".tmp"));
  hw::io::write_file_atomic(path, "");
  CHECK(hw::io::read_file(path).empty());
}

TEST_CASE("read_file and write_file_atomic name the file on failure", "[files]") {
  hw::test::TempDir dir;
  CHECK_THROWS_WITH(hw::io::read_file(dir.file("nope.txt")), Contains("nope.txt"));
  CHECK_THROWS_WITH(hw::io::write_file_atomic(dir.file("missing/x.txt"), "a"), Contains("missing/x.txt"));
  // A failed write leaves an existing file untouched.
  const std::string path = dir.file("keep.txt");
  hw::io::write_file_atomic(path, "old");
  fs::create_directory(path + ".tmp");  // the tmp path cannot be created as a file
  CHECK_THROWS_AS(hw::io::write_file_atomic(path, "new"), hw::Error);
  CHECK(hw::io::read_file(path) == "old");
}

TEST_CASE("replace_dir_atomic installs a new directory and removes the old one", "[files]") {
  hw::test::TempDir dir;
  const std::string final_dir = dir.file("ckpt");
  const std::string tmp1 = dir.file("ckpt.tmp1");
  fs::create_directory(tmp1);
  hw::io::write_file_atomic(tmp1 + "/f", "one");
  hw::io::replace_dir_atomic(tmp1, final_dir);  // no previous final_dir
  CHECK(hw::io::read_file(final_dir + "/f") == "one");
  CHECK_FALSE(fs::exists(tmp1));

  const std::string tmp2 = dir.file("ckpt.tmp2");
  fs::create_directory(tmp2);
  hw::io::write_file_atomic(tmp2 + "/g", "two");
  hw::io::replace_dir_atomic(tmp2, final_dir);
  CHECK(hw::io::read_file(final_dir + "/g") == "two");
  CHECK_FALSE(fs::exists(final_dir + "/f"));  // nothing of the old directory remains
  CHECK_FALSE(fs::exists(final_dir + ".old"));
  CHECK_FALSE(fs::exists(tmp2));

  CHECK_THROWS_WITH(hw::io::replace_dir_atomic(dir.file("absent"), final_dir), Contains("absent"));
  CHECK(hw::io::read_file(final_dir + "/g") == "two");
}
