"""
#63 point 2 on one GPU, from the repository root: python results/gpu_mfu.py OUT (about 8 min).

How far gpt's MFU at GPT-2 124M (12 x 768, block 1024, micro-batch 12 of nanoGPT's 124M run, bf16,
compiled) moves with each lever, one at a time from that baseline, timed as bench.py times a step
(train.py's train_step: forward, backward, clipping, AdamW): the micro-batch; torch.compile off and
its modes; the SDPA backend; the cross-entropy over the 50k vocabulary in chunks (each chunk's
logits recomputed in the backward pass, so they never all live at once); MDHA's depth-wise
convolution (gpt with attn='mdha', and primer_ez). Then every block once with the best micro-batch
and backend found. One JSON line per variant in OUT/mfu.jsonl as it ends (a variant that fails, or
runs out of time, is a line with its error), the machine in OUT/machine.txt. Each variant runs in a
fresh process, the levers that matter most first (a compile mode's search is slowest: last); none
starts once DEADLINE_S (default 470) is near. SKIP=name,prefix,... leaves variants out (a second
window: SKIP=baseline,eager,chunked,micro,sdpa,attn,primer,compile runs the blocks alone). A lever
goes into train.py or model.py only if it pays here and parity with nanoGPT's numerics holds (the
chunked loss's difference from the full one is in its line).

--small: the same on the CPU at a toy size with compile's eager backend, a rehearsal of the script
itself (tests/test_bench.py runs it), so that a GPU window only measures.
"""
import contextlib
import json
import os
import re
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # the repository
sys.path.insert(0, HERE)

GPU = dict(shape=['--n_layer=12', '--n_head=12', '--n_embd=768', '--block_size=1024',
                  '--vocab_size=50304', '--batch_size=12', '--device=cuda', '--dtype=bfloat16'],
           micro=(8, 16, 24), backends=('flash', 'efficient', 'cudnn', 'math'),
           modes=('max-autotune-no-cudagraphs', 'reduce-overhead'), iters=10, repeats=3, warmup=3,
           blocks=('gpt', 'gpt_rope', 'llama', 'llama_gelu', 'llama_primer', 'primer_ez', 'swiglu',
                   'geglu', 'reglu', 'gmlp', 'amlp'), timeout=150)
SMALL = dict(shape=['--n_layer=2', '--n_head=2', '--n_embd=64', '--block_size=64',
                    '--vocab_size=512', '--batch_size=4', '--device=cpu', '--dtype=float32'],
             micro=(2, 8), backends=('flash', 'math', 'efficient'), modes=('eager',), iters=2,
             repeats=1, warmup=1, blocks=('gmlp',), timeout=120)


def plan(run):
    """The variants in the order a window runs them: each is {name, config, flags, compile, sdpa,
    chunks}; the blocks' come last, with the best micro-batch and backend (filled in by main)."""
    base = dict(config='gpt', flags=[], compile='default', sdpa='', chunks=0)
    skip = tuple(s for s in os.environ.get('SKIP', '').split(',') if s)
    return [v for v in (
        [dict(base, name='baseline'), dict(base, name='eager', compile='')]
        + [dict(base, name=f'chunked_ce={c}', chunks=c) for c in (4, 16)]
        + [dict(base, name=f'micro_batch={m}', flags=[f'--batch_size={m}']) for m in run['micro']]
        + [dict(base, name=f'sdpa={b}', sdpa=b) for b in run['backends']]
        + [dict(base, name='attn=mdha', flags=['--attn=mdha']),
           dict(base, name='primer_ez', config='primer_ez')]
        + [dict(base, name=f'compile={m}', compile=m) for m in run['modes']])
        if not v['name'].startswith(skip)]


def chunked_forward(model, chunks):
    """model.forward with the training loss computed over `chunks` chunks of positions, each
    chunk's logits recomputed in the backward pass (torch.utils.checkpoint): the trunk is
    GPT.forward's own (its output taken at ln_f), the loss the same mean cross-entropy."""
    import torch
    import torch.nn.functional as F
    import torch.utils.checkpoint
    from model import GPT

    def piece(x, y):
        return F.cross_entropy(model.lm_head(x).float(), y, ignore_index=-1, reduction='sum')

    def forward(idx, targets=None, cache=None):
        if targets is None:
            return GPT.forward(model, idx, None, cache)
        out = {}
        hook = model.transformer.ln_f.register_forward_hook(lambda m, i, o: out.update(x=o))
        try:
            GPT.forward(model, idx)  # (its one last-position logit row is not used)
        finally:
            hook.remove()
        x, y = out['x'].flatten(0, 1), targets.reshape(-1)
        total = sum(torch.utils.checkpoint.checkpoint(piece, xc, yc, use_reentrant=False)
                    for xc, yc in zip(x.chunk(chunks), y.chunk(chunks)))
        return None, total / (y != -1).sum()
    return forward


def measure(variant, run, small):
    """One variant's line, measured in this process: bench.py's setup and step, the lever on."""
    import torch
    import bench
    from model import GPT
    cfg, device, device_type, dtype, mcfg, ctx, scaler = bench.setup(
        os.path.join(HERE, 'configs', f"{variant['config']}.py"), run['shape'] + variant['flags'])
    torch.manual_seed(0)
    model = GPT(mcfg).to(device)
    x = torch.randint(0, mcfg.vocab_size, (cfg.batch_size, mcfg.block_size + 1), device=device)
    x, y = x[:, :-1], x[:, 1:]
    line = {}
    if variant['chunks']:  # the same loss as the full cross-entropy's, before anything trains
        with torch.no_grad(), ctx:
            full = model(x, y)[1].float().item()
            model.forward = chunked_forward(model, variant['chunks'])
            line['loss_diff'] = abs(model(x, y)[1].float().item() - full)
    opt = model.configure_optimizers(cfg.weight_decay, 1e-3, (cfg.beta1, cfg.beta2), device_type,
                                     cfg.optimizer)
    if variant['compile']:
        kw = (dict(backend='eager') if small or variant['compile'] == 'eager' else
              {} if variant['compile'] == 'default' else dict(mode=variant['compile']))
        model = torch.compile(model, **kw)
    sdpa = contextlib.nullcontext()
    if variant['sdpa']:
        from torch.nn.attention import SDPBackend, sdpa_kernel
        sdpa = sdpa_kernel(getattr(SDPBackend, {'flash': 'FLASH_ATTENTION', 'efficient':
                                                'EFFICIENT_ATTENTION', 'cudnn': 'CUDNN_ATTENTION',
                                                'math': 'MATH'}[variant['sdpa']]))
    with sdpa:
        def step():
            bench.one_step(model, x, y, ctx, scaler, opt, cfg.grad_clip)
        for _ in range(run['warmup']):
            step()
        times = [bench.timed_round(step, run['iters'], device_type) for _ in range(run['repeats'])]
    dt, ms_range = bench.median_and_range(times)
    tokens_per_s = cfg.batch_size * mcfg.block_size / dt
    raw = model._orig_mod if hasattr(model, '_orig_mod') else model
    peak = bench.peak_flops(device, cfg.peak_flops, dtype)
    return dict(line, ms_per_iter=dt * 1000, ms_range=ms_range, tokens_per_s=tokens_per_s,
                mfu=raw.estimate_mfu(tokens_per_s, peak),
                peak_mem_gb=torch.cuda.max_memory_allocated() / 2 ** 30
                if device_type == 'cuda' else None, setup=bench.setup_text(cfg, device, dtype))


def main(out, small):
    run = SMALL if small else GPU
    os.makedirs(out, exist_ok=True)
    deadline = time.time() + float(os.environ.get('DEADLINE_S', 470))
    with open(os.path.join(out, 'machine.txt'), 'w') as f:
        import torch
        f.write(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}\ntorch {torch.__version__}"
                f"\n{torch.cuda.get_device_name() if torch.cuda.is_available() else 'cpu'}\n")
    lines, todo = [], plan(run)
    while todo:
        variant = todo.pop(0)
        if variant['name'] == 'blocks':  # every block with the best micro-batch and backend
            todo = [dict(variant, name=f'block={b}', config=b) for b in run['blocks']]
            continue
        left = deadline - time.time()
        if left < 20:
            line = dict(variant, error=f"not started: {left:.0f} s left before DEADLINE_S")
        else:
            try:
                proc = subprocess.run([sys.executable, __file__, '--child', json.dumps(variant)]
                                      + (['--small'] if small else []), capture_output=True,
                                      text=True, timeout=min(run['timeout'], left), cwd=HERE)
                got = proc.stdout.strip().splitlines()
                line = dict(variant, **(json.loads(got[-1]) if proc.returncode == 0 and got else
                                        {'error': (proc.stderr.strip().splitlines() or
                                                   [f'exit {proc.returncode}'])[-1][:300]}))
            except subprocess.TimeoutExpired:
                line = dict(variant, error=f"ran past its {min(run['timeout'], left):.0f} s")
        lines.append(line)
        with open(os.path.join(out, 'mfu.jsonl'), 'a') as f:
            f.write(json.dumps(line) + '\n')
        mfu = line.get('mfu') and f", MFU {line['mfu']:.1%}"
        print(f"{line['name']}: " + (line['error'] if 'error' in line else
                                     f"{line['ms_per_iter']:.1f} ms/iter, "
                                     f"{line['tokens_per_s']:,.0f} tok/s{mfu or ''}"), flush=True)
        if not todo and not any(x['name'].startswith('block=') for x in lines):
            todo = [best_blocks(lines)]


def best_blocks(lines):
    """The blocks' variant: the micro-batch and the SDPA backend of the fastest line of each lever
    (the baseline's where none ran faster)."""
    ok = [x for x in lines if 'error' not in x]
    best = {}
    for lever in ('micro_batch=', 'sdpa='):
        ran = [x for x in ok if x['name'].startswith(lever) or x['name'] == 'baseline']
        best[lever] = max(ran, key=lambda x: x['tokens_per_s'], default=None)
    top = best['micro_batch='] or {}
    return dict(name='blocks', flags=list(top.get('flags', [])), compile='default',
                sdpa=(best['sdpa='] or {}).get('sdpa', ''), chunks=0)


if __name__ == '__main__':
    args = sys.argv[1:]
    small = '--small' in args or os.environ.get('SMALL') == '1'
    if '--child' in args:  # one variant: its line, or its error's first line
        try:
            line = measure(json.loads(args[args.index('--child') + 1]), SMALL if small else GPU,
                           small)
        except Exception as e:  # torch.compile's wrapper names the kernel's own error inside
            own = re.search(r"got (\w+)\('([^']+)", str(e))
            line = {'error': f"{own[1]}: {own[2]}" if own else
                    f"{type(e).__name__}: {(str(e).strip().splitlines() or [''])[0]}"[:300]}
        print(json.dumps(line))
    else:
        paths = [a for a in args if not a.startswith('--')]
        if len(paths) != 1:
            sys.exit("usage: python results/gpu_mfu.py OUT_FOLDER [--small]")
        main(paths[0], small)
