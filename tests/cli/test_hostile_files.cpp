// Hostile files (issue 35): crafted checkpoints, configs, trainer.json, tokenizer.json and run
// folders, each made by a generator below, fed to the CLI under `ulimit -v` (4 GiB) and a time
// limit. Each must end in exactly one `error:` line naming the culprit and exit code 1, within a
// few seconds, with nothing written outside the run directory: every test keeps a folder
// "outside" holding one victim file that links planted in the run directory point at, and checks
// it is unchanged afterwards.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>

#include "cli/cli_util.hpp"
#include "headwise/data/shards.hpp"
#include "headwise/io/files.hpp"
#include "headwise/io/safetensors.hpp"
#include "headwise/kernels/backend.hpp"
#include "headwise/model/checkpoint.hpp"

using namespace hw;
namespace fs = std::filesystem;

namespace {

// A scratch folder with run/ (what headwise may write) and outside/victim.txt (what it must not).
struct Sandbox {
  std::string root, run, outside, victim;
  explicit Sandbox(const std::string& name)
      : root(test::cli_temp_dir("hostile_" + name)), run(root + "/run"), outside(root + "/outside"),
        victim(outside + "/victim.txt") {
    fs::create_directories(outside);
    test::write_text(victim, "precious\n");
  }
  // outside/ still holds exactly the victim, unchanged.
  bool outside_untouched() const {
    int n = 0;
    for (const auto& e : fs::directory_iterator(outside)) n += e.path().filename() == "victim.txt" ? 1 : 100;
    std::ifstream in(victim);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    return n == 1 && text == "precious\n";
  }
};

// One error line naming the culprit, exit 1 (not a signal, not a timeout), within max_seconds.
void expect_refused(const test::LimitedResult& r, const std::string& needle, double max_seconds = 20) {
  INFO(r.out.substr(0, 4000));
  CHECK(r.code == 1);
  CHECK(test::error_lines(r.out) == 1);
  CHECK(r.out.find(needle) != std::string::npos);
  CHECK(r.seconds < max_seconds);
}

std::string deep_json(int levels) { return std::string(size_t(levels), '[') + std::string(size_t(levels), ']'); }

// A tiny checkpoint with a linear head (layer 0 head 0) and a static head, written in process.
std::string make_checkpoint(const std::string& dir) {
  ModelConfig mc;
  mc.n_layer = 2;
  mc.n_head = 2;
  mc.n_embd = 16;
  mc.block_size = 16;
  mc.vocab_size = 32;
  mc.head_plan = attn::HeadPlan::from_json(nlohmann::json::parse(R"([["linear","softmax"],["static","softmax"]])"));
  mc.validate();
  Model<float> m(mc, cpu_backend<float>());
  m.init_weights(3);
  save_model_files(m, dir);
  return dir;
}

// Rewrites a safetensors file through `edit` (name -> tensor), keeping the metadata.
struct RawTensor {
  DType dtype;
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};
template <class Fn>
void rewrite_safetensors(const std::string& path, Fn&& edit) {
  std::map<std::string, RawTensor> ts;
  {
    io::SafetensorsReader st(path);
    for (const auto& n : st.names()) {
      const auto& info = st.info(n);
      RawTensor t{info.dtype, info.shape, std::vector<uint8_t>(info.nbytes)};
      st.read(n, info.dtype, info.shape, t.bytes.data());
      ts[n] = std::move(t);
    }
  }
  edit(ts);
  io::SafetensorsWriter w;
  for (const auto& [n, t] : ts) w.add(n, t.dtype, t.shape, t.bytes.data());
  w.write(path);
}

RawTensor int_tensor(const std::vector<int32_t>& v) {
  RawTensor t{DType::I32, {int64_t(v.size())}, std::vector<uint8_t>(v.size() * 4)};
  std::memcpy(t.bytes.data(), v.data(), t.bytes.size());
  return t;
}

// Token shards and a tiny config (optionally with a method) pointing at them.
std::string make_run_config(const std::string& dir, const std::string& method = R"({"name": "none"})") {
  std::vector<uint16_t> toks(3000);
  for (size_t i = 0; i < toks.size(); ++i) toks[i] = uint16_t((i * 5 + i / 7) % 30);
  data::write_shard(dir + "/train_0.bin", toks);
  data::write_shard(dir + "/val_0.bin", std::vector<uint16_t>(toks.begin(), toks.begin() + 700));
  const std::string cfg = dir + "/tiny.json";
  test::write_text(cfg, R"({
    "model": {"n_layer": 2, "n_head": 4, "n_embd": 32, "block_size": 16, "vocab_size": 32},
    "train": {"micro_batch": 2, "seq_len": 16, "steps": 4, "lr": 1e-2, "warmup_steps": 1, "eval_every": 0,
              "eval_batches": 2, "checkpoint_every": 2, "seed": 3, "threads": 1},
    "data": {"train": ")" + dir + R"(/train_*.bin", "val": ")" + dir + R"(/val_*.bin", "shuffle": false},
    "method": )" + method + "}");
  return cfg;
}

const std::string kFixtures = std::string(HEADWISE_SOURCE_DIR) + "/tests/fixtures/tokenizers/";

}  // namespace

TEST_CASE("hostile: a tensor stored under two names, and bad int tensors, are refused", "[cli][hostile]") {
  Sandbox s("dupes");
  const std::string ck = make_checkpoint(s.root + "/ck");
  test::write_text(s.root + "/p.txt", "1 2 3");
  const std::string gen = "generate --prompt-tokens " + s.root + "/p.txt --max-new 2 --checkpoint ";
  // The valid checkpoint decodes.
  REQUIRE(test::run_limited(gen + ck).code == 0);
  // Both spellings of the groups: one passes the check, the other would be loaded (issue 35, 1).
  const std::string dup = s.root + "/dup";
  fs::copy(ck, dup);
  rewrite_safetensors(dup + "/model.safetensors", [](auto& ts) {
    ts["transformer.h.0.attn.linear.0.groups"] = int_tensor(std::vector<int32_t>(8, 1000));
  });
  expect_refused(test::run_limited(gen + dup), "are the same tensor 'h.0.attn.linear.0.groups' stored twice");
  // One name, values out of 1..G.
  const std::string bad = s.root + "/bad";
  fs::copy(ck, bad);
  rewrite_safetensors(bad + "/model.safetensors",
                      [](auto& ts) { ts["h.0.attn.linear.0.groups"] = int_tensor({1, 1, 1, 1000, 1, 1, 1, 1}); });
  expect_refused(test::run_limited(gen + bad), "groups[3] = 1000 is outside 1..1");
  expect_refused(test::run_limited("inspect --checkpoint " + bad), "groups[3] = 1000 is outside 1..1");
  // G above head_dim (8): L of 10 x 10 (the decoder's O(G^3) loop, issue 35, 9).
  const std::string big_g = s.root + "/big_g";
  fs::copy(ck, big_g);
  rewrite_safetensors(big_g + "/model.safetensors", [](auto& ts) {
    RawTensor L{DType::F32, {10, 10}, std::vector<uint8_t>(400, 0)};
    ts["h.0.attn.linear.0.L"] = L;
  });
  expect_refused(test::run_limited(gen + big_g), "must be (G+1)x(G+1) with G in 1..head_dim (8)");
  // --init-from reads the same way.
  const std::string cfg = make_run_config(s.root);
  expect_refused(test::run_limited("train --config " + cfg + " --out " + s.run + " --set model.n_head=2 --set " +
                                   "model.n_embd=16 --init-from " + bad),
                 "groups[3] = 1000 is outside 1..1");
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: corrupted AAH planner state in trainer.json is refused on --resume", "[cli][hostile]") {
  Sandbox s("aah_state");
  const std::string cfg = make_run_config(
      s.root, R"({"name": "aah", "windows": [2, 4, 8, 16], "warmup_steps": 1, "control_every": 1, "seed": 3})");
  const auto ok = test::run_limited("train --config " + cfg + " --out " + s.root + "/first");
  INFO(ok.out);
  REQUIRE(ok.code == 0);
  const std::string ck = s.root + "/first/checkpoints/step_2";
  nlohmann::json tj = nlohmann::json::parse(io::read_file(ck + "/trainer.json"));
  REQUIRE(tj["planners"][0]["name"] == "aah");
  // A head index out of range and a hierarchy naming a head the model lacks (issue 35, 2).
  nlohmann::json bad = tj;
  bad["planners"][0]["state"]["index"][0] = 99;
  test::write_text(ck + "/trainer.json", bad.dump());
  const std::string resume = "train --config " + cfg + " --out " + s.run + " --resume " + ck;
  expect_refused(test::run_limited(resume), "planners[0].state: index[0]: 99 is outside [0, 3]");
  bad = tj;
  bad["planners"][0]["state"]["hierarchy"][1][0][0][0] = 1 << 30;
  test::write_text(ck + "/trainer.json", bad.dump());
  expect_refused(test::run_limited(resume), "planners[0].state: hierarchy[1][0][0][0]: 1073741824 is outside [0, 3]");
  // trainer.json nested 100k deep (issue 35, 3).
  test::write_text(ck + "/trainer.json", deep_json(100000));
  expect_refused(test::run_limited(resume), "JSON nested deeper than 64 levels");
  // Negative counters.
  bad = tj;
  bad["step"] = -5;
  test::write_text(ck + "/trainer.json", bad.dump());
  expect_refused(test::run_limited(resume), "trainer.json: step: -5 is outside");
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: JSON nested 100k levels deep is refused by every loader", "[cli][hostile]") {
  Sandbox s("deep");
  const std::string deep = deep_json(100000);  // 200 KB
  const std::string cfg = make_run_config(s.root);
  // A run config, and a --set value.
  test::write_text(s.root + "/deep.json", deep);
  expect_refused(test::run_limited("train --config " + s.root + "/deep.json --out " + s.run),
                 "JSON nested deeper than 64 levels");
  test::write_text(s.root + "/deep_plan.json", R"({"model": {"head_plan": )" + deep + "}}");
  expect_refused(test::run_limited("train --config " + s.root + "/deep_plan.json --out " + s.run),
                 "JSON nested deeper than 64 levels");
  // A checkpoint's config.json.
  const std::string ck = make_checkpoint(s.root + "/ck");
  test::write_text(ck + "/config.json", R"({"model_type": "gpt2", "head_plan": )" + deep + "}");
  expect_refused(test::run_limited("inspect --checkpoint " + ck), "JSON nested deeper than 64 levels");
  // A safetensors header.
  const std::string ck2 = make_checkpoint(s.root + "/ck2");
  {
    const std::string header = R"({"a": )" + deep + "}";
    std::ofstream f(ck2 + "/model.safetensors", std::ios::binary | std::ios::trunc);
    const uint64_t len = header.size();
    f.write(reinterpret_cast<const char*>(&len), 8);
    f << header;
  }
  expect_refused(test::run_limited("inspect --checkpoint " + ck2), "JSON nested deeper than 64 levels");
  // tokenizer.json.
  test::write_text(s.root + "/tok.json", R"({"model": )" + deep + "}");
  expect_refused(test::run_limited("tokenize --tokenizer " + s.root + "/tok.json --text hi"),
                 "JSON nested deeper than 64 levels");
  // Error messages show a brief of a value, never the value: a 1 MB string.
  test::write_text(s.root + "/long.json", R"({"model": {"pos": ")" + std::string(1 << 20, 'x') + R"("}})");
  const auto r = test::run_limited("train --config " + s.root + "/long.json --out " + s.run);
  expect_refused(r, "model.pos must be");
  CHECK(r.out.size() < 2000);
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: sizes that overflow or exceed the documented bounds are refused before allocation",
          "[cli][hostile]") {
  Sandbox s("sizes");
  const std::string cfg = make_run_config(s.root);
  const std::string train = "train --config " + cfg + " --out " + s.run + " ";
  // micro_batch * seq_len * world used to wrap to 0 and divide by it (SIGFPE) (issue 35, 4).
  expect_refused(test::run_limited(train + "--set train.micro_batch=4611686018427387904"),
                 "train.micro_batch must be in 1..1048576");
  expect_refused(test::run_limited(train + "--set train.micro_batch=1048576 --set train.seq_len=4096"),
                 "train.micro_batch * train.seq_len (4294967296) must be at most 2147483648");
  expect_refused(test::run_limited(train + "--set train.total_batch_tokens=1e30"), "expected an integer, got number");
  expect_refused(test::run_limited(train + "--set train.steps=18446744073709551615"), "expected an integer");
  expect_refused(test::run_limited(train + "--set model.n_embd=1073741824"), "model.n_embd must be in 1..65536");
  expect_refused(test::run_limited(train + "--set model.n_layer=100000"), "model.n_layer must be in 1..1024");
  expect_refused(test::run_limited(train + "--set model.n_embd=4096 --set model.n_head=1"),
                 "(the head dimension, 4096) must be at most 1024");
  // A checkpoint whose config.json claims a model far larger than its file: refused before the
  // model is allocated (2 layers x 12 x 2048^2 floats: 800 MB, from a 40 KB file).
  const std::string ck = make_checkpoint(s.root + "/ck");
  nlohmann::json c = nlohmann::json::parse(io::read_file(ck + "/config.json"));
  c["n_embd"] = 2048;
  c["head_plan"] = nullptr;
  c.erase("head_plan");
  test::write_text(ck + "/config.json", c.dump());
  expect_refused(test::run_limited("inspect --checkpoint " + ck), "bytes of tensors (2 per value), but the weight files hold");
  // An integer above int (get<int>() truncated it) and a float where an integer belongs.
  c["n_embd"] = 4294967312LL;  // 2^32 + 16: truncated, it was a valid 16
  test::write_text(ck + "/config.json", c.dump());
  expect_refused(test::run_limited("inspect --checkpoint " + ck), "config.json key 'n_embd': 4294967312 is outside");
  c["n_embd"] = 16.5;
  test::write_text(ck + "/config.json", c.dump());
  expect_refused(test::run_limited("inspect --checkpoint " + ck), "config.json key 'n_embd': expected an integer");
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: tokenizer ids far beyond the entries cost nothing", "[cli][hostile]") {
  Sandbox s("tok_ids");
  nlohmann::json tok = nlohmann::json::parse(io::read_file(kFixtures + "gpt2_style.json"));
  // One id of 2^27 (9 s and 4.3 GB before), 2^31 - 2 and 2^31 - 1 (issue 35, 5).
  for (int64_t id : {int64_t(1) << 27, (int64_t(1) << 31) - 2, (int64_t(1) << 31) - 1}) {
    INFO(id);
    nlohmann::json t = tok;
    t["model"]["vocab"]["zzz"] = id;
    test::write_text(s.root + "/t.json", t.dump());
    expect_refused(test::run_limited("tokenize --tokenizer " + s.root + "/t.json --text hi", 1024, 30),
                   "'zzz'] = number " + std::to_string(id) + " is not an id in 0..", 5);
    t = tok;
    t["added_tokens"].push_back({{"id", id}, {"content", "<big>"}, {"special", true}});
    test::write_text(s.root + "/t.json", t.dump());
    expect_refused(test::run_limited("tokenize --tokenizer " + s.root + "/t.json --text hi", 1024, 30),
                   "has id number " + std::to_string(id) + ", not in 0..", 5);
  }
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: a line of 200k combining marks normalizes in linear time", "[cli][hostile]") {
  Sandbox s("nfc");
  // a + (U+0316 below, U+0301 above) x 100000: one run of 200k non-starters, reordered by class
  // (insertion sort: 10^10 swaps; minutes). Output: a-acute, the 100000 U+0316, 99999 U+0301.
  std::string text = "a";
  for (int i = 0; i < 100000; ++i) text += "\xCC\x96\xCC\x81";
  test::write_text(s.root + "/marks.txt", text);
  const auto enc = test::run_limited("tokenize --tokenizer " + kFixtures + "qwen2_style.json --file " + s.root +
                                     "/marks.txt", 4096, 60);
  INFO(enc.out.substr(0, 2000));
  REQUIRE(enc.code == 0);
  CHECK(enc.seconds < 15);
  test::write_text(s.root + "/ids.txt", enc.out);
  const auto dec = test::run_limited("tokenize --tokenizer " + kFixtures + "qwen2_style.json --decode --file " +
                                     s.root + "/ids.txt", 4096, 60);
  REQUIRE(dec.code == 0);
  std::string want = "\xC3\xA1";  // a + U+0301 composed
  for (int i = 0; i < 100000; ++i) want += "\xCC\x96";
  for (int i = 0; i < 99999; ++i) want += "\xCC\x81";
  CHECK((dec.out == want || dec.out == want + "\n"));
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: prepare running out of memory inside its parallel loop is one error and leaves nothing",
          "[cli][hostile][oom]") {
  Sandbox s("prepare_oom");
  // One line of 64M Hangul syllables' bytes (each decomposes to 2-3 jamo under NFC): the encoder
  // needs several GB for it, far beyond the 1.5 GiB limit, and fails inside the OpenMP loop
  // (issue 35, 7: std::terminate before, and the temp directory left behind).
  {
    std::ofstream f(s.root + "/big.txt", std::ios::binary);
    const std::string block = [] {
      std::string b;
      for (int i = 0; i < 1 << 16; ++i) b += "\xEA\xB0\x80";  // U+AC00
      return b;
    }();
    for (int i = 0; i < 340; ++i) f << block;  // 67 MB
  }
  const std::string out = s.run + "/data";
  const auto r = test::run_limited("prepare --input " + s.root + "/big.txt --output " + out + " --tokenizer " +
                                       kFixtures + "qwen2_style.json --threads 2",
                                   1536, 120);
  expect_refused(r, "out of memory", 120);
  CHECK(!fs::exists(out));  // created by this run, removed with its temp directory
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: links planted in a run directory are refused, never followed", "[cli][hostile]") {
  Sandbox s("links");
  const std::string cfg = make_run_config(s.root);
  const std::string train = "train --config " + cfg + " --out " + s.run;
  fs::create_directories(s.run);
  // metrics.jsonl -> the victim (issue 35, 8).
  fs::create_symlink(s.victim, s.run + "/metrics.jsonl");
  expect_refused(test::run_limited(train), "metrics.jsonl' is a symbolic link");
  fs::remove(s.run + "/metrics.jsonl");
  // config.json -> the victim (written through path.tmp before).
  fs::create_symlink(s.victim, s.run + "/config.json");
  expect_refused(test::run_limited(train), "config.json' is a symbolic link");
  fs::remove(s.run + "/config.json");
  // checkpoints/ -> the folder outside.
  fs::create_directory_symlink(s.outside, s.run + "/checkpoints");
  expect_refused(test::run_limited(train), "checkpoints' is a symbolic link");
  fs::remove(s.run + "/checkpoints");
  // A link where the temp file used to be created: now never opened (a fresh name each time).
  fs::create_directories(s.run + "/checkpoints");
  fs::create_symlink(s.victim, s.run + "/summary.json.tmp");
  fs::create_symlink(s.victim, s.run + "/checkpoints/step_2.tmp");
  const auto ok = test::run_limited(train);
  INFO(ok.out);
  CHECK(ok.code == 0);
  CHECK(fs::exists(s.run + "/checkpoints/step_4/model.safetensors"));
  CHECK(s.outside_untouched());
}

TEST_CASE("hostile: experiment branch names '.' and '..' are refused", "[cli][hostile]") {
  Sandbox s("branches");
  const std::string cfg = make_run_config(s.root);
  for (const char* name : {".", "..", "a/b", "x\ty"}) {
    INFO(name);
    nlohmann::json doc = nlohmann::json::parse(io::read_file(cfg));
    doc["experiment"] = {{"branches", {{{"name", "ref"}, {"method", {{"name", "none"}}}}, {{"name", name}}}}};
    test::write_text(s.root + "/exp.json", doc.dump());
    expect_refused(test::run_limited("experiment --config " + s.root + "/exp.json --out " + s.run),
                   "bad branch name");
  }
  CHECK(!fs::exists(s.run));
  CHECK(s.outside_untouched());
}
