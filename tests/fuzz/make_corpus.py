#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (tests/fuzz/corpus/<target>/): a few small valid
inputs of each parser and a few near misses, so libFuzzer starts from the formats' structure.
Run from anywhere: python3 tests/fuzz/make_corpus.py (standard library only)."""
import json
import os
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def put(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data if isinstance(data, bytes) else data.encode())


def safetensors(tensors, metadata=None, pad=True):
    header, blob = {}, b""
    if metadata:
        header["__metadata__"] = metadata
    for name, (dtype, shape, data) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    text = json.dumps(header, separators=(",", ":")).encode()
    if pad:
        text += b" " * ((8 - len(text) % 8) % 8)
    return struct.pack("<Q", len(text)) + text + blob


def bytes_to_unicode():
    """GPT-2's byte -> printable character map (the byte-level vocabulary's 256 symbols)."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


def main():
    f32 = struct.pack("<4f", 1.0, -2.0, 0.5, 3.0)
    put("safetensors_header", "valid", safetensors({"w": ("F32", [2, 2], f32), "g": ("I32", [1], struct.pack("<i", 1))},
                                                   {"format": "pt"}))
    put("safetensors_header", "empty_shape", safetensors({"s": ("F32", [], struct.pack("<f", 1.0)),
                                                          "z": ("F32", [0, 3], b"")}))
    put("safetensors_header", "bf16_u16", safetensors({"b": ("BF16", [2], b"\x80\x3f\x00\x40"),
                                                       "u": ("U16", [1], b"\x07\x00"), "h": ("F16", [1], b"\x00\x3c")}))
    put("safetensors_header", "overlap", safetensors({"a": ("F32", [1], f32[:4])})[:-4] + f32[:8])
    put("safetensors_header", "short", struct.pack("<Q", 1 << 40) + b"{}")

    m = bytes_to_unicode()
    vocab = {m[b]: b for b in range(256)}
    merges = [("h", "e"), ("l", "l"), ("he", "ll"), ("Ġ", "w")]
    for a, b in merges:
        vocab.setdefault(a + b, len(vocab))
    tok = {
        "version": "1.0",
        "added_tokens": [{"id": len(vocab), "content": "<|endoftext|>", "special": True, "normalized": False,
                          "single_word": False, "lstrip": False, "rstrip": False}],
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": "",
                  "end_of_word_suffix": "", "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": [a + " " + b for a, b in merges]},
    }
    put("tokenizer_json", "gpt2_mini.json", json.dumps(tok))
    tok_nfc = json.loads(json.dumps(tok))
    tok_nfc["normalizer"] = {"type": "NFC"}
    tok_nfc["model"]["merges"] = [[a, b] for a, b in merges]
    with open(os.path.join(HERE, "..", "fixtures", "tokenizers", "qwen2_style.json"), encoding="utf-8") as f:
        tok_nfc["pre_tokenizer"] = json.load(f)["pre_tokenizer"]  # the exact Qwen 2 Split regex
    put("tokenizer_json", "qwen_mini.json", json.dumps(tok_nfc))
    put("tokenizer_json", "text_plain", b"\x00Hello, world! In the beginning God created\n\n  x 123456")
    put("tokenizer_json", "text_marks", b"\x00a" + "\u0316\u0301".encode() * 20 + "\uac00\u1100\u1161e\u0301".encode())
    put("tokenizer_json", "text_bad_utf8", b"\x00\xff\xfe\xcc\x81\xed\xa0\x80 <|im_end|> \xe2\x84")

    def shard(tokens, magic=20240520, version=1, count=None):
        header = [0] * 256
        header[0], header[1], header[2] = magic, version, len(tokens) if count is None else count
        return struct.pack("<256i", *header) + struct.pack("<%dH" % len(tokens), *tokens)
    put("shard_header", "valid", shard([1, 2, 3, 65535, 0]))
    put("shard_header", "empty", shard([]))
    put("shard_header", "bad_count", shard([1, 2], count=3))
    put("shard_header", "bad_magic", shard([1], magic=7))

    put("config_json", "run.json", json.dumps({
        "model": {"n_layer": 2, "n_head": 4, "n_kv_head": 2, "n_embd": 32, "block_size": 16, "vocab_size": 64,
                  "pos": "rope", "head_plan": [["softmax", "window:3", "linear", "static"],
                                               ["sink_window:2:4", "pruned", "performer:8", "dijiang"]],
                  "lora": {"rank": 2, "layers": [1], "targets": ["q", "o"]}},
        "train": {"micro_batch": 2, "seq_len": 16, "total_batch_tokens": 64, "steps": 4, "lr": 1e-2},
        "data": {"train": "a/*.bin", "val": "b/*.bin", "val_split": "halves"},
        "method": [{"name": "saf", "ratio": 0.25}, {"name": "aah", "windows": [2, 4, 8, 16]}]}))
    put("config_json", "comments.json", '// a comment\n{"model": {/* n */ "n_layer": 1e0}, "method": {"name": "none"}}')
    put("config_json", "hf_config.json", json.dumps({
        "model_type": "gpt2", "vocab_size": 64, "n_positions": 16, "n_embd": 32, "n_layer": 2, "n_head": 4,
        "n_inner": None, "activation_function": "gelu_new", "layer_norm_epsilon": 1e-5, "headwise_n_kv_head": 2,
        "headwise_pos": "learned", "headwise_bias": True, "linear_eps": 1e-6,
        "head_plan": [["softmax", "linear", "static", "taylorshift"], ["softmax"] * 4],
        "headwise_lora": {"rank": 1, "alpha": 2}}))
    # A mixed plan's own model type (docs/checkpoints.md): the family in headwise_family.
    put("config_json", "hf_headwise_config.json", json.dumps({
        "model_type": "headwise", "architectures": ["HeadwiseForCausalLM"], "headwise_family": "qwen2",
        "vocab_size": 64, "hidden_size": 32, "intermediate_size": 48, "num_hidden_layers": 2,
        "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 16, "rms_norm_eps": 1e-6,
        "tie_word_embeddings": True, "linear_eps": 1e-6,
        "head_plan": [["softmax", "sink_window:1:2", "static", "linear"], ["window:3"] * 4]}))

    put("token_ids", "ids", b"15496 11 995 0\n")
    put("token_ids", "edges", b" 50303\t0\n\n 007 ")
    put("token_ids", "bad", b"12 -1 3x 99999999999999999999")


if __name__ == "__main__":
    main()
