"""The two evaluations a verdict needs, on the judged examples (the validation set's first `verdict_eval_samples`
rows, tokenized in their order): the model before its first step, and after training. Their per-example scores,
with the strongest trivial baseline's on the same rows, become the `verdict_*` metrics (scoring/judgement.py).

The evaluation before training runs when training begins (the model is wrapped for DDP/FSDP then, as for any
evaluation during training), only on a fresh start; its scores are kept in the checkpoint dir (restored with the
checkpoints after an interruption), so that a resumed attempt compares with the same untrained model.
"""

from __future__ import annotations

import json
import logging
import os

from transformers import TrainerCallback

from hftrain.scoring import baselines, judgement
from hftrain.stall import watchdog as stall

logger = logging.getLogger("hftrain")
PRETRAINED_FILE = "_verdict_pretrained.json"  # a run-level file: "_" like _history.json


class JudgedEvaluation(TrainerCallback):
    def __init__(self, *, task, raw, features, tokenizer, eval_kwargs: dict, checkpoint_dir: str, rank: int,
                 fresh: bool) -> None:
        self.task, self.raw, self.features, self.tokenizer = task, raw, features, tokenizer
        self.eval_kwargs, self.rank, self.fresh = eval_kwargs, rank, fresh
        self.path = os.path.join(checkpoint_dir, PRETRAINED_FILE)
        self.trainer = None  # set once the Trainer exists (runner.build_trainer)
        self.pretrained: list[float] | None = None
        self.pretrained_loss: float | None = None
        self.loss: float | None = None  # of the last evaluation

    # --- before the first step
    def on_train_begin(self, args, state, control, **kwargs):
        if self.trainer is None or self.pretrained is not None:
            return
        if self.fresh and state.global_step == 0:
            self.pretrained = self.evaluate("pretrained")
            self.pretrained_loss = self.loss
            if self.rank == 0:
                self._keep(self.pretrained, self.loss)
        else:
            self.pretrained, self.pretrained_loss = self.kept()

    def _keep(self, scores: list[float], loss: float | None) -> None:
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            with open(self.path + ".tmp", "w") as handle:
                json.dump({"examples": len(scores), "scores": scores, "loss": loss}, handle)
            os.replace(self.path + ".tmp", self.path)
        except OSError as err:  # a resumed attempt then says it has no untrained scores: never fail training
            logger.warning("could not keep the untrained model's scores in %s: %s", self.path, err)

    def kept(self) -> tuple[list[float] | None, float | None]:
        """The untrained model's scores and loss kept by the attempt that started the run (None: none, or another
        set)."""
        try:
            with open(self.path) as handle:
                data = json.load(handle)
        except (OSError, ValueError):
            return None, None
        scores = data.get("scores") if isinstance(data, dict) else None
        if not isinstance(scores, list) or len(scores) != len(self.raw):
            return None, None
        loss = data.get("loss")
        return [float(v) for v in scores], float(loss) if isinstance(loss, int | float) else None

    def evaluate(self, prefix: str) -> list[float]:
        """Every rank: the model as it is now on the judged examples; the headline metric per example."""
        trainer = self.trainer
        saved = trainer.compute_metrics
        trainer.compute_metrics = self.task.compute_metrics(self.raw, self.features, self.tokenizer)
        self.task.example_scores = None
        stall.HEART.mark("evaluation", "eval")  # the stall watchdog's longer limit applies
        trainer._goodput.eval_begins()
        try:
            found = trainer.evaluate(eval_dataset=self.features, metric_key_prefix=prefix, **self.eval_kwargs)
        finally:
            trainer._goodput.eval_ends()
            trainer.compute_metrics = saved
            stall.HEART.mark("train", "train")
        loss = found.get(f"{prefix}_loss")
        self.loss = float(loss) if isinstance(loss, int | float) else None
        scores = list(self.task.example_scores or [])
        if len(scores) > len(self.raw) and len(scores) % len(self.raw) == 0:
            # every rank evaluated all of them (FSDP on CPU: the evaluation is not sharded), gathered in rank order:
            # the first copy is the examples in their order
            scores = scores[: len(self.raw)]
        if len(scores) != len(self.raw):
            raise RuntimeError(f"the {prefix} evaluation scored {len(scores)} of {len(self.raw)} judged examples")
        return scores

    # --- after training
    def metrics(self, trained: list[float], raw_train, steps: int) -> dict[str, float]:
        """Global rank 0: the `verdict_*` metrics; {} when the run cannot be judged (said in the log)."""
        if self.pretrained is None:
            self.pretrained, self.pretrained_loss = self.kept()
        if self.pretrained is None:
            logger.warning("no verdict: the scores of the model before training were not kept (%s)", self.path)
            return {}
        try:
            found = baselines.strongest(self.task, raw_train, self.raw)
        except Exception as err:  # noqa: BLE001 - a baseline is a courtesy: never fail a finished training for it
            logger.warning("no verdict: no trivial baseline for %s: %s", self.task.name, err)
            return {}
        if found is None:
            return {}
        name, _, baseline = found
        names = list(type(self.task).verdict.baselines)
        change = (self.loss - self.pretrained_loss if self.loss is not None and self.pretrained_loss is not None
                  else float("nan"))  # unknown: the verdict then never says "unchanged"
        return judgement.judgement_metrics(model=trained, baseline=baseline, pretrained=self.pretrained,
                                           baseline_index=names.index(name), steps=steps, loss_change=change)
