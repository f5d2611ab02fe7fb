# GPT-2 block with rotary positions instead of its learned table: an ablation, not a paper's model.
# llama differs from gpt in three things (RMSNorm, rotary positions, SwiGLU); this config changes
# only the positions, so RESULTS.md can say how much of llama's lead is its positions.
# parameters: 0.85M (get_num_params() at vocab_size=256, data/stdlib_byte)
#   +0.0% vs gpt: ffn hidden 544, chosen by model.matched_width
#   the MLP widened to give back the wpe table's parameters (match_params='gpt')
#   python prepare.py --dataset=stdlib && python train.py configs/gpt_rope.py

from _recipe import *  # noqa: F403 (configs/_recipe.py: the recipe every architecture shares)

out_dir = 'out-gpt_rope'
learning_rate = 4e-3  # the best of RESULTS.md §2's grid at this shape (1e-3 ... 1.6e-2)
min_lr = 4e-4  # learning_rate / 10

pos_emb = 'rope'  # rotary positions (arXiv:2104.09864) on q and k; no wpe table
match_params = 'gpt'  # width (ffn_hidden / gmlp_d_ffn) picked so parameters equal gpt's at this shape
