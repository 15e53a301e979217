// src/eval against hand-worked examples and an independent reference (a full forward of the same
// model on each concatenated sequence, one at a time): the harness's rules one by one.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "headwise/core/error.hpp"
#include "headwise/eval/eval_tokenizer.hpp"
#include "headwise/eval/loglikelihood.hpp"
#include "headwise/eval/mc_metrics.hpp"
#include "headwise/eval/py_text.hpp"
#include "headwise/eval/task_eval.hpp"
#include "headwise/eval/task_file.hpp"
#include "headwise/eval/task_finetune.hpp"
#include "headwise/eval/text_perplexity.hpp"
#include "infer/infer_fixture.hpp"
#include "support/temp_dir.hpp"

using namespace hw;
using namespace hw::eval;
using nlohmann::json;

namespace {

// A byte-level BPE small enough to work by hand: the 256 byte symbols (GPT-2's byte-to-unicode
// map, id = byte value: a = 97, b = 98, c = 99, space = 32 as "Ġ"), merges "a b" (256), then
// "b c" (257), then "Ġ a" (258), and <|endoftext|> = 259.
std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) s += char(cp);
  else s += char(0xC0 | (cp >> 6)), s += char(0x80 | (cp & 0x3F));
  return s;
}

json tiny_tokenizer_json() {
  json vocab = json::object();
  uint32_t extra = 0;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    vocab[utf8(printable ? b : 256 + extra++)] = b;
  }
  vocab["ab"] = 256;
  vocab["bc"] = 257;
  vocab["\u0120a"] = 258;
  vocab["<|endoftext|>"] = 259;
  const json j = {
      {"version", "1.0"},
      {"normalizer", nullptr},
      {"pre_tokenizer", {{"type", "ByteLevel"}, {"add_prefix_space", false}, {"trim_offsets", true}, {"use_regex", true}}},
      {"post_processor", nullptr},
      {"added_tokens",
       json::array({{{"id", 259}, {"content", "<|endoftext|>"}, {"single_word", false}, {"lstrip", false},
                     {"rstrip", false}, {"normalized", false}, {"special", true}}})},
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", json::array({"a b", "b c", "\u0120 a"})}}}};
  return j;
}

EvalTokenizer tiny_tokenizer() {
  return EvalTokenizer::bpe(data::BpeTokenizer::from_json_text(tiny_tokenizer_json().dump(), "tiny"));
}

// Llama 3's post-processor shape: a template putting a special token before the text.
json bos_template(bool after_too = false) {
  json single = json::array({{{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}},
                             {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}});
  if (after_too) single.push_back({{"SpecialToken", {{"id", "<|endoftext|>"}, {"type_id", 0}}}});
  return {{"type", "Sequence"},
          {"processors",
           json::array({{{"type", "ByteLevel"}},
                        {{"type", "TemplateProcessing"},
                         {"single", single},
                         {"special_tokens", {{"<|endoftext|>", {{"id", "<|endoftext|>"}, {"ids", {259}}}}}}}})}};
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// log P(continuation | context) by one unpadded forward of the model on (context + continuation)
// cut to its last max_length + 1 tokens, in double: the reference the scorer must equal.
double reference_ll(Model<float>& m, const LlRequest& r, int64_t max_length) {
  std::vector<int32_t> full = r.context;
  full.insert(full.end(), r.continuation.begin(), r.continuation.end());
  if (int64_t(full.size()) > max_length + 1) full.erase(full.begin(), full.end() - (max_length + 1));
  const std::vector<int32_t> input(full.begin(), full.end() - 1);
  const std::vector<float> logits = test::full_forward_logits(m, input);
  const int64_t V = m.config().vocab_size, n = int64_t(r.continuation.size()), T = int64_t(input.size());
  double ll = 0.0;
  for (int64_t k = 0; k < n; ++k) {
    const float* z = logits.data() + (T - n + k) * V;
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(double(z[v]));
    ll += double(z[r.continuation[size_t(k)]]) - std::log(s);
  }
  return ll;
}

}  // namespace

TEST_CASE("Python string rules on hand-worked strings", "[eval]") {
  CHECK(py_len("naïve") == 5);  // 6 bytes
  CHECK(py_len("日本") == 2);
  CHECK(py_strip("\u3000 \t a b \u00a0\n") == "a b");
  CHECK(py_rstrip("be  \n") == "be");
  CHECK(py_rstrip("") == "");
  CHECK(py_capitalize("tHE Dog élan") == "The dog élan");
  CHECK(py_capitalize("éLAN ΣΟΦΙΑ") == "Élan σοφια");
  CHECK(py_replace("a   b", "  ", " ") == "a  b");  // left to right, non-overlapping
  CHECK(remove_bracketed("x [title] y [a\nb] z [c]") == "x  y [a\nb] z ");
  CHECK(py_split_whitespace_count("a b") == 2);
  CHECK(py_split_whitespace_count(" a  b\n") == 4);  // re.split: ['', 'a', 'b', '']
  CHECK(py_split_whitespace_count("a\u3000b\u00a0c") == 3);
  CHECK(py_split_whitespace_count("") == 1);
}

TEST_CASE("each format becomes the harness's prompt and continuations", "[eval]") {
  SECTION("hellaswag: capitalize, [title], brackets, double spaces") {
    const json d = {{"activity_label", "Baking"},
                    {"ctx_a", "A man [header] mixes flour."},
                    {"ctx_b", "THE dough"},
                    {"endings", {"rises  well [title] slowly.", " is done. "}},
                    {"label", "1"}};
    REQUIRE(detect_format(d) == "hellaswag");
    const McExample ex = example_from_json(d, "hellaswag", "f:1");
    CHECK(ex.contexts[0] == "Baking: A man mixes flour. The dough");
    CHECK(ex.choices == std::vector<std::string>{"rises well. slowly.", "is done."});
    CHECK(ex.continuations[0] == " rises well. slowly.");
    CHECK(ex.label == 1);
  }
  SECTION("piqa, arc, boolq, sst2") {
    McExample ex = example_from_json({{"goal", "g"}, {"sol1", "a"}, {"sol2", "b"}, {"label", 1}}, "piqa", "f:1");
    CHECK(ex.contexts[1] == "Question: g\nAnswer:");
    CHECK(ex.continuations[1] == " b");
    const json arc = {{"question", "q?"},
                      {"choices", {{"text", {"x", "y", "z"}}, {"label", {"1", "2", "3"}}}},
                      {"answerKey", "3"}};
    REQUIRE(detect_format(arc) == "arc");
    ex = example_from_json(arc, "arc", "f:1");
    CHECK(ex.label == 2);
    CHECK(ex.contexts[0] == "Question: q?\nAnswer:");
    ex = example_from_json({{"passage", "P."}, {"question", "is it"}, {"answer", true}}, "boolq", "f:1");
    CHECK(ex.contexts[0] == "P.\nQuestion: is it?\nAnswer:");
    CHECK(ex.choices == std::vector<std::string>{"no", "yes"});
    CHECK(ex.label == 1);
    ex = example_from_json({{"sentence", "fine ."}, {"label", 0}}, "sst2", "f:1");
    CHECK(ex.contexts[0] == "fine .\nQuestion: Is this sentence positive or negative?\nAnswer:");
    CHECK(ex.continuations[0] == " negative");
  }
  SECTION("winogrande: partial evaluation") {
    const json d = {{"sentence", "Ann helped Bea because _ was  kind. "}, {"option1", "Ann"}, {"option2", "Bea"},
                    {"answer", "2"}};
    REQUIRE(detect_format(d) == "winogrande");
    const McExample ex = example_from_json(d, "winogrande", "f:1");
    CHECK(ex.contexts == std::vector<std::string>{"Ann helped Bea because Ann", "Ann helped Bea because Bea"});
    CHECK(ex.continuations[0] == " was  kind.");
    CHECK(ex.choices == ex.contexts);
    CHECK(ex.label == 1);
  }
  SECTION("mmlu: description, stripped question, letters") {
    const json d = {{"question", " Which? "}, {"subject", "college_biology"}, {"choices", {"w", "x", "y", "z"}},
                    {"answer", 3}};
    REQUIRE(detect_format(d) == "mmlu");
    const McExample ex = example_from_json(d, "mmlu", "f:1");
    CHECK(ex.contexts[0] ==
          "The following are multiple choice questions (with answers) about college biology.\n\nWhich?\nA. w\nB. x\nC. "
          "y\nD. z\nAnswer:");
    CHECK(ex.continuations[3] == " D");
    CHECK(ex.choices[3] == "D");
  }
}

TEST_CASE("bad task files: one error naming the file and line", "[eval]") {
  test::TempDir dir;
  auto bad = [&](const std::string& text) {
    test::write_text(dir.file("t.jsonl"), text);
    return error_of([&] { read_task_file(dir.file("t.jsonl")); });
  };
  const std::string ok = R"({"context": "c", "choices": ["a", "b"], "label": 0})";
  CHECK_THAT(bad(ok + "\n" + R"({"foo": 1})"), Catch::Contains("t.jsonl:2: missing key"));
  CHECK_THAT(bad(R"({"foo": 1})"), Catch::Contains("t.jsonl:1: unknown task format"));
  CHECK_THAT(bad(R"({"context": "c", "choices": ["a", "b"], "label": 2})"),
             Catch::Contains("t.jsonl:1: label 2 is outside the 2 choices"));
  CHECK_THAT(bad(R"({"context": "c", "choices": [], "label": 0})"), Catch::Contains("t.jsonl:1: the choice list is empty"));
  CHECK_THAT(bad("context,choices,label\nx,y,0\n"), Catch::Contains("t.jsonl:1: not valid JSON") && Catch::Contains("must be JSONL"));
  CHECK_THAT(bad(std::string(100000, '[')), Catch::Contains("t.jsonl:1: JSON nested deeper than 64 levels"));
  CHECK_THAT(bad("\n\n"), Catch::Contains("t.jsonl: no examples"));
  CHECK_THAT(error_of([&] { read_task_file(dir.file("missing.jsonl")); }), Catch::Contains("missing.jsonl: cannot open"));
  test::write_text(dir.file("t.jsonl"), ok + "\n\n" + ok + "\n" + ok + "\n");
  const TaskFile tf = read_task_file(dir.file("t.jsonl"), 2);
  CHECK(tf.examples.size() == 2);
  CHECK(tf.examples[1].line == 3);
}

TEST_CASE("acc_norm divides by the choice's characters, not its bytes", "[eval]") {
  // "naïve" is 5 characters and 6 bytes: per character -10/5 = -2.0 < -11.5/6 = -1.917, so
  // pred_norm = 1; per byte it would be -10/6 = -1.667 > -1.917 and pred_norm 0.
  const McJudgement j = judge({-10.0, -11.5}, {"naïve", "abcdef"}, 1);
  CHECK(j.pred == 0);
  CHECK(j.pred_norm == 1);
  CHECK(!j.acc);
  CHECK(j.acc_norm);
  // Ties go to the first maximum (numpy argmax).
  CHECK(judge({-1.0, -1.0}, {"a", "b"}, 1).pred == 0);
  const MeanStderr m = mean_stderr({1, 0, 1, 1});
  CHECK(m.mean == 0.75);
  REQUIRE(m.stderr_);
  CHECK(*m.stderr_ == Approx(0.25).epsilon(1e-12));  // sample sd 0.5 / sqrt(4)
  CHECK(!mean_stderr({1}).stderr_);
}

TEST_CASE("a choice is tokenized as it reads after its context", "[eval]") {
  const EvalTokenizer tok = tiny_tokenizer();
  CHECK(tok.encode("abc") == std::vector<int32_t>{256, 99});  // "a b" outranks "b c"
  CHECK(tok.encode("bc") == std::vector<int32_t>{257});
  // Alone, "bc" is one token (257); after "a" the whole "abc" is [ab, c], so the continuation is
  // whole[len(encode("a")):] = [c] (the harness's _encode_pair), not encode("bc").
  LlRequest r = encode_pair(tok, "a", "bc");
  CHECK(r.context == std::vector<int32_t>{97});
  CHECK(r.continuation == std::vector<int32_t>{99});
  // Trailing spaces of the context move to the continuation: "a " + "a" -> "a" + " a" = [Ġa].
  r = encode_pair(tok, "a ", "a");
  CHECK(r.context == std::vector<int32_t>{97});
  CHECK(r.continuation == std::vector<int32_t>{258});
  // An empty context conditions on the prefix token (end of text).
  r = encode_pair(tok, "", " a");
  CHECK(r.context == std::vector<int32_t>{259});
  CHECK(r.continuation == std::vector<int32_t>{258});
  r = encode_pair(tok, "", "<|endoftext|>a");  // starts with the prefix token: it becomes the context
  CHECK(r.context == std::vector<int32_t>{259});
  CHECK(r.continuation == std::vector<int32_t>{97});
}

TEST_CASE("a post-processor's BOS goes before every encoded text but not an empty context's choice", "[eval]") {
  // The tokenizer with the template, as a Llama 3 tokenizer.json carries it.
  auto with_template = [](const nlohmann::json& pp) {
    nlohmann::json j = tiny_tokenizer_json();
    j["post_processor"] = pp;
    return data::BpeTokenizer::from_json_text(j.dump(), "t.json");
  };
  const data::BpeTokenizer templated = with_template(bos_template());
  const EvalTokenizer tok = EvalTokenizer::bpe(templated, template_prefix_ids(templated, "tiny"));
  CHECK(tok.encode("ab") == std::vector<int32_t>{259, 256});
  CHECK(tok.encode("<|endoftext|>a") == std::vector<int32_t>{259, 97});  // starts with the BOS: none added
  CHECK(tok.prefix_token() == 259);
  LlRequest r = encode_pair(tok, "a ", "a");
  CHECK(r.context == std::vector<int32_t>{259, 97});
  CHECK(r.continuation == std::vector<int32_t>{258});
  r = encode_pair(tok, "", " a");  // tok_encode(continuation, add_special_tokens=False) after the prefix
  CHECK(r.context == std::vector<int32_t>{259});
  CHECK(r.continuation == std::vector<int32_t>{258});
  CHECK_THAT(error_of([&] { template_prefix_ids(with_template(bos_template(true)), "t.json"); }),
             Catch::Contains("t.json: the post_processor template appends tokens after the text"));
  CHECK(template_prefix_ids(with_template({{"type", "ByteLevel"}}), "t.json").empty());
}

TEST_CASE("rolling windows: every token once, the harness's contexts", "[eval]") {
  const std::vector<int32_t> t = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  using V = std::vector<int32_t>;
  // stride = context = 4 (context_len 1): non-overlapping windows; the last one carries 3 tokens.
  std::vector<LlRequest> w = rolling_windows(t, 0, 4, 1);
  REQUIRE(w.size() == 3);
  CHECK((w[0].context == V{0} && w[0].continuation == V{1, 2, 3, 4}));
  CHECK((w[1].context == V{4} && w[1].continuation == V{5, 6, 7, 8}));
  CHECK((w[2].context == V{6, 7, 8} && w[2].continuation == V{9, 10}));
  // stride 2 (context_len 3): two new tokens per window after two or more of context.
  w = rolling_windows(t, 0, 4, 3);
  REQUIRE(w.size() == 4);
  CHECK((w[1].context == V{2, 3, 4} && w[1].continuation == V{5, 6}));
  CHECK((w[2].context == V{4, 5, 6} && w[2].continuation == V{7, 8}));
  CHECK((w[3].context == V{6, 7, 8} && w[3].continuation == V{9, 10}));
  CHECK(rolling_windows({}, 0, 4, 1).empty());
  CHECK(rolling_windows({5}, 0, 4, 1).size() == 1);
}

TEST_CASE("a static + window + linear plan scores what full forwards give, left-truncated as the harness", "[eval]") {
  test::InferCase c{"mixed", 2, "learned",
                    R"([["static", "window:3", "linear", "softmax"], ["linear", "sink_window:1:2", "static", "pruned"]])"};
  const ModelConfig cfg = test::infer_config(c, 12);  // vocab 29, block 12
  auto scored = test::infer_model(cfg);
  auto ref = test::infer_model(cfg);
  std::vector<LlRequest> reqs;
  const std::vector<int32_t> ctx = test::random_tokens(6, 29, 3);
  for (int k = 0; k < 4; ++k)  // choices of one context, two of them one token (equal inputs: shared rows)
    reqs.push_back({ctx, test::random_tokens(k < 2 ? 1 : 2 + k, 29, 10 + uint64_t(k))});
  reqs.push_back({test::random_tokens(20, 29, 4), test::random_tokens(3, 29, 5)});  // 23 tokens > 12 + 1: truncated
  reqs.push_back({{7}, test::random_tokens(12, 29, 6)});                               // continuation = whole context
  reqs.push_back({ctx, {}});
  reqs.back().continuation = reqs[2].continuation;  // input a prefix of another row's
  reqs.back().continuation.resize(1);
  reqs.push_back({ctx, {3, 5}});  // inputs that differ in their last token only: never one row
  reqs.push_back({ctx, {4, 5}});
  LoglikelihoodScorer scorer(*scored, 12, 3);
  const std::vector<LlResult> got = scorer.score(reqs);
  CHECK(scorer.stats().rows < int64_t(reqs.size()));  // rows were shared
  for (size_t i = 0; i < reqs.size(); ++i) {
    INFO("request " << i);
    const double want = reference_ll(*ref, reqs[i], 12);
    CHECK(std::abs(got[i].ll - want) <= 1e-5 * std::max(1.0, std::abs(want)));
  }
  // Left truncation by hand: the input is the last 12 + 1 of the 23 tokens less the final one, so
  // the context keeps its last 10 tokens.
  std::vector<int32_t> full = reqs[4].context;
  full.insert(full.end(), reqs[4].continuation.begin(), reqs[4].continuation.end());
  LlRequest cut{std::vector<int32_t>(full.begin() + 10, full.end() - 3), reqs[4].continuation};
  CHECK(cut.context.size() == 10);
  CHECK(std::abs(reference_ll(*ref, cut, 12) - got[4].ll) <= 1e-5 * std::abs(got[4].ll));
}

TEST_CASE("text perplexity counts tokens, words and bytes as the wikitext task", "[eval]") {
  test::InferCase c{"soft", 4, "learned", R"([["softmax", "softmax", "softmax", "softmax"], ["softmax", "window:2", "softmax", "softmax"]])"};
  const ModelConfig cfg = test::infer_config(c, 8);
  auto m = test::infer_model(cfg);
  // Bytes as tokens needs vocab 256; this model has 29, so the text's bytes are all below 29
  // (0x1c is whitespace to Python, as \t \n \v \f \r).
  const std::string doc = std::string("\x01\x02\x1c\x03\x04\x05\t\x06\x07\x08\x09\x0a\x0b\x0c\x0d\x0e\x0f\x10", 18);
  CHECK(py_split_whitespace_count(doc) == 4);  // runs: \x1c, \t, \t\n\v\f\r
  LoglikelihoodScorer scorer(*m, 8, 4);
  const TextPerplexity r = text_perplexity({doc}, EvalTokenizer::bytes(), scorer, 8, 8);
  CHECK(r.tokens == 18);
  CHECK(r.bytes == 18);
  CHECK(r.words == py_split_whitespace_count(doc));
  // The sum over the windows equals a reference summed window by window (each token once).
  double want = 0.0;
  std::vector<int32_t> ids(doc.begin(), doc.end());
  for (const LlRequest& w : rolling_windows(ids, '\n', 8, 1)) want += reference_ll(*m, w, 8);
  CHECK(std::abs(r.ll - want) <= 1e-5 * std::abs(want));
  CHECK(r.bits_per_byte() == Approx(-want / 18 / std::log(2.0)).epsilon(1e-5));
  CHECK(r.word_perplexity() == Approx(std::exp(-want / double(r.words))).epsilon(1e-5));
}

TEST_CASE("answer-only fine-tuning: targets on the answer tokens, and a rule is learnt", "[eval]") {
  // Hand-worked sequence with bytes: context "ab", answer " c" -> tokens a b ' ' c; the inputs
  // are a b ' ', and only the positions of ' ' (after b) and c (after ' ') carry targets.
  McExample ex;
  ex.contexts = {"ab", "ab"};
  ex.continuations = {" c", " d"};
  ex.choices = {"c", "d"};
  ex.label = 0;
  const EvalTokenizer bytes = EvalTokenizer::bytes();
  AnswerSequence s = answer_sequence(ex, bytes, 5);
  CHECK(s.inputs == std::vector<int32_t>{'a', 'b', ' ', 0, 0});
  CHECK(s.targets == std::vector<int32_t>{-1, ' ', 'c', -1, -1});
  s = answer_sequence(ex, bytes, 2);  // left-truncated like the scorer: inputs "b ", targets " c"
  CHECK(s.inputs == std::vector<int32_t>{'b', ' '});
  CHECK(s.targets == std::vector<int32_t>{' ', 'c'});

  // A rule a small byte model cannot guess: the answer is "yes" when the context's first letter
  // is in a..m. Fine-tuning on 512 examples takes held-out accuracy from chance to (nearly) all.
  auto make = [](uint64_t seed, int n) {
    TaskFile tf;
    tf.path = "rule";
    tf.format = "generic";
    Rng rng(seed);
    for (int i = 0; i < n; ++i) {
      std::string ctx;
      for (int k = 0; k < 4; ++k) ctx += char('a' + rng.below(26));
      const int label = ctx[0] <= 'm' ? 0 : 1;
      tf.examples.push_back(example_from_json({{"context", ctx + "?"}, {"choices", {"yes", "no"}}, {"label", label}},
                                              "generic", "rule"));
    }
    return tf;
  };
  ModelConfig cfg;
  cfg.n_layer = 1;
  cfg.n_head = 2;
  cfg.n_embd = 32;
  cfg.block_size = 16;
  cfg.vocab_size = 256;
  cfg.head_plan = attn::HeadPlan::from_json(json::parse(R"([["softmax", "static"]])"));
  cfg.validate();
  Model<float> m(cfg, cpu_backend<float>());
  m.init_weights(1);
  const TaskFile train = make(1, 512), held_out = make(2, 64);
  LoglikelihoodScorer scorer(m, 16, 16);
  const double before = evaluate_task(held_out, bytes, scorer).acc.mean;
  FinetuneOptions opt;
  opt.steps = 300;
  opt.batch = 16;
  opt.lr = 3e-3;
  opt.min_lr = 3e-4;
  const std::vector<double> losses = finetune_on_task(m, train, bytes, opt);
  const double after = evaluate_task(held_out, bytes, scorer).acc.mean;
  INFO("held-out acc " << before << " -> " << after << ", answer loss " << losses.front() << " -> " << losses.back());
  CHECK(before < 0.75);
  CHECK(after >= 0.9);
  CHECK(losses.back() < 0.5 * losses.front());
}
