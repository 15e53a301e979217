#pragma once
// Shared by the fuzz targets: a private scratch file for parsers that read paths, and the rule
// every target checks -- a hostile input may only end in hw::Error (the CLI's one `error:` line);
// any other exception, a crash, a sanitizer report or a hang is a finding.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>

#include "headwise/core/error.hpp"

namespace hw::fuzz {

// A file of this process's own under TMPDIR (or /tmp), rewritten per input.
inline const std::string& scratch_path(const char* name) {
  static const std::string path = [&] {
    const char* dir = std::getenv("TMPDIR");
    return std::string(dir && *dir ? dir : "/tmp") + "/headwise_fuzz_" + name + "_" + std::to_string(::getpid());
  }();
  return path;
}

inline void write_scratch(const std::string& path, const uint8_t* data, size_t size) {
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) std::abort();
  if (size && std::fwrite(data, 1, size, f) != size) std::abort();
  std::fclose(f);
}

// Runs fn; hw::Error is the expected way to refuse input. Anything else aborts (a finding).
template <class Fn>
void expect_only_errors(Fn&& fn) {
  try {
    fn();
  } catch (const Error&) {
  } catch (const std::exception& e) {
    std::fprintf(stderr, "finding: an exception other than hw::Error escaped: %s\n", e.what());
    std::abort();
  }
}

}  // namespace hw::fuzz
