"""
Every block this repository compares, in one file, behind one GPTConfig.

- 'transformer': pre-norm GPT-2 block, attention + feed-forward, each with a residual.
    attn 'mha':  causal multi-head attention (F.scaled_dot_product_attention).
    attn 'mdha': Primer's Multi-DConv-Head Attention, arXiv:2109.08668 sec. 3.
    ffn 'relu' | 'gelu' | 'relu2' (squared ReLU, Primer) and the gated family of
    "GLU Variants Improve Transformer", arXiv:2002.05202: 'glu' 'bilinear' 'reglu' 'geglu' 'swiglu'.
    Primer EZ is attn='mdha', ffn='relu2'.
- 'gmlp': "Pay Attention to MLPs", arXiv:2105.08050: channel MLP with a causal Spatial Gating Unit.
- 'amlp': gMLP plus a tiny single-head attention added to the spatial gate (same paper, sec. 4.3).

Modern options combine with every block where they make sense: norm='rmsnorm' (LLaMA), rotary
positions pos_emb='rope' (Su et al., arXiv:2104.09864) on every attention, optimizer 'muon'
(train.py).

Tensors are (B, T, C): batch, time, channels. Reading order: GPTConfig, the shared parts,
attention (with Primer's depth-wise conv), the FFNs, gMLP/aMLP, the blocks, GPT; then sizing
(widths, parameter matching, FLOPs) and the decoding cache every token mixer takes (`cache`).
"""
import functools
import math
from dataclasses import dataclass, fields, replace

import torch
import torch.nn as nn
from torch.nn import functional as F

BLOCKS = ('transformer', 'gmlp', 'amlp')
ATTNS = ('mha', 'mdha')
NORMS = ('layernorm', 'rmsnorm')
POS_EMBS = ('learned', 'none', 'rope')
DCONV_INITS = ('primer', 'random')
MATCHES = ('', 'gpt')
OPTIMIZERS = ('adamw', 'muon')
# FFNS (and GATED, those that gate) come from FFN_ACTS, the one table of FFNs, with the FFN below


@dataclass
class GPTConfig:
    block_size: int = 1024      # longest sequence; also the size of the SGU's spatial matrix
    vocab_size: int = 50304     # GPT-2's 50257 padded up to a multiple of 64
    n_layer: int = 12           # blocks in the stack
    n_head: int = 12            # attention heads (transformer blocks)
    n_embd: int = 768           # model width d_model
    dropout: float = 0.0        # dropout on embeddings, residual branches and attention
    bias: bool = True           # False turns off every bias in Linears and LayerNorms
    block: str = 'transformer'  # 'transformer' | 'gmlp' | 'amlp'
    attn: str = 'mha'           # transformer blocks: 'mha' | 'mdha'
    dconv_kernel: int = 3       # MDHA: depth-wise conv width along the sequence
    dconv_shared: bool = False  # MDHA: share kernels across heads (labml) instead of per channel
    dconv_init: str = 'primer'  # MDHA: 'primer' (0.5 now, 0.5/K before) | 'random' (nn.Conv1d's)
    ffn: str = 'gelu'           # transformer blocks: one of FFNS; 'none' = attention only
    ffn_hidden: int = 0         # FFN hidden width; 0 = 4*n_embd, gated 2/3 of that (rounded)
    ffn_multiple_of: int = 64   # gated auto width is rounded to a multiple of this
    bias1: bool = True          # FFN: bias of the first layer (only while bias=True)
    bias_gate: bool = True      # FFN: bias of the gate layer (only while bias=True)
    bias2: bool = True          # FFN: bias of the second layer (only while bias=True)
    gmlp_d_ffn: int = 0         # gMLP channel width d_ffn; 0 = 6*n_embd as in the paper
    tiny_attn_size: int = 64    # aMLP: width of the single-head tiny attention
    pos_emb: str = 'learned'    # 'learned' (GPT-2) | 'none' | 'rope' (rotary, on every attention)
    rope_base: float = 10000.0  # RoPE: theta_i = rope_base^(-2i/head_size)
    norm: str = 'layernorm'     # every norm, the SGU's included: 'layernorm' | 'rmsnorm'
    tie_weights: bool = True    # share wte and lm_head weights
    match_params: str = ''      # 'gpt': size ffn_hidden / gmlp_d_ffn to the GPT-2 block's count

    def __post_init__(self):
        for name, allowed in (('pos_emb', POS_EMBS), ('norm', NORMS), ('dconv_init', DCONV_INITS),
                              ('match_params', MATCHES), ('block', BLOCKS), ('attn', ATTNS),
                              ('ffn', FFNS)):
            if getattr(self, name) not in allowed:
                raise ValueError(f"unknown {name} {getattr(self, name)!r}; choose one of "
                                 f"{', '.join(a or repr(a) for a in allowed)}")
        # (fields, what is allowed, the rule in words): written as what is allowed, nan fails too
        for names, ok, must in (('block_size vocab_size n_layer n_head n_embd dconv_kernel '
                                 'ffn_multiple_of tiny_attn_size', lambda v: v >= 1, "at least 1"),
                                ('ffn_hidden gmlp_d_ffn', lambda v: v >= 0, "0 (auto) or positive"),
                                ('dropout', lambda v: 0 <= v < 1, "in [0, 1)"),
                                ('rope_base', lambda v: 0 < v < math.inf,
                                 "a positive finite number (RoFormer's and LLaMA's: 10000)")):
            for name in names.split():
                if not ok(getattr(self, name)):
                    raise ValueError(f"{name} must be {must}, got {getattr(self, name)!r}")
        # combinations that cannot be built, each with what to do instead
        gmlp, heads = self.block != 'transformer', [h for h in range(1, 17) if self.n_embd % h == 0]
        knob = 'gmlp_d_ffn' if gmlp else 'ffn_hidden'
        for bad, why in (
                (not gmlp and self.n_embd % self.n_head, f"n_embd={self.n_embd} is not divisible "
                 f"by n_head={self.n_head}; pick n_head among {heads}"),
                (gmlp and self.match_params and self.n_embd % self.n_head,  # the GPT-2 block's
                 f"match_params={self.match_params!r} sizes this {self.block} (which has no heads) "
                 f"to the parameters of a GPT-2 block of n_embd={self.n_embd} with "
                 f"n_head={self.n_head}, which must divide it: set n_head to one of {heads}, or "
                 "match_params=''"),
                (gmlp and (self.attn != 'mha' or self.ffn != 'gelu'), f"block={self.block!r} has "
                 "no attention or FFN sub-layer, so attn/ffn must stay at their defaults "
                 "('mha'/'gelu'); use gmlp_d_ffn to size it"),
                (self.block == 'gmlp' and self.pos_emb == 'rope', "block='gmlp' has no attention "
                 "for rotary positions to rotate; use pos_emb='none' (the SGU's weights are "
                 "positional) or block='amlp'"),
                (gmlp and self.gmlp_d_ffn % 2, f"gmlp_d_ffn={self.gmlp_d_ffn} must be even (the "
                 "SGU splits it in two)"),
                (self.pos_emb == 'rope' and self.head_size % 2, "rotary positions rotate pairs of "
                 f"channels: head size {self.head_size} must be even"),
                (self.match_params and getattr(self, knob), f"match_params={self.match_params!r} "
                 f"picks {knob} itself; set {knob}=0 or match_params=''"),
                (self.match_params and self.ffn == 'none', "ffn='none' has no width for "
                 "match_params to size; set match_params=''")):
            if bad:
                raise ValueError(why)

    @property
    def head_size(self):
        """Channels per query/key of the attention rotary positions turn (aMLP: the tiny one's)."""
        return self.n_embd // self.n_head if self.block == 'transformer' else self.tiny_attn_size


# -----------------------------------------------------------------------------
# shared parts: norms, rotary positions, causal attention

def make_norm(config, dim):
    """The one place a norm is chosen: GPT-2's LayerNorm (with bias=True) or RMSNorm (LLaMA)."""
    if config.norm == 'layernorm':
        return nn.LayerNorm(dim, bias=config.bias)
    return nn.RMSNorm(dim, eps=1e-5)  # x / sqrt(mean(x^2) + eps) * g, arXiv:1910.07467: no bias


class Rotary(nn.Module):
    """
    Rotary position embedding (RoPE), Su et al. arXiv:2104.09864: channel i of a head and channel
    i + hs/2 form a pair that turns by the angle t * theta_i at position t, theta_i = base^(-2i/hs),
    so q_t . k_s depends on t - s only. (Pairs (i, i + hs/2) as in GPT-NeoX and LLaMA's HF code,
    instead of the paper's (2i, 2i+1): the same rotation up to a fixed permutation of channels.)
    """

    def __init__(self, *, head_size, block_size, base):
        super().__init__()
        theta = base ** (-torch.arange(0, head_size, 2, dtype=torch.float32) / head_size)  # (hs/2,)
        angle = torch.outer(torch.arange(block_size, dtype=torch.float32), theta)  # (T, hs/2)
        # buffers, not parameters, and not in the state dict: checkpoints stay as they were
        self.register_buffer('cos', angle.cos(), persistent=False)
        self.register_buffer('sin', angle.sin(), persistent=False)

    def forward(self, x, rows=None):
        # x: (B, nh, T, hs) at positions `rows` (slice or (T,) tensor), or 0..T-1; rotated in fp32
        rows = slice(0, x.size(-2)) if rows is None else rows
        cos, sin = self.cos[rows], self.sin[rows]  # (T, hs/2)
        x1, x2 = x.float().chunk(2, dim=-1)
        return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1).type_as(x)


def make_rotary(config, head_size):
    return Rotary(head_size=head_size, block_size=config.block_size,
                  base=config.rope_base) if config.pos_emb == 'rope' else None


def causal_attention(q, k, v, *, dropout_p=0.0, cache=None):
    """
    softmax(q k^T / sqrt(hs)) v with a causal mask, where q holds the last Tq of the Tk positions.
    q: (B, nh, Tq, hs), k and v: (B, nh, Tk, hs), Tk >= Tq (Tk > Tq when decoding with a cache).
    A fixed-shape cache's keys include positions not written yet: its `visible` mask hides them.
    """
    Tq, Tk = q.size(-2), k.size(-2)
    if cache is not None and cache.of.fixed:
        if Tq == 1:  # one token against all block_size rows: two small matmuls (the fused
            # kernel gives each head one tile of work: 4-6x slower, H100, 124M; RESULTS.md §4)
            att = (q @ k.transpose(-2, -1)) * q.size(-1) ** -0.5
            return torch.where(cache.of.visible, att, -math.inf).softmax(dim=-1).to(v.dtype) @ v
        return F.scaled_dot_product_attention(q, k, v, attn_mask=cache.of.visible)
    if Tq == Tk:
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p, is_causal=True)
    if Tq == 1:  # one new token sees every cached position
        return F.scaled_dot_product_attention(q, k, v, dropout_p=dropout_p)
    # a chunk of Tq new tokens after Tk - Tq cached ones: query i sees keys j <= Tk - Tq + i
    mask = torch.ones(Tq, Tk, dtype=torch.bool, device=q.device).tril(diagonal=Tk - Tq)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout_p)


# -----------------------------------------------------------------------------
# attention, and Primer's depth-wise conv (MDHA)

class CausalSelfAttention(nn.Module):
    """Causal multi-head attention; with attn='mdha', Primer's depth-wise conv follows c_attn."""

    def __init__(self, config):
        super().__init__()
        self.n_head, self.n_embd = config.n_head, config.n_embd
        # q, k, v at once
        self.c_attn = nn.Linear(config.n_embd, 3 * config.n_embd, bias=config.bias)
        self.c_proj = nn.Linear(config.n_embd, config.n_embd, bias=config.bias)
        self.dconv = None
        if config.attn == 'mdha':
            self.dconv = CausalDepthwiseConv(n_embd=config.n_embd, n_head=config.n_head,
                                             kernel=config.dconv_kernel, shared=config.dconv_shared,
                                             init=config.dconv_init)
        self.rotary = make_rotary(config, config.n_embd // config.n_head)
        self.dropout = config.dropout
        self.resid_dropout = nn.Dropout(config.dropout)

    def forward(self, x, cache=None):
        B, T, C = x.size()
        qkv = self.c_attn(x)  # (B, T, 3C)
        if self.dconv is not None:
            qkv = self.dconv(qkv, cache)  # Primer MDHA: conv over time per channel
        q, k, v = qkv.split(self.n_embd, dim=2)
        # (B, nh, T, hs)
        q, k, v = (t.view(B, T, self.n_head, C // self.n_head).transpose(1, 2) for t in (q, k, v))
        # after MDHA's conv; keys are cached rotated, at their own positions
        if self.rotary is not None:
            rows = cache.of.rows if cache is not None else None
            q, k = self.rotary(q, rows), self.rotary(k, rows)
        if cache is not None:
            k, v = cache.remember('k', k, dim=2), cache.remember('v', v, dim=2)  # (B, nh, Tk, hs)
        y = causal_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, cache=cache)
        y = y.transpose(1, 2).contiguous().view(B, T, C)  # re-assemble heads side by side
        return self.resid_dropout(self.c_proj(y))


def causal_conv(x, w):
    """y_t = sum_{s<K} w[:, K-1-s] * x_{t-s} along dim 1 of x (B, T, C), w (C, K); 0 before t=0."""
    K = w.size(1)
    y = x * w[:, K - 1]
    for s in range(1, min(K, x.size(1))):  # tap s reads s steps back: causal
        y[:, s:].addcmul_(x[:, :-s], w[:, K - 1 - s])
    return y


class CausalConv(torch.autograd.Function):
    """causal_conv with a hand-written backward: the same as a left-padded F.conv1d(groups=C),
    without its transposes of the (B, T, C) layout. A Primer EZ training step on the CPU: 36.5 ms
    instead of 46.1 (4x128, block 64, batch 12; GUIDE.md §2)."""

    @staticmethod
    def forward(ctx, x, w):
        ctx.save_for_backward(x, w)
        return causal_conv(x, w)

    @staticmethod
    def backward(ctx, g):
        x, w = ctx.saved_tensors
        K = w.size(1)
        gx = g * w[:, K - 1]
        gw = torch.zeros_like(w)
        gw[:, K - 1] = (g * x).sum((0, 1))
        for s in range(1, min(K, x.size(1))):
            gx[:, :-s].addcmul_(g[:, s:], w[:, K - 1 - s])
            gw[:, K - 1 - s] = (g[:, s:] * x[:, :-s]).sum((0, 1))
        return gx, gw


class CausalDepthwiseConv(nn.Module):
    """
    Primer's depth-wise convolution along the sequence, applied to q, k and v after their
    projections (arXiv:2109.08668 sec. 3): y_t[c] = sum_i w[c, i] x_{t-K+1+i}[c].
    One kernel per channel of q, k and v (as the official Primer code), or with `shared` one per
    head dimension reused by every head (labml's variant). Padding is on the left only: causal.
    """

    def __init__(self, *, n_embd, n_head, kernel, shared, init='primer'):
        super().__init__()
        self.kernel, self.n_head, self.shared = kernel, n_head, shared
        per = n_embd // n_head if shared else n_embd
        # (3, per, K): q, k, v each get their own kernels; tap K-1 reads the current position
        # the Primer authors' code: 0.5 on now, 0.5/K on each earlier step (~identity)
        if init == 'primer':
            w = torch.full((3, per, kernel), 0.5 / kernel)
            w[..., kernel - 1] = 0.5
        else:  # 'random': nn.Conv1d's default init, U(±1/sqrt(K))
            w = torch.empty(3, per, kernel).uniform_(-kernel ** -0.5, kernel ** -0.5)
        self.weight = nn.Parameter(w)

    def forward(self, x, cache=None):
        # x: (B, T, 3C), the concatenated q, k, v projections
        w = self.weight
        if self.shared:  # (3, hs, K) -> (3, nh, hs, K): every head uses the same kernels
            w = w.unsqueeze(1).expand(3, self.n_head, *w.shape[1:])
        w = w.reshape(x.size(2), self.kernel).to(x.dtype)  # (3C, K); under autocast x is bf16/fp16
        if cache is None or self.kernel == 1:
            return CausalConv.apply(x, w) if torch.is_grad_enabled() else causal_conv(x, w)
        # decoding: prepend the last K-1 inputs (zeros before the first: the conv's left padding),
        # then drop their outputs; the tail is kept in one buffer of fixed shape, updated in place
        if 'conv_tail' not in cache.buffers or cache.buffers['conv_tail'].size(0) != x.size(0):
            cache.buffers['conv_tail'] = x.new_zeros(x.size(0), self.kernel - 1, x.size(2))
        tail = cache.buffers['conv_tail']
        full = torch.cat([tail, x], dim=1)
        tail.copy_(full[:, -(self.kernel - 1):])
        return causal_conv(full, w)[:, self.kernel - 1:]


# -----------------------------------------------------------------------------
# feed-forward: the plain and the gated (GLU) family

# Every FFN by name: its nonlinearity, and whether it gates (act(x W1) ⊙ (x V), "GLU Variants
# Improve Transformer", arXiv:2002.05202). A new FFN is one row here: its gate follows from it.
FFN_ACTS = {'relu': (F.relu, False), 'gelu': (F.gelu, False),
            'relu2': (lambda x: F.relu(x).square(), False),  # Primer, arXiv:2109.08668 sec. 3
            'glu': (torch.sigmoid, True),  # Dauphin et al. 2016
            'bilinear': (lambda x: x, True),  # no nonlinearity: (x W1) ⊙ (x V)
            'reglu': (F.relu, True), 'geglu': (F.gelu, True),
            'swiglu': (F.silu, True)}  # SiLU: Swish with beta=1
FFNS = (*FFN_ACTS, 'none')  # 'none': attention alone (the probe's mixer view)
GATED = tuple(name for name, (_, gated) in FFN_ACTS.items() if gated)


class MLP(nn.Module):
    """
    Position-wise feed-forward: c_proj(act(c_fc(x))), or for the gated family
    c_proj(act(c_fc(x)) * c_gate(x)) (arXiv:2002.05202 eq. 5-6), i.e. act(x W1) ⊙ (x V) then W2.
    """

    def __init__(self, config):
        super().__init__()
        hidden = ffn_width(config)
        self.act, gated = FFN_ACTS[config.ffn]
        self.c_fc = nn.Linear(config.n_embd, hidden, bias=config.bias and config.bias1)
        self.c_gate = None
        if gated:
            self.c_gate = nn.Linear(config.n_embd, hidden, bias=config.bias and config.bias_gate)
        self.c_proj = nn.Linear(hidden, config.n_embd, bias=config.bias and config.bias2)
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x):
        h = self.act(self.c_fc(x))
        if self.c_gate is not None:
            h = h * self.c_gate(x)
        return self.dropout(self.c_proj(h))



# -----------------------------------------------------------------------------
# gMLP and aMLP: the Spatial Gating Unit, the tiny attention

class SpatialGatingUnit(nn.Module):
    """
    s(Z) = Z1 ⊙ f_{W,b}(LN(Z2)), f_{W,b}(Z2) = W Z2 + b mixing along the sequence
    (arXiv:2105.08050 sec. 2). W is masked to its lower triangle so position t only reads s <= t,
    and sliced to [:T, :T] (b to [:T]) for shorter sequences. W ≈ 0 and b = 1 at init make the
    unit start as ≈ identity on Z1, which the paper finds important for stable training.
    """

    def __init__(self, config, d_ffn):
        super().__init__()
        T = config.block_size
        self.ln = make_norm(config, d_ffn // 2)
        # uniform(±0.01/T): near zero even summed over T (labml: ±0.01; lucidrains: 1e-3/T)
        self.weight = nn.Parameter(torch.empty(T, T).uniform_(-0.01 / T, 0.01 / T))
        self.bias = nn.Parameter(torch.ones(T))

    def forward(self, z1, z2, gate_res=None, cache=None):
        # z1, z2: the two halves of Z, (B, T, d_ffn/2) each
        T = z1.size(1)
        if cache is None:  # positions 0..T-1: W[:T, :T], lower triangle: row t sees columns s <= t
            z2, w, b = self.ln(z2), torch.tril(self.weight[:T, :T]), self.bias[:T]
        else:  # the rows of this call's positions; the columns of the Tk positions read, masked
            z2 = cache.remember('z2', self.ln(z2), dim=1)  # normalised Z2 rows: (B, Tk, d_ffn/2)
            w, b = self.weight[cache.of.rows, :z2.size(1)], self.bias[cache.of.rows]
            if cache.of.visible is not None:
                w = w * cache.of.visible
        # $W Z_2 + b$: (B, T, d_ffn/2); one batched matmul-add is faster on CPU than `w @ z2 + b`
        gate = torch.baddbmm(b[:, None], w.expand(z2.size(0), -1, -1), z2)
        if gate_res is not None:
            gate = gate + gate_res  # aMLP: tiny attention joins the gate before the product
        return z1 * gate


class TinyAttention(nn.Module):
    """aMLP's single-head causal attention of width d_attn, projected to d_out (arXiv:2105.08050
    sec. 4.3)."""

    def __init__(self, config, d_out):
        super().__init__()
        self.d_attn = config.tiny_attn_size
        self.c_attn = nn.Linear(config.n_embd, 3 * self.d_attn, bias=config.bias)
        self.c_proj = nn.Linear(self.d_attn, d_out, bias=config.bias)
        self.rotary = make_rotary(config, self.d_attn)
        self.dropout = config.dropout

    def forward(self, x, cache=None):
        q, k, v = self.c_attn(x).unsqueeze(1).split(self.d_attn, dim=3)  # each (B, 1, T, d_attn)
        if self.rotary is not None:
            rows = cache.of.rows if cache is not None else None
            q, k = self.rotary(q, rows), self.rotary(k, rows)
        if cache is not None:
            k, v = cache.remember('tiny_k', k, dim=2), cache.remember('tiny_v', v, dim=2)
        y = causal_attention(q, k, v, dropout_p=self.dropout if self.training else 0.0, cache=cache)
        return self.c_proj(y.squeeze(1))  # (B, T, d_out)


# -----------------------------------------------------------------------------
# blocks

class Block(nn.Module):
    """Pre-norm transformer block: x + attn(ln_1(x)), then x + mlp(ln_2(x)); with ffn='none' the
    token mixer alone, as Zoology's MQAR models are (its state mixer = identity)."""

    def __init__(self, config):
        super().__init__()
        self.ln_1 = make_norm(config, config.n_embd)
        self.attn = CausalSelfAttention(config)
        self.ln_2 = make_norm(config, config.n_embd) if config.ffn != 'none' else None
        self.mlp = MLP(config) if config.ffn != 'none' else None

    def forward(self, x, cache=None):
        x = x + self.attn(self.ln_1(x), cache)
        return x if self.mlp is None else x + self.mlp(self.ln_2(x))


class GMLPBlock(nn.Module):
    """gMLP block x + c_proj(SGU(gelu(X U))), X = ln(x); aMLP adds tiny attention of X to the
    gate."""

    def __init__(self, config):
        super().__init__()
        d_ffn = gmlp_width(config)
        self.ln_1 = make_norm(config, config.n_embd)
        # $Z = \sigma(X U)$ split in halves Z1, Z2 as two Linears: the same math as one Linear and
        # a chunk, but contiguous halves (on CPU ~10% faster: no copies or cat in the backward)
        self.c_fc = nn.Linear(config.n_embd, d_ffn // 2, bias=config.bias)  # Z1, the gated values
        self.c_gate = nn.Linear(config.n_embd, d_ffn // 2, bias=config.bias)  # Z2, mixed along time
        self.sgu = SpatialGatingUnit(config, d_ffn)
        self.attn = TinyAttention(config, d_ffn // 2) if config.block == 'amlp' else None
        self.c_proj = nn.Linear(d_ffn // 2, config.n_embd, bias=config.bias)  # $Y = s(Z) V$
        self.dropout = nn.Dropout(config.dropout)

    def forward(self, x, cache=None):
        h = self.ln_1(x)
        gate_res = self.attn(h, cache) if self.attn is not None else None
        z = self.sgu(F.gelu(self.c_fc(h)), F.gelu(self.c_gate(h)), gate_res, cache)
        return x + self.dropout(self.c_proj(z))


def make_block(config):
    """The one place a block type is chosen by name (GPTConfig refused any other)."""
    return Block(config) if config.block == 'transformer' else GMLPBlock(config)


# -----------------------------------------------------------------------------
# the language model

class GPT(nn.Module):

    def __init__(self, config):
        super().__init__()
        self.config = config
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(config.vocab_size, config.n_embd),
            wpe=(nn.Embedding(config.block_size, config.n_embd) if config.pos_emb == 'learned'
                 else None),
            drop=nn.Dropout(config.dropout),
            h=nn.ModuleList([make_block(config) for _ in range(config.n_layer)]),
            ln_f=make_norm(config, config.n_embd),
        ))
        self.lm_head = nn.Linear(config.n_embd, config.vocab_size, bias=False)
        if config.tie_weights:
            # https://paperswithcode.com/method/weight-tying
            self.transformer.wte.weight = self.lm_head.weight
        self.apply(self._init_weights)
        # GPT-2's scaled init of every residual output projection (all named c_proj), per the GPT-2
        # paper
        for pn, p in self.named_parameters():
            if pn.endswith('c_proj.weight'):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * config.n_layer))

    @classmethod
    def from_checkpoint(cls, ckpt):
        """The GPT a checkpoint of train.py's holds, rebuilt from its own model_args (no config file
        needed; a field added since takes its default)."""
        known = {f.name for f in fields(GPTConfig)}
        model = cls(GPTConfig(**{k: v for k, v in ckpt['model_args'].items() if k in known}))
        # (the prefixes a compiled or DDP-wrapped module's state has, as nanoGPT saves it, go)
        model.load_state_dict({k.removeprefix('_orig_mod.').removeprefix('module.'): v
                               for k, v in ckpt['model'].items()})
        return model

    def _init_weights(self, module):
        # SGU and depth-wise conv parameters keep their own (paper) init from their constructors
        if isinstance(module, nn.Linear):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
            if module.bias is not None:
                torch.nn.init.zeros_(module.bias)
        elif isinstance(module, nn.Embedding):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)

    def get_num_params(self):
        """
        Every parameter, a tied one once (wte = lm_head): position embeddings and the SGU's
        positional T x T weights included. One convention for every block, used to match sizes.
        """
        return sum(p.numel() for p in self.parameters())

    def forward(self, idx, targets=None, cache=None):
        B, T = idx.size()
        # (the fixed-shape cache reads no Python counter: its caller keeps within block_size)
        if (0 if cache is None or cache.fixed else cache.pos) + T > self.config.block_size:
            raise ValueError(f"sequence of {T + (cache.pos if cache else 0)} tokens is longer than "
                             f"block_size={self.config.block_size}; crop it (generate does) or "
                             "train a larger block_size")
        if cache is not None:
            cache.begin(T, self.config.block_size, idx.device)
        x = self.transformer.wte(idx)  # (B, T, C)
        if self.transformer.wpe is not None:
            pos = torch.arange(T, device=idx.device) if cache is None else cache.index  # (T,)
            x = x + self.transformer.wpe(pos)
        x = self.transformer.drop(x)
        for i, block in enumerate(self.transformer.h):
            x = block(x, cache.layers[i] if cache is not None else None)
        x = self.transformer.ln_f(x)
        if cache is not None:
            cache.end(T)
        if targets is not None:
            logits = self.lm_head(x)  # (B, T, V)
            # the mean cross-entropy of the next token, in nats: train.py's val_loss, and bits
            # per byte (val_loss / ln 2 x tokens per byte) read it so; an auxiliary loss goes
            # beside it (returned on its own), never into it. Targets of -1 are not scored:
            # probe.py's recall batches score the answer positions only
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.reshape(-1),
                                   ignore_index=-1)
            return logits, loss
        # inference: only the last position, (B, 1, V); a slice, not nanoGPT's x[:, [-1], :], whose
        # index, a tensor from a Python list, is a host-to-device copy a CUDA graph cannot record
        return self.lm_head(x[:, -1:, :]), None

    def optimizer_groups(self, optimizer='adamw'):
        """
        {group: [parameter names]}, each trainable parameter in exactly one group.
        'muon' (optimizer='muon' only): the 2-D matrices inside the blocks that map features to
          features (c_attn, c_fc, c_gate, c_proj, the tiny attention's): what Muon orthogonalises.
        'decay': other >= 2-D tensors under AdamW with weight decay: the embeddings and lm_head (a
          lookup table and a classifier, not hidden maps), the SGU's spatial W (it mixes positions,
          is masked to its lower triangle and starts near 0: orthogonalising it would undo all
          three), MDHA's conv kernels (3-D).
        'no_decay': biases and norm gains, AdamW without decay.
        """
        groups = {'muon': [], 'decay': [], 'no_decay': []}
        for name, p in self.named_parameters():
            if not p.requires_grad:
                continue
            # chosen by name: a new block's 2-D weight that mixes positions, not features (as the
            # SGU's W does), is named here, or Muon orthogonalises it
            hidden = (p.dim() == 2 and name.startswith('transformer.h.')
                      and not name.endswith('sgu.weight'))
            group = ('muon' if hidden and optimizer == 'muon' else
                     'decay' if p.dim() >= 2 else 'no_decay')
            groups[group].append(name)
        return groups

    def configure_optimizers(self, weight_decay, learning_rate, betas, device_type,
                             optimizer='adamw'):
        """AdamW, or Muon for the hidden matrices plus AdamW for the rest (see optimizer_groups)."""
        check_optimizer(optimizer)
        params = dict(self.named_parameters())
        names = self.optimizer_groups(optimizer)
        # each group's lr is the schedule's times its lr_scale (train.py): a group that wants
        # another base lr (as nanochat's embeddings do) sets it here
        adamw = torch.optim.AdamW([
            {'params': [params[n] for n in names['decay']], 'weight_decay': weight_decay,
             'lr_scale': 1.0},
            {'params': [params[n] for n in names['no_decay']], 'weight_decay': 0.0, 'lr_scale': 1.0},
        ], lr=learning_rate, betas=betas, **({'fused': True} if device_type == 'cuda' else {}))
        if optimizer == 'adamw':
            return adamw
        # Muon (Jordan et al. 2024) with Moonshot's update scaling (arXiv:2502.16982): 0.2
        # sqrt(max(A, B)) matches AdamW's update RMS, so the same learning_rate, schedule and
        # weight decay apply
        muon = torch.optim.Muon([{'params': [params[n] for n in names['muon']], 'lr_scale': 1.0}],
                                lr=learning_rate, weight_decay=weight_decay,
                                adjust_lr_fn='match_rms_adamw')
        return Optimizers(adamw=adamw, muon=muon)

    def flops_per_token(self, T=None):
        """Training FLOPs per token at sequence length T (default block_size): see count_flops."""
        return count_flops(self.config, T)

    def estimate_mfu(self, tokens_per_s, peak_flops):
        """Model FLOPs utilisation: achieved training FLOP/s over the peak FLOP/s (None: unknown)."""
        return count_flops(self.config) * tokens_per_s / peak_flops if peak_flops else None


def check_optimizer(name):
    """A ValueError unless `name` is an optimizer this torch has (Muon arrived in torch 2.9)."""
    if name not in OPTIMIZERS:
        raise ValueError(f"unknown optimizer {name!r}; choose one of {', '.join(OPTIMIZERS)}")
    if name == 'muon' and not hasattr(torch.optim, 'Muon'):
        raise ValueError(f"optimizer='muon' needs torch.optim.Muon (torch >= 2.9); this is torch "
                         f"{torch.__version__}: upgrade torch or use optimizer='adamw'")


class Optimizers:
    """Several torch optimizers stepped as one (Muon + AdamW): param_groups, step, zero_grad and
    state_dict span them all, so train.py's loop, GradScaler and checkpoints treat them as one."""

    def __init__(self, **optimizers):
        self.optimizers = optimizers

    @property
    def param_groups(self):
        return [g for opt in self.optimizers.values() for g in opt.param_groups]

    def step(self):
        for opt in self.optimizers.values():
            opt.step()

    def zero_grad(self, set_to_none=True):
        for opt in self.optimizers.values():
            opt.zero_grad(set_to_none=set_to_none)

    def state_dict(self):
        return {name: opt.state_dict() for name, opt in self.optimizers.items()}

    def load_state_dict(self, state):  # (train.py refuses a resume with another optimizer)
        for name, opt in self.optimizers.items():
            opt.load_state_dict(state[name])


# -----------------------------------------------------------------------------
# sizing: widths, parameter counts and matching, FLOPs

def ffn_width(config):
    """Hidden width of the FFN: 4*d, or 2/3 of that for gated FFNs: 3 matrices cost what 2 did."""
    if config.ffn_hidden:
        return config.ffn_hidden
    if config.match_params:
        return matched_width(config)
    if config.ffn in GATED:  # arXiv:2002.05202 sec. 2: d_ff reduced by 2/3 to keep parameters equal
        m = config.ffn_multiple_of
        return max(m, m * round(2 * 4 * config.n_embd / 3 / m))
    return 4 * config.n_embd


def gmlp_width(config):
    if config.match_params and not config.gmlp_d_ffn:
        return matched_width(config)
    return config.gmlp_d_ffn or 6 * config.n_embd  # arXiv:2105.08050 sec. 2 uses d_ffn = 6 d_model


def count_params(config):
    """Every parameter of GPT(config), a tied one once: the one convention used for matching sizes.
    Built on the meta device, so it allocates nothing."""
    with torch.device('meta'):
        return GPT(config).get_num_params()


def count_flops(config, T=None):
    """
    Training FLOPs (forward + backward = 3x forward) per token at sequence length T
    (default block_size), counting each matmul as 2 FLOPs per multiply-add: the Linear
    layers, attention's QK^T and AV, the depth-wise convs, the SGU's spatial matmul and the
    tiny attention. Attention-like terms use the full T (no causal halving), as PaLM's MFU does.
    """
    cfg, T = config, T or config.block_size
    C = cfg.n_embd
    if cfg.block == 'transformer':
        layer = 2 * C * 3 * C + 2 * C * C + 2 * 2 * T * C  # c_attn, c_proj, QK^T and AV
        if cfg.attn == 'mdha':
            layer += 2 * 3 * C * cfg.dconv_kernel
        if cfg.ffn != 'none':
            layer += 2 * C * ffn_width(cfg) * (3 if cfg.ffn in GATED else 2)
    else:
        d = gmlp_width(cfg)
        layer = 2 * C * d + 2 * (d // 2) * C + 2 * T * (d // 2)  # c_fc, c_proj, spatial W
        if cfg.block == 'amlp':
            a = cfg.tiny_attn_size
            layer += 2 * C * 3 * a + 2 * 2 * T * a + 2 * a * (d // 2)
    forward = cfg.n_layer * layer + 2 * C * cfg.vocab_size  # + lm_head
    return 3 * forward


MATCH_TOLERANCE = 0.01  # match_params='gpt': at most 1% from the GPT-2 block's count, else an error


def matched_width(config):
    """
    The width knob (ffn_hidden for transformer blocks, gmlp_d_ffn for gMLP/aMLP) that gives `config`
    the parameter count of the GPT-2 block (mha + gelu MLP, learned positions, LayerNorm) at the
    same depth, width, heads, block_size, vocab, bias and tying. Parameters are linear in the knob,
    so two counts give it; it is then rounded to the coarsest multiple of 64, 32, ..., 2 (1) landing
    within 0.5%. A config that cannot come within MATCH_TOLERANCE (a gMLP whose block_size^2 spatial
    weights outweigh the GPT-2 block it is matched to) is a ValueError saying which way to go.
    """
    w, err, target, got = _closest_width(tuple(sorted(vars(config).items())))
    if err <= MATCH_TOLERANCE:
        return w
    what = config.block if config.block != 'transformer' else f"{config.attn} + {config.ffn}"
    raise ValueError(f"match_params='gpt': {what} cannot come within {MATCH_TOLERANCE:.0%} of the "
                     f"GPT-2 block's {target:,} parameters at n_layer={config.n_layer}, "
                     f"n_embd={config.n_embd}, block_size={config.block_size} (closest: {got:,}, "
                     f"{got / target - 1:+.0%}); a wider n_embd or a shorter block_size comes "
                     "closer, or set match_params='' to compare unmatched")


@functools.lru_cache(maxsize=None)
def _closest_width(items):
    """(knob value, relative error, the GPT-2 block's count, the count at that value)."""
    config = GPTConfig(**{**dict(items), 'match_params': ''})
    target = count_params(replace(config, block='transformer', attn='mha', ffn='gelu', ffn_hidden=0,
                                  gmlp_d_ffn=0, pos_emb='learned', norm='layernorm'))
    knob, step = ('ffn_hidden', 1) if config.block == 'transformer' else ('gmlp_d_ffn', 2)
    p1, p2 = (count_params(replace(config, **{knob: w})) for w in (64, 128))
    exact = 64 + (target - p1) * 64 / (p2 - p1)
    best = None
    for m in (64, 32, 16, 8, 4, 2, 1):
        if m % step:
            continue
        w = max(m, m * round(exact / m))
        got = count_params(replace(config, **{knob: w}))
        err = abs(got - target) / target
        if err <= 0.005:
            return w, err, target, got
        best = min(best or (err, w, got), (err, w, got))
    return best[1], best[0], target, best[2]


# -----------------------------------------------------------------------------
# the decoding cache every token mixer takes

class DecodeCache:
    """
    What decoding keeps between calls: for every layer, the history each token mixer reads
    (attention's K/V, the tiny attention's, the SGU's normalised Z2 rows, MDHA's last K-1 inputs) in
    buffers of block_size positions, allocated once and written in place (index_copy_). Each call's
    positions are tensors: `index`, those of its T new tokens, and `visible` (T, Tk), which of the
    Tk positions read each token may see. With fixed=True every call reads the whole buffers (Tk =
    block_size) under that mask, and position state lives in a tensor (`step`): a one-token call has
    the same shapes and reads no Python counter, so it can be captured once (torch.compile's CUDA
    graphs) and replayed. Without, Tk is the positions written so far (less work in eager mode) and
    `pos` counts them.
    """

    def __init__(self, n_layer, fixed=False):
        self.pos, self.fixed, self.step = 0, fixed, None
        self.layers = [LayerCache(self) for _ in range(n_layer)]

    def begin(self, T, block_size, device):
        if self.step is None:
            self.step = torch.zeros((), dtype=torch.long, device=device)
            self.block_size = block_size
        self.index = self.step + torch.arange(T, device=device)  # (T,) positions of the new tokens
        # what indexes this call's rows of a position table: a slice where the positions are a
        # Python count (a view, no gather: measured faster on the CPU), else the tensor
        self.rows = self.index if self.fixed else slice(self.pos, self.pos + T)
        Tk = block_size if self.fixed else self.pos + T
        # (T, Tk): causal; one new token after the written ones sees them all, and needs no mask
        self.visible = (torch.arange(Tk, device=device) <= self.index[:, None]
                        if self.fixed or T > 1 else None)

    def end(self, T):
        self.step += T  # in place: the same tensor every call
        # (the fixed path reads no Python counter: a captured call could not update it)
        if not self.fixed:
            self.pos += T

    def reset(self):
        """Empty, for a new sequence, keeping its buffers (a step recorded on them stays valid)."""
        self.pos = 0
        for t in self._state() if self.step is not None else ():
            t.zero_()

    def save(self):
        """Copies of every tensor of its state (position and buffers), for `load` to put back."""
        return [t.clone() for t in self._state()]

    def load(self, saved):
        for t, s in zip(self._state(), saved, strict=True):
            t.copy_(s)

    def _state(self):
        return [self.step, *(b for layer in self.layers for _, b in sorted(layer.buffers.items()))]


class LayerCache:
    """One layer's buffers in a DecodeCache: `remember` writes a mixer's new rows, returns its
    history."""

    def __init__(self, cache):
        self.of, self.buffers = cache, {}

    def remember(self, key, new, dim):
        """Write `new` (T rows along `dim`) at this call's positions; return the buffer: all
        block_size rows (fixed) or the rows written so far."""
        c = self.of
        if key not in self.buffers or self.buffers[key].size(0) != new.size(0):  # or another batch
            shape = list(new.shape)
            shape[dim] = c.block_size
            self.buffers[key] = new.new_zeros(shape)
        buf = self.buffers[key]
        if c.fixed:
            buf.index_copy_(dim, c.index, new)
            return buf
        buf.narrow(dim, c.pos, new.size(dim)).copy_(new)
        return buf.narrow(dim, 0, c.pos + new.size(dim))
