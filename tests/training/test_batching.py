"""Batch shapes (hftrain/batching.py) and evaluation order under the length-grouped default."""

from __future__ import annotations

import datasets
import torch
from hftrain import batching, runner
from transformers import Trainer, TrainingArguments


def _dataset(lengths):
    return datasets.Dataset.from_dict({"input_ids": [[1] * n for n in lengths], "row": list(range(len(lengths)))})


def test_row_lengths_read_arrow_and_follow_a_selection():
    ds = _dataset([3, 1, 5, 2, 5])
    assert batching.row_lengths(ds) == [3, 1, 5, 2, 5]
    assert batching.row_lengths(ds.select([4, 1, 0])) == [5, 1, 3]


def test_longest_first_is_a_stable_descending_order():
    ds = _dataset([3, 1, 5, 2, 5])
    assert batching.longest_first(ds)["row"][:] == [2, 4, 0, 3, 1]
    already = _dataset([4, 4, 2])
    assert batching.longest_first(already) is already


def test_evaluation_keeps_feature_order_under_group_by_length(tmp_path):
    """transformers 5.3 evaluates in a random LengthGroupedSampler order when train_sampling_strategy is
    group_by_length (our default); the runner's Trainer evaluates in feature order instead, so predictions line
    up with the features that QA post-processing reads."""
    ds = _dataset([(i * 7) % 23 + 1 for i in range(40)])
    args = TrainingArguments(output_dir=str(tmp_path), train_sampling_strategy="group_by_length", use_cpu=True,
                             report_to="none")
    model = torch.nn.Linear(1, 1)
    stock = Trainer(model=model, args=args)._get_eval_sampler(ds)
    assert list(stock) != list(range(40))  # the library's behaviour this guards against
    ours = runner.make_trainer_class(Trainer)(model=model, args=args)._get_eval_sampler(ds)
    assert list(ours) == list(range(40))
