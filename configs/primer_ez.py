# Primer EZ (arXiv:2109.08668): multi-DConv-head attention and squared-ReLU FFN.
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   -0.4% vs gpt: ffn hidden 504, chosen by model.matched_width
#   python prepare.py --dataset=stdlib && python train.py configs/primer_ez.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-primer_ez'
learning_rate = 4e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 4e-4  # learning_rate / 10

attn = 'mdha'  # depth-wise causal conv (width 3) after the q, k, v projections
ffn = 'relu2'  # relu(x)^2
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
