# GPT-2 124M on FineWeb, for GPUs: the recipe that compares the architecture configs at GPT-2 small's
# shape. It comes after an architecture config on the command line, so its keys win and the
# architecture's block stays (GUIDE.md §8: "GPUs: GPT-2 124M on FineWeb, and MFU").
#   python fineweb.py --train_shards=25                       # 2.5B train tokens (5 GB) and the val shard
#   torchrun --standalone --nproc_per_node=8 train.py configs/gmlp.py configs/_fineweb124m.py --out_dir=out-124m-gmlp
#   python sweep.py --recipe=configs/_fineweb124m.py --configs=gpt,llama,gmlp --hellaswag=hellaswag_val.jsonl
# 2.5B tokens is Chinchilla's 20 tokens per parameter: 4,768 iterations of 524,288 tokens, as nanoGPT's
# and llm.c's 124M runs batch them; lr, warmup and schedule are llm.c's GPT-2 124M ones.

data_dir = 'data/fineweb10B'  # what `python fineweb.py` writes
vocab_size = 50304  # GPT-2's 50,257 padded to a multiple of 64
block_size = 1024

n_layer = 12
n_head = 12
n_embd = 768
dropout = 0.0
bias = False

batch_size = 16  # sequences per GPU and micro-step: fits every block on an 80 GB GPU in bf16
gradient_accumulation_steps = 32  # 16 x 1024 x 32 = 524,288 tokens an iteration; torchrun divides the 32
learning_rate = 6e-4
min_lr = 6e-5
warmup_iters = 700
max_iters = 4768
lr_decay_iters = 4768
weight_decay = 0.1
beta1 = 0.9
beta2 = 0.95
grad_clip = 1.0

eval_interval = 250
eval_iters = 20  # x 16 x 1024 = 327,680 val tokens, the same ones each time
log_interval = 10
always_save_checkpoint = True

device = 'cuda'
dtype = 'bfloat16'
compile = True
