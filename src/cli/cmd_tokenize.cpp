// `headwise tokenize --tokenizer tokenizer.json (--text T | --file F) [--decode]`: the ids of a
// text (space separated, one line), or with --decode the text of whitespace-separated ids.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

namespace hw::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer, text, file;
  bool decode = false;
};

std::vector<uint32_t> parse_ids(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  std::vector<uint32_t> ids;
  std::string word;
  while (in >> word) {
    size_t used = 0;
    long long v = -1;
    try {
      v = std::stoll(word, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    check(used == word.size() && v >= 0 && v < (1LL << 32), where + ": '" + word + "' is not a token id");
    ids.push_back(uint32_t(v));
  }
  return ids;
}

}  // namespace

void add_tokenize_command(CLI::App& app) {
  auto a = std::make_shared<TokenizeArgs>();
  CLI::App* cmd = app.add_subcommand("tokenize", "Print the token ids of a text (or, with --decode, the text of ids)");
  cmd->add_option("--tokenizer", a->tokenizer, "Hugging Face tokenizer.json (byte-level BPE)")->required();
  auto* t = cmd->add_option("--text", a->text, "The text (or ids, with --decode)");
  auto* f = cmd->add_option("--file", a->file, "Read the text (or ids) from this file");
  t->excludes(f);
  cmd->add_flag("--decode", a->decode, "Input is whitespace-separated ids; print their text");
  cmd->callback([a, t, f] {
    check(t->count() + f->count() == 1, "tokenize needs --text TEXT or --file FILE");
    const data::BpeTokenizer tok = data::BpeTokenizer::load(a->tokenizer);
    std::string input = a->text;
    std::string where = "--text";
    if (f->count()) {
      std::ifstream in(a->file, std::ios::binary);
      check(in.is_open(), "--file '" + a->file + "': cannot open");
      input.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
      check(!in.bad(), "--file '" + a->file + "': read error");
      where = "--file '" + a->file + "'";
    }
    if (a->decode) {
      const std::string text = tok.decode(parse_ids(input, where));
      std::fwrite(text.data(), 1, text.size(), stdout);
      return;
    }
    const std::vector<uint32_t> ids = tok.encode(input);
    std::string line;
    for (size_t i = 0; i < ids.size(); ++i) line += (i ? " " : "") + std::to_string(ids[i]);
    std::printf("%s\n", line.c_str());
  });
}

}  // namespace hw::cli
