# The recipe every architecture config shares, and the one RESULTS.md §2's main table was trained with:
# Python's standard library as bytes (python prepare.py --dataset=stdlib: 28M train bytes of code, no
# download), a 256-byte context (5-10 lines of code: names defined in one line and used in another),
# 4 layers, 4 heads, 128 wide, 500 iterations of 8 x 256 = 1.02M bytes, AdamW, cosine to lr/10.
# An architecture config starts with `from _recipe import *` and states only what makes it that
# architecture (and its learning rate, the best of RESULTS.md §2's grid); change a line here and every
# architecture trains the new recipe.

data_dir = 'data/stdlib_byte'  # what `python prepare.py --dataset=stdlib` writes
eval_interval = 250
# 50 batches of 8 x 256: 102k bytes per split, drawn from eval_seed (one val set for every run), cheap enough
# for short runs. Measured (RESULTS.md §1a): a gap between two configs then has a val-sample standard error
# of about 0.01 nats per byte, which the report prints under its gap tables; the studies pass
# --eval_iters=200 (below 0.005)
eval_iters = 50
log_interval = 50
always_save_checkpoint = False  # at evals save only when val loss improves; the final state is always saved

gradient_accumulation_steps = 1
batch_size = 8
block_size = 256  # bytes of context

n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0  # one pass over a fraction of the data: nothing to regularise
bias = False  # nanoGPT's train.py default, and the GLU-variants paper's: no biases anywhere

learning_rate = 2e-3  # each architecture config sets its own: the best of RESULTS.md §2's grid for it
max_iters = 500
lr_decay_iters = 500  # usually equal to max_iters
min_lr = 2e-4  # learning_rate / 10
beta2 = 0.99  # a bit higher: few tokens per iteration
warmup_iters = 50
weight_decay = 0.1
grad_clip = 1.0

compile = False  # on CPU torch.compile costs more than it saves at this size
