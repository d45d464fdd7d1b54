"""`checkpoint.every_minutes: "auto"`: what the pipeline tells the training code. Pure.

The training code (training_code/hftrain/checkpoint/interval.py) chooses the time between checkpoints as
sqrt(2 x C x M) clamped to the bounds of contract/intervals.py ([5, 60] minutes): C the blocking save time it measures, M the mean time between
interruptions it observes in the run's history. Until the run has seen an interruption it needs a prior for M,
which depends on the instance type and the capacity: the pipeline passes it per attempt as the
`interruption_prior_hours` hyperparameter, from the table below.

The priors are conservative guesses, not measurements: AWS publishes no mean time between spot interruptions
for SageMaker instances (the EC2 Spot Instance Advisor gives only a monthly interruption-frequency band per EC2
instance type and region). They err short (more frequent interruptions than most runs see), which makes the
first interval shorter, i.e. a few more saves rather than hours of recomputation. The run's own history replaces
them after its first interruption.
"""

from __future__ import annotations

from contract.intervals import CHECKPOINT_MAX_MINUTES, CHECKPOINT_MIN_MINUTES
from hfsm_lambda.spec.typed import Checkpoint

AUTO = "auto"
MIN_MINUTES = CHECKPOINT_MIN_MINUTES
MAX_MINUTES = CHECKPOINT_MAX_MINUTES  # the durability watchdog measures an auto interval against this upper bound
# Spot capacity of the scarce large GPU families is reclaimed more often than that of smaller ones (a guess).
SPOT_PRIOR_HOURS = {
    "ml.p5": 6.0, "ml.p5e": 6.0, "ml.p5en": 6.0, "ml.p4d": 6.0, "ml.p4de": 6.0, "ml.p6": 6.0, "ml.trn1": 8.0,
    "ml.trn2": 8.0, "ml.p3dn": 8.0, "ml.p3": 12.0, "ml.g6e": 12.0, "ml.g6": 12.0, "ml.g5": 12.0, "ml.g4dn": 12.0,
}
DEFAULT_SPOT_PRIOR_HOURS = 12.0
# On-demand instances are not reclaimed; what ends such a job early is a hardware failure or a stop (a guess).
ON_DEMAND_PRIOR_HOURS = 168.0


def family(instance_type: str) -> str:
    """ml.p4d.24xlarge -> ml.p4d"""
    return ".".join(instance_type.split(".")[:2])


def prior_hours(instance_type: str, spot: bool) -> float:
    """The mean time between interruptions assumed before a run has seen one."""
    if not spot:
        return ON_DEMAND_PRIOR_HOURS
    return SPOT_PRIOR_HOURS.get(family(instance_type), DEFAULT_SPOT_PRIOR_HOURS)


def watchdog_minutes(every_minutes: int | str) -> float:
    """The interval the durability watchdog measures against: the fixed one, or auto's upper bound."""
    return float(MAX_MINUTES if every_minutes == AUTO else every_minutes or 0)


def attempt_hyperparameters(checkpoint: Checkpoint, instance_type: str, spot: bool) -> dict[str, object]:
    """The per-attempt hyperparameters of an auto interval (none for a fixed one)."""
    if checkpoint.every_minutes != AUTO:
        return {}
    return {"interruption_prior_hours": prior_hours(instance_type, spot)}
