"""headwise's mixed-head models for transformers (the files headwise copies into checkpoints)."""
from .configuration_headwise import HeadwiseConfig, parse_head_kind
from .modeling_headwise import HeadwiseCache, HeadwiseForCausalLM

__all__ = ["HeadwiseConfig", "HeadwiseCache", "HeadwiseForCausalLM", "parse_head_kind"]
