// `headwise tokenize --tokenizer tokenizer.json (--text T | --file F) [--decode]`: the ids of a
// text (space separated, one line), or with --decode the text of whitespace-separated ids.
#include <cstdio>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>

#include "cli/commands.hpp"
#include "cli/token_ids.hpp"
#include "headwise/core/error.hpp"
#include "headwise/data/bpe_tokenizer.hpp"

namespace hw::cli {

namespace {

struct TokenizeArgs {
  std::string tokenizer, text, file;
  bool decode = false;
};

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
      std::istringstream ids_in(input);
      const std::vector<int32_t> ids = parse_token_ids(ids_in, where, tok.vocab_size());
      const std::string text = tok.decode(std::vector<uint32_t>(ids.begin(), ids.end()));
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
