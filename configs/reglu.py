# ReGLU FFN (arXiv:2002.05202): relu(x W) * (x V), then W2.
# parameters: 0.86M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   +0.5% vs gpt: ffn hidden 344, chosen by model.matched_width
#   python prepare.py --dataset=stdlib && python train.py configs/reglu.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-reglu'
learning_rate = 2e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 2e-4  # learning_rate / 10

ffn = 'reglu'
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
