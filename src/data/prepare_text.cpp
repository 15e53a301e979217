// `headwise prepare` (prepare.hpp): inputs -> chunks -> ids (parallel, in order) -> a spool
// file of all ids -> train/val shards, all under a temp directory moved into place at the end.
#include <omp.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <new>
#include <optional>
#include <sstream>

#include "data/text_chunks.hpp"
#include "headwise/core/error.hpp"
#include "headwise/core/parallel_errors.hpp"
#include "headwise/core/process_stats.hpp"
#include "headwise/data/bpe_tokenizer.hpp"
#include "headwise/data/prepare.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/data/tokenizer.hpp"
#include "headwise/io/files.hpp"
#include "io/atomic_file.hpp"

namespace hw::data {

namespace fs = std::filesystem;

namespace {

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

File open_file(const fs::path& p, const char* mode) {
  File f(std::fopen(p.c_str(), mode));
  if (!f) fail("prepare: cannot open '" + p.string() + "'");
  return f;
}

void write_or_fail(std::FILE* f, const void* data, size_t bytes, const fs::path& p) {
  if (bytes && std::fwrite(data, 1, bytes, f) != bytes) fail("prepare: write to '" + p.string() + "' failed (disk full?)");
}

std::string shard_name(const std::string& split, int64_t i) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "_%06lld.bin", static_cast<long long>(i));
  return split + buf;
}

// Removes the temp directory unless the run got to the end.
// Removes the temp directory, and the output directory when this run created it and it is
// left empty (a failed run leaves nothing behind).
struct TempDirGuard {
  fs::path dir, out;
  bool created_out = false;
  ~TempDirGuard() {
    std::error_code ec;
    fs::remove_all(dir, ec);
    if (created_out && fs::is_empty(out, ec)) fs::remove(out, ec);
  }
};

// Shards of at most shard_tokens from the next `count` ids of the spool (`width` bytes each: 2
// for version-1 shards, 4 for version 2); returns the count.
int64_t write_split(std::FILE* spool, const fs::path& spool_path, const fs::path& dir, const std::string& split,
                    int64_t count, int64_t shard_tokens, int width) {
  int64_t n = 0;
  std::vector<uint8_t> buf(size_t(4) << 20);
  const size_t per_read = buf.size() / size_t(width);
  for (int64_t done = 0; done < count; ++n) {
    const int64_t ntok = std::min(shard_tokens, count - done);
    const fs::path path = dir / shard_name(split, n);
    io::AtomicFile out(path.string());  // a fresh file, never a link planted in the temp dir
    std::array<int32_t, 256> header{};
    header[0] = kShardMagic;
    header[1] = width == 4 ? kShardVersion32 : kShardVersion;
    header[2] = int32_t(ntok);
    out.write(header.data(), sizeof header);
    for (int64_t left = ntok; left > 0;) {
      const size_t k = size_t(std::min<int64_t>(left, int64_t(per_read)));
      if (std::fread(buf.data(), size_t(width), k, spool) != k)
        fail("prepare: short read from the spool '" + spool_path.string() + "'");
      out.write(buf.data(), k * size_t(width));
      left -= int64_t(k);
    }
    out.commit();
    done += ntok;
  }
  return n;
}

class Progress {
 public:
  Progress(bool on, int64_t total_bytes) : on_(on), total_(total_bytes), tty_(::isatty(2) == 1) {}
  void update(int64_t bytes, int64_t tokens, bool last = false) {
    if (!on_) return;
    const double t = seconds();
    if (!last && t - shown_ < (tty_ ? 0.5 : 10.0)) return;
    if (last && bytes == shown_bytes_ && !tty_) return;  // the final state is already on a line
    shown_ = t;
    shown_bytes_ = bytes;
    const double mb = double(bytes) / 1e6, rate = t > 0 ? mb / t : 0.0;
    const double eta = rate > 0 ? (double(total_ - bytes) / 1e6) / rate : 0.0;
    std::fprintf(stderr, "%sprepare: %.1f of %.1f MB (%.0f%%), %.2f MB/s, %lld tokens, ETA %.0f s%s",
                 tty_ ? "\r" : "", mb, double(total_) / 1e6, total_ > 0 ? 100.0 * double(bytes) / double(total_) : 100.0,
                 rate, static_cast<long long>(tokens), eta, tty_ && !last ? "" : "\n");
    std::fflush(stderr);
  }
  double seconds() const { return since_start_.seconds(); }

 private:
  bool on_;
  int64_t total_;
  bool tty_;
  double shown_ = -1e9;
  int64_t shown_bytes_ = -1;
  Stopwatch since_start_;
};

}  // namespace

std::string prepare_shards(const PrepareOptions& o) {
  check(!o.inputs.empty(), "prepare: no input files");
  check(!o.out_dir.empty(), "prepare: empty output directory");
  check(o.val_fraction >= 0.0 && o.val_fraction < 1.0,
        "prepare: --val-fraction must be in [0, 1), got " + std::to_string(o.val_fraction));
  check(o.shard_tokens > 0 && o.shard_tokens <= std::numeric_limits<int32_t>::max(),
        "prepare: --shard-tokens must be in [1, 2^31-1], got " + std::to_string(o.shard_tokens));
  check(o.threads >= 1 && o.threads <= 1024, "prepare: --threads must be in [1, 1024], got " + std::to_string(o.threads));
  check(o.chunk_bytes >= 1, "prepare: chunk size must be >= 1");

  // Everything that can be checked is checked before anything is written.
  std::optional<BpeTokenizer> tok;
  if (!o.tokenizer.empty()) {
    tok = BpeTokenizer::load(o.tokenizer);
    check(tok->vocab_size() <= int64_t(std::numeric_limits<int32_t>::max()),
          "tokenizer '" + o.tokenizer + "' has a vocabulary of " + std::to_string(tok->vocab_size()) +
              " tokens, above the largest token id 2^31-1");
  }
  // 16-bit shards (llm.c's version 1) unless the vocabulary needs 32 bits (version 2).
  const int width = tok && tok->vocab_size() > 65536 ? 4 : 2;
  std::optional<uint32_t> eos;
  if (o.append_eos) {
    check(tok.has_value(), "prepare: --append-eos needs --tokenizer (the byte tokenizer has no end-of-text token)");
    eos = tok->eos_id();
    check(eos.has_value(), "tokenizer '" + o.tokenizer +
                               "' has no end-of-text special token (<|endoftext|>, <|end_of_text|>, </s>, "
                               "<|im_end|>, <eos>) for --append-eos");
  }
  int64_t total_bytes = 0;
  for (const std::string& in : o.inputs) {
    std::error_code ec;
    if (!fs::is_regular_file(in, ec)) fail("input file '" + in + "' does not exist or is not a file");
    std::ifstream probe(in, std::ios::binary);
    if (!probe) fail("cannot open input file '" + in + "'");
    total_bytes += int64_t(fs::file_size(in, ec));
  }

  // Refuse to mix with an earlier run's shards: a leftover train_000007.bin would silently
  // join the glob of a smaller new dataset.
  const fs::path dir(o.out_dir);
  std::error_code ec;
  const bool existed = fs::exists(dir, ec);
  TempDirGuard tmp{dir / (".prepare." + std::to_string(::getpid()) + ".tmp"), dir, false};
  io::refuse_symlink(o.out_dir);
  fs::create_directories(dir, ec);
  tmp.created_out = !existed;
  if (ec) fail("prepare: cannot create output directory '" + o.out_dir + "' (" + ec.message() + ")");
  for (const auto& entry : fs::directory_iterator(dir)) {
    const std::string name = entry.path().filename().string();
    if (((name.starts_with("train_") || name.starts_with("val_")) && name.ends_with(".bin")) ||
        name == "tokenizer.json")
      fail("prepare: output directory '" + o.out_dir + "' already holds a prepared dataset (" + name +
           "); remove it first");
  }
  io::fresh_dir(tmp.dir.string());

  // 1. Encode into the spool, chunks in file order, a batch of chunks at a time in parallel.
  const fs::path spool_path = tmp.dir / "ids.spool";
  File spool = open_file(spool_path, "w+bx");  // x: created exclusively (O_EXCL), never a planted link
  std::vector<BpeCache> caches(size_t(o.threads));
  Progress progress(o.progress, total_bytes);
  int64_t n = 0, bytes_done = 0;
  std::vector<uint16_t> out16;
  auto emit = [&](const std::vector<uint32_t>& ids) {
    if (width == 4) {
      write_or_fail(spool.get(), ids.data(), ids.size() * sizeof(uint32_t), spool_path);
    } else {
      out16.assign(ids.begin(), ids.end());  // ids < 65536: the vocabulary is
      write_or_fail(spool.get(), out16.data(), out16.size() * sizeof(uint16_t), spool_path);
    }
    n += int64_t(ids.size());
  };
  auto encode = [&](const std::string& text, std::vector<uint32_t>& ids, int thread) {
    ids.clear();
    if (tok) tok->encode(text, ids, &caches[size_t(thread)]);
    else
      for (char c : text) ids.push_back(static_cast<unsigned char>(c));
  };
  const size_t batch = size_t(o.threads) * 4;
  std::vector<std::string> texts(batch);
  std::vector<std::vector<uint32_t>> ids(batch);
  for (size_t f = 0; f < o.inputs.size(); ++f) {
    if (f > 0 && !eos) {  // documents joined by a newline
      std::vector<uint32_t> nl;
      encode("\n", nl, 0);
      emit(nl);
    }
    TextChunks chunks(o.inputs[f], o.chunk_bytes, !tok || tok->cuttable_at_lines());
    try {
      for (bool more = true; more;) {
        size_t k = 0;
        while (k < batch && (more = chunks.next(texts[k]))) ++k;
        ParallelErrors errors;  // (a huge line's bad_alloc, say: one error, and the temp dir is removed)
#pragma omp parallel for num_threads(o.threads) schedule(dynamic, 1)
        for (int64_t i = 0; i < int64_t(k); ++i)
          errors.run([&] { encode(texts[size_t(i)], ids[size_t(i)], omp_get_thread_num()); });
        errors.rethrow();
        for (size_t i = 0; i < k; ++i) {
          emit(ids[i]);
          bytes_done += int64_t(texts[i].size());
        }
        progress.update(bytes_done, n);
      }
    } catch (const std::bad_alloc&) {  // memory follows the longest line (or a file read whole)
      fail("prepare: out of memory encoding '" + o.inputs[f] + "' (a line too long for this machine's memory?)");
    }
    if (eos) emit({*eos});
  }
  progress.update(bytes_done, n, true);

  int64_t n_val = static_cast<int64_t>(std::floor(static_cast<double>(n) * o.val_fraction));
  if (o.val_fraction > 0.0) n_val = std::max<int64_t>(n_val, 1);
  check(n - n_val > 0, "prepare: inputs hold " + std::to_string(n) + " tokens, too few for a train and a val split");

  // 2. The spool into shards.
  if (std::fflush(spool.get()) != 0) fail("prepare: write to '" + spool_path.string() + "' failed (disk full?)");
  std::rewind(spool.get());
  const int64_t n_train = n - n_val;
  const int64_t train_shards = write_split(spool.get(), spool_path, tmp.dir, "train", n_train, o.shard_tokens, width);
  const int64_t val_shards = write_split(spool.get(), spool_path, tmp.dir, "val", n_val, o.shard_tokens, width);
  spool.reset();
  fs::remove(spool_path, ec);
  if (tok) io::copy_file_atomic(o.tokenizer, (tmp.dir / "tokenizer.json").string());

  // 3. Into place.
  std::vector<fs::path> made;
  for (const auto& entry : fs::directory_iterator(tmp.dir)) made.push_back(entry.path());
  std::sort(made.begin(), made.end());
  for (const fs::path& p : made) {
    fs::rename(p, dir / p.filename(), ec);
    if (ec) fail("prepare: cannot move '" + p.string() + "' into '" + o.out_dir + "' (" + ec.message() + ")");
  }
  tmp.created_out = false;

  std::ostringstream os;
  os << "prepared " << n << " tokens (" << (tok ? tok->describe() : std::string("bytes")) << ") from "
     << o.inputs.size() << " file(s) into '" << o.out_dir << "': train " << n_train << " tokens in " << train_shards
     << " shard(s), val " << n_val << " tokens in " << val_shards << " shard(s)"
     << (width == 4 ? " of 32-bit tokens (version 2)" : "") << "; "
     << (progress.seconds() > 0 ? double(bytes_done) / 1e6 / progress.seconds() : 0.0) << " MB/s";
  return os.str();
}

std::string prepare_text_shards(const std::vector<std::string>& inputs, const std::string& out_dir,
                                double val_fraction, int64_t shard_tokens) {
  PrepareOptions o;
  o.inputs = inputs;
  o.out_dir = out_dir;
  o.val_fraction = val_fraction;
  o.shard_tokens = shard_tokens;
  return prepare_shards(o);
}

}  // namespace hw::data
