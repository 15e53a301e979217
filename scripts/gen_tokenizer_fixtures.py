#!/usr/bin/env python3
"""Writes the byte-level BPE test fixtures under tests/fixtures/tokenizers/ with the
`tokenizers` package (the independent reference the C++ tokenizer is compared against):

  gpt2_style.json    GPT-2 pre-tokenizer (ByteLevel with its regex), merges as "a b" strings
  llama3_style.json  Llama 3 pre-tokenizer (Split(regex) + ByteLevel(use_regex=false)),
                     ignore_merges, merges as ["a", "b"] lists
  qwen2_style.json   Qwen 2: its Split regex (\p{N} one digit at a time) + ByteLevel, and the
                     NFC normalizer; also encodes the NFC hard strings of gen_nfc_tables.py
  expected_ids.json  for each: the ids of a corpus sample and of the hard strings
                     (encode(text, add_special_tokens=False)), and of the invalid UTF-8 cases;
                     for qwen2 also each case's decoded text ("decoded": NFC changes the text)

Both are trained on the embedded corpus (the KJV text of scripts/prepare_default_corpus.sh)
plus the hard strings, so that some merges join the bytes of multi-byte characters.
Usage: python3 scripts/gen_tokenizer_fixtures.py [kjv.txt] (default: runs `bible`).
"""
import json
import os
import subprocess
import sys

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from gen_nfc_tables import NFC_HARD

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "tokenizers")
LLAMA3_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                r"|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2_REGEX = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
               r"|\s*[\r\n]+|\s+(?!\S)|\s+")
MERGES = 3000

HARD = [
    "", " ", "  ", "\n", "\n\n\n", "   \n\n  \n ", "a\n\n\nb", "a \n b", "x.\n\ny", "...\n\n  foo",
    "line\r\nnext\r\n", "\t\ttab\t", "trailing   ", "trailing spaces and newline  \n", "  leading",
    "Hello, world!", "don't  stop", "he's", "HE'S", "they'RE here", "I'M", "'ll've'd'm't", "''s", " 's", "Ain'T",
    "long \u017f: '\u017f", "12345 1234567 3.14159 1,000,000 007", "abc123def v1.2.3-rc4",
    "\u0663\u0664\u0665 \u00bd \u216b \u2460", "caf\u00e9 na\u00efve \u0396\u03b5\u03cd\u03c2 \u041f\u0440\u0438\u0432\u0435\u0442 \u043c\u0438\u0440",
    "\u65e5\u672c\u8a9e\u306e\u30c6\u30ad\u30b9\u30c8 \u4e2d\u6587\u5b57\u7b26", "\ud55c\uad6d\uc5b4 \ud14d\uc2a4\ud2b8",
    "\U0001F642\U0001F44D\U0001F3FD \U0001F468\u200d\U0001F469\u200d\U0001F467 \U0001F1EB\U0001F1F7",
    "\U0001F642a \U0001F642 a", "e\u0301 ab\u0300c", "\x00\x01\x07\x1b[0m\x7f", "\x1c\x1d\x1e\x1f x\x1cy",
    "\u0085 \u00a0 \u2028 \u3000x \u3000\u3000y \u2003", "a<|endoftext|>b <|endoftext|><|endoftext|>",
    "<|begin_of_text|>Hi<|end_of_text|>", "<|endoftext", " " * 100 + "x", "!" * 200, "a" * 300,
    "Ge1:1 In the beginning God created the heaven and the earth.\n",
    "\u0627\u0644\u0639\u0631\u0628\u064a\u0629 \u05e2\u05d1\u05e8\u05d9\u05ea \u0939\u093f\u0928\u094d\u0926\u0940",
    "mixed\tws \u000b\u000c end", "$100.00 & 50% (approx.) #tag @user", "\U00010400\U0001D400\U0001D7CE",
]

# Invalid UTF-8: each stray byte is one symbol of class "other" (bpe_tokenizer.hpp); `tokenizers`
# cannot take such input, so the reference is built from parts it can: the ids of the valid
# parts and the vocabulary's byte tokens for the stray run (checked to have no merge between
# them), as the rule says the pieces fall.
INVALID = [  # (bytes, parts): a part is text (encoded by `tokenizers`) or bytes (byte tokens)
    (b"ab\xff\xfe cd", ["ab", b"\xff\xfe", " cd"]),
    (b"\x80", [b"\x80"]),
    (b"x \xc3(", ["x", b" \xc3("]),
    (b"\xe2\x82 end\xf4\x8f", [b"\xe2\x82", " end", b"\xf4\x8f"]),
]
# Qwen 2's training text (more accented letters) merges " " with the byte 0xC3: a byte that never
# starts valid UTF-8 takes its place, so that the byte tokens of the rule stay unmerged.
INVALID_QWEN2 = [(b"x \xc0(", ["x", b" \xc0("]) if d == b"x \xc3(" else (d, p) for d, p in INVALID]


# Qwen 2 only: NFC next to added tokens (normalized after they are split out), and decomposed text
# that the corpus trains merges for once composed.
QWEN2_EXTRA = NFC_HARD + [
    "<|im_start|>user\nCafe\u0301?<|im_end|>\n", "<|im_end|>\u0301x e<|endoftext|>\u0301", "\u0301<|im_start|>",
    "And God sai\u0308d, Let there be light: and there was light.", "the LORD\u0301 \u212bngel 12345",
]


def corpus_text(argv):
    if len(argv) > 1:
        return open(argv[1], encoding="utf-8").read()
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    return subprocess.run(["bible", "-f", "Gen1:1-Rev22:21"], check=True, capture_output=True, env=env).stdout.decode()


def byte_chars():
    return pre_tokenizers.ByteLevel.alphabet()


def train(text, style):
    tok = Tokenizer(models.BPE(ignore_merges=(style == "llama3")))
    if style == "gpt2":
        tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
        specials = ["<|endoftext|>"]
    else:
        regex = LLAMA3_REGEX if style == "llama3" else QWEN2_REGEX
        tok.pre_tokenizer = pre_tokenizers.Sequence([
            pre_tokenizers.Split(Regex(regex), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
        specials = ["<|begin_of_text|>", "<|end_of_text|>"]
    if style == "qwen2":
        tok.normalizer = normalizers.NFC()
        specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=256 + MERGES + len(specials), special_tokens=specials,
                                  initial_alphabet=byte_chars(), show_progress=False)
    lines = text.splitlines(keepends=True) + HARD * 50 + (QWEN2_EXTRA * 50 if style == "qwen2" else [])
    tok.train_from_iterator(lines, trainer=trainer)
    return tok


def byte_token_ids(tok, data):
    """Ids of the single-byte tokens of data (GPT-2's byte-to-unicode map)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAD)) + list(range(0xAE, 0x100))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    m = dict(zip(bs, cs))
    return [tok.token_to_id(chr(m[b])) for b in data]


def main(argv):
    text = corpus_text(argv)
    sample = text[:20000] + text[2_000_000:2_010_000]
    expected = {}
    for style in ("gpt2", "llama3", "qwen2"):
        tok = train(text, style)
        path = os.path.join(OUT, f"{style}_style.json")
        tok.save(path)
        if style == "gpt2":  # rewrite merges in the "a b" string form, as GPT-2's own file has them
            j = json.load(open(path, encoding="utf-8"))
            j["model"]["merges"] = [f"{a} {b}" for a, b in j["model"]["merges"]]
            with open(path, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False, indent=1)
        tok = Tokenizer.from_file(path)  # the ids below come from the file as committed
        merges = json.load(open(path, encoding="utf-8"))["model"]["merges"]
        merge_pairs = {tuple(m.split(" ")) if isinstance(m, str) else tuple(m) for m in merges}
        enc = lambda s: tok.encode(s, add_special_tokens=False).ids
        cases = [{"text": s, "ids": enc(s)} for s in HARD + (QWEN2_EXTRA if style == "qwen2" else []) + [sample]]
        if style == "qwen2":
            for c in cases:
                c["decoded"] = tok.decode(c["ids"], skip_special_tokens=False)
        invalid = []
        for data, parts in (INVALID_QWEN2 if style == "qwen2" else INVALID):
            ids = []
            for p in parts:
                if isinstance(p, str):
                    ids += enc(p)
                else:
                    bt = byte_token_ids(tok, p)
                    toks = [tok.id_to_token(i) for i in bt]
                    assert all((a, b) not in merge_pairs for a, b in zip(toks, toks[1:])), (style, p)
                    ids += bt
            invalid.append({"hex": data.hex(), "ids": ids})
        expected[style] = {"file": f"{style}_style.json", "vocab_size": tok.get_vocab_size(with_added_tokens=True),
                           "cases": cases, "invalid_utf8": invalid}
        print(f"{style}: vocab {expected[style]['vocab_size']}, {len(merges)} merges, sample "
              f"{len(sample)} chars -> {len(cases[-1]['ids'])} ids")
    with open(os.path.join(OUT, "expected_ids.json"), "w", encoding="utf-8") as f:
        json.dump({"generator": "scripts/gen_tokenizer_fixtures.py",
                   "tokenizers_version": __import__("tokenizers").__version__, **expected}, f)
        f.write("\n")


if __name__ == "__main__":
    main(sys.argv)
