"""Configuration of headwise's mixed-head models for Hugging Face transformers.

A checkpoint that headwise writes with any head kind other than softmax says
`model_type: "headwise"`, names its family in `headwise_family` (gpt2, llama, qwen2 or qwen3)
and keeps every other key of that family's config.json as the family writes it (GPT-2's
n_embd/n_layer/..., the Llama family's hidden_size/num_hidden_layers/...), plus `head_plan` (per
layer, per query head, a kind string) and `linear_eps`. This class reads such a config.json,
checks the plan (an unknown kind is one ValueError naming it) and gives the model code one set of
names whatever the family; it writes the family's own keys back, so that headwise reads a
config that transformers saved. The file is copied into every such checkpoint by headwise
(python/headwise_hf/ in the headwise repository is the source).
"""
from transformers import PretrainedConfig

FAMILIES = ("gpt2", "llama", "qwen2", "qwen3")
PERFORMER_FEATURES = 250  # `performer` without a count (the OAL paper's baseline)
MAX_PERFORMER_FEATURES = 8192
KINDS = ("softmax", "window:W", "sink_window:S:W", "static", "linear", "pruned", "performer", "performer:M",
         "dijiang", "taylorshift")

# GPT-2's config.json names and the names the model code reads; the latter are derived when
# reading and dropped when writing (headwise reads GPT-2's own keys).
_GPT2_NAMES = {"n_embd": "hidden_size", "n_layer": "num_hidden_layers", "n_head": "num_attention_heads",
               "n_positions": "max_position_embeddings"}
# The tokenizer class transformers picks for the family's own model_type (a folder whose
# tokenizer_config.json names none, as headwise's trained checkpoints with tokenizer.json alone).
_TOKENIZERS = {"gpt2": "GPT2Tokenizer", "llama": "LlamaTokenizer", "qwen2": "Qwen2Tokenizer", "qwen3": "Qwen2Tokenizer"}
_GPT2_DERIVED = ("hidden_size", "num_hidden_layers", "num_attention_heads", "max_position_embeddings",
                 "num_key_value_heads", "head_dim", "intermediate_size", "rms_norm_eps")


def _count(text, part, what, low):
    if not part.isdigit() or int(part) < low:
        raise ValueError(f"headwise: bad {what} in head kind '{text}' (expected an integer >= {low})")
    return int(part)


def parse_head_kind(text):
    """One head_plan entry as (kind, sink, window, features): window:W -> ("window", 0, W, 0),
    sink_window:S:W -> ("sink_window", S, W, 0), performer[:M] -> ("performer", 0, 0, M), the
    others (kind, 0, 0, 0). Anything else is a ValueError naming the text."""
    if not isinstance(text, str):
        raise ValueError(f"headwise: head kind {text!r} is not a string (known kinds: {', '.join(KINDS)})")
    parts = text.split(":")
    name = parts[0]
    if len(parts) == 1 and name in ("softmax", "static", "linear", "pruned", "dijiang", "taylorshift"):
        return (name, 0, 0, 0)
    if name == "performer" and len(parts) <= 2:
        m = PERFORMER_FEATURES if len(parts) == 1 else _count(text, parts[1], "feature count", 1)
        if m > MAX_PERFORMER_FEATURES:
            raise ValueError(f"headwise: head kind '{text}' has more than {MAX_PERFORMER_FEATURES} features")
        return ("performer", 0, 0, m)
    if name == "window" and len(parts) == 2:
        return ("window", 0, _count(text, parts[1], "window", 1), 0)
    if name == "sink_window" and len(parts) == 3:
        return ("sink_window", _count(text, parts[1], "sink", 0), _count(text, parts[2], "window", 1), 0)
    raise ValueError(f"headwise: unknown head kind '{text}' (known kinds: {', '.join(KINDS)})")


class HeadwiseConfig(PretrainedConfig):
    model_type = "headwise"

    def __init__(self, headwise_family="llama", head_plan=None, linear_eps=1e-6, headwise_linear_groups=None,
                 headwise_lora=None, headwise_attention="auto", headwise_load_adapters=True, **kwargs):
        """headwise_attention and headwise_load_adapters are options of a run, not of the checkpoint
        (from_pretrained(DIR, trust_remote_code=True, headwise_attention="sdpa")): the softmax-family
        kinds' backend ("auto": FlexAttention block masks for window heads on a GPU, else
        scaled_dot_product_attention with a boolean mask; "sdpa"; "flex"), and whether the LoRA
        adapters headwise stored beside the weights are applied (HeadwiseForCausalLM.from_pretrained)."""
        if headwise_family not in FAMILIES:
            raise ValueError(f"headwise: headwise_family {headwise_family!r} is not one of {', '.join(FAMILIES)}")
        # RoPE (the Llama family): transformers 4's rope_theta + rope_scaling or 5's rope_parameters,
        # kept as one rope_parameters object (which headwise reads too), outside transformers'
        # own RoPE standardisation.
        rope = {k: kwargs.pop(k) for k in ("rope_theta", "rope_scaling", "rope_parameters") if k in kwargs}
        kwargs.setdefault("tokenizer_class", _TOKENIZERS[headwise_family])
        if headwise_family == "gpt2":
            kwargs.setdefault("tie_word_embeddings", True)
        else:
            kwargs.setdefault("tie_word_embeddings", False)  # the Llama-family classes' default
        super().__init__(**kwargs)
        self.headwise_family = headwise_family
        self.head_plan = head_plan
        self.linear_eps = float(linear_eps)
        self.headwise_linear_groups = headwise_linear_groups
        self.headwise_lora = headwise_lora
        if headwise_attention not in ("auto", "sdpa", "flex"):
            raise ValueError(f"headwise: headwise_attention must be auto, sdpa or flex, got {headwise_attention!r}")
        self.headwise_attention = headwise_attention
        self.headwise_load_adapters = bool(headwise_load_adapters)
        if headwise_family != "gpt2":  # (GPT-2's RoPE: headwise_pos and headwise_rope_theta)
            rp = dict(rope.get("rope_parameters") or rope.get("rope_scaling") or {})
            if "type" in rp and "rope_type" not in rp:
                rp["rope_type"] = rp.pop("type")
            rp.setdefault("rope_type", "default")
            rp.setdefault("rope_theta", rope.get("rope_theta") if rope.get("rope_theta") is not None else 10000.0)
            if rp["rope_type"] not in ("default", "llama3"):
                raise ValueError(f"headwise: rope_type {rp['rope_type']!r} is not supported (only llama3 scaling, or none)")
            self.rope_parameters = rp
        if headwise_family == "gpt2":
            self._derive_gpt2()
        else:
            self._derive_llama()
        self._check_plan()

    # -- the family's keys, under the names the model code reads --
    def _derive_gpt2(self):
        for native, name in _GPT2_NAMES.items():
            if not hasattr(self, native):
                raise ValueError(f"headwise: a gpt2-family config needs '{native}'")
            setattr(self, name, getattr(self, native))
        self.num_key_value_heads = getattr(self, "headwise_n_kv_head", None) or self.n_head
        self.head_dim = self.n_embd // self.n_head
        self.intermediate_size = 4 * self.n_embd
        self.layer_norm_epsilon = getattr(self, "layer_norm_epsilon", 1e-5)
        if getattr(self, "activation_function", "gelu_new") not in ("gelu_new", "gelu_pytorch_tanh"):
            raise ValueError("headwise: only the tanh GELU (gelu_new) is supported")

    def _derive_llama(self):
        for key in ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size",
                    "max_position_embeddings", "vocab_size"):
            if getattr(self, key, None) is None:
                raise ValueError(f"headwise: a {self.headwise_family}-family config needs '{key}'")
        if getattr(self, "num_key_value_heads", None) is None:
            self.num_key_value_heads = self.num_attention_heads
        if getattr(self, "head_dim", None) is None:
            self.head_dim = self.hidden_size // self.num_attention_heads
        if getattr(self, "use_sliding_window", False):
            raise ValueError("headwise: use_sliding_window = true (Qwen's sliding-window layers) is not supported")
        if getattr(self, "hidden_act", "silu") != "silu":
            raise ValueError("headwise: hidden_act must be silu (SwiGLU)")

    def _check_plan(self):
        L, H = self.num_hidden_layers, self.num_attention_heads
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError("headwise: num_key_value_heads must divide num_attention_heads")
        if self.head_plan is None:
            self.head_plan = [["softmax"] * H for _ in range(L)]
        if not isinstance(self.head_plan, list) or len(self.head_plan) != L:
            raise ValueError(f"headwise: head_plan must list {L} layers")
        for l, row in enumerate(self.head_plan):
            if not isinstance(row, list) or len(row) != H:
                raise ValueError(f"headwise: head_plan layer {l} must list {H} heads")
            for h, text in enumerate(row):
                try:
                    parse_head_kind(text)
                except ValueError as e:
                    raise ValueError(f"{e}, in head_plan layer {l} head {h}") from None
        groups = self.headwise_linear_groups
        if groups is not None and (not isinstance(groups, list) or len(groups) != L
                                   or any(not isinstance(r, list) or len(r) != H for r in groups)):
            raise ValueError("headwise: headwise_linear_groups must list, per layer and head, a linear head's G")
        for l, row in enumerate(self.head_plan):
            for h, text in enumerate(row):
                if text == "linear" and (groups is None or not isinstance(groups[l][h], int) or groups[l][h] < 1):
                    raise ValueError(f"headwise: linear head (layer {l}, head {h}) has no group count in "
                                     "headwise_linear_groups (write the checkpoint again with `headwise export`)")

    # -- config.json: the family's own keys, as headwise reads them --
    def to_dict(self):
        out = super().to_dict()
        if self.headwise_family == "gpt2":
            for key in _GPT2_DERIVED:
                out.pop(key, None)
        for key in ("headwise_lora", "headwise_linear_groups"):
            if out.get(key) is None:
                out.pop(key, None)
        for key in ("headwise_attention", "headwise_load_adapters"):  # a run's options
            out.pop(key, None)
        return out

    def to_diff_dict(self):
        # Every key: headwise reads some of them without the defaults transformers assumes.
        out = self.to_dict()
        out.pop("_name_or_path", None)
        return out
