"""headwise's mixed-head decoders in PyTorch, for Hugging Face transformers, PEFT and lm-eval.

One implementation of the model families headwise trains and converts (GPT-2 with learned or
rotary positions, Llama, Qwen2, Qwen3: RMSNorm, SwiGLU, RoPE with Llama 3 scaling, GQA, biases,
q/k norm, tied or untied head) and of its nine head kinds, each computing what headwise's CPU
reference computes (src/attention/*.cpp there; the docs' head-plans page has the definitions):

  softmax, window:W, sink_window:S:W  softmax over the keys i-W < j <= i (and j < S), through
                                      scaled_dot_product_attention with the kind's mask, or
                                      FlexAttention block masks on a GPU;
  static                              P(i,j) = exp(alpha_j + rho_(i-j) - log Z_i) (SAF), from the
                                      stored alpha and rho, log Z in float64 as headwise does;
  linear                              kappa = eps + ||L^T s||^2, s = [1, s_g = sum_(r in g) q_r k_r
                                      / sqrt(D)] (OAL's grouped quadratic kernel with its L);
  taylorshift                         1 + tau s + (tau s)^2 / 2 on unit-length q, k;
  performer                           exp(W x' - |x'|^2/2) / sqrt(M), x' = x / D^(1/4), the stored W;
  dijiang                             exp(log_w) (.) softmax(C q') against softmax(C k'), C the DCT-II;
  pruned                              no output.

The four kernel kinds run in chunked linear time: a prefix state S = sum_j phi(k_j) (x) [v_j, 1]
per chunk of 64 tokens and the exact pairs inside a chunk, in float32 whatever the model's dtype.
Generation keeps headwise's cache per KV head: every position for softmax and static heads (V
only for static), the sink and the last W positions for window and sink+window heads, and the
constant-size state of kernel heads.

headwise copies this file into every checkpoint folder it writes with a mixed plan (the source
is python/headwise_hf/ in its repository); load with
AutoModelForCausalLM.from_pretrained(DIR, trust_remote_code=True).
"""
import json
import math
import os
import warnings

import torch
import torch.nn.functional as F
from torch import nn
from transformers import GenerationMixin, PreTrainedModel
from transformers.cache_utils import Cache, CacheLayerMixin
from transformers.modeling_outputs import CausalLMOutputWithPast
from transformers.pytorch_utils import Conv1D

from .configuration_headwise import HeadwiseConfig, parse_head_kind

try:  # transformers 5: initialisers that leave loaded tensors alone
    from transformers import initialization as _init
except ImportError:
    from torch.nn import init as _init
try:  # FlexAttention (PyTorch >= 2.5): block-sparse masks for window heads on a GPU
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention
except ImportError:
    create_block_mask = flex_attention = None

CHUNK = 64  # tokens per chunk of the kernel kinds' prefix-state evaluation (headwise's kTile)
KERNEL_KINDS = ("linear", "taylorshift", "performer", "dijiang")
SOFTMAX_KINDS = ("softmax", "window", "sink_window")
_OUTPUT_CACHE_FIELD = "cache" if "cache" in CausalLMOutputWithPast.__dataclass_fields__ else "past_key_values"


def compute_dtype(x):
    """float32 for 16-bit tensors and float32 ones, float64 for float64 (a reference run)."""
    return torch.float64 if x.dtype == torch.float64 else torch.float32


# ---------------------------------------------------------------------------------------------
# Head-kind values (checkpoint tensors h.{l}.attn.<kind>.{h}.<name>)
# ---------------------------------------------------------------------------------------------
class StaticHead(nn.Module):
    """SAF's fitted pattern: alpha (per key position) and rho (per distance), buffers."""

    def __init__(self, n_positions):
        super().__init__()
        self.register_buffer("alpha", torch.zeros(n_positions))
        self.register_buffer("rho", torch.zeros(n_positions))
        self._logz, self._key = None, None

    def log_z(self, n, dtype=torch.float32):
        """log Z_i = logsumexp_(k <= i) (alpha_k + rho_(i-k)) for i < n, in float64 (as headwise's
        static_log_normalisers), then in `dtype`; computed once per change of alpha or rho."""
        key = (self.alpha._version, self.rho._version, self.alpha.data_ptr(), self.rho.data_ptr())
        if key != self._key:
            self._logz, self._key = None, key
        have = 0 if self._logz is None else self._logz.numel()
        if have < n:
            a, r = self.alpha.double(), self.rho.double()
            parts = [] if self._logz is None else [self._logz]
            step = max(1, (1 << 22) // n)
            for i0 in range(have, n, step):
                i = torch.arange(i0, min(n, i0 + step), device=a.device)
                k = torch.arange(0, int(i[-1]) + 1, device=a.device)
                d = i[:, None] - k[None, :]
                logits = (a[k][None, :] + r[d.clamp(min=0)]).masked_fill(d < 0, -math.inf)
                parts.append(torch.logsumexp(logits, -1))
            self._logz = torch.cat(parts)
        return self._logz[:n].to(dtype)


class LinearHead(nn.Module):
    """OAL's grouped quadratic kernel: L ((G+1)x(G+1), lower triangle read) and the groups
    (per dimension, 1..G)."""

    def __init__(self, n_groups, head_dim):
        super().__init__()
        self.L = nn.Parameter(torch.zeros(n_groups + 1, n_groups + 1))
        self.register_buffer("groups", torch.ones(head_dim, dtype=torch.int32))


class PerformerHead(nn.Module):
    def __init__(self, n_features, head_dim):
        super().__init__()
        self.register_buffer("W", torch.zeros(n_features, head_dim))


class DiJiangHead(nn.Module):
    def __init__(self, head_dim):
        super().__init__()
        self.log_w = nn.Parameter(torch.zeros(head_dim))


class TaylorShiftHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.tau = nn.Parameter(torch.ones(1))


def add_head_values(module, config, layer):
    """Registers layer `layer`'s head-kind values on `module` as ModuleDicts named after the
    kinds (static, linear, ...), keyed by head index: the checkpoint's names."""
    D = config.head_dim
    made = {}
    for h, text in enumerate(config.head_plan[layer]):
        kind, _, _, m = parse_head_kind(text)
        if kind == "static":
            made.setdefault("static", {})[str(h)] = StaticHead(config.max_position_embeddings)
        elif kind == "linear":
            made.setdefault("linear", {})[str(h)] = LinearHead(config.headwise_linear_groups[layer][h], D)
        elif kind == "performer":
            made.setdefault("performer", {})[str(h)] = PerformerHead(m, D)
        elif kind == "dijiang":
            made.setdefault("dijiang", {})[str(h)] = DiJiangHead(D)
        elif kind == "taylorshift":
            made.setdefault("taylorshift", {})[str(h)] = TaylorShiftHead()
    for kind, heads in made.items():
        module.add_module(kind, nn.ModuleDict(heads))


class HeadValues(nn.Module):
    """A Llama-family layer's head-kind values, at h.{l}.attn (headwise's names beside the
    family's own)."""

    def __init__(self, config, layer):
        super().__init__()
        add_head_values(self, config, layer)


class HeadValueLayer(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        self.attn = HeadValues(config, layer)


# ---------------------------------------------------------------------------------------------
# Kernel kinds: features and the chunked prefix-state engine
# ---------------------------------------------------------------------------------------------
def _pair_index(D, device):
    r, c = torch.triu_indices(D, D, device=device)
    return r, c


def quad_features(x, pairs):
    """X(x) = [1, x_r, x_r x_c (r <= c)] (float32), headwise's packed pair features."""
    r, c = pairs
    one = torch.ones(x.shape[:-1] + (1,), dtype=x.dtype, device=x.device)
    return torch.cat((one, x, x[..., r] * x[..., c]), -1)


def quad_weights(L, groups, eps, scale, pairs, dtype):
    """Query-side weights w with psi = w (.) X(q): kappa(q, k) = psi(q) . X(k) = eps + ||L_low^T s||^2."""
    Ll = torch.tril(L.to(dtype))
    M = Ll @ Ll.T
    g = groups.long()
    r, c = pairs
    w0 = (eps + M[0, 0]).reshape(1)
    w1 = 2.0 * M[0, g] * scale
    w2 = torch.where(r == c, 1.0, 2.0) * M[g[r], g[c]] * (scale * scale)
    return torch.cat((w0, w1, w2))


def performer_features(x, W):
    D, M = x.shape[-1], W.shape[0]
    xs = x * (1.0 / math.sqrt(math.sqrt(D)))
    sq = (xs * xs).sum(-1, keepdim=True) / 2.0
    return torch.exp(xs @ W.to(x.dtype).T - sq) * (1.0 / math.sqrt(M))


def dct_matrix(D, device, dtype):
    f = torch.arange(D, dtype=torch.float64, device=device)[:, None]
    d = torch.arange(D, dtype=torch.float64, device=device)[None, :]
    scale = torch.full_like(f, math.sqrt(2.0 / D))
    scale[0] = math.sqrt(1.0 / D)
    return (scale * torch.cos(math.pi * (d + 0.5) * f / D)).to(dtype)


def dijiang_features(x, C):
    xs = x * (1.0 / math.sqrt(math.sqrt(x.shape[-1])))
    return torch.softmax(xs @ C.T, -1)


def unit_rows(x):
    n = x.norm(dim=-1, keepdim=True)
    safe = torch.where(n > 0, n, torch.ones_like(n))
    return x * torch.where(n > 0, 1.0 / safe, torch.zeros_like(n))  # a zero row stays zero


def kernel_attend(psi, phi, v, head_group, state=None):
    """Causal kernel attention, exact, chunk by chunk: out_i = sum_(j<=i) (psi_i . phi_j) v_j / sum_(j<=i) psi_i . phi_j.
    psi [B, nh, T, F] (per head), phi [B, ng, T, F] and v [B, ng, T, D] (per group), head_group [nh]
    (each head's group), state [B, ng, F, D+1] (the prefix before these tokens) or None.
    Returns out [B, nh, T, D] (float32) and the state after them."""
    B, nh, T, Fd = psi.shape
    ng, D = phi.shape[1], v.shape[-1]
    C = min(CHUNK, T)
    pad = (-T) % C
    u = torch.cat((v, torch.ones_like(v[..., :1])), -1)
    if pad:  # padded keys get zero features: they add nothing to any state
        psi, phi, u = (F.pad(t, (0, 0, 0, pad)) for t in (psi, phi, u))
    n = (T + pad) // C
    psi_c = psi.view(B, nh, n, C, Fd)
    phi_c = phi.view(B, ng, n, C, Fd)
    u_c = u.view(B, ng, n, C, D + 1)
    dS = phi_c.transpose(-1, -2) @ u_c  # [B, ng, n, F, D+1]
    incl = dS.cumsum(2)
    excl = torch.cat((torch.zeros_like(dS[:, :, :1]), incl[:, :, :-1]), 2)
    if state is not None:
        excl = excl + state[:, :, None]
    end = incl[:, :, -1] if state is None else state + incl[:, :, -1]
    same = nh == ng and bool((head_group == torch.arange(ng, device=head_group.device)).all())
    pick = (lambda t: t) if same else (lambda t: t.index_select(1, head_group))
    inter = psi_c @ pick(excl)
    A = psi_c @ pick(phi_c).transpose(-1, -2)
    A = A * torch.ones(C, C, dtype=torch.bool, device=A.device).tril()
    nd = (inter + A @ pick(u_c)).reshape(B, nh, n * C, D + 1)[:, :, :T]
    return nd[..., :D] / nd[..., D:], end


# ---------------------------------------------------------------------------------------------
# One layer's heads: the plan row, its cache policy and the computation of every kind
# ---------------------------------------------------------------------------------------------
class LayerPlan:
    """A layer's head plan: each head's kind, the heads of each spec, each KV group's cache."""

    def __init__(self, config, layer):
        self.H, self.KV, self.D = config.num_attention_heads, config.num_key_value_heads, config.head_dim
        self.rep = self.H // self.KV
        self.eps = config.linear_eps
        self.specs = [parse_head_kind(t) for t in config.head_plan[layer]]
        self.by_spec = {}
        for h, s in enumerate(self.specs):
            self.by_spec.setdefault(s, []).append(h)
        # Cache per KV group (headwise's policy): every position when a softmax head reads it (V
        # only when only static heads do), else the largest sink and window of its window heads.
        self.sig = []
        for g in range(self.KV):
            kinds = [self.specs[h] for h in range(g * self.rep, (g + 1) * self.rep)]
            names = {s[0] for s in kinds}
            streams = [s for s in kinds if s[0] in ("window", "sink_window")]
            if "softmax" in names or ("static" in names and streams):
                self.sig.append(("full",))
            elif "static" in names:
                self.sig.append(("v",))
            elif streams:
                self.sig.append(("stream", max(s[1] for s in streams), max(s[2] for s in streams)))
            else:
                self.sig.append(None)


def _visible(qpos, kpos, sink, window):
    """keys j visible to query i: j <= i and (j < sink or j > i - window)."""
    i, j = qpos[:, None], kpos[None, :]
    return (j <= i) & ((j < sink) | (j > i - window))


_FLEX = {}


def _flex_window(q, k, v, qpos0, sink, window):
    """FlexAttention with a block mask for contiguous key positions 0..S-1 and queries at qpos0..;
    compiled once per process."""
    if "fn" not in _FLEX:
        _FLEX["fn"] = torch.compile(flex_attention, dynamic=False) if q.is_cuda else flex_attention
    Tq, S = q.shape[-2], k.shape[-2]
    key = (Tq, S, qpos0, sink, window, q.device)
    if key not in _FLEX:
        def mask_mod(b, h, qi, kj):
            i = qi + qpos0
            return (kj <= i) & ((kj < sink) | (kj > i - window))
        _FLEX[key] = create_block_mask(mask_mod, None, None, Tq, S, device=q.device)
    return _FLEX["fn"](q, k, v, block_mask=_FLEX[key])


class MixedAttention:
    """Attention of one layer's heads (no projections): every kind, with or without a cache."""

    def __init__(self, plan, values, backend="auto"):
        self.p = plan
        self.values = values  # the module holding the static/linear/... ModuleDicts
        self.backend = backend

    def __call__(self, q, k, v, p0, lc):
        """q [B, H, T, D], k, v [B, KV, T, D] (normed, rotated); the tokens sit at positions
        p0.. ; lc: this layer's HeadwiseLayerCache or None. Returns [B, T, H * D]."""
        p = self.p
        B, H, T, D = q.shape
        qpos = torch.arange(p0, p0 + T, device=q.device)
        out = q.new_zeros(B, H, T, D)
        sets = self._key_sets(k, v, qpos, lc)
        for spec, heads in p.by_spec.items():
            kind = spec[0]
            if kind in SOFTMAX_KINDS:
                self._softmax_family(q, spec, heads, sets, qpos, out, fresh=lc is None or p0 == 0)
            elif kind == "static":
                self._static(heads, sets, qpos, out)
        kernels = {}
        for h, s in enumerate(p.specs):
            if s[0] in KERNEL_KINDS:
                kernels.setdefault(s[0], []).append(h)
        for kind, heads in kernels.items():
            self._kernel(kind, heads, q, k, v, lc, out)
        if lc is not None:
            lc.commit(sets)
        return out.transpose(1, 2).reshape(B, T, H * D)

    # Keys and values each head group reads: {sig: (groups, K, V, kpos)}; without a cache the
    # tokens themselves for every group.
    def _key_sets(self, k, v, qpos, lc):
        if lc is None:
            return {"all": (list(range(self.p.KV)), k, v, qpos)}
        return lc.key_sets(k, v, qpos)

    def _heads_by_set(self, heads, sets):
        out = {}
        for h in heads:
            g = h // self.p.rep
            for name, (groups, *_rest) in sets.items():
                if g in groups:
                    out.setdefault(name, []).append((h, groups.index(g)))
        return out

    def _softmax_family(self, q, spec, heads, sets, qpos, out, fresh):
        kind, sink, window, _ = spec
        if kind == "softmax":
            window = 1 << 62
        for name, pairs in self._heads_by_set(heads, sets).items():
            _, K, V, kpos = sets[name]
            hs = torch.tensor([h for h, _ in pairs], device=q.device)
            gi = torch.tensor([i for _, i in pairs], device=q.device)
            qh, kh, vh = q.index_select(1, hs), K.index_select(1, gi), V.index_select(1, gi)
            contiguous = fresh and kpos.numel() == qpos.numel()
            if kind == "softmax" and contiguous:
                o = F.scaled_dot_product_attention(qh, kh, vh, is_causal=True)
            elif (kind != "softmax" and contiguous and flex_attention is not None and qh.shape[-2] >= 128
                  and (self.backend == "flex" or (self.backend == "auto" and qh.is_cuda and _FLEX.get("ok", True)))):
                try:
                    o = _flex_window(qh, kh, vh, int(qpos[0]), sink, window)
                except Exception as e:  # noqa: BLE001 (a compile failure: the mask path computes the same)
                    if self.backend == "flex":
                        raise
                    _FLEX["ok"] = False
                    warnings.warn(f"headwise: FlexAttention failed ({type(e).__name__}: {e}); "
                                  "using scaled_dot_product_attention with a mask")
                    o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=_visible(qpos, kpos, sink, window))
            else:
                mask = _visible(qpos, kpos, sink, window)
                o = F.scaled_dot_product_attention(qh, kh, vh, attn_mask=mask)
            out[:, hs] = o.to(out.dtype)

    def _static(self, heads, sets, qpos, out):
        for name, pairs in self._heads_by_set(heads, sets).items():
            _, _, V, kpos = sets[name]
            hs = [h for h, _ in pairs]
            gi = torch.tensor([i for _, i in pairs], device=V.device)
            vals = [self.values.static[str(h)] for h in hs]
            n = int(torch.max(qpos)) + 1
            cd = compute_dtype(V)
            alpha = torch.stack([m.alpha.to(cd) for m in vals])  # [nh, n_positions]
            rho = torch.stack([m.rho.to(cd) for m in vals])
            logz = torch.stack([m.log_z(n, cd) for m in vals])   # [nh, n]
            Vh = V.index_select(1, gi).to(cd)                    # [B, nh, S, D]
            rows = max(1, (1 << 22) // max(1, kpos.numel() * len(hs)))
            res = []
            for r0 in range(0, qpos.numel(), rows):
                qp = qpos[r0:r0 + rows]
                d = qp[:, None] - kpos[None, :]
                logits = alpha[:, kpos][:, None, :] + rho[:, d.clamp(min=0)] - logz[:, qp][:, :, None]
                P = torch.exp(logits).masked_fill(d < 0, 0.0)     # [nh, rows, S]
                res.append(P @ Vh)
            out[:, torch.tensor(hs, device=V.device)] = torch.cat(res, 2).to(out.dtype)

    def _kernel(self, kind, heads, q, k, v, lc, out):
        p = self.p
        dev = q.device
        groups = sorted({h // p.rep for h in heads})
        gidx = torch.tensor([groups.index(h // p.rep) for h in heads], device=dev)
        gsel = torch.tensor(groups, device=dev)
        cd = compute_dtype(q)
        qh = q.index_select(1, torch.tensor(heads, device=dev)).to(cd)
        kg, vg = k.index_select(1, gsel).to(cd), v.index_select(1, gsel).to(cd)
        D = p.D
        if kind in ("linear", "taylorshift"):
            pairs = _pair_index(D, dev)
            if kind == "linear":
                ws = [quad_weights(self.values.linear[str(h)].L, self.values.linear[str(h)].groups, p.eps,
                                   1.0 / math.sqrt(D), pairs, cd) for h in heads]
                qf, kf = qh, kg
            else:
                ones = torch.ones(D, dtype=torch.int32, device=dev)
                ws = []
                for h in heads:
                    tau = self.values.taylorshift[str(h)].tau.to(cd).reshape(())
                    zero = torch.zeros((), dtype=cd, device=dev)
                    L = torch.stack((torch.stack((torch.ones_like(zero), zero)), torch.stack((tau / 2, tau / 2))))
                    ws.append(quad_weights(L, ones, 0.0, 1.0, pairs, cd))
                qf, kf = unit_rows(qh), unit_rows(kg)
            psi = quad_features(qf, pairs) * torch.stack(ws)[None, :, None, :]
            phi = quad_features(kf, pairs)
            o, end = self._run_kernel(kind, psi, phi, vg, gidx, groups, lc)
        elif kind == "dijiang":
            C = dct_matrix(D, dev, cd)
            wt = torch.stack([torch.exp(self.values.dijiang[str(h)].log_w.to(cd)) for h in heads])
            psi = dijiang_features(qh, C) * wt[None, :, None, :]
            phi = dijiang_features(kg, C)
            o, end = self._run_kernel(kind, psi, phi, vg, gidx, groups, lc)
        else:  # performer: its own W on both sides, so one "group" per head
            res = []
            for i, h in enumerate(heads):
                W = self.values.performer[str(h)].W
                psi = performer_features(qh[:, i:i + 1], W)
                phi = performer_features(kg[:, gidx[i]:gidx[i] + 1], W)
                o1, _ = self._run_kernel(kind, psi, phi, vg[:, gidx[i]:gidx[i] + 1], gidx[:1] * 0, [("h", h)], lc)
                res.append(o1)
            o = torch.cat(res, 1)
        out[:, torch.tensor(heads, device=dev)] = o.to(out.dtype)

    def _run_kernel(self, kind, psi, phi, v, gidx, groups, lc):
        if lc is None:
            return kernel_attend(psi, phi, v, gidx)
        keys = [(kind, g) for g in groups]
        state = lc.kernel_state(keys)
        o, end = kernel_attend(psi, phi, v, gidx, state)
        lc.set_kernel_state(keys, end)
        return o, end


# ---------------------------------------------------------------------------------------------
# The cache for generation
# ---------------------------------------------------------------------------------------------
class HeadwiseLayerCache(CacheLayerMixin):
    """One layer's cache, kept per KV group as headwise keeps it: K and V of every position
    (softmax heads; V only when only static heads read the group), the sink and the last W
    positions (window and sink+window heads; W the largest window of the group), and the prefix
    state of kernel heads."""

    is_compileable = False
    is_sliding = False

    def __init__(self, plan):
        super().__init__()
        self.plan = plan
        self.seen = 0
        self.kv = {}      # sig -> [K or None, V, positions]
        self.states = {}  # (kind, group) -> [B, F, D+1]

    def lazy_initialization(self, key_states, value_states):
        self.is_initialized = True

    def update(self, key_states, value_states, *args, **kwargs):
        raise NotImplementedError("headwise layers keep their own cache (HeadwiseCache)")

    def get_seq_length(self):
        return self.seen

    def get_mask_sizes(self, query_length):
        return self.seen + query_length, 0

    def get_max_length(self):
        return -1

    def key_sets(self, k, v, qpos):
        sets = {}
        for sig in set(s for s in self.plan.sig if s is not None):
            groups = [g for g, s in enumerate(self.plan.sig) if s == sig]
            gsel = torch.tensor(groups, device=k.device)
            kn, vn = k.index_select(1, gsel), v.index_select(1, gsel)
            old = self.kv.get(sig)
            if old is None:
                K, V, pos = kn, vn, qpos
            else:
                K = kn if old[0] is None else torch.cat((old[0], kn), 2)
                V, pos = torch.cat((old[1], vn), 2), torch.cat((old[2], qpos))
            sets[sig] = (groups, K, V, pos)
        return sets

    def commit(self, sets):
        for sig, (_, K, V, pos) in sets.items():
            if sig[0] == "stream":  # the sink and the last `window` positions
                keep = (pos < sig[1]) | (pos > pos[-1] - sig[2])
                K, V, pos = K[:, :, keep], V[:, :, keep], pos[keep]
            self.kv[sig] = [None if sig[0] == "v" else K, V, pos]
        self.is_initialized = True

    def kernel_state(self, keys):
        got = [self.states.get(key) for key in keys]
        return None if any(s is None for s in got) else torch.stack(got, 1)

    def set_kernel_state(self, keys, end):
        for i, key in enumerate(keys):
            self.states[key] = end[:, i]

    def advance(self, n):
        self.seen += n

    def _apply(self, fn):
        for sig, (K, V, pos) in self.kv.items():
            self.kv[sig] = [None if K is None else fn(K), fn(V), pos]
        self.states = {key: fn(s) for key, s in self.states.items()}

    def reorder_cache(self, beam_idx):
        self._apply(lambda t: t.index_select(0, beam_idx.to(t.device)))

    def batch_repeat_interleave(self, repeats):
        self._apply(lambda t: t.repeat_interleave(repeats, dim=0))

    def batch_select_indices(self, indices):
        self._apply(lambda t: t[indices, ...])

    def reset(self):
        self.seen, self.kv, self.states = 0, {}, {}

    def crop(self, max_length):
        raise NotImplementedError("a headwise cache cannot be cropped (streaming heads forget positions)")

    def nbytes(self):
        n = 0
        for K, V, _ in self.kv.values():
            n += V.numel() * V.element_size() + (0 if K is None else K.numel() * K.element_size())
        return n + sum(s.numel() * s.element_size() for s in self.states.values())


class HeadwiseCache(Cache):
    """transformers' Cache with one HeadwiseLayerCache per layer (what generate() uses for a
    headwise model)."""

    def __init__(self, config):
        super().__init__(layers=[HeadwiseLayerCache(LayerPlan(config, l)) for l in range(config.num_hidden_layers)])

    def nbytes(self):
        """Bytes of every cached tensor (K, V and kernel states)."""
        return sum(layer.nbytes() for layer in self.layers)


# ---------------------------------------------------------------------------------------------
# Layers of the two families
# ---------------------------------------------------------------------------------------------
class RMSNorm(nn.Module):
    def __init__(self, n, eps):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(n))
        self.eps = eps

    def forward(self, x):
        xf = x.to(compute_dtype(x))
        return (self.weight.to(xf.dtype) * (xf * torch.rsqrt((xf * xf).mean(-1, keepdim=True) + self.eps))).to(x.dtype)


class HwConv1D(Conv1D):
    """transformers' Conv1D (x W + b, W [in, out], so PEFT treats it as GPT-2's), bias optional."""

    def __init__(self, nf, nx, bias=True):
        super().__init__(nf, nx)
        if not bias:
            del self.bias
            self.register_parameter("bias", None)

    def forward(self, x):
        y = x @ self.weight
        return y if self.bias is None else y + self.bias


def rope_inv_freq(config):
    """Per-pair frequencies (Python floats: double, as headwise's rope_inv_freq), Llama 3 scaling included."""
    D = config.head_dim
    if config.headwise_family == "gpt2":
        theta, sc = float(getattr(config, "headwise_rope_theta", 10000.0)), {}
    else:
        sc = config.rope_parameters
        theta = float(sc["rope_theta"])
    inv = [theta ** (-2.0 * i / D) for i in range(D // 2)]
    if sc.get("rope_type") == "llama3":
        old = sc["original_max_position_embeddings"]
        lo_w, hi_w = old / sc["low_freq_factor"], old / sc["high_freq_factor"]
        for i, x in enumerate(inv):
            wavelen = 2.0 * math.pi / x
            if wavelen > lo_w:
                inv[i] = x / sc["factor"]
            elif wavelen >= hi_w:
                smooth = (old / wavelen - sc["low_freq_factor"]) / (sc["high_freq_factor"] - sc["low_freq_factor"])
                inv[i] = (1.0 - smooth) * x / sc["factor"] + smooth * x
    return inv


def rotate(x, cos, sin):
    """Rotate-half RoPE: the pair (x_i, x_(i+D/2)) turns by position x frequency i."""
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), -1)


class Rope:
    def __init__(self, config):
        self.freqs = rope_inv_freq(config)  # floats: models are built on the meta device
        self.inv = {}

    def tables(self, positions, dtype):
        dev = str(positions.device)
        if dev not in self.inv:
            self.inv[dev] = torch.tensor(self.freqs, dtype=torch.float64, device=positions.device)
        ang = positions.double()[:, None] * self.inv[dev][None, :]  # angles in double, as headwise
        return ang.cos().to(dtype), ang.sin().to(dtype)


class AttentionCore(nn.Module):
    """What both families share after their projections: q/k norm, RoPE, the mixed heads."""

    def attend(self, q, k, v, p0, lc, rope):
        B, T = q.shape[:2]
        cfg = self.cfg
        q = q.view(B, T, cfg.num_attention_heads, cfg.head_dim).transpose(1, 2)
        k = k.view(B, T, cfg.num_key_value_heads, cfg.head_dim).transpose(1, 2)
        v = v.view(B, T, cfg.num_key_value_heads, cfg.head_dim).transpose(1, 2)
        if getattr(self, "q_norm", None) is not None:
            q, k = self.q_norm(q), self.k_norm(k)
        if rope is not None:
            cos, sin = rope.tables(torch.arange(p0, p0 + T, device=q.device), q.dtype)
            q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        return self.mixed(q, k, v, p0, lc)


class GPT2Attention(AttentionCore):
    def __init__(self, config, layer):
        super().__init__()
        self.cfg = config
        C, hd = config.hidden_size, config.head_dim
        self.nq, self.nkv = config.num_attention_heads * hd, config.num_key_value_heads * hd
        bias = getattr(config, "headwise_bias", True)
        self.c_attn = HwConv1D(self.nq + 2 * self.nkv, C, bias)
        self.c_proj = HwConv1D(C, self.nq, bias)
        add_head_values(self, config, layer)
        self.__dict__["mixed"] = MixedAttention(LayerPlan(config, layer), self,
                                                getattr(config, "headwise_attention", "auto"))

    def forward(self, x, p0, lc, rope):
        qkv = self.c_attn(x)
        q, k, v = qkv.split((self.nq, self.nkv, self.nkv), -1)
        return self.c_proj(self.attend(q, k, v, p0, lc, rope))


class GPT2MLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        bias = getattr(config, "headwise_bias", True)
        self.c_fc = HwConv1D(config.intermediate_size, config.hidden_size, bias)
        self.c_proj = HwConv1D(config.hidden_size, config.intermediate_size, bias)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x), approximate="tanh"))


class GPT2Block(nn.Module):
    def __init__(self, config, layer):
        super().__init__()
        eps = config.layer_norm_epsilon
        self.ln_1 = nn.LayerNorm(config.hidden_size, eps=eps)
        self.attn = GPT2Attention(config, layer)
        self.ln_2 = nn.LayerNorm(config.hidden_size, eps=eps)
        self.mlp = GPT2MLP(config)
        self.drop = nn.Dropout(getattr(config, "resid_pdrop", 0.0) or 0.0)

    def forward(self, x, p0, lc, rope):
        x = x + self.drop(self.attn(self.ln_1(x), p0, lc, rope))
        return x + self.drop(self.mlp(self.ln_2(x)))


class HeadwiseGPT2Model(nn.Module):
    def __init__(self, config):
        super().__init__()
        self.rope = getattr(config, "headwise_pos", "learned") == "rope"
        self.wte = nn.Embedding(config.vocab_size, config.hidden_size)
        if not self.rope:
            self.wpe = nn.Embedding(config.max_position_embeddings, config.hidden_size)
        self.drop = nn.Dropout(getattr(config, "embd_pdrop", 0.0) or 0.0)
        self.h = nn.ModuleList(GPT2Block(config, l) for l in range(config.num_hidden_layers))
        self.ln_f = nn.LayerNorm(config.hidden_size, eps=config.layer_norm_epsilon)
        self.__dict__["rotary"] = Rope(config) if self.rope else None

    def embed(self, ids):
        return self.wte(ids)

    def forward(self, x, p0, caches):
        if not self.rope:
            x = x + self.wpe(torch.arange(p0, p0 + x.shape[1], device=x.device))
        x = self.drop(x)
        for l, block in enumerate(self.h):
            x = block(x, p0, caches[l] if caches else None, self.rotary)
        return self.ln_f(x)


class LlamaAttention(AttentionCore):
    def __init__(self, config, layer, values):
        super().__init__()
        self.cfg = config
        C, hd = config.hidden_size, config.head_dim
        H, KV = config.num_attention_heads, config.num_key_value_heads
        fam = config.headwise_family
        qkv_bias = fam == "qwen2" or getattr(config, "attention_bias", False)
        o_bias = fam != "qwen2" and getattr(config, "attention_bias", False)
        self.q_proj = nn.Linear(C, H * hd, bias=qkv_bias)
        self.k_proj = nn.Linear(C, KV * hd, bias=qkv_bias)
        self.v_proj = nn.Linear(C, KV * hd, bias=qkv_bias)
        self.o_proj = nn.Linear(H * hd, C, bias=o_bias)
        if fam == "qwen3":
            self.q_norm = RMSNorm(hd, config.rms_norm_eps)
            self.k_norm = RMSNorm(hd, config.rms_norm_eps)
        self.__dict__["mixed"] = MixedAttention(LayerPlan(config, layer), values,
                                                getattr(config, "headwise_attention", "auto"))

    def forward(self, x, p0, lc, rope):
        return self.o_proj(self.attend(self.q_proj(x), self.k_proj(x), self.v_proj(x), p0, lc, rope))


class LlamaMLP(nn.Module):
    def __init__(self, config):
        super().__init__()
        bias = config.headwise_family == "llama" and getattr(config, "mlp_bias", False)
        C, I = config.hidden_size, config.intermediate_size
        self.gate_proj = nn.Linear(C, I, bias=bias)
        self.up_proj = nn.Linear(C, I, bias=bias)
        self.down_proj = nn.Linear(I, C, bias=bias)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class LlamaBlock(nn.Module):
    def __init__(self, config, layer, values):
        super().__init__()
        self.input_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.self_attn = LlamaAttention(config, layer, values)
        self.post_attention_layernorm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.mlp = LlamaMLP(config)

    def forward(self, x, p0, lc, rope):
        x = x + self.self_attn(self.input_layernorm(x), p0, lc, rope)
        return x + self.mlp(self.post_attention_layernorm(x))


class HeadwiseLlamaModel(nn.Module):
    def __init__(self, config, values):
        super().__init__()
        self.embed_tokens = nn.Embedding(config.vocab_size, config.hidden_size)
        self.layers = nn.ModuleList(LlamaBlock(config, l, values[l]) for l in range(config.num_hidden_layers))
        self.norm = RMSNorm(config.hidden_size, config.rms_norm_eps)
        self.__dict__["rotary"] = Rope(config)

    def embed(self, ids):
        return self.embed_tokens(ids)

    def forward(self, x, p0, caches):
        for l, block in enumerate(self.layers):
            x = block(x, p0, caches[l] if caches else None, self.rotary)
        return self.norm(x)


# ---------------------------------------------------------------------------------------------
# The model
# ---------------------------------------------------------------------------------------------
class HeadwisePreTrainedModel(PreTrainedModel):
    config_class = HeadwiseConfig
    base_model_prefix = "model"
    _no_split_modules = ["GPT2Block", "LlamaBlock"]
    _supports_sdpa = True
    _supports_flex_attn = True
    # Head-kind values stay float32 in a 16-bit model (the kernels compute in float32).
    _keep_in_fp32_modules_strict = ["static", "linear", "performer", "dijiang", "taylorshift"]

    def _init_weights(self, module):
        std = getattr(self.config, "initializer_range", 0.02) or 0.02
        if isinstance(module, (nn.Linear, Conv1D)):
            _init.normal_(module.weight, mean=0.0, std=std)
            if module.bias is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            _init.normal_(module.weight, mean=0.0, std=std)
        elif isinstance(module, (nn.LayerNorm, RMSNorm)):
            _init.ones_(module.weight)
            if getattr(module, "bias", None) is not None:
                _init.zeros_(module.bias)
        elif isinstance(module, StaticHead):  # headwise's defaults for a head that has no values yet
            _init.zeros_(module.alpha)
            _init.zeros_(module.rho)
        elif isinstance(module, LinearHead):
            G1 = module.L.shape[0]
            L = torch.zeros(G1, G1)
            L[0, 0] = 1.0
            L[1:, 0] = 0.5
            L[1:, 1:] = 0.5 * torch.eye(G1 - 1)
            _init.copy_(module.L, L)
            _init.ones_(module.groups)
        elif isinstance(module, PerformerHead):  # Gaussian rows (headwise draws orthogonal blocks)
            _init.normal_(module.W, mean=0.0, std=1.0)
        elif isinstance(module, DiJiangHead):
            _init.zeros_(module.log_w)
        elif isinstance(module, TaylorShiftHead):
            _init.ones_(module.tau)


class HeadwiseForCausalLM(HeadwisePreTrainedModel, GenerationMixin):
    def __init__(self, config):
        super().__init__(config)
        self.gpt2 = config.headwise_family == "gpt2"
        if self.gpt2:
            # GPT-2's files name its tensors without the prefix (h.0..., wte...); transformers adds it.
            self.base_model_prefix = "transformer"
            self.transformer = HeadwiseGPT2Model(config)
            body, embed = self.transformer, "transformer.wte.weight"
        else:
            # headwise keeps the head-kind values beside the family's tensors: h.{l}.attn.<kind>.{h}.*
            self.h = nn.ModuleList(HeadValueLayer(config, l) for l in range(config.num_hidden_layers))
            self.model = HeadwiseLlamaModel(config, [hl.attn for hl in self.h])
            body, embed = self.model, "model.embed_tokens.weight"
        self.__dict__["body"] = body
        self.lm_head = nn.Linear(config.hidden_size, config.vocab_size, bias=False)
        self._tied_weights_keys = {"lm_head.weight": embed} if config.tie_word_embeddings else {}
        self.post_init()

    def get_input_embeddings(self):
        return self.transformer.wte if self.gpt2 else self.model.embed_tokens

    def set_input_embeddings(self, value):
        if self.gpt2:
            self.transformer.wte = value
        else:
            self.model.embed_tokens = value

    def get_output_embeddings(self):
        return self.lm_head

    def set_output_embeddings(self, value):
        self.lm_head = value

    @classmethod
    def from_pretrained(cls, pretrained_model_name_or_path, *args, **kwargs):
        """transformers' from_pretrained, with the LoRA adapters headwise stored beside the weights
        (adapter_model.safetensors + adapter_config.json, when config.json has headwise_lora)
        applied as headwise applies them: where PEFT is installed, transformers attaches them
        itself as PEFT adapters (unmerged); without it they are folded into the weights here.
        headwise_load_adapters=False loads the base model alone (to attach them with
        PeftModel.from_pretrained, say)."""
        model = super().from_pretrained(pretrained_model_name_or_path, *args, **kwargs)
        cfg = model.config
        if getattr(cfg, "headwise_lora", None) is not None:
            attached = getattr(model, "_hf_peft_config_loaded", False)
            if not getattr(cfg, "headwise_load_adapters", True):
                if attached:
                    _drop_peft_layers(model)
            elif not attached:
                merge_adapter_files(model, str(pretrained_model_name_or_path))
            cfg.headwise_lora = None  # the model in memory holds no headwise adapters of its own
        return model

    def _prepare_cache_for_generation(self, generation_config, model_kwargs, *args, **kwargs):
        if model_kwargs.get("cache") is None and model_kwargs.get("past_key_values") is None \
                and generation_config.use_cache is not False:
            model_kwargs["cache" if _OUTPUT_CACHE_FIELD == "cache" else "past_key_values"] = HeadwiseCache(self.config)
            return
        return super()._prepare_cache_for_generation(generation_config, model_kwargs, *args, **kwargs)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, cache=None, past_key_values=None,
                inputs_embeds=None, labels=None, use_cache=None, logits_to_keep=0, return_dict=None, **kwargs):
        cache = cache if cache is not None else past_key_values
        if use_cache is None:
            use_cache = getattr(self.config, "use_cache", True) and not self.training
        if cache is None and use_cache:
            cache = HeadwiseCache(self.config)
        if cache is not None and not isinstance(cache, HeadwiseCache):
            if cache.get_seq_length() > 0:
                raise TypeError("headwise: this model keeps its own cache (HeadwiseCache), not "
                                f"{type(cache).__name__}")
            cache = HeadwiseCache(self.config)
        x = inputs_embeds if inputs_embeds is not None else self.body.embed(input_ids)
        B, T = x.shape[:2]
        p0 = cache.get_seq_length() if cache is not None else 0
        _check_positions(attention_mask, position_ids, p0, T)
        layers = cache.layers if cache is not None else None
        h = self.body(x, p0, layers)
        if cache is not None:
            for lc in cache.layers:
                lc.advance(T)
        if isinstance(logits_to_keep, int) and logits_to_keep > 0:
            h = h[:, -logits_to_keep:]
        elif not isinstance(logits_to_keep, int):
            h = h[:, logits_to_keep]
        logits = self.lm_head(h)
        loss = None
        if labels is not None:
            loss = F.cross_entropy(logits[:, :-1].to(compute_dtype(logits)).reshape(-1, logits.shape[-1]),
                                   labels[:, 1:].reshape(-1).to(logits.device), ignore_index=-100)
        out = CausalLMOutputWithPast(loss=loss, logits=logits, **{_OUTPUT_CACHE_FIELD: cache})
        return out if return_dict is not False else out.to_tuple()


def _drop_peft_layers(model):
    """Undo the PEFT adapters transformers attached at load time: each wrapped module back to its
    base layer (transformers' delete_adapter needs a newer PEFT)."""
    for name, module in list(model.named_modules()):
        base = getattr(module, "base_layer", None)
        if isinstance(base, nn.Module) and hasattr(module, "lora_A"):
            parent, _, child = name.rpartition(".")
            setattr(model.get_submodule(parent) if parent else model, child, base)
    model._hf_peft_config_loaded = False
    for attr in ("peft_config", "_weight_conversions"):  # (the latter renames tensors as PEFT's when saving)
        model.__dict__.pop(attr, None)


def _check_positions(attention_mask, position_ids, p0, T):
    """headwise's positions are implicit (0, 1, ...): padding may only follow the text, and
    position_ids, if given, must be those positions."""
    if attention_mask is not None and attention_mask.dim() == 2 and attention_mask.shape[1] > 1:
        m = attention_mask.to(torch.int8)
        if bool((m[:, 1:] > m[:, :-1]).any()):
            raise ValueError("headwise: left padding (a 0 before a 1 in attention_mask) is not supported: "
                             "pad on the right or run one sequence at a time")
    if position_ids is not None:
        want = torch.arange(p0, p0 + T, device=position_ids.device)
        if not bool((position_ids == want).all()):
            raise ValueError("headwise: position_ids must be p0, p0 + 1, ... (the tokens' positions in the cache)")


# ---------------------------------------------------------------------------------------------
# LoRA adapters that headwise stores (PEFT's files), folded into the weights
# ---------------------------------------------------------------------------------------------
def _pattern_value(patterns, key, default):
    """PEFT's rank_pattern / alpha_pattern: the first pattern p with key ~ (.*\\.)?(p)$."""
    import re
    for p, value in (patterns or {}).items():
        if re.match(rf"(.*\.)?({p})$", key):
            return value
    return default


def merge_adapter_files(model, directory):
    from safetensors.torch import load_file
    cfg_path = os.path.join(directory, "adapter_config.json")
    w_path = os.path.join(directory, "adapter_model.safetensors")
    if not (os.path.isfile(cfg_path) and os.path.isfile(w_path)):
        raise ValueError(f"headwise: {directory} declares LoRA adapters (headwise_lora) but has no "
                         "adapter_config.json and adapter_model.safetensors")
    acfg = json.load(open(cfg_path))
    if acfg.get("use_dora"):
        raise ValueError(f"headwise: {cfg_path}: DoRA adapters are not supported")
    tensors = load_file(w_path)
    prefix = "base_model.model."
    with torch.no_grad():
        for name, A in tensors.items():
            if not name.endswith(".lora_A.weight"):
                continue
            path = name[len(prefix):-len(".lora_A.weight")]
            B = tensors[name.replace(".lora_A.weight", ".lora_B.weight")]
            r = _pattern_value(acfg.get("rank_pattern"), path, acfg["r"])
            alpha = _pattern_value(acfg.get("alpha_pattern"), path, acfg["lora_alpha"])
            scale = alpha / (math.sqrt(r) if acfg.get("use_rslora") else r)
            module = model.get_submodule(path)
            delta = scale * (B.double() @ A.double())  # [out, in]
            if isinstance(module, Conv1D):
                delta = delta.T
            module.weight.add_(delta.to(module.weight.dtype).to(module.weight.device))
