# Quick start on a CPU: a 4-layer, 128-wide GPT on the char-level pydoc corpus, about a minute on
# 2 cores, leaving out-quick/ckpt.pt for sample.py.
#   python prepare.py && python train.py configs/quick.py && python sample.py
# parameters: 0.81M (get_num_params() at vocab_size=103, data/pydoc_char of Python 3.11)

out_dir = 'out-quick'
data_dir = 'data/pydoc_char'  # what a plain `python prepare.py` writes
eval_interval = 250
eval_iters = 20
log_interval = 50
always_save_checkpoint = True

gradient_accumulation_steps = 1
batch_size = 12
block_size = 64

n_layer = 4
n_head = 4
n_embd = 128
dropout = 0.0
bias = False  # as every architecture config (nanoGPT's train.py default)

learning_rate = 1e-3
max_iters = 1500
lr_decay_iters = 1500
min_lr = 1e-4
beta2 = 0.99
warmup_iters = 50

device = 'cpu'  # the quick start is for any machine; drop this line to use a GPU
dtype = 'float32'
compile = False
