#pragma once
// One exception type for every user-facing failure: the CLI prints what() as a single
// line ("error: ...") and exits non-zero. Messages name the culprit (file, key, tensor).
#include <stdexcept>
#include <string>

namespace hw {

struct Error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

[[noreturn]] inline void fail(const std::string& msg) { throw Error(msg); }

inline void check(bool ok, const std::string& msg) {
  if (!ok) fail(msg);
}

}  // namespace hw
