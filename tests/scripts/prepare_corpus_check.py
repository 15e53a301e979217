"""Checks of scripts/data/prepare_corpus.py on small corpora made here (run by
test_prepare_corpus.sh with the venv's python): the shards' ids against headwise's own tokenizer
(`headwise tokenize`, a second implementation: the script encodes with the `tokenizers` package)
on every document on its own, shard sizes and headers, the val/train split, resume after an
interruption writing the same bytes, uint32 shards above a 65,536 vocabulary, and the bad-input
errors.

  prepare_corpus_check.py SCRIPT TOKENIZER_JSON WORKDIR HEADWISE
"""
import glob
import json
import os
import struct
import subprocess
import sys

import pyarrow as pa
import pyarrow.parquet as pq

script, tok_path, work, headwise = sys.argv[1:5]
py = sys.executable
failures = []


def special_id(path, content):
    return next(t["id"] for t in json.load(open(path))["added_tokens"] if t["content"] == content)


EOT = special_id(tok_path, "<|endoftext|>")
_encoded = {}


def hw_ids(text, tokenizer=tok_path):
    """The ids of `text` by headwise's own tokenizer (no special tokens added)."""
    key = (tokenizer, text)
    if key not in _encoded:
        path = os.path.join(work, "hw_tokenize_input.txt")
        with open(path, "w", encoding="utf-8", newline="") as f:
            f.write(text)
        p = subprocess.run([headwise, "tokenize", "--tokenizer", tokenizer, "--file", path], capture_output=True, text=True)
        if p.returncode != 0:
            raise SystemExit(f"FAIL: headwise tokenize exited {p.returncode}: {p.stderr.strip()}")
        _encoded[key] = [int(x) for x in p.stdout.split()]
    return _encoded[key]


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def run(*args, env=None, expect=0):
    e = dict(os.environ)
    e.update(env or {})
    p = subprocess.run([py, script, "--tokenizer", tok_path, *args], capture_output=True, text=True, env=e)
    if p.returncode != expect:
        print(p.stdout, p.stderr)
        raise SystemExit(f"FAIL: prepare_corpus {' '.join(args)} exited {p.returncode}, expected {expect}")
    return p


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    header = struct.unpack("<256i", data[:1024])
    assert header[0] == 20240520, path
    width = 2 if header[1] == 1 else 4
    n = header[2]
    assert len(data) == 1024 + width * n, f"{path}: size does not match the header's count"
    return header[1], list(struct.unpack(f"<{n}{'H' if width == 2 else 'I'}", data[1024:]))


def split_ids(out, split):
    ids, sizes = [], []
    for p in sorted(glob.glob(os.path.join(out, f"{split}_*.bin"))):
        _, t = read_shard(p)
        ids += t
        sizes.append(len(t))
    return ids, sizes


# --- corpora ----------------------------------------------------------------------------------
docs = [f"Document {i}: the quick brown fox jumps over {i * 7} lazy dogs.\nIt ran {'far ' * (i % 5)}away, café naïve ☃."
        for i in range(60)]
docs[3] = ""  # an empty document is still one (its end-of-text token)
os.makedirs(work, exist_ok=True)
# Two parquet files of the FineWeb-Edu layout (text plus other columns), several row groups.
for k in range(2):
    part = docs[k * 30:(k + 1) * 30]
    table = pa.table({"text": part, "id": [f"<urn:{k}:{i}>" for i in range(len(part))],
                      "token_count": [len(t) for t in part]})
    pq.write_table(table, os.path.join(work, f"fineweb_{k:02d}.parquet"), row_group_size=7)
with open(os.path.join(work, "docs.jsonl"), "w") as f:
    for d in docs:
        f.write(json.dumps({"text": d, "meta": 1}) + "\n")
wiki_lines = ["", " = Valkyria Chronicles III = \n", "", " Senjō no Valkyria 3 : <unk> Chronicles \n",
              " = = Gameplay = = \n", "", " As with previous games , the 1 @,@ 000 troops \n"] * 5
with open(os.path.join(work, "wiki.train.raw"), "w") as f:
    f.write("".join(l if l.endswith("\n") else l + "\n" for l in wiki_lines))
pq.write_table(pa.table({"text": [l if l.endswith("\n") else "" for l in wiki_lines]}),
               os.path.join(work, "wikitext-2-raw-v1-train.parquet"))

expected = []
for d in docs:
    expected += [EOT] + hw_ids(d)

# --- parquet, --val-tokens, small shards ------------------------------------------------------
out = os.path.join(work, "fw")
r = run("--out", out, "--input", os.path.join(work, "fineweb_*.parquet"), "--val-tokens", "150",
        "--shard-tokens", "100", "--batch-docs", "8")
summary = json.loads(r.stdout.strip().splitlines()[-1])
val, vsizes = split_ids(out, "val")
train, tsizes = split_ids(out, "train")
check(val + train == expected, f"parquet: val + train ids equal headwise's per-document encodings with <|endoftext|> "
                               f"before each ({len(expected)} tokens, {len(docs)} documents)")
check(len(val) == 150 and vsizes == [100, 50], f"val split: the first 150 tokens, shards {vsizes}")
check(all(s == 100 for s in tsizes[:-1]) and 0 < tsizes[-1] <= 100, f"train shards of 100 tokens, last {tsizes[-1]}")
check(summary["train_tokens"] == len(train) and summary["val_tokens"] == 150, "summary token counts")
check(read_shard(glob.glob(os.path.join(out, "train_*.bin"))[0])[0] == 1, "uint16 shards (version 1) for a small vocabulary")

# --- resume: interrupted after 3 shards, rerun = the uninterrupted bytes ------------------------
out2 = os.path.join(work, "fw_resume")
args = ["--out", out2, "--input", os.path.join(work, "fineweb_*.parquet"), "--val-tokens", "150",
        "--shard-tokens", "100", "--batch-docs", "8"]
run(*args, env={"HW_PREPARE_STOP_AFTER_SHARDS": "3"}, expect=3)
check(len(glob.glob(os.path.join(out2, "*.bin"))) == 3, "interrupted run left 3 complete shards")
run(*args, env={"HW_PREPARE_STOP_AFTER_SHARDS": "2"}, expect=3)  # interrupted again, mid-document
run(*args)
same = sorted(os.listdir(out)) == sorted(os.listdir(out2)) and all(
    open(os.path.join(out, n), "rb").read() == open(os.path.join(out2, n), "rb").read()
    for n in os.listdir(out) if n.endswith(".bin"))
check(same, "resumed twice: the same shard files, byte for byte, as the uninterrupted run")
r = run(*args)
check("already complete" in r.stderr, "a finished folder is left as it is")
p = run("--out", out2, "--input", os.path.join(work, "fineweb_00.parquet"), "--val-tokens", "150", "--shard-tokens",
        "100", expect=1)
check(p.stderr.startswith("error: ") and ".prepare_state.val+train.json" in p.stderr and p.stderr.count("\n") == 1,
      "other arguments over a state: one error line naming the state file")
p = run("--out", out2, "--input", os.path.join(work, "fineweb_00.parquet"), "--split", "train", expect=1)
check(p.stderr.startswith("error: ") and "already holds train shards" in p.stderr,
      "another run's shards of the same split: one error line")

# --- JSONL, --split, --max-tokens -----------------------------------------------------------
out3 = os.path.join(work, "jsonl")
run("--out", out3, "--input", os.path.join(work, "docs.jsonl"), "--split", "val", "--max-tokens", "333",
    "--shard-tokens", "1000")
val3, _ = split_ids(out3, "val")
check(val3 == expected[:333] and not glob.glob(os.path.join(out3, "train_*")), "jsonl: --split val --max-tokens 333")

# --- WikiText's own splits in one folder: --split train, then --split val -----------------------
both = os.path.join(work, "two_splits")
run("--out", both, "--input", os.path.join(work, "docs.jsonl"), "--split", "train", "--shard-tokens", "1000")
run("--out", both, "--input", os.path.join(work, "fineweb_00.parquet"), "--split", "val", "--shard-tokens", "1000")
check(split_ids(both, "train")[0] == expected and split_ids(both, "val")[0] == expected[:len(split_ids(both, "val")[0])]
      and os.path.exists(os.path.join(both, "corpus_summary.val.json")), "--split train and --split val share a folder")

# --- WikiText raw and parquet: rows concatenated, no end-of-text --------------------------------
for name, empty in (("wiki.train.raw", "\n"), ("wikitext-2-raw-v1-train.parquet", "")):
    wiki_expected = []  # each line (raw) or row (parquet) as it is in the file, encoded alone
    for l in wiki_lines:
        wiki_expected += hw_ids(l if l.endswith("\n") else empty)
    o = os.path.join(work, "wiki_" + name.split(".")[-1])
    run("--out", o, "--input", os.path.join(work, name), "--shard-tokens", "64")
    ids, _ = split_ids(o, "train")
    check(ids == wiki_expected and EOT not in ids, f"wikitext {name}: rows encoded one by one, concatenated")

# --- a vocabulary above 65,536: uint32 shards -------------------------------------------------
big = json.load(open(tok_path))
big["model"]["vocab"]["<|big|>"] = 70000
big["added_tokens"].append({"id": 70000, "content": "<|big|>", "single_word": False, "lstrip": False,
                            "rstrip": False, "normalized": False, "special": True})
big_path = os.path.join(work, "big_tokenizer.json")
json.dump(big, open(big_path, "w"))
o = os.path.join(work, "big")
p = subprocess.run([py, script, "--tokenizer", big_path, "--out", o, "--input", os.path.join(work, "docs.jsonl"),
                    "--shard-tokens", "100000"], capture_output=True, text=True)
if p.returncode == 0:
    version, ids = read_shard(os.path.join(o, "train_000000.bin"))
    check(version == 2 and ids == expected,
          "vocabulary above 65,536: version-2 (uint32) shards, same ids")
else:
    print(p.stdout, p.stderr)
    check(False, "a tokenizer with an id of 70,000 prepares")

# --- bad input: one error line each -------------------------------------------------------------
def one_error(args, needle, what):
    p = subprocess.run([py, script, "--tokenizer", tok_path, *args], capture_output=True, text=True)
    lines = p.stderr.strip().splitlines()
    check(p.returncode == 1 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0],
          f"{what}: {lines[-1] if lines else '(nothing)'}")


one_error(["--out", os.path.join(work, "e1"), "--input", os.path.join(work, "missing.parquet")],
          "missing.parquet: no such file", "missing input file")
one_error(["--out", os.path.join(work, "e2"), "--input", os.path.join(work, "fineweb_00.parquet"), "--text-field", "body"],
          "no column 'body'", "parquet without the text field")
with open(os.path.join(work, "bad.jsonl"), "w") as f:
    f.write('{"text": "fine"}\n{"body": "no text"}\n')
one_error(["--out", os.path.join(work, "e3"), "--input", os.path.join(work, "bad.jsonl")], "bad.jsonl:2: no string field 'text'",
          "JSONL record without the field")
with open(os.path.join(work, "not.parquet"), "w") as f:
    f.write("plain text\n")
one_error(["--out", os.path.join(work, "e4"), "--input", os.path.join(work, "not.parquet")], "not a parquet file",
          "a text file named .parquet")

if failures:
    raise SystemExit(f"{len(failures)} check(s) failed")
print("prepare_corpus: all checks passed")
