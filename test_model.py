"""
model.py's properties, on CPU in seconds: shapes, causality, paper formulas written out plainly,
parameter parity, cached decoding equal to full decoding, overfitting, and config errors; for every
block, every config in configs/ and every value of every GPTConfig field (the last section). Beside
model.py, where a block's author works; the other tests are in tests/.
"""
import contextlib
import copy
import dataclasses
import functools
import glob
import math
import os
import re
from types import SimpleNamespace

import pytest
import torch
from torch.nn import functional as F

from model import (count_flops, ATTNS, BLOCKS, FFNS, GATED, GPT, POS_EMBS, CausalConv, CausalDepthwiseConv, DecodeCache, GPTConfig,
                   Rotary, SpatialGatingUnit, count_params, ffn_width, gmlp_width, matched_width)

from sample import CapturedStep, generate, sample_next, stream

# every block / attn / ffn combination the config accepts, built from model.py's lists: a block, attention
# or FFN added there is covered by every test below that takes COMBOS (shapes, causality, cached decoding,
# overfitting, parameter matching) with no edit here
COMBOS = ([('transformer', attn, ffn) for attn in ATTNS for ffn in FFNS]
          + [(block, 'mha', 'gelu') for block in BLOCKS if block != 'transformer'])
MIXERS = [('transformer', 'mha', 'gelu'), ('transformer', 'mdha', 'relu2'),
          ('gmlp', 'mha', 'gelu'), ('amlp', 'mha', 'gelu')]
VOCAB = 13
HERE = os.path.dirname(os.path.abspath(__file__))  # the repository (this file sits beside model.py)


def positions(block):
    """The pos_emb options a block takes: gMLP has no attention for rotary positions."""
    return [p for p in POS_EMBS if not (block == 'gmlp' and p == 'rope')]


# the sizes every tiny model here has: a config's own flags at these sizes run in milliseconds
TINY = dict(block_size=16, vocab_size=VOCAB, n_layer=2, n_head=2, n_embd=16, ffn_multiple_of=8, gmlp_d_ffn=32,
            tiny_attn_size=8)


def tiny(block='transformer', attn='mha', ffn='gelu', **kw):
    return GPTConfig(**{**TINY, 'block': block, 'attn': attn, 'ffn': ffn, **kw})


def build(cfg, seed=0, double=True):
    torch.manual_seed(seed)
    model = GPT(cfg)
    return model.double() if double else model


def idx_batch(B=3, T=12, seed=1):
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


def big_weights(model):
    """Large random weights: outputs sensitive to every input, no near-tie greedy choices."""
    with torch.no_grad():
        for p in model.parameters():
            p.normal_(0, 0.5)
    return model


@pytest.mark.parametrize('block,attn,ffn', COMBOS)
def test_forward_backward_shapes_and_finite(block, attn, ffn):
    model = build(tiny(block, attn, ffn), double=False)
    idx = idx_batch()
    logits, loss = model(idx, idx)
    assert logits.shape == (3, 12, VOCAB)
    assert torch.isfinite(loss) and abs(loss.item() - math.log(VOCAB)) < 0.5  # near uniform at init
    loss.backward()
    for name, p in model.named_parameters():
        assert p.grad is not None, name
        assert torch.isfinite(p.grad).all(), name
    logits, loss = model(idx)  # inference: last position only
    assert logits.shape == (3, 1, VOCAB) and loss is None


def assert_causal(model, t):
    """Changing token t leaves every output before t unchanged, and does change output t."""
    idx = idx_batch()
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    a, _ = model(idx, idx)
    b, _ = model(changed, changed)
    assert torch.allclose(a[:, :t], b[:, :t], atol=1e-12, rtol=0)
    assert (a[:, t] - b[:, t]).abs().max() > 1e-6


@pytest.mark.parametrize('block,attn,ffn', MIXERS + [('transformer', 'mdha', 'swiglu')])
@pytest.mark.parametrize('t', [0, 5, 11])
def test_causality(block, attn, ffn, t):
    """Changing token t leaves every output before t unchanged, and does change output t."""
    model = build(tiny(block, attn, ffn, dconv_kernel=4)).eval()
    assert_causal(model, t)


@pytest.mark.parametrize('block', ['transformer', 'gmlp', 'amlp'])
def test_causality_with_dropout_and_no_position_embeddings(block):
    """In training mode, with the same dropout masks, a change at t=7 still leaves outputs before 7 alone."""
    model = build(tiny(block, pos_emb='none', dropout=0.2)).train()
    assert model.transformer.wpe is None
    idx = idx_batch()
    changed = idx.clone()
    changed[:, 7] = (changed[:, 7] + 1) % VOCAB
    torch.manual_seed(5)
    a = model(idx, idx)[0]
    torch.manual_seed(5)
    b = model(changed, changed)[0]
    assert torch.allclose(a[:, :7], b[:, :7], atol=1e-12, rtol=0)
    assert (a[:, 7] - b[:, 7]).abs().max() > 1e-6
    torch.manual_seed(6)
    assert not torch.allclose(model(idx, idx)[0], a)  # dropout is really on


def test_mdha_keeps_autocast_dtype():
    model = GPT(tiny('transformer', 'mdha'))
    x = torch.randn(2, 5, 16)
    with torch.autocast('cpu', dtype=torch.bfloat16):
        qkv = model.transformer.h[0].attn.c_attn(x)
        assert model.transformer.h[0].attn.dconv(qkv).dtype == torch.bfloat16


def test_sgu_is_near_identity_on_z1_at_init():
    cfg = tiny('gmlp', block_size=64)
    torch.manual_seed(0)
    sgu = SpatialGatingUnit(cfg, 32).double()
    z = torch.randn(4, 64, 32, dtype=torch.float64)
    z1 = z[..., :16]
    out = sgu(z1, z[..., 16:])
    assert out.shape == (4, 64, 16)
    assert (sgu.bias == 1).all()
    assert sgu.weight.abs().max() <= 0.01
    assert torch.allclose(out, z1, rtol=0, atol=0.01 * z1.abs().max().item())


def test_sgu_matches_plain_masked_reference():
    """Z1 ⊙ (W_masked LN(Z2) + b), written with an explicit mask and an einsum, at T < block_size."""
    cfg = tiny('gmlp', block_size=16)
    torch.manual_seed(0)
    sgu = SpatialGatingUnit(cfg, 32).double()
    with torch.no_grad():
        sgu.weight.normal_()  # a trained-looking W so the mask matters
        sgu.bias.normal_()
    z = torch.randn(2, 10, 32, dtype=torch.float64)
    z1, z2 = z[..., :16], z[..., 16:]
    z2 = F.layer_norm(z2, (16,), sgu.ln.weight, sgu.ln.bias)
    mask = torch.tensor([[1.0 if s <= t else 0.0 for s in range(10)] for t in range(10)], dtype=torch.float64)
    w = sgu.weight[:10, :10] * mask
    expected = z1 * (torch.einsum('ts,bsd->btd', w, z2) + sgu.bias[:10, None])
    assert torch.allclose(sgu(z[..., :16], z[..., 16:]), expected, atol=1e-12)


@pytest.mark.parametrize('shared', [False, True])
def test_depthwise_conv_matches_a_loop(shared):
    """y_t[c] = sum_i w[c, i] x_{t-K+1+i}[c], zeros before the start; shared kernels repeat per head."""
    C, nh, K, T = 8, 2, 3, 7
    torch.manual_seed(0)
    conv = CausalDepthwiseConv(n_embd=C, n_head=nh, kernel=K, shared=shared).double()
    x = torch.randn(2, T, 3 * C, dtype=torch.float64)
    w = conv.weight
    expected = torch.zeros_like(x)
    for c in range(3 * C):
        part, ch = divmod(c, C)
        kernel = w[part, ch % (C // nh)] if shared else w[part, ch]
        for t in range(T):
            for i in range(K):
                s = t - K + 1 + i
                if s >= 0:
                    expected[:, t, c] += kernel[i] * x[:, s, c]
    assert torch.allclose(conv(x), expected, atol=1e-12)
    assert conv.weight.shape == ((3, C // nh, K) if shared else (3, C, K))
    # the hand-written backward against finite differences (T=2 < K exercises the start too)
    assert torch.autograd.gradcheck(lambda x_, w_: CausalConv.apply(x_, w_),
                                    (x[:, :5].clone().requires_grad_(), torch.randn(3 * C, K, dtype=torch.float64, requires_grad=True)))
    assert torch.autograd.gradcheck(lambda x_, w_: CausalConv.apply(x_, w_),
                                    (x[:, :2].clone().requires_grad_(), torch.randn(3 * C, K, dtype=torch.float64, requires_grad=True)))


# each FFN's nonlinearity written out plainly, applied to a = x W1 + b1 (for a gated FFN: to the gate)
# each FFN from its paper: (the nonlinearity written out, whether it gates), set here independently
# of model.py, so that a GLU declared there without its gate fails
ERF_GELU = lambda a: 0.5 * a * (1 + torch.erf(a / math.sqrt(2)))  # noqa: E731
FORMULAS = {'relu': (torch.relu, False), 'gelu': (ERF_GELU, False), 'relu2': (lambda a: torch.relu(a) ** 2, False),
            'glu': (lambda a: 1 / (1 + torch.exp(-a)), True), 'bilinear': (lambda a: a, True),
            'reglu': (torch.relu, True), 'geglu': (ERF_GELU, True), 'swiglu': (lambda a: a / (1 + torch.exp(-a)), True)}


def ffn_problem(ffn):
    """The sentence for what is wrong with model.py's ffn against its formula in FORMULAS, or None:
    the one cause a new FFN's other failures (a width, a count, a config's header) follow from."""
    if ffn not in FORMULAS:
        return (f"model.FFNS has {ffn!r} but test_model.py's FORMULAS has no formula for it: add its "
                f"nonlinearity there, written out from its paper, and whether it gates, so this test "
                f"can check model.py against it")
    formula, gated = FORMULAS[ffn]
    if ffn.endswith('glu') and not (gated and ffn in GATED):  # named a GLU (GLU Variants: *GLU)
        return (f"ffn={ffn!r} is named a GLU but builds no gate: a GLU multiplies act(x W1) by a gate "
                f"x V (arXiv:2002.05202); mark it gated in model.FFN_ACTS and in FORMULAS, or give an "
                f"ungated FFN a name that is not a GLU's")
    if gated != (ffn in GATED):
        return (f"ffn={ffn!r} {'gates' if gated else 'does not gate'} by its formula in FORMULAS, but "
                f"model.FFN_ACTS marks it {'gated' if ffn in GATED else 'ungated'}: fix its row there")
    model = build(tiny(ffn=ffn))
    mlp = model.transformer.h[0].mlp
    with torch.no_grad():
        for p in mlp.parameters():
            p.normal_()  # biases too, so a missing bias would show
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    W1, b1, W2, b2 = mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias
    act = formula(x @ W1.T + b1)
    if gated:
        act = act * (x @ mlp.c_gate.weight.T + mlp.c_gate.bias)
    elif mlp.c_gate is not None:
        return f"ffn={ffn!r} does not gate, but model.py builds a c_gate for it"
    worst = (mlp(x) - (act @ W2.T + b2)).abs().max().item()
    if not worst <= 1e-10:
        return (f"model.py's ffn={ffn!r} is not its formula in FORMULAS: the outputs differ by up to "
                f"{worst:.3g} (float64); check its nonlinearity in model.FFN_ACTS and its gate")
    return None


@pytest.mark.parametrize('ffn', [f for f in FFNS if f != 'none'])
def test_ffn_equals_its_formula(ffn):
    """Gated: act(x W1 + b1) ⊙ (x V + c) then W2 + b2 (arXiv:2002.05202); ungated act(x W1 + b1) W2 + b2.
    Every FFN model.py lists is checked: a new one needs its formula in FORMULAS."""
    problem = ffn_problem(ffn)
    if problem:  # a sentence, not a tensor dump
        pytest.fail(problem, pytrace=False)


def test_ffn_bias_flags():
    mlp = GPT(tiny(ffn='swiglu', bias1=False, bias_gate=True, bias2=False)).transformer.h[0].mlp
    assert mlp.c_fc.bias is None and mlp.c_gate.bias is not None and mlp.c_proj.bias is None
    mlp = GPT(tiny(ffn='swiglu', bias=False)).transformer.h[0].mlp
    assert mlp.c_fc.bias is None and mlp.c_gate.bias is None and mlp.c_proj.bias is None


@pytest.mark.parametrize('ffn', GATED)
def test_gated_params_match_ungated_at_default_widths(ffn):
    """At the default widths (2/3 hidden for gated) the FFN parameter counts agree within 2%."""
    def ffn_params(name):
        cfg = GPTConfig(ffn=name)
        with torch.device('meta'):  # the shapes, no 124M-wide weights to fill
            model = GPT(GPTConfig(**{**cfg.__dict__, 'n_layer': 1}))
        return sum(p.numel() for p in model.transformer.h[0].mlp.parameters())
    base, gated = ffn_params('gelu'), ffn_params(ffn)
    width = ffn_width(GPTConfig(ffn=ffn))
    if width != 2048 or abs(gated - base) / base >= 0.02:
        pytest.fail(ffn_problem(ffn) or f"the gated ffn={ffn!r} has a default hidden width of {width}, not "
                    f"2048 (2/3 of 4 x 768, rounded to a multiple of 64): its three matrices must cost what "
                    f"GELU's two do (arXiv:2002.05202 sec. 2); see model.ffn_width", pytrace=False)


def test_default_widths():
    def width(**kw):
        return ffn_width(GPTConfig(n_embd=128, n_head=4, **kw))
    assert width() == 512
    assert width(ffn='swiglu') == 320  # 341.3 rounded to a multiple of 64
    assert width(ffn='swiglu', ffn_multiple_of=8) == 344
    assert width(ffn='swiglu', ffn_hidden=300) == 300


def test_gpt2_init():
    cfg = GPTConfig(block_size=64, vocab_size=256, n_layer=8, n_head=4, n_embd=64, ffn='swiglu')
    model = build(cfg, double=False)
    assert model.lm_head.weight is model.transformer.wte.weight
    std = {n: p.std().item() for n, p in model.named_parameters()}
    assert abs(std['transformer.h.0.mlp.c_proj.weight'] - 0.02 / math.sqrt(16)) < 0.001
    assert abs(std['transformer.h.0.attn.c_proj.weight'] - 0.02 / math.sqrt(16)) < 0.001
    assert abs(std['transformer.h.0.mlp.c_gate.weight'] - 0.02) < 0.002
    gm = build(GPTConfig(block_size=64, vocab_size=256, n_layer=8, n_embd=64, block='amlp'), double=False)
    names = [n for n, _ in gm.named_parameters()]
    assert 'transformer.h.0.c_proj.weight' in names and 'transformer.h.0.attn.c_proj.weight' in names
    assert (gm.transformer.h[0].sgu.bias == 1).all()


@pytest.mark.parametrize('fixed', [False, True])
@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('block,attn,ffn,pos', [(*m, p) for m in MIXERS for p in positions(m[0])])
def test_cached_forward_equals_full_forward(block, attn, ffn, pos, shared, fixed):
    """Prefill a chunk, then one token, then another chunk, to the last position: logits equal the full
    forward's; with the fixed-shape cache too, whose calls read all block_size positions."""
    model = build(tiny(block, attn, ffn, dconv_shared=shared, pos_emb=pos)).eval()
    idx = idx_batch(T=16)
    full, _ = model(idx, idx)
    cache = DecodeCache(model.config.n_layer, fixed=fixed)
    got = []
    for a, b in [(0, 5), (5, 6), (6, 7), (7, 15), (15, 16)]:
        logits, _ = model(idx[:, a:b], idx[:, a:b], cache=cache)
        got.append(logits)
    assert cache.step.item() == 16 and cache.pos == (0 if fixed else 16)
    assert torch.allclose(torch.cat(got, dim=1), full, atol=1e-10)


def test_the_cache_writes_in_place_and_returns_the_history():
    for fixed in (False, True):
        cache, parts = DecodeCache(1, fixed=fixed), []
        layer = cache.layers[0]
        for n in (1, 5, 1, 1, 8):  # to block_size = 16
            new = torch.randn(2, n, 3)
            parts.append(new)
            cache.begin(n, 16, 'cpu')
            got = layer.remember('x', new, dim=1)
            history = torch.cat(parts, dim=1)
            if fixed:  # every block_size row, the ones not written yet zero, in the one buffer
                assert got.shape == (2, 16, 3) and got.data_ptr() == layer.buffers['x'].data_ptr()
                assert torch.equal(got[:, :history.size(1)], history) and not got[:, history.size(1):].any()
            else:
                assert torch.equal(got, history)
            cache.end(n)


@pytest.mark.parametrize('B', [1, 2])
def test_fixed_shape_steps_compile_once(B):
    """Every one-token step of the fixed-shape cache has the same shapes, strides included, and reads no
    Python counter: compiled once, it runs every later step without a recompile (what CUDA graphs
    need), at batch 1 (sample.py's default, where a slice of the growing sequence would change its
    stride every token) as at 2."""
    import torch._dynamo
    model = build(tiny('amlp', pos_emb='rope')).eval()  # the tiny attention (rotary) and the SGU
    torch._dynamo.reset()
    step = torch.compile(model, backend='eager', dynamic=False)
    with torch.no_grad(), torch._dynamo.config.patch(error_on_recompile=True):
        want = generate(model, idx_batch(B=B, T=3), 12, temperature=0, use_cache=False)
        got = torch.cat([idx_batch(B=B, T=3), *stream(model, idx_batch(B=B, T=3), 12, temperature=0, fixed=True,
                                                            step=step)], dim=1)
    assert torch.equal(got, want)


@pytest.mark.parametrize('block,attn,ffn,pos', [(*c, p) for c in COMBOS for p in positions(c[0])])
def test_cached_generate_equals_uncached_greedy(block, attn, ffn, pos):
    """Token for token, with either cache, including the step that fills the window and past block_size,
    where the window slides (16 + 30 > 16)."""
    model = big_weights(build(tiny(block, attn, ffn, pos_emb=pos, norm='rmsnorm' if pos == 'rope' else 'layernorm'))).eval()
    prompt = idx_batch(B=4, T=5)
    slow = generate(model, prompt, 30, temperature=0, use_cache=False)
    for fixed in (False, True):
        fast = generate(model, prompt, 30, temperature=0, use_cache=True, fixed=fixed)
        assert fast.shape == (4, 35)
        assert torch.equal(fast, slow), fixed  # logits themselves: test_cached_forward_equals_full_forward


@pytest.mark.parametrize('fixed', [False, True])
@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_a_reused_cache_decodes_as_a_fresh_one(block, attn, ffn, fixed):
    """stream(cache=...) empties the cache it is given (MDHA's conv tail included) and reallocates it for
    another batch size: after another sequence, past the window, the tokens are a fresh cache's."""
    model = big_weights(build(tiny(block, attn, ffn, dconv_kernel=3))).eval()
    cache = DecodeCache(model.config.n_layer, fixed=fixed)
    for B, T, seed in [(2, 5, 1), (2, 3, 2), (3, 4, 3)]:
        prompt = idx_batch(B=B, T=T, seed=seed)
        want = generate(model, prompt, 20, temperature=0, use_cache=False)
        got = torch.cat([prompt, *stream(model, prompt, 20, temperature=0, fixed=fixed, cache=cache)], dim=1)
        assert torch.equal(got, want), (B, T)
    with pytest.raises(ValueError, match='fixed'):
        next(stream(model, prompt, 1, fixed=not fixed, cache=cache))


def test_sampling_is_seeded_and_cache_independent():
    model = build(tiny('amlp')).eval()
    prompt = idx_batch(B=2, T=3)
    runs = [generate(model, prompt, 20, temperature=1.0, top_k=8, top_p=0.9, use_cache=c,
                           generator=torch.Generator().manual_seed(7)) for c in (True, True, False)]
    assert torch.equal(runs[0], runs[1]) and torch.equal(runs[0], runs[2])


def test_sample_next_filters():
    logits = torch.tensor([[3.0, 2.0, 1.0, 0.0, -1.0]])
    g = torch.Generator().manual_seed(0)
    assert sample_next(logits, temperature=0).item() == 0
    assert {sample_next(logits, top_k=2, generator=g).item() for _ in range(200)} == {0, 1}
    # probs ≈ .64 .23 .09 .03 .01: top_p=0.8 keeps the first two, top_p=0.5 only the first
    assert {sample_next(logits, top_p=0.8, generator=g).item() for _ in range(200)} == {0, 1}
    assert {sample_next(logits, top_p=0.5, generator=g).item() for _ in range(50)} == {0}
    assert sample_next(logits, temperature=1e-6, generator=g).item() == 0


@pytest.mark.parametrize('block,attn,ffn', MIXERS + [('transformer', 'mha', 'swiglu')])
def test_overfits_one_batch(block, attn, ffn):
    torch.manual_seed(0)
    cfg = tiny(block, attn, ffn, n_embd=32, gmlp_d_ffn=64, block_size=32)
    model = GPT(cfg)
    idx = torch.randint(0, VOCAB, (4, 33), generator=torch.Generator().manual_seed(3))
    x, y = idx[:, :-1], idx[:, 1:]
    opt = model.configure_optimizers(0.0, 3e-3, (0.9, 0.99), 'cpu')
    first = None
    for _ in range(150):
        _, loss = model(x, y)
        first = first or loss.item()
        opt.zero_grad()
        loss.backward()
        opt.step()
    assert first > 2.0 and loss.item() < 0.3 * first, (first, loss.item())


def test_sequence_length_limits():
    model = build(tiny('gmlp'))
    model(idx_batch(T=7), idx_batch(T=7))  # shorter than block_size: the SGU slices W
    with pytest.raises(ValueError, match='longer than block_size=16'):
        model(idx_batch(T=17))
    cache = DecodeCache(2)
    model(idx_batch(T=16), cache=cache)
    with pytest.raises(ValueError, match='longer than block_size'):
        model(idx_batch(T=1), cache=cache)


@pytest.mark.parametrize('kwargs,message', [
    (dict(n_embd=30, n_head=4), 'n_embd=30 is not divisible by n_head=4'),
    (dict(ffn='swish'), "unknown ffn 'swish'; choose one of relu, gelu"),
    (dict(attn='flash'), "unknown attn 'flash'; choose one of mha, mdha"),
    (dict(block='mamba'), "unknown block 'mamba'"),
    (dict(block='gmlp', ffn='swiglu'), "block='gmlp' has no attention or FFN"),
    (dict(block='gmlp', gmlp_d_ffn=33), 'must be even'),
    (dict(n_layer=0), 'n_layer must be at least 1'),
    (dict(dropout=1.5), 'dropout must be in'),
])
def test_bad_configs_raise_readable_errors(kwargs, message):
    with pytest.raises(ValueError, match=message.replace('(', r'\(')):
        GPTConfig(**kwargs)


def test_optimizer_groups():
    model = build(tiny('amlp', attn='mha'), double=False)
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 'cpu')
    decay, no_decay = opt.param_groups
    assert decay['weight_decay'] == 0.1 and no_decay['weight_decay'] == 0.0
    assert all(p.dim() >= 2 for p in decay['params']) and all(p.dim() < 2 for p in no_decay['params'])
    n = sum(p.numel() for g in opt.param_groups for p in g['params'])
    assert n == sum(p.numel() for p in model.parameters())  # tied weights counted once, none lost


def test_flops_per_token_counts_each_mixer():
    base = GPT(GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128))
    C, T, L, V = 128, 64, 4, 65
    # 2 FLOPs per multiply-add in c_attn, c_proj, c_fc, c_proj, QK^T, AV and lm_head; x3 for fwd+bwd
    expected = 3 * (L * (2 * 12 * C * C + 4 * T * C) + 2 * C * V)
    assert base.flops_per_token() == expected
    mdha = GPT(GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_head=4, n_embd=128, attn='mdha'))
    assert mdha.flops_per_token() - expected == 3 * L * 2 * 3 * C * 3
    gm = GPT(GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_embd=128, block='gmlp', gmlp_d_ffn=256))
    assert gm.flops_per_token() == 3 * (L * (2 * C * 256 + 2 * 128 * C + 2 * T * 128) + 2 * C * V)
    am = GPT(GPTConfig(block_size=64, vocab_size=65, n_layer=4, n_embd=128, block='amlp', gmlp_d_ffn=256))
    assert am.flops_per_token() - gm.flops_per_token() == 3 * L * (2 * C * 192 + 4 * T * 64 + 2 * 64 * 128)
    assert base.estimate_mfu(1e6, peak_flops=expected * 2e6) == pytest.approx(0.5)


def test_param_count_is_every_parameter_once():
    # one convention for every block: tied wte/lm_head once, positional tensors (wpe, SGU's W) included
    for kw in (dict(), dict(block='gmlp', pos_emb='none')):
        model = GPT(tiny(**kw))
        names = {id(p): n for n, p in model.named_parameters(remove_duplicate=False)}
        assert len(names) == len(list(model.parameters()))  # the tied weight is listed once
        total = sum(p.numel() for p in model.parameters())
        assert model.get_num_params() == total == count_params(tiny(**kw))
    assert GPT(tiny()).transformer.wpe.weight.numel() == 16 * 16


# -----------------------------------------------------------------------------
# modern options: RMSNorm, rotary positions, Muon; paper-faithful MDHA init; width matching

def test_rmsnorm_equals_its_formula():
    model = build(tiny(norm='rmsnorm'))
    norm = model.transformer.h[0].ln_1
    with torch.no_grad():
        norm.weight.uniform_(0.5, 1.5)
    x = torch.randn(3, 5, 16, dtype=torch.float64) * 3 + 1
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-5) * norm.weight
    assert torch.allclose(norm(x), expected, atol=1e-12)
    names = [n for n, _ in model.named_parameters()]
    assert not any(n.endswith('ln_1.bias') for n in names)  # no mean, no bias
    gm = build(tiny('gmlp', norm='rmsnorm'))
    assert isinstance(gm.transformer.h[0].sgu.ln, torch.nn.RMSNorm)  # the SGU's norm follows too


def rope_reference(x, base=10000.0):
    """RoPE as in Su et al. 2021, eq. 13-15: a block-diagonal rotation R_t per position, built as a
    dense matrix, acting on channel pairs (i, i + hs/2) (model.Rotary's pairing)."""
    B, H, T, D = x.shape
    out = torch.empty_like(x)
    for t in range(T):
        R = torch.zeros(D, D, dtype=x.dtype)
        for i in range(D // 2):
            a = t * base ** (-2 * i / D)
            j = i + D // 2
            R[i, i], R[i, j], R[j, i], R[j, j] = math.cos(a), -math.sin(a), math.sin(a), math.cos(a)
        out[:, :, t] = x[:, :, t] @ R.T
    return out


def test_rotary_equals_plain_rope_and_attention_uses_it():
    rot = Rotary(head_size=8, block_size=16, base=10000.0).double()
    x = torch.randn(2, 3, 10, 8, dtype=torch.float64)
    assert torch.allclose(rot(x), rope_reference(x), atol=1e-6)
    assert torch.allclose(rot(x[:, :, 4:], torch.arange(4, x.size(2))), rope_reference(x)[:, :, 4:], atol=1e-6)  # decoding
    # the attention module: q and k rotated by the reference, v not, then plain causal softmax attention
    model = build(tiny(pos_emb='rope'))
    attn = model.transformer.h[0].attn
    h = torch.randn(2, 10, 16, dtype=torch.float64)
    q, k, v = attn.c_attn(h).split(16, dim=2)
    q, k, v = (t.view(2, 10, 2, 8).transpose(1, 2) for t in (q, k, v))
    q, k = rope_reference(q), rope_reference(k)
    scores = (q @ k.transpose(-1, -2)) / math.sqrt(8)
    scores = scores.masked_fill(torch.ones(10, 10).triu(1).bool(), float('-inf'))
    y = (scores.softmax(-1) @ v).transpose(1, 2).reshape(2, 10, 16)
    assert torch.allclose(attn(h), attn.c_proj(y), atol=1e-10)
    assert model.transformer.wpe is None


@pytest.mark.parametrize('block,attn,ffn', [('transformer', 'mha', 'swiglu'), ('transformer', 'mdha', 'relu2'),
                                            ('amlp', 'mha', 'gelu')])
@pytest.mark.parametrize('t', [0, 6])
def test_rope_and_rmsnorm_keep_causality(block, attn, ffn, t):
    model = build(tiny(block, attn, ffn, pos_emb='rope', norm='rmsnorm')).eval()
    assert_causal(model, t)


def test_rope_scores_depend_only_on_the_offset():
    rot = Rotary(head_size=8, block_size=64, base=10000.0).double()
    q, k = torch.randn(8, dtype=torch.float64), torch.randn(8, dtype=torch.float64)

    def score(t, s):  # q placed at position t, k at position s
        qs = torch.zeros(1, 1, 64, 8, dtype=torch.float64)
        ks = torch.zeros(1, 1, 64, 8, dtype=torch.float64)
        qs[0, 0, t], ks[0, 0, s] = q, k
        return (rot(qs)[0, 0, t] @ rot(ks)[0, 0, s]).item()
    for offset in (0, 3, 17):
        values = [score(s + offset, s) for s in (0, 5, 20, 40)]
        assert max(values) - min(values) < 1e-6, (offset, values)  # float32 cos/sin tables
    assert abs(score(3, 0) - score(10, 0)) > 1e-3  # and it does depend on the offset


def test_new_flag_defaults_change_nothing():
    """The defaults build the same model as before these flags existed: same parameter names, shapes
    and (seeded) values, no rotary buffers in the state dict."""
    for old, new in [(dict(), dict(pos_emb='learned', norm='layernorm', match_params=''))]:
        a, b = build(tiny(**old)).state_dict(), build(tiny(**new)).state_dict()
        assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    default = build(tiny())
    assert not any(isinstance(m, (torch.nn.RMSNorm, Rotary)) for m in default.modules())
    assert all(isinstance(m.ln_1, torch.nn.LayerNorm) for m in default.transformer.h)
    assert GPTConfig().pos_emb == 'learned'
    with pytest.raises(ValueError, match="unknown pos_emb False"):  # the bool from before rotary positions
        GPTConfig(pos_emb=False)
    rope = build(tiny(pos_emb='rope'))
    assert not any('cos' in k or 'sin' in k for k in rope.state_dict())  # checkpoints unchanged in form


def test_mdha_conv_starts_as_the_primer_authors_code():
    K = 3
    conv = CausalDepthwiseConv(n_embd=16, n_head=2, kernel=K, shared=False)  # default init='primer'
    assert torch.equal(conv.weight[..., K - 1], torch.full((3, 16), 0.5))  # tap K-1 reads position t
    assert torch.equal(conv.weight[..., :K - 1], torch.full((3, 16, K - 1), 0.5 / K))
    x = torch.randn(1, 6, 48)
    y = conv(x)
    assert torch.allclose(y[:, 2], 0.5 * x[:, 2] + 0.5 / K * (x[:, 1] + x[:, 0]))
    model = build(tiny(attn='mdha'))  # GPT's own init leaves it alone
    assert torch.equal(model.transformer.h[0].attn.dconv.weight[..., K - 1], torch.full((3, 16), 0.5, dtype=torch.float64))
    rand = CausalDepthwiseConv(n_embd=16, n_head=2, kernel=K, shared=False, init='random').weight
    assert rand.abs().max() <= K ** -0.5 and rand.std() > 0.1  # nn.Conv1d's U(+-1/sqrt(K))


SIZES = [dict(n_layer=2, n_head=2, n_embd=64), dict(n_layer=4, n_head=4, n_embd=128),
         dict(n_layer=6, n_head=6, n_embd=192), dict(n_layer=3, n_head=4, n_embd=96)]
ARCHS = [dict(attn='mdha', ffn='relu2'), dict(ffn='swiglu'), dict(ffn='geglu'), dict(ffn='reglu'),
         dict(ffn='glu'), dict(ffn='bilinear'), dict(ffn='relu'), dict(block='gmlp', pos_emb='none'),
         dict(block='amlp', pos_emb='none'), dict(norm='rmsnorm', pos_emb='rope', ffn='swiglu'), dict(pos_emb='rope')]


@pytest.mark.parametrize('size', SIZES, ids=lambda s: f"{s['n_layer']}L{s['n_embd']}")
@pytest.mark.parametrize('bias', [False, True])
def test_match_params_lands_within_one_percent_of_gpt(size, bias):
    base = dict(block_size=64, vocab_size=65, bias=bias, **size)
    target = count_params(GPTConfig(**base))
    for arch in ARCHS:
        cfg = GPTConfig(**base, **arch, match_params='gpt')
        with torch.device('meta'):  # the shapes, no weights to fill
            n = GPT(cfg).get_num_params()
        assert abs(n / target - 1) < 0.01, (arch, size, n, target)
        assert matched_width(cfg) == (ffn_width(cfg) if cfg.block == 'transformer' else gmlp_width(cfg))
    with pytest.raises(ValueError, match='picks ffn_hidden itself'):
        GPTConfig(**base, ffn='swiglu', ffn_hidden=100, match_params='gpt')


@pytest.mark.parametrize('block,attn,ffn', MIXERS)
@pytest.mark.parametrize('optimizer', ['adamw', 'muon'])
def test_optimizer_groups_cover_every_parameter_once(block, attn, ffn, optimizer):
    model = build(tiny(block, attn, ffn, pos_emb='rope' if block != 'gmlp' else 'none'), double=False)
    groups = model.optimizer_groups(optimizer)
    names = [n for g in groups.values() for n in g]
    assert sorted(names) == sorted(n for n, _ in model.named_parameters())  # each exactly once
    params = dict(model.named_parameters())
    if optimizer == 'adamw':
        assert groups['muon'] == []
    else:
        assert groups['muon'] and all(params[n].dim() == 2 and '.h.' in n for n in groups['muon'])
        assert 'transformer.wte.weight' in groups['decay'] and not any('sgu.weight' in n for n in groups['muon'])  # = lm_head
    opt = model.configure_optimizers(0.1, 1e-3, (0.9, 0.95), 'cpu', optimizer=optimizer)
    n = sum(p.numel() for g in opt.param_groups for p in g['params'])
    assert n == model.get_num_params()


def test_muon_state_resumes_exactly():
    """4 steps straight equal 2 steps, a state_dict round-trip into a fresh model + optimizer, 2 more."""
    cfg = tiny(ffn='swiglu', pos_emb='rope', norm='rmsnorm')
    idx = idx_batch(T=12)

    def steps(model, opt, n):
        for _ in range(n):
            _, loss = model(idx, idx)
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

    straight = build(cfg, double=False)
    opt = straight.configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu', optimizer='muon')
    steps(straight, opt, 4)
    first = build(cfg, double=False)
    opt1 = first.configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu', optimizer='muon')
    steps(first, opt1, 2)
    saved = (copy.deepcopy(first.state_dict()), copy.deepcopy(opt1.state_dict()))
    second = build(tiny(ffn='swiglu', pos_emb='rope', norm='rmsnorm'), seed=99, double=False)
    opt2 = second.configure_optimizers(0.1, 1e-2, (0.9, 0.95), 'cpu', optimizer='muon')
    second.load_state_dict(saved[0])
    opt2.load_state_dict(saved[1])
    steps(second, opt2, 2)
    a, b = straight.state_dict(), second.state_dict()
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert any(not torch.equal(a[k], first.state_dict()[k]) for k in a)  # the steps did move it


def test_decoding_keeps_cudnn_attention_off_and_training_keeps_it(monkeypatch):
    """Decoding makes a new attention shape every token; cuDNN's SDPA builds a plan per shape (~50 ms
    on an H100: 18 tokens/s at GPT-2 124M). generate must run without it; a training forward keeps
    torch's default choice of backends."""
    import model as model_module
    seen = []
    real = model_module.causal_attention

    def spy(*args, **kw):
        seen.append(torch.backends.cuda.cudnn_sdp_enabled())
        return real(*args, **kw)

    monkeypatch.setattr(model_module, 'causal_attention', spy)
    m = GPT(tiny()).eval()
    idx = torch.zeros(1, 3, dtype=torch.long)
    for use_cache in (True, False):
        seen.clear()
        generate(m, idx, 4, temperature=0, use_cache=use_cache)
        assert seen and not any(seen)
    seen.clear()
    m(idx, idx)
    assert seen and all(seen)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA graphs need a GPU')
@pytest.mark.parametrize('block,attn,ffn,pos', [(*c, p) for c in COMBOS for p in positions(c[0])])
def test_captured_decoding_equals_uncached_greedy_on_a_gpu(block, attn, ffn, pos):
    """What sample.py --compile runs on a GPU: the one-token step recorded as a CUDA graph and
    replayed, token for token equal to uncached greedy decoding, past block_size (the window slides),
    and its logits at each step those of the eager fixed-shape step."""
    model = big_weights(build(tiny(block, attn, ffn, pos_emb=pos))).cuda().eval()
    prompt = idx_batch(B=1, T=3).cuda()
    want = generate(model, prompt, 20, temperature=0, use_cache=False)
    step = CapturedStep(model)
    got = torch.cat([prompt, *stream(model, prompt, 20, temperature=0, fixed=True, step=step)], dim=1)
    assert torch.equal(got, want) and step.records == 1
    eager, replayed = (DecodeCache(model.config.n_layer, fixed=True) for _ in range(2))
    with torch.no_grad():
        model(prompt, cache=eager), model(prompt, cache=replayed)
        for t in range(3, 13):
            a, _ = model(got[:, t:t + 1], cache=eager)
            b, _ = step(got[:, t:t + 1].clone(), cache=replayed)
            assert torch.allclose(a, b, rtol=0, atol=1e-10), t
    assert step.records == 2  # another cache: recorded again


# sequences through one cache: (batch, prompt length, seed, through the recorded step?, recordings after it).
# The same batch replays; an eager sequence at batch 3 moves the buffers, so the step records again at
# batch 2 although its input's shape is the one it was recorded at; then batch 3 itself records.
SEQUENCES = [(2, 3, 1, True, 1), (2, 5, 2, True, 1), (3, 4, 3, False, 1), (2, 3, 4, True, 2), (3, 3, 5, True, 3)]


@pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA graphs need a GPU')
@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_one_recorded_step_serves_every_later_sequence_on_a_gpu(block, attn, ffn):
    """One CapturedStep and one cache through several streams (bench.py's timing, sample.py's batches):
    a same-batch sequence replays the graph recorded before (reset in place); buffers moved by another
    batch size mean a new recording (SEQUENCES); every sequence equals uncached greedy decoding."""
    model = big_weights(build(tiny(block, attn, ffn, dconv_kernel=3))).cuda().eval()
    step, cache = CapturedStep(model), DecodeCache(model.config.n_layer, fixed=True)
    held = []  # every buffer the cache had stays allocated: a moved buffer cannot land where the old one was
    for B, T, seed, by, records in SEQUENCES:
        held += cache._state() if cache.step is not None else []
        prompt = idx_batch(B=B, T=T, seed=seed).cuda()
        want = generate(model, prompt, 8, temperature=0, use_cache=False)
        got = torch.cat([prompt, *stream(model, prompt, 8, temperature=0, fixed=True, step=step if by else None, cache=cache)],
                        dim=1)
        assert torch.equal(got, want) and step.records == records, (B, T, by)


@pytest.mark.skipif(not torch.cuda.is_available(), reason='CUDA graphs need a GPU')
@pytest.mark.parametrize('compiled', [False, True])
@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_captured_decoding_in_bf16_equals_the_same_steps_unrecorded(block, attn, ffn, compiled):
    """Under bf16 autocast (sample.py's default on a GPU), at batch 2, the replayed graph gives the
    tokens of the same step run without a graph: the model's eager kernels, or the compiled ones."""
    import torch._dynamo
    torch._dynamo.reset()
    model = big_weights(build(tiny(block, attn, ffn), double=False)).cuda().eval()
    prompt = idx_batch(B=2, T=3).cuda()
    fn = torch.compile(model, dynamic=False) if compiled else model
    with torch.autocast('cuda', dtype=torch.bfloat16):
        want = torch.cat([prompt, *stream(model, prompt, 12, temperature=0, fixed=True, step=fn)], dim=1)
        step = CapturedStep(fn)
        got = torch.cat([prompt, *stream(model, prompt, 12, temperature=0, fixed=True, step=step)], dim=1)
    assert torch.equal(got, want) and step.records == 1


@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_when_a_captured_step_records_again(block, attn, ffn, monkeypatch):
    """CapturedStep's own decisions, on the CPU: the CUDA recording stood in for by a 'graph' whose
    replay runs the step on the tensors it was recorded with (what a real graph reads). Same cache,
    same batch: replayed, never recorded again; another batch size moves the buffers: recorded again.
    A stale graph would write into the old buffers and the tokens would differ from uncached ones."""
    def record(self, idx, cache):
        self.idx = idx.clone()
        self.graph = SimpleNamespace(replay=lambda c=cache, i=self.idx: setattr(self, 'logits', self.fn(i, cache=c)[0]))
        self.recorded_on, self.records = self._where(idx, cache), self.records + 1
    monkeypatch.setattr(CapturedStep, '_record', record)
    monkeypatch.setattr(torch.cuda, 'device', lambda device: contextlib.nullcontext())
    model = big_weights(build(tiny(block, attn, ffn, dconv_kernel=3))).eval()
    step, cache = CapturedStep(model), DecodeCache(model.config.n_layer, fixed=True)
    held = []  # every buffer the cache had stays allocated: a moved buffer cannot land where the old one was
    for B, T, seed, by, records in SEQUENCES:
        held += cache._state() if cache.step is not None else []
        prompt = idx_batch(B=B, T=T, seed=seed)
        want = generate(model, prompt, 8, temperature=0, use_cache=False)
        got = torch.cat([prompt, *stream(model, prompt, 8, temperature=0, fixed=True, step=step if by else None, cache=cache)],
                        dim=1)
        assert torch.equal(got, want) and step.records == records, (B, T, by)


def test_a_captured_step_needs_a_fixed_cache_that_holds_a_prompt():
    model = build(tiny())
    with pytest.raises(ValueError, match='fixed=True'):
        CapturedStep(model)(idx_batch(B=1, T=1), cache=DecodeCache(2))
    with pytest.raises(ValueError, match='holds a prompt'):
        CapturedStep(model)(idx_batch(B=1, T=1), cache=DecodeCache(2, fixed=True))


@pytest.mark.parametrize('block,attn,ffn,pos', [(*c, p) for c in COMBOS for p in positions(c[0])])
def test_the_one_token_step_makes_no_tensor_from_python_data(block, attn, ffn, pos):
    """A tensor built from Python data inside the step (x[:, [-1]]'s index, torch.tensor(...)) is, on a
    GPU, a host-to-device copy: a CUDA graph cannot record it (CapturedStep's capture fails). Traced
    on the CPU, the fixed-shape one-token step holds none (aten.lift_fresh_copy) and reads no value
    back into Python, for every block."""
    from torch.fx.experimental.proxy_tensor import make_fx
    model = build(tiny(block, attn, ffn, pos_emb=pos)).eval()
    cache = DecodeCache(model.config.n_layer, fixed=True)
    with torch.no_grad():
        model(idx_batch(B=1, T=3), cache=cache)
        graph = make_fx(lambda tok: model(tok, cache=cache)[0])(idx_batch(B=1, T=1))
    # ... nor a read of a tensor's value into Python (.item(), nonzero()): a sync, refused in a capture
    bad = ('lift_fresh', '_local_scalar_dense', 'nonzero')
    made = [str(n.target) for n in graph.graph.nodes if n.op == 'call_function' and any(b in str(n.target) for b in bad)]
    assert not made, made


@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_saved_cache_state_undoes_a_step(block, attn, ffn):
    """CapturedStep's warm-up calls run a step and load the saved state back: decoding then goes on
    exactly as without them (MDHA's conv tail included: it is state, not a position's row)."""
    model = build(tiny(block, attn, ffn, dconv_kernel=3)).eval()
    idx = idx_batch(B=2, T=9)
    want, got = DecodeCache(2, fixed=True), DecodeCache(2, fixed=True)
    with torch.no_grad():
        model(idx[:, :4], cache=want)
        model(idx[:, :4], cache=got)
        saved = got.save()
        for _ in range(3):  # a warm-up that writes row 4 and shifts the tail, then undone
            model(idx[:, 7:8], cache=got)
            got.load(saved)
        for t in range(4, 9):
            a, _ = model(idx[:, t:t + 1], cache=want)
            b, _ = model(idx[:, t:t + 1], cache=got)
            assert torch.equal(a, b), t
    assert torch.equal(got.step, want.step) and all(torch.equal(x, y) for x, y in zip(got.save(), want.save()))


# -----------------------------------------------------------------------------
# count_flops against the FLOPs torch counts in the model's own matmuls

def counted_flops(cfg, B=2):
    """torch's count (FlopCounterMode) of one training step's matmul FLOPs per token at block_size:
    forward and backward, attention through SDPA's math backend (whose matmuls it counts)."""
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.utils.flop_counter import FlopCounterMode
    model = build(cfg, double=False)
    x = torch.randint(0, cfg.vocab_size, (B, cfg.block_size))
    with sdpa_kernel(SDPBackend.MATH), FlopCounterMode(display=False) as counter:
        model(x, x)[1].backward()
    return counter.get_total_flops() / (B * cfg.block_size)


@pytest.mark.parametrize('block,attn,ffn', COMBOS, ids=['-'.join(c) for c in COMBOS])
@pytest.mark.parametrize('pos', ['learned', 'rope'])
def test_count_flops_equals_the_flops_torch_counts_in_the_model(block, attn, ffn, pos):
    """The hand formula behind max_flops budgets and MFU equals torch's count of the model's matmuls, for
    every block (a new one's too: COMBOS follows model.py's lists) and every config in configs/. The one
    term torch does not count is MDHA's depth-wise conv (elementwise, in CausalConv): the formula's
    2 x 3C x K per token and layer, x 3 for forward and backward, is taken out before comparing."""
    if block == 'gmlp' and pos == 'rope':
        pytest.skip('gmlp has no attention to rotate')
    cfg = tiny(block, attn, ffn, pos_emb=pos)
    conv = 3 * cfg.n_layer * 2 * 3 * cfg.n_embd * cfg.dconv_kernel if attn == 'mdha' else 0
    assert counted_flops(cfg) == count_flops(cfg) - conv, (block, attn, ffn)


def test_count_flops_equals_torchs_count_for_every_config():
    from configurator import parse_config
    from train import TrainConfig
    for path in sorted(glob.glob(os.path.join(HERE, 'configs', '[!_]*.py'))):
        cfg = GPTConfig(**parse_config(TrainConfig, [path, '--n_layer=2', '--n_embd=64', '--n_head=2',
                                                     '--block_size=32', '--vocab_size=64']).model_args())
        conv = 3 * cfg.n_layer * 2 * 3 * cfg.n_embd * cfg.dconv_kernel if cfg.attn == 'mdha' else 0
        assert counted_flops(cfg) == count_flops(cfg) - conv, path


# -----------------------------------------------------------------------------
# every config in configs/ and every value of every GPTConfig field: shapes, causality and cached
# decoding, built from the flags themselves. A new field (qk_norm, say) is tested at its values and a
# new config file at its own settings, with no edit here; `-k NAME` selects them by the config's file
# name (-k gpt_qknorm) or the field's (-k qk_norm).

CONFIG_FILES = sorted(glob.glob(os.path.join(HERE, 'configs', '[!_]*.py')))  # the _recipes are parts, not configs
# a config at tiny size: its own flags at these sizes; a width it leaves at 0 (auto in GPTConfig) stays auto
SHRINK = {**TINY, 'ffn_hidden': 32}
AUTO = {f.name for f in dataclasses.fields(GPTConfig) if f.default == 0}  # ffn_hidden, gmlp_d_ffn
# the models a field's value is tried on, in this order: it is tested on the first one GPTConfig takes it on
# and it changes (one model per value keeps these tests to seconds): the token mixers, then the llama block
# (rotary positions, RMSNorm, a gated FFN) for values that act only there (rope_base, bias_gate)
BASES = {**{'/'.join(m): tiny(*m) for m in MIXERS},
         'transformer/mha/swiglu/rope/rmsnorm': tiny(ffn='swiglu', pos_emb='rope', norm='rmsnorm')}
# the values of a field that field_values cannot derive (a str that __post_init__ does not check against
# a list, a type other than bool, str, int and float), or that act only with another flag no base has:
# field name -> its settings, each a value or a dict of fields (the value and the flags it needs)
VALUES = {}


def field_values(f):
    """The settings of GPTConfig's field `f` to test, each a tuple of (field, value) pairs: a bool's other
    value; a str's every value but the default, from the list __post_init__ names when it refuses an unknown
    one; an int's or a float's first of a few values near the tiny size's that a base takes. Where none can
    be derived, a sentence saying so in their place: the tests fail with it."""
    name, default = f.name, f.default
    ask = (f"add its settings to VALUES in test_model.py (a value, or a dict with the flags it needs), and the "
           f"tests of shapes, causality and cached decoding run at them")
    if name in VALUES:
        return [tuple(v.items()) if isinstance(v, dict) else ((name, v),) for v in VALUES[name]]
    if isinstance(default, bool):
        return [((name, not default),)]
    if isinstance(default, str):
        try:
            GPTConfig(**{name: '\0not a value'})
        except ValueError as e:
            listed = re.fullmatch(rf"unknown {name} .*; choose one of (.*)", str(e))
            if listed:  # as model.py writes them: '' as ''
                allowed = ['' if v == "''" else v for v in listed.group(1).split(', ')]
                return [((name, v),) for v in allowed if v != default]
        return [f"GPTConfig.{name} is a str that __post_init__ does not check against a list of allowed values, "
                f"so its values cannot be derived: refuse an unknown one there as the other fields do, or {ask}"]
    if isinstance(default, (int, float)):
        b = TINY.get(name, default)
        if isinstance(default, float):
            near = [2 * b, b / 2] if b else [0.1, 0.5]
        else:  # 0: auto, a width (ffn_hidden)
            near = [2 * b, b + 1, b // 2, b - 1] if b else [2 * TINY['n_embd'], 1]
        for v in near:
            if v not in (default, b) and any(takes(base, ((name, v),)) for base in BASES.values()):
                return [((name, v),)]
        return [f"GPTConfig.{name}: no model in BASES takes any of {near}: {ask}"]
    return [f"GPTConfig.{name} is a {type(default).__name__}, whose values cannot be derived: {ask}"]


def takes(base, setting):
    """base with the setting, or None where GPTConfig refuses the combination."""
    try:
        return GPTConfig(**{**dataclasses.asdict(base), **dict(setting)})
    except ValueError:
        return None


def shown(setting):
    return ','.join(f"{k}={v}" for k, v in setting)


CASES = ([pytest.param(p, id=os.path.basename(p)[:-3]) for p in CONFIG_FILES]
         + [pytest.param(s, id=f"{f.name}=?" if isinstance(s, str) else shown(s))
            for f in dataclasses.fields(GPTConfig) for s in field_values(f)])


@functools.lru_cache(maxsize=None)
def fingerprint(items):
    """What the config of these (field, value) items builds: its parameters' names, shapes and (seeded)
    values, and its outputs on one batch from one seed, in training mode (so that dropout counts)."""
    model = build(GPTConfig(**dict(items)))
    torch.manual_seed(0)
    out = model.train()(idx_batch(), idx_batch())[0]
    return [(k, v.shape) for k, v in model.state_dict().items()], list(model.state_dict().values()), out


def changes(base, cfg):
    """Whether cfg builds another model than base: another parameter, or other outputs."""
    (na, pa, ya), (nb, pb, yb) = (fingerprint(tuple(vars(c).items())) for c in (base, cfg))
    return na != nb or not all(map(torch.equal, pa, pb)) or not torch.equal(ya, yb)


@functools.lru_cache(maxsize=None)
def resolve(case):
    """(label, GPTConfig) of a case: a config file with SHRINK's sizes, or a field's setting on the first
    model of BASES that GPTConfig takes it on and that it changes; else the sentence of what to do (str)."""
    if isinstance(case, str) and not case.endswith('.py'):
        return case  # a field whose values field_values cannot derive
    if isinstance(case, str):
        from configurator import parse_config
        from train import TrainConfig
        args, rel = parse_config(TrainConfig, [case]).model_args(), os.path.relpath(case, HERE)
        try:
            return rel, GPTConfig(**{**args, **{k: v for k, v in SHRINK.items() if args[k] or k not in AUTO}})
        except ValueError as e:
            return f"{rel} at test_model.py's SHRINK sizes is refused ({e}): give SHRINK sizes its flags take"
    for label, base in BASES.items():
        if (cfg := takes(base, case)) is not None and changes(base, cfg):
            return f"{shown(case)} on {label}", cfg
    return (f"{shown(case)} is refused by GPTConfig, or changes nothing, on every model in test_model.py's BASES "
            f"({'; '.join(BASES)}), so no test runs at it: give it a setting in VALUES with the flags it needs")


def case_config(case):
    got = resolve(case)
    if isinstance(got, str):
        pytest.fail(got, pytrace=False)
    return got


@pytest.mark.parametrize('case', CASES)
def test_each_config_and_flag_value_has_shapes_and_finite_gradients(case):
    label, cfg = case_config(case)
    model = build(cfg, double=False)
    idx = idx_batch()
    logits, loss = model(idx, idx_batch(seed=2))  # targets unrelated to the inputs: near uniform at init
    assert logits.shape == (3, 12, cfg.vocab_size), label
    assert torch.isfinite(loss) and abs(loss.item() - math.log(cfg.vocab_size)) < 0.5, label
    loss.backward()
    bad = [n for n, p in model.named_parameters() if p.grad is None or not torch.isfinite(p.grad).all()]
    assert not bad, f"{label}: no finite gradient for {bad}"
    assert model(idx)[0].shape == (3, 1, cfg.vocab_size), label


@pytest.mark.parametrize('case', CASES)
def test_each_config_and_flag_value_is_causal_in_eval_and_in_training(case):
    """Changing token 6 leaves every output before it unchanged and changes output 6: in eval mode, and in a
    training forward with the same dropout masks (dropout on where the config or the value sets it)."""
    label, cfg = case_config(case)
    t, idx = 6, idx_batch()
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    model = build(cfg).eval()
    a, b = model(idx, idx)[0], model(changed, changed)[0]
    assert torch.allclose(a[:, :t], b[:, :t], atol=1e-12, rtol=0), f"{label}: a later token changes earlier outputs"
    assert (a[:, t] - b[:, t]).abs().max() > 1e-6, label
    model.train()
    outputs = []
    for x in (idx, changed, idx):
        torch.manual_seed(5)
        outputs.append(model(x, x)[0])
    a, b, again = outputs
    assert torch.equal(a, again), label  # the same masks
    assert torch.allclose(a[:, :t], b[:, :t], atol=1e-12, rtol=0), \
        f"{label}: in a training forward (dropout={cfg.dropout}) a later token changes earlier outputs"
    if cfg.dropout:
        torch.manual_seed(6)
        assert not torch.allclose(model(idx, idx)[0], a), label  # dropout is really on


@pytest.mark.parametrize('case', CASES)
def test_each_config_and_flag_value_decodes_with_a_cache_as_without(case):
    """With either cache, a prefill, one token, another and a chunk to the last position give the full
    forward's logits; greedy generation to past block_size (12 + 6 > 16) gives the uncached tokens."""
    label, cfg = case_config(case)
    model = big_weights(build(cfg)).eval()
    idx, prompt = idx_batch(T=16), idx_batch(B=2, T=12)
    full, _ = model(idx, idx)
    slow = generate(model, prompt, 6, temperature=0, use_cache=False)
    for fixed in (False, True):
        cache = DecodeCache(cfg.n_layer, fixed=fixed)
        got = torch.cat([model(idx[:, a:b], idx[:, a:b], cache=cache)[0]
                         for a, b in [(0, 5), (5, 6), (6, 7), (7, 15), (15, 16)]], dim=1)
        assert torch.allclose(got, full, atol=1e-10), f"{label}, fixed={fixed}: cached logits differ from full ones"
        fast = generate(model, prompt, 6, temperature=0, use_cache=True, fixed=fixed)
        assert torch.equal(fast, slow), f"{label}, fixed={fixed}: cached greedy tokens differ from uncached ones"
