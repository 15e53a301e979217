#!/usr/bin/env python3
"""Build the Hugging Face GPT-2 parity fixture in tests/fixtures/hf_tiny_gpt2/.

Run once by hand (needs torch, transformers, safetensors); the outputs are committed so CI never
needs torch. The model is tiny and every weight, bias and LayerNorm parameter is drawn from
N(0, 0.1) so that a C++ model missing any term (a bias, a LayerNorm shift) fails the comparison.

Outputs:
  model.safetensors, config.json  - exactly as transformers' save_pretrained writes them (float32)
  expected.json                   - inputs, targets, losses, tensor checks
  reference.safetensors           - logits_f32 and logits_f64 [B, T, V] (every row and position) and
                                    grad.<name>: every entry of every parameter's float64 gradient

Float64 reference values come from a float64 copy of the *saved float32 weights*, so a C++ model
that loads model.safetensors and computes in double should match them to ~1e-12.
"""
import json
import os
import sys

import torch
import torch.nn.functional as F
from safetensors.torch import load_file, save_file
from transformers import GPT2Config, GPT2LMHeadModel

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "fixtures", "hf_tiny_gpt2")

B, T = 2, 16


def build_model():
    config = GPT2Config(
        vocab_size=64, n_positions=32, n_embd=32, n_layer=2, n_head=4,
        layer_norm_epsilon=1e-5, activation_function="gelu_new",
        resid_pdrop=0.0, embd_pdrop=0.0, attn_pdrop=0.0, summary_first_dropout=0.0,
        tie_word_embeddings=True, bos_token_id=0, eos_token_id=0,
    )
    config._attn_implementation = "eager"  # the plain softmax(QK^T/sqrt(d))V formula
    torch.manual_seed(0)
    model = GPT2LMHeadModel(config)
    with torch.no_grad():
        for _, p in model.named_parameters():  # wte is tied to lm_head: drawn once
            p.normal_(0.0, 0.1)
    model.eval()
    return config, model


def mean_ce(logits, targets):
    return F.cross_entropy(logits.reshape(-1, logits.shape[-1]), targets.reshape(-1), reduction="mean")


def main():
    config, model = build_model()
    os.makedirs(OUT, exist_ok=True)
    model.save_pretrained(OUT, safe_serialization=True)
    for extra in ("generation_config.json",):  # not needed by headwise; keep the fixture small
        path = os.path.join(OUT, extra)
        if os.path.exists(path):
            os.remove(path)

    gen = torch.Generator().manual_seed(1234)
    seq = torch.randint(0, config.vocab_size, (B, T + 1), generator=gen)
    inputs, targets = seq[:, :T].contiguous(), seq[:, 1:].contiguous()

    # Reload the saved weights so the references describe exactly what is in the file.
    saved = load_file(os.path.join(OUT, "model.safetensors"))
    _, m32 = build_model()
    missing, unexpected = m32.load_state_dict(saved, strict=False)
    assert not unexpected, unexpected
    assert set(missing) <= {"lm_head.weight"}, missing  # tied to wte
    assert m32.lm_head.weight.data_ptr() == m32.transformer.wte.weight.data_ptr()
    m64 = GPT2LMHeadModel(config).double().eval()
    m64.load_state_dict({k: v.double() for k, v in saved.items()}, strict=False)

    with torch.no_grad():
        logits32 = m32(input_ids=inputs).logits
        loss32 = mean_ce(logits32, targets)
        # Cross-check against HF's own shifted-label loss on the T+1 sequence (causal: same logits).
        hf_loss32 = m32(input_ids=seq, labels=seq).loss
        assert abs(hf_loss32.item() - loss32.item()) < 1e-5, (hf_loss32.item(), loss32.item())

    logits64 = m64(input_ids=inputs).logits
    loss64 = mean_ce(logits64, targets)
    loss64.backward()
    assert abs(loss64.item() - loss32.item()) < 1e-4

    reference = {"logits_f32": logits32.contiguous(), "logits_f64": logits64.detach().contiguous()}
    for name, p in m64.named_parameters():  # the tied wte gradient includes the lm_head contribution
        reference["grad." + name] = p.grad.detach().contiguous()
    save_file(reference, os.path.join(OUT, "reference.safetensors"))

    tensor_checks = {}
    for name, t in saved.items():
        assert t.dtype == torch.float32, (name, t.dtype)
        tensor_checks[name] = {
            "shape": list(t.shape),
            "first": t.reshape(-1)[:4].tolist(),
            "sum": t.double().sum().item(),
        }

    expected = {
        "description": "HF GPT2LMHeadModel parity fixture; made by tests/reference/make_hf_fixture.py",
        "versions": {"torch": torch.__version__, "transformers": __import__("transformers").__version__,
                     "safetensors": __import__("safetensors").__version__},
        "config": {"vocab_size": 64, "n_positions": 32, "n_embd": 32, "n_layer": 2, "n_head": 4,
                   "n_inner": 128, "layer_norm_epsilon": 1e-5, "activation": "gelu_new (tanh GELU)",
                   "tied_embeddings": True,
                   "conv1d_note": "HF Conv1D weights are stored [in_features, out_features]: y = x @ W + b"},
        "batch": B,
        "seq_len": T,
        "input_ids": inputs.tolist(),
        "targets": targets.tolist(),
        "loss_f64": loss64.item(),
        "loss_f32": loss32.item(),
        "reference_note": "reference.safetensors: logits_f32 / logits_f64 [batch, seq_len, vocab]; grad.<name>: the "
                          "float64 autograd gradient of loss_f64 (mean over B*T), names as in named_parameters(), "
                          "the tied wte gradient including the lm_head contribution",
        "tensor_checks": tensor_checks,
    }
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(expected, f, indent=1)
        f.write("\n")
    print(f"wrote {OUT}: loss_f64={loss64.item():.12f} loss_f32={loss32.item():.8f}", file=sys.stderr)


if __name__ == "__main__":
    main()
