"""The compiled BPE merge loop of the tokenizer reduce (bpe_merge.c); tokenizer_mr/native_merge.py loads it."""

from pathlib import Path

LIBRARY = Path(__file__).with_name("libbpe_merge.so")
