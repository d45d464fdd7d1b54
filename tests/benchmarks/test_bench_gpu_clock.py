"""bench_gpu.py's StepClock times the measured optimizer steps only.

On the H200 (issue 38) the clock ran until `Trainer.train` returned, so `ours` was charged for the final
checkpoint it writes after its last step (4 GB for BERT-large with its optimizer state, ~5 s against ~3 s of
steps) while the example scripts, which save nothing, were not: the ratio to hf-best was off by about 2x. A
Trainer whose run ends with a slow save and a slow on_train_end shows the same on CPU."""

from __future__ import annotations

import time

import torch
from transformers import Trainer, TrainerCallback, TrainingArguments

from benchmarks.bench_gpu import StepClock

SLOW = 1.0  # seconds spent after the last step; the measured steps take milliseconds


class Toy(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = torch.nn.Embedding(32, 8)
        self.out = torch.nn.Linear(8, 1)

    def forward(self, input_ids, attention_mask=None, labels=None):
        hidden = self.embed(input_ids).mean(1)
        loss = (self.out(hidden).squeeze(-1) - labels.float()).pow(2).mean()
        return {"loss": loss}


class SlowEnd(TrainerCallback):
    """A final save and end of training as slow as a large checkpoint."""

    def on_save(self, args, state, control, **kwargs):
        time.sleep(SLOW)

    def on_train_end(self, args, state, control, **kwargs):
        time.sleep(SLOW)


def test_the_clock_stops_at_the_last_measured_step_and_counts_its_rows(tmp_path):
    rows = [{"input_ids": torch.tensor([1 + i % 7, 2, 3, 4]), "attention_mask": torch.tensor([1, 1, 1, i % 2]),
             "labels": torch.tensor(i % 2)} for i in range(64)]
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=5, per_device_train_batch_size=4,
                             save_strategy="steps", save_steps=5, report_to="none", disable_tqdm=True,
                             use_cpu=True, logging_steps=5, train_sampling_strategy="sequential")
    trainer = Trainer(model=Toy(), args=args, train_dataset=rows, callbacks=[SlowEnd()])
    with StepClock(warmup=2, cuda=False) as clock:
        began = time.perf_counter()
        trainer.train()
        whole = time.perf_counter() - began
    result = clock.result
    assert whole > 2 * SLOW  # the save and the end did run, inside train()
    assert result["seconds"] < SLOW / 2, result  # ... and are not in the measured window
    assert result["steps"] == 3
    assert result["rows"] == 3 * 4 and result["processed"] == 3 * 4 * 4
    assert result["real"] == sum(float(r["attention_mask"].sum()) for r in rows[8:20])
    assert result["step_ms_median"] is not None and result["step_ms_median"] < 1000 * SLOW
    assert Trainer.train is clock._original  # restored on exit
