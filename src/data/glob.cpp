#include <glob.h>

#include <algorithm>

#include "headwise/core/error.hpp"
#include "headwise/data/shards.hpp"

namespace hw::data {

std::vector<std::string> expand_glob(const std::string& pattern) {
  glob_t g{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &g);
  std::vector<std::string> out;
  if (rc == 0)
    for (size_t i = 0; i < g.gl_pathc; ++i) out.emplace_back(g.gl_pathv[i]);
  ::globfree(&g);
  if (rc == GLOB_NOMATCH || (rc == 0 && out.empty())) fail("no files match '" + pattern + "'");
  if (rc != 0) fail("cannot expand '" + pattern + "' (glob error " + std::to_string(rc) + ")");
  // glob(3) sorts by the locale's collation; byte order makes shard order locale-independent.
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace hw::data
