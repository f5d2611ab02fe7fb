# GPT baseline: pre-norm transformer, multi-head attention, GELU MLP (GPT-2 block).
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   every architecture config matches this count within 1% (match_params='gpt')
#   python prepare.py --dataset=stdlib && python train.py configs/gpt.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-gpt'
learning_rate = 4e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 4e-4  # learning_rate / 10
