# GPT baseline: pre-norm transformer, multi-head attention, GELU MLP (GPT-2 block).
# parameters: 0.81M (get_num_params() at vocab_size=103, data/pydoc_char of Python 3.11)
#   every architecture config matches this count within 1% (match_params='gpt')
#   python train.py configs/gpt.py    (add --device=cpu to stay on the CPU)

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-gpt'
