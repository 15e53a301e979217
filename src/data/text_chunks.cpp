#include "data/text_chunks.hpp"

#include <cerrno>
#include <cstring>

#include "headwise/core/error.hpp"

namespace hw::data {

TextChunks::TextChunks(const std::string& path, int64_t target, bool cut_at_lines)
    : path_(path), target_(size_t(target)), cut_(cut_at_lines) {
  f_ = std::fopen(path.c_str(), "rb");
  if (!f_) fail("input file '" + path + "': cannot open (" + std::strerror(errno) + ")");
}

TextChunks::~TextChunks() {
  if (f_) std::fclose(f_);
}

bool TextChunks::next(std::string& out) {
  out.swap(carry_);
  carry_.clear();
  size_t scan_from = 0;  // cut points before this were looked for already
  for (;;) {
    if (cut_ && out.size() >= target_) {
      // The last cut point: out[p - 1] == '\n' and out[p] printable ASCII, p > 0.
      for (size_t p = out.size() - 1; p > scan_from; --p) {
        const auto c = static_cast<unsigned char>(out[p]);
        if (out[p - 1] == '\n' && c >= 0x21 && c <= 0x7E) {
          carry_.assign(out, p, std::string::npos);
          out.resize(p);
          return true;
        }
      }
      scan_from = out.size() - 1;
    }
    if (eof_) return !out.empty();
    const size_t want = std::max<size_t>(target_, 1 << 16);
    const size_t old = out.size();
    out.resize(old + want);
    const size_t got = std::fread(out.data() + old, 1, want, f_);
    out.resize(old + got);
    read_ += int64_t(got);
    if (got < want) {
      if (std::ferror(f_)) fail("input file '" + path_ + "': read error (" + std::strerror(errno) + ")");
      eof_ = true;
    }
  }
}

}  // namespace hw::data
