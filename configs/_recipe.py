# The recipe every architecture config shares: nanoGPT's char-level CPU recipe exactly
# (config/train_shakespeare_char.py with its README's CPU overrides: 4 layers, 4 heads, 128 wide,
# block 64, batch 12, 2000 iterations; bias=False as its train.py), on data/pydoc_char.
# An architecture config starts with `from _recipe import *` and states only what makes it that
# architecture; change a line here and every architecture trains the new recipe.

data_dir = 'data/pydoc_char'  # what a plain `python prepare.py` writes
eval_interval = 250
eval_iters = 200
log_interval = 10
always_save_checkpoint = False  # at evals save only when val loss improves; the final state is always saved

gradient_accumulation_steps = 1
batch_size = 12
block_size = 64  # context of up to 64 previous characters

n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
bias = False  # nanoGPT's train.py default, and the GLU-variants paper's: no biases anywhere

learning_rate = 1e-3  # a small model can take a high rate
max_iters = 2000
lr_decay_iters = 2000  # usually equal to max_iters
min_lr = 1e-4  # learning_rate / 10
beta2 = 0.99  # a bit higher: few tokens per iteration
warmup_iters = 100
weight_decay = 0.1
grad_clip = 1.0

compile = False  # on CPU torch.compile costs more than it saves at this size
