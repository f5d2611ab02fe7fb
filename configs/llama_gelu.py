# The llama block with GPT-2's GELU MLP in place of SwiGLU: the GLU question asked on today's
# baseline (RMSNorm, rotary positions, no biases) instead of on GPT-2's block.
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   +0.0% vs gpt: ffn hidden 544, chosen by model.matched_width
#   the MLP widened to give back the wpe table's parameters (match_params='gpt')
#   python prepare.py --dataset=stdlib && python train.py configs/llama_gelu.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-llama_gelu'
learning_rate = 4e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 8e-3)
min_lr = 4e-4  # learning_rate / 10

norm = 'rmsnorm'
pos_emb = 'rope'  # rotary positions (arXiv:2104.09864) on q and k; no wpe table
ffn = 'gelu'
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
