#!/usr/bin/env python3
"""Downloaded corpus files -> llm.c token shards (headwise's data format), streaming.

Reads FineWeb-Edu parquet shards, WikiText-2/103 (the raw `wiki.*.raw` files or the Hugging Face
parquet files), or any JSONL with a text field, document by document (parquet in record
batches, text and JSONL line by line: memory stays bounded by --shard-tokens), encodes them with
the given Hugging Face tokenizer.json (the `tokenizers` package) and writes
OUT/{val,train}_NNNNNN.bin: llm.c's 256 x int32 header (magic 20240520, version 1 = uint16
tokens, or 2 = uint32 above a 65,536 vocabulary, token count) and the tokens.

  prepare_corpus.py --tokenizer TOK.json --out DIR --input FILE... [--format auto|parquet|jsonl|text|wikitext]
                    [--text-field text] [--split train|val | --val-tokens N] [--max-tokens N]
                    [--shard-tokens N] [--eot prepend|none]

Documents: every parquet row / JSONL record / text line is one; --eot prepend (the default except
for WikiText) puts the tokenizer's <|endoftext|> before each, as llm.c's fineweb.py does. WikiText
is one running text: its rows (lines, headings included) are encoded one by one and concatenated,
as transformers' run_clm does, with no end-of-text tokens.

Splits: --split puts every token into that split; --val-tokens N sends the first N tokens to val
and the rest to train (llm.c takes FineWeb's first shard as validation).

Resumable: after each complete shard DIR/.prepare_state.<split>.json records where the stream stands
(input, document, tokens of it already written); a rerun with the same arguments continues from
there and writes the same bytes as an uninterrupted run. Different arguments over an existing
state are refused. Progress goes to stderr; the final token counts to stdout and
DIR/corpus_summary.<split>.json. A --split train run and a --split val run may share DIR
(WikiText's own validation file).

Bad input (a missing file, a parquet file without the text field, a JSONL line that is not an
object with a string text field, a tokenizer without <|endoftext|> under --eot prepend): one
`error:` line naming it, exit 1.
"""
import argparse
import glob
import hashlib
import json
import os
import struct
import sys
import time

MAGIC = 20240520
HEADER_INTS = 256


class BadInput(Exception):
    pass


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--input", nargs="+", required=True, help="files or glob patterns, read in sorted order")
    p.add_argument("--format", default="auto", choices=["auto", "parquet", "jsonl", "text", "wikitext"])
    p.add_argument("--text-field", default="text")
    split = p.add_mutually_exclusive_group()
    split.add_argument("--split", choices=["train", "val"])
    split.add_argument("--val-tokens", type=int)
    p.add_argument("--max-tokens", type=int, default=0, help="stop after this many tokens in all (0: all)")
    p.add_argument("--shard-tokens", type=int, default=100_000_000)
    p.add_argument("--eot", choices=["prepend", "none"])
    p.add_argument("--batch-docs", type=int, default=512, help="documents per encode_batch call")
    a = p.parse_args(argv)
    if a.shard_tokens <= 0:
        raise BadInput(f"--shard-tokens must be positive, got {a.shard_tokens}")
    if a.val_tokens is not None and a.val_tokens <= 0:
        raise BadInput(f"--val-tokens must be positive, got {a.val_tokens}")
    if a.max_tokens < 0:
        raise BadInput(f"--max-tokens must be >= 0, got {a.max_tokens}")
    if a.split is None and a.val_tokens is None:
        a.split = "train"
    return a


def expand_inputs(patterns):
    files = []
    for pat in patterns:
        hits = sorted(glob.glob(pat)) if any(c in pat for c in "*?[") else [pat]
        if not hits:
            raise BadInput(f"--input {pat}: no file matches")
        for f in hits:
            if not os.path.isfile(f):
                raise BadInput(f"--input {f}: no such file")
            files.append(f)
    return files


def format_of(path, fmt):
    if fmt != "auto":
        return fmt
    name = os.path.basename(path)
    if name.endswith(".parquet"):
        return "wikitext" if "wikitext" in path.lower() else "parquet"
    if name.endswith(".jsonl") or name.endswith(".json"):
        return "jsonl"
    if name.endswith(".raw") or "wikitext" in path.lower():
        return "wikitext"
    return "text"


def documents(path, fmt, field):
    """Yields the documents of one file in order."""
    if fmt in ("parquet",) or (fmt == "wikitext" and path.endswith(".parquet")):
        try:
            import pyarrow.parquet as pq
        except ImportError:
            raise BadInput("pyarrow is not installed (scripts/data/prepare_corpus.sh installs it into a venv)")
        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # pyarrow raises several types for a file that is not parquet
            raise BadInput(f"{path}: not a parquet file ({e})")
        if field not in pf.schema_arrow.names:
            raise BadInput(f"{path}: no column '{field}' (columns: {', '.join(pf.schema_arrow.names)}); "
                           f"choose one with --text-field")
        for batch in pf.iter_batches(columns=[field], batch_size=1024):
            for v in batch.column(0).to_pylist():
                yield v if v is not None else ""
    elif fmt == "jsonl":
        with open(path, "r", encoding="utf-8") as f:
            for n, line in enumerate(f, 1):
                if not line.strip():
                    continue
                try:
                    rec = json.loads(line)
                except json.JSONDecodeError as e:
                    raise BadInput(f"{path}:{n}: not JSON ({e.msg})")
                if not isinstance(rec, dict) or not isinstance(rec.get(field), str):
                    raise BadInput(f"{path}:{n}: no string field '{field}' (choose one with --text-field)")
                yield rec[field]
    else:  # text and raw WikiText: one line each, newline kept
        with open(path, "r", encoding="utf-8") as f:
            for line in f:
                yield line


class Shards:
    """Routes the token stream into val/train shards of exactly shard_tokens (the last may be short)."""

    def __init__(self, out, shard_tokens, version, state):
        self.out, self.shard_tokens, self.version = out, shard_tokens, version
        self.count = state.get("shards", {"train": 0, "val": 0})
        self.tokens = state.get("tokens", {"train": 0, "val": 0})
        self.buf = {"train": [], "val": []}

    def path(self, split, n):
        return os.path.join(self.out, f"{split}_{n:06d}.bin")

    def add(self, split, ids):
        """Adds ids; returns True when a shard was completed (the caller saves the state)."""
        b = self.buf[split]
        b.extend(ids)
        done = False
        while len(b) >= self.shard_tokens:
            self.write(split, b[: self.shard_tokens])
            del b[: self.shard_tokens]
            done = True
        return done

    def write(self, split, ids):
        if not ids:
            return
        header = [0] * HEADER_INTS
        header[0], header[1], header[2] = MAGIC, self.version, len(ids)
        fmt = "H" if self.version == 1 else "I"
        path = self.path(split, self.count[split])
        tmp = path + ".tmp"
        with open(tmp, "wb") as f:
            f.write(struct.pack(f"<{HEADER_INTS}i", *header))
            f.write(struct.pack(f"<{len(ids)}{fmt}", *ids))
        os.replace(tmp, path)
        self.count[split] += 1
        self.tokens[split] += len(ids)

    def pending(self):
        return {s: len(b) for s, b in self.buf.items()}

    def flush_split(self, split):
        self.write(split, self.buf[split])
        self.buf[split] = []

    def flush(self):
        for split in ("val", "train"):
            self.flush_split(split)


def main(argv):
    a = parse_args(argv)
    try:
        from tokenizers import Tokenizer
    except ImportError:
        raise BadInput("the tokenizers package is not installed (scripts/data/prepare_corpus.sh installs it)")
    if not os.path.isfile(a.tokenizer):
        raise BadInput(f"--tokenizer {a.tokenizer}: no such file")
    try:
        tok = Tokenizer.from_file(a.tokenizer)
    except Exception as e:
        raise BadInput(f"--tokenizer {a.tokenizer}: not a tokenizer.json the tokenizers package reads ({e})")
    files = expand_inputs(a.input)
    fmts = [format_of(f, a.format) for f in files]
    eot_mode = a.eot or ("none" if all(f == "wikitext" for f in fmts) else "prepend")
    eot = None
    if eot_mode == "prepend":
        eot = tok.token_to_id("<|endoftext|>")
        if eot is None:
            raise BadInput(f"--tokenizer {a.tokenizer}: no <|endoftext|> token for --eot prepend (use --eot none)")
    vocab = max(tok.get_vocab(with_added_tokens=True).values()) + 1  # ids may leave gaps: the largest decides
    version = 1 if vocab <= 65536 else 2

    os.makedirs(a.out, exist_ok=True)
    with open(a.tokenizer, "rb") as f:
        tok_sha = hashlib.sha256(f.read()).hexdigest()
    settings = {"inputs": [os.path.abspath(f) for f in files], "formats": fmts, "text_field": a.text_field,
                "tokenizer_sha256": tok_sha, "split": a.split, "val_tokens": a.val_tokens,
                "max_tokens": a.max_tokens, "shard_tokens": a.shard_tokens, "eot": eot_mode}
    # One state (and summary) per split choice, so --split train and --split val can share a folder.
    mode = a.split or "val+train"
    writes = [a.split] if a.split else ["val", "train"]
    state_path = os.path.join(a.out, f".prepare_state.{mode}.json")
    state = {}
    if os.path.exists(state_path):
        with open(state_path) as f:
            state = json.load(f)
        if state.get("settings") != settings:
            raise BadInput(f"{state_path}: an earlier run with other arguments (inputs, tokenizer, splits or shard "
                           f"size) left this folder; use another --out or remove it")
        if state.get("done"):
            print(json.dumps(state["summary"]))
            print(f"prepare_corpus: {a.out} is already complete", file=sys.stderr)
            return 0
    elif any(n.endswith(".bin") and n.split("_")[0] in writes for n in os.listdir(a.out)):
        raise BadInput(f"--out {a.out} already holds {' or '.join(writes)} shards of another run; use another folder")
    shards = Shards(a.out, a.shard_tokens, version, state)
    # Where the stream stands: input file, document in it, tokens of that document already in
    # completed shards (a shard boundary can split a document).
    pos = state.get("position", {"file": 0, "doc": 0, "skip": 0})
    emitted = sum(shards.tokens.values())  # tokens in completed shards
    stop_after = int(os.environ.get("HW_PREPARE_STOP_AFTER_SHARDS", "0"))  # tests: simulate an interruption
    written_now = 0
    t_start = t_last = time.time()
    docs_seen = 0

    def save(position):
        tmp = state_path + ".tmp"
        with open(tmp, "w") as f:
            json.dump({"settings": settings, "position": position, "shards": shards.count,
                       "tokens": shards.tokens}, f)
        os.replace(tmp, state_path)

    total = emitted  # tokens routed so far (completed shards + buffers)
    limit = a.max_tokens or None
    finished = False
    for fi in range(pos["file"], len(files)):
        start_doc = pos["doc"] if fi == pos["file"] else 0
        batch, batch_first = [], start_doc

        def encode_and_route(batch, first_doc):
            nonlocal total, written_now, finished
            encs = tok.encode_batch(batch, add_special_tokens=False)
            for k, enc in enumerate(encs):
                d = first_doc + k
                ids = ([eot] if eot is not None else []) + enc.ids
                skip = pos["skip"] if (fi == pos["file"] and d == pos["doc"]) else 0
                ids = ids[skip:]
                off = skip
                while ids:
                    if limit is not None and total >= limit:
                        finished = True
                        return
                    split = a.split or ("val" if total < a.val_tokens else "train")
                    room = (limit - total) if limit is not None else len(ids)
                    if a.val_tokens is not None and split == "val":
                        room = min(room, a.val_tokens - total)
                    take = ids[:room]
                    ids = ids[room:]
                    completed = shards.add(split, take)
                    total += len(take)
                    off += len(take)
                    if split == "val" and a.val_tokens is not None and total == a.val_tokens:
                        shards.flush_split("val")  # the val split is complete: its last shard now
                        completed = True
                    if completed:
                        # Tokens of this document still buffered after the last completed shard:
                        # a resume re-encodes the document and skips what the shards hold.
                        left = shards.pending()[split]
                        other = "train" if split == "val" else "val"
                        if shards.pending()[other] == 0 and left <= off:
                            save({"file": fi, "doc": d, "skip": off - left})
                        written_now += 1
                        if stop_after and written_now >= stop_after:
                            print(f"prepare_corpus: stopping after {written_now} shards "
                                  f"(HW_PREPARE_STOP_AFTER_SHARDS)", file=sys.stderr)
                            sys.exit(3)

        for d, text in enumerate(documents(files[fi], fmts[fi], a.text_field)):
            if d < start_doc:
                continue
            batch.append(text)
            docs_seen += 1
            if len(batch) >= a.batch_docs:
                encode_and_route(batch, batch_first)
                batch_first += len(batch)
                batch = []
                if finished:
                    break
                now = time.time()
                if now - t_last >= 5:
                    t_last = now
                    print(f"prepare_corpus: {os.path.basename(files[fi])} ({fi + 1}/{len(files)}): "
                          f"{total:,} tokens, {total / max(now - t_start, 1e-9):,.0f} tokens/s, "
                          f"shards train {shards.count['train']} val {shards.count['val']}", file=sys.stderr)
        if batch and not finished:
            encode_and_route(batch, batch_first)
        if finished:
            break
    shards.flush()
    summary = {"train_tokens": shards.tokens["train"], "val_tokens": shards.tokens["val"],
               "train_shards": shards.count["train"], "val_shards": shards.count["val"],
               "vocab_size": vocab, "shard_version": version, "eot": eot_mode,
               "tokenizer": os.path.abspath(a.tokenizer), "inputs": settings["inputs"]}
    with open(os.path.join(a.out, f"corpus_summary.{mode}.json"), "w") as f:
        json.dump(summary, f, indent=1)
    tmp = state_path + ".tmp"
    with open(tmp, "w") as f:
        json.dump({"settings": settings, "done": True, "summary": summary}, f)
    os.replace(tmp, state_path)
    print(f"prepare_corpus: train {summary['train_tokens']:,} tokens in {summary['train_shards']} shards, "
          f"val {summary['val_tokens']:,} tokens in {summary['val_shards']} shards -> {a.out}", file=sys.stderr)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BadInput as e:
        print(f"error: {e}", file=sys.stderr)
        sys.exit(1)
    except UnicodeDecodeError as e:
        print(f"error: an input is not UTF-8 text ({e.reason} at byte {e.start})", file=sys.stderr)
        sys.exit(1)
