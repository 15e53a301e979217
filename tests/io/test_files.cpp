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
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename() == "a.bin");  // no temp left
  hw::io::write_file_atomic(path, "");
  CHECK(hw::io::read_file(path).empty());
}

TEST_CASE("read_file and write_file_atomic name the file on failure", "[files]") {
  hw::test::TempDir dir;
  CHECK_THROWS_WITH(hw::io::read_file(dir.file("nope.txt")), Contains("nope.txt"));
  CHECK_THROWS_WITH(hw::io::write_file_atomic(dir.file("missing/x.txt"), "a"), Contains("missing/x.txt"));
  // A failed write leaves what is there untouched, and no temp file: a directory at the path.
  const std::string path = dir.file("keep");
  fs::create_directory(path);
  hw::io::write_file_atomic(path + "/f", "old");
  CHECK_THROWS_AS(hw::io::write_file_atomic(path, "new"), hw::Error);
  CHECK(hw::io::read_file(path + "/f") == "old");
  for (const auto& e : fs::directory_iterator(dir.path())) CHECK(e.path().filename() == "keep");
}

TEST_CASE("writers refuse a link at the target and never open a planted temp name", "[files][hostile]") {
  hw::test::TempDir dir;
  const std::string victim = dir.file("victim.txt");
  hw::io::write_file_atomic(victim, "precious");
  // A link at the target path: an error, the file it points to untouched.
  fs::create_symlink(victim, dir.file("out.json"));
  CHECK_THROWS_WITH(hw::io::write_file_atomic(dir.file("out.json"), "x"), Contains("out.json' is a symbolic link"));
  // The old fixed temp name planted as a link: the writer picks a fresh name and never opens it.
  fs::create_symlink(victim, dir.file("cfg.json.tmp"));
  hw::io::write_file_atomic(dir.file("cfg.json"), "new");
  CHECK(hw::io::read_file(dir.file("cfg.json")) == "new");
  CHECK(hw::io::read_file(victim) == "precious");
  // Logs: a symbolic link or a second hard link is refused, a plain file appended to.
  fs::create_symlink(victim, dir.file("metrics.jsonl"));
  CHECK_THROWS_WITH(hw::io::AppendFile(dir.file("metrics.jsonl"), false), Contains("is a symbolic link"));
  CHECK_THROWS_WITH(hw::io::AppendFile(dir.file("metrics.jsonl"), true), Contains("is a symbolic link"));
  fs::create_hard_link(victim, dir.file("hard.jsonl"));
  CHECK_THROWS_WITH(hw::io::AppendFile(dir.file("hard.jsonl"), true), Contains("not a regular file of its own"));
  CHECK(hw::io::read_file(victim) == "precious");
  {
    hw::io::AppendFile log(dir.file("log.jsonl"), true);
    log.write_line("{\"a\": 1}");
    log.write_line("{\"b\": 2}");
  }
  hw::io::AppendFile(dir.file("log.jsonl"), false).write_line("3");
  CHECK(hw::io::read_file(dir.file("log.jsonl")) == "{\"a\": 1}\n{\"b\": 2}\n3\n");
  // Directories: a link is refused by ensure_dir, removed (not followed) by fresh_dir.
  fs::create_directory(dir.file("elsewhere"));
  hw::io::write_file_atomic(dir.file("elsewhere/keep"), "k");
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("ckpts"));
  CHECK_THROWS_WITH(hw::io::ensure_dir(dir.file("ckpts")), Contains("ckpts' is a symbolic link"));
  hw::io::fresh_dir(dir.file("ckpts"));
  CHECK(fs::is_directory(fs::symlink_status(dir.file("ckpts"))));
  CHECK(hw::io::read_file(dir.file("elsewhere/keep")) == "k");
  fs::create_directory_symlink(dir.file("elsewhere"), dir.file("final"));
  CHECK_THROWS_WITH(hw::io::replace_dir_atomic(dir.file("ckpts"), dir.file("final")), Contains("is a symbolic link"));
  CHECK(hw::io::read_file(dir.file("elsewhere/keep")) == "k");
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
