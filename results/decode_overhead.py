"""Where a recorded decoding step's time goes (#47): GPT-2 124M, batch 1, greedy, on one GPU.
python results/decode_overhead.py OUT_FILE (COMPILE=1: the compiled model in the graph). Times, ms
per token over 300 tokens after a warm-up: the graph's replay alone, the step as stream() calls it,
and the whole stream() loop; with float32 weights under bf16 autocast (what sample.py does: the
casts are in the graph) and with the weights cast to bf16 once; then torch.profiler's top rows over
50 tokens of stream(). Without a GPU it rehearses itself at a tiny size on the CPU."""
import json, os, sys, time
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import torch
from model import GPT, GPTConfig, DecodeCache
from sample import CapturedStep, stream

out = open(sys.argv[1], 'w')
def say(**kw):
    print(json.dumps(kw), file=out, flush=True); print(kw, flush=True)
GPU = torch.cuda.is_available()  # without one, a rehearsal of this script at a tiny size
dev, sync = ('cuda', torch.cuda.synchronize) if GPU else ('cpu', lambda: None)
say(gpu=torch.cuda.get_device_name() if GPU else 'none', torch=torch.__version__)
torch.manual_seed(0)
shape = (dict(n_layer=12, n_head=12, n_embd=768, block_size=1024, vocab_size=50304) if GPU else
         dict(n_layer=1, n_head=2, n_embd=32, block_size=64, vocab_size=64))
base = GPT(GPTConfig(**shape)).to(dev).eval()
prompt = torch.zeros(1, 1, dtype=torch.long, device=dev)
N = 300 if GPU else 20
def ms(f, n):
    sync(); t0 = time.perf_counter(); f(n); sync()
    return 1000 * (time.perf_counter() - t0) / n
COMPILE = os.environ.get('COMPILE') == '1'  # the model compiled (no graphs of its own) in the graph
for weights in ('float32+autocast',) if COMPILE else ('float32+autocast', 'bfloat16'):
    model = base if weights != 'bfloat16' else base.to(torch.bfloat16)
    fn = torch.compile(model, dynamic=False) if COMPILE else model
    ctx = torch.autocast(dev, dtype=torch.bfloat16, enabled=weights != 'bfloat16')
    with torch.no_grad(), ctx:
        step = CapturedStep(fn) if GPU else None
        cache = DecodeCache(base.config.n_layer, fixed=True)
        list(stream(model, prompt, 8, temperature=0, fixed=True, step=step, cache=cache))  # records
        idx = torch.zeros(1, 1, dtype=torch.long, device=dev)
        replay = ms(lambda n: [step.graph.replay() for _ in range(n)], N) if GPU else None
        call = ms(lambda n: [(step or model)(idx, cache=cache) for _ in range(n)], N)
        cache.reset()
        loop = ms(lambda n: list(stream(model, prompt, n, temperature=0, fixed=True, step=step,
                                        cache=cache)), N)
        uncached = ms(lambda n: list(stream(model, prompt, n, temperature=0, use_cache=False)), 50)
        say(weights=weights, compiled=COMPILE, ms_replay=replay, ms_step_call=call, ms_stream=loop,
            ms_uncached=uncached, tok_s_stream=1000 / loop, records=step.records if GPU else None)
        if COMPILE:
            continue
        from torch.profiler import profile, ProfilerActivity
        cache.reset()
        with profile(activities=[ProfilerActivity.CPU] + [ProfilerActivity.CUDA] * GPU) as prof:
            list(stream(model, prompt, 50, temperature=0, fixed=True, step=step, cache=cache))
            sync()
        for key in ('self_cpu_time_total', 'device_time_total' if GPU else 'cpu_time_total'):
            t = prof.key_averages().table(sort_by=key, row_limit=15)
            t = f"== {weights}, sorted by {key}\n{t}"
            print(t); print(t, file=out, flush=True)
