"""Distributed tokenizer training: map (count words per shard) and reduce (learn the vocabulary from counts).

Shared by `tokenizer_map.py` and `tokenizer_reduce.py`; see docs/tokenizer.md.
"""
