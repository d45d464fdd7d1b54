"""What BPE learning builds, shared by bpe.py (steps 1-3: the vocabulary before any merge) and bpe_merge.py
(steps 4-5: the merge loop): the learner's settings (`BpeConfig`) and the vocabulary as it grows (`Tokens`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class BpeConfig:
    vocab_size: int
    min_frequency: int = 0
    special_tokens: Sequence[str] = ()
    limit_alphabet: int | None = None
    initial_alphabet: Sequence[str] = ()
    continuing_subword_prefix: str | None = None
    end_of_word_suffix: str | None = None



class Tokens:
    """Token strings by id, and ids by string: adding an existing string returns its id (as tokenizers does)."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.strings: list[str] = []

    def __len__(self) -> int:
        return len(self.strings)

    def add(self, tok: str) -> int:
        idx = self.ids.get(tok)
        if idx is None:
            idx = len(self.strings)
            self.ids[tok] = idx
            self.strings.append(tok)
        return idx
