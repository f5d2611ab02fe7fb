"""
model.py's properties, on CPU in seconds: shapes, causality, paper formulas written out plainly,
parameter parity, cached decoding equal to full decoding, overfitting, and config errors.
"""
import math

import pytest
import torch
from torch.nn import functional as F

from model import (ATTNS, FFNS, GATED, GPT, CausalConv, CausalDepthwiseConv, DecodeCache, GPTConfig,
                   SpatialGatingUnit, extend, ffn_width, sample_next)

# every block / attn / ffn combination the config accepts
COMBOS = ([('transformer', attn, ffn) for attn in ATTNS for ffn in FFNS]
          + [('gmlp', 'mha', 'gelu'), ('amlp', 'mha', 'gelu')])
MIXERS = [('transformer', 'mha', 'gelu'), ('transformer', 'mdha', 'relu2'),
          ('gmlp', 'mha', 'gelu'), ('amlp', 'mha', 'gelu')]
VOCAB = 13


def tiny(block='transformer', attn='mha', ffn='gelu', **kw):
    args = dict(block_size=16, vocab_size=VOCAB, n_layer=2, n_head=2, n_embd=16, block=block,
                attn=attn, ffn=ffn, ffn_multiple_of=8, gmlp_d_ffn=32, tiny_attn_size=8)
    args.update(kw)
    return GPTConfig(**args)


def build(cfg, seed=0, double=True):
    torch.manual_seed(seed)
    model = GPT(cfg)
    return model.double() if double else model


def idx_batch(B=3, T=12, seed=1):
    return torch.randint(0, VOCAB, (B, T), generator=torch.Generator().manual_seed(seed))


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


@pytest.mark.parametrize('block,attn,ffn', MIXERS + [('transformer', 'mdha', 'swiglu')])
@pytest.mark.parametrize('t', [0, 5, 11])
def test_causality(block, attn, ffn, t):
    """Changing token t leaves every output before t unchanged, and does change output t."""
    model = build(tiny(block, attn, ffn, dconv_kernel=4)).eval()
    idx = idx_batch()
    changed = idx.clone()
    changed[:, t] = (changed[:, t] + 1) % VOCAB
    a, _ = model(idx, idx)
    b, _ = model(changed, changed)
    assert torch.allclose(a[:, :t], b[:, :t], atol=1e-12, rtol=0)
    assert (a[:, t] - b[:, t]).abs().max() > 1e-6


@pytest.mark.parametrize('block', ['transformer', 'gmlp', 'amlp'])
def test_causality_with_dropout_and_no_position_embeddings(block):
    """In training mode, with the same dropout masks, a change at t=7 still leaves outputs before 7 alone."""
    model = build(tiny(block, pos_emb=False, dropout=0.2)).train()
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


@pytest.mark.parametrize('ffn', GATED + ('relu', 'gelu', 'relu2'))
def test_ffn_equals_its_formula(ffn):
    """Gated: act(x W1 + b1) ⊙ (x V + c) then W2 + b2 (arXiv:2002.05202); ungated act(x W1 + b1) W2 + b2."""
    model = build(tiny(ffn=ffn))
    mlp = model.transformer.h[0].mlp
    with torch.no_grad():
        for p in mlp.parameters():
            p.normal_()  # biases too, so a missing bias would show
    x = torch.randn(2, 5, 16, dtype=torch.float64)
    W1, b1, W2, b2 = mlp.c_fc.weight, mlp.c_fc.bias, mlp.c_proj.weight, mlp.c_proj.bias
    a = x @ W1.T + b1
    act = {'relu': torch.relu(a), 'gelu': 0.5 * a * (1 + torch.erf(a / math.sqrt(2))),
           'relu2': torch.relu(a) ** 2, 'glu': 1 / (1 + torch.exp(-a)), 'bilinear': a,
           'reglu': torch.relu(a), 'geglu': 0.5 * a * (1 + torch.erf(a / math.sqrt(2))),
           'swiglu': a / (1 + torch.exp(-a))}[ffn]
    if ffn in GATED:
        act = act * (x @ mlp.c_gate.weight.T + mlp.c_gate.bias)
    else:
        assert mlp.c_gate is None
    assert torch.allclose(mlp(x), act @ W2.T + b2, atol=1e-10)


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
        return sum(p.numel() for p in GPT(GPTConfig(**{**cfg.__dict__, 'n_layer': 1})).transformer.h[0].mlp.parameters())
    base, gated = ffn_params('gelu'), ffn_params(ffn)
    assert ffn_width(GPTConfig(ffn=ffn)) == 2048
    assert abs(gated - base) / base < 0.02


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


@pytest.mark.parametrize('shared', [False, True])
@pytest.mark.parametrize('block,attn,ffn', MIXERS)
def test_cached_forward_equals_full_forward(block, attn, ffn, shared):
    """Prefill a chunk, then one token, then another chunk: logits equal the full forward's."""
    model = build(tiny(block, attn, ffn, dconv_shared=shared)).eval()
    idx = idx_batch(T=14)
    full, _ = model(idx, idx)
    cache = DecodeCache(model.config.n_layer)
    got = []
    for a, b in [(0, 5), (5, 6), (6, 7), (7, 14)]:
        logits, _ = model(idx[:, a:b], idx[:, a:b], cache=cache)
        got.append(logits)
    assert cache.pos == 14
    assert torch.allclose(torch.cat(got, dim=1), full, atol=1e-10)


def test_extend_keeps_the_whole_history_while_its_buffer_grows():
    cache, parts = {}, []
    for n in (1, 5, 1, 1, 20, 3, 1, 40):  # past the first buffer (16) and several doublings
        new = torch.randn(2, n, 3)
        parts.append(new)
        got = extend(cache, 'x', new, dim=1)
        assert torch.equal(got, torch.cat(parts, dim=1))
    assert extend(None, 'x', new, dim=1) is new


@pytest.mark.parametrize('block,attn,ffn', COMBOS)
def test_cached_generate_equals_uncached_greedy(block, attn, ffn):
    """Token for token, including past block_size where the window slides (16 + 30 > 16)."""
    model = build(tiny(block, attn, ffn)).eval()
    with torch.no_grad():  # large random weights: input-sensitive, no near-tie greedy choices
        for p in model.parameters():
            p.normal_(0, 0.5)
    prompt = idx_batch(B=4, T=5)
    fast = model.generate(prompt, 30, temperature=0, use_cache=True)
    slow = model.generate(prompt, 30, temperature=0, use_cache=False)
    assert fast.shape == (4, 35)
    assert torch.equal(fast, slow)  # logits themselves: test_cached_forward_equals_full_forward


def test_sampling_is_seeded_and_cache_independent():
    model = build(tiny('amlp')).eval()
    prompt = idx_batch(B=2, T=3)
    runs = [model.generate(prompt, 20, temperature=1.0, top_k=8, top_p=0.9, use_cache=c,
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


def test_param_count_excludes_position_embeddings():
    model = GPT(tiny())
    total = sum(p.numel() for p in model.parameters())
    assert model.get_num_params(non_embedding=False) == total
    assert model.get_num_params() == total - 16 * 16
