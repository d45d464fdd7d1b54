"""The names of the metrics that carry a run's judgement from the training job to the pipeline's verdict.

Producer: global rank 0 of a training job (hftrain/scoring/judgement.py, as METRIC lines after the final
evaluation). Consumers: the job's MetricDefinitions (lambda/plan/job_requests.py) and the verdict
(lambda/runs/verdict.py). Scores are the task's headline metric in its own units, over the judged examples (the
validation set's first `verdict_eval_samples` rows); gains are the model's score minus the other's, as a 95%
paired-bootstrap interval over those examples.
"""

from __future__ import annotations

EXAMPLES = "verdict_examples"  # how many validation examples were judged
STEPS = "verdict_steps"  # optimizer steps the model was trained for
MODEL = "verdict_model"  # the trained model's score on the judged examples
BASELINE = "verdict_baseline"  # the strongest trivial baseline's score
BASELINE_INDEX = "verdict_baseline_index"  # which of the task's baselines that is (its position in the list)
PRETRAINED = "verdict_pretrained"  # the same model before its first step
# the trained model's evaluation loss on the judged examples minus the untrained one's: exactly 0 when training
# changed nothing (learning rate 0, say)
LOSS_CHANGE = "verdict_loss_change"
GAIN_BASELINE_LOW = "verdict_gain_baseline_low"
GAIN_BASELINE_HIGH = "verdict_gain_baseline_high"
GAIN_PRETRAINED_LOW = "verdict_gain_pretrained_low"
GAIN_PRETRAINED_HIGH = "verdict_gain_pretrained_high"

ALL = (EXAMPLES, STEPS, MODEL, BASELINE, BASELINE_INDEX, PRETRAINED, LOSS_CHANGE, GAIN_BASELINE_LOW, GAIN_BASELINE_HIGH,
       GAIN_PRETRAINED_LOW, GAIN_PRETRAINED_HIGH)
