# gMLP (arXiv:2105.08050): channel MLP with a causal spatial gating unit, no attention.
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   -0.3% vs gpt: d_ffn 720, chosen by model.matched_width
#   python prepare.py --dataset=stdlib && python train.py configs/gmlp.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-gmlp'
learning_rate = 8e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 8e-4  # learning_rate / 10

block = 'gmlp'
pos_emb = 'none'  # the SGU's spatial weights know positions (paper sec. 2)
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
