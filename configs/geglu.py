# GEGLU FFN (arXiv:2002.05202): gelu(x W) * (x V), then W2.
# parameters: 0.81M (get_num_params() at vocab_size=103, data/pydoc_char of Python 3.11)
#   -0.3% vs gpt: ffn hidden 340, chosen by model.matched_width
#   python train.py configs/geglu.py    (add --device=cpu to stay on the CPU)

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-geglu'

ffn = 'geglu'
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
