#!/usr/bin/env python3
"""tests/fixtures/tokenizers/expected_post.json: the ids the `tokenizers` package gives with
add_special_tokens=True (what transformers' tokenizer(text) returns) for llama3_style.json under
three post-processors: Llama 3's (Sequence of ByteLevel and a TemplateProcessing that puts
<|begin_of_text|> first), a template with a token after the text, and BertProcessing. Each
entry holds the post_processor JSON as `tokenizers` writes it, which the C++ test puts into the
fixture. Run with the venv of scripts/gen_llama_fixtures.sh (tokenizers comes with transformers).
"""
import json
import os

from tokenizers import Tokenizer, processors

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "tokenizers")
TEXTS = ["In the beginning God created the heaven and the earth.", "", " x", "<|end_of_text|>ab"]

tok = Tokenizer.from_file(os.path.join(FIX, "llama3_style.json"))
variants = {
    "llama3": processors.Sequence([processors.ByteLevel(trim_offsets=False),
                                   processors.TemplateProcessing(single="<|begin_of_text|> $A",
                                                                 pair="<|begin_of_text|> $A <|begin_of_text|> $B",
                                                                 special_tokens=[("<|begin_of_text|>", 0)])]),
    "suffix": processors.TemplateProcessing(single="<|begin_of_text|> $A <|end_of_text|>",
                                            special_tokens=[("<|begin_of_text|>", 0), ("<|end_of_text|>", 1)]),
    "bert": processors.BertProcessing(("<|end_of_text|>", 1), ("<|begin_of_text|>", 0)),
}
out = {}
for name, pp in variants.items():
    tok.post_processor = pp
    out[name] = {"post_processor": json.loads(tok.to_str())["post_processor"],
                 "cases": [{"text": t, "ids": tok.encode(t, add_special_tokens=True).ids} for t in TEXTS]}
with open(os.path.join(FIX, "expected_post.json"), "w") as f:
    json.dump(out, f, indent=1)
    f.write("\n")
print({k: v["cases"][0]["ids"][:4] for k, v in out.items()})
