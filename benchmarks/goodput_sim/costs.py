"""A fleet's figures at one end of their ranges, flattened to the seconds one instance pays for each thing."""

from __future__ import annotations

from dataclasses import dataclass

from benchmarks.goodput_sim.profiles import Fleet
from hftrain.checkpoint.manager import DEFAULT_KEEP


@dataclass(frozen=True)
class Costs:
    """Seconds per instance (provisioning: wall time, not billed)."""

    work: float
    prior_hours: float
    notice: float
    provisioning: float
    image_pull: float
    data_download: float
    checkpoint_download: float  # the whole checkpoint prefix (the newest DEFAULT_KEEP), to every instance, at a start
    imports: float
    data_load: float  # the raw data read at every start (the tokenized cache does not skip it)
    pg_join: float
    model_load: float
    tokenize: float
    cache_load: float
    restore: float  # reading and verifying this instance's shard from local disk
    blocking_save: float  # a blocking save: this instance's shard written and hashed
    snapshot: float  # what a background save blocks: one GPU's shard copied to pinned host memory
    background_write: float  # a background save is complete this long after its snapshot
    upload: float  # a complete checkpoint reaches S3 this long after (durable for a new job)
    evaluation: float
    final_upload: float  # the model to S3 at the end
    exit: float
    fault_detect: float
    crash_detect: float
    stall_detect: float
    in_place: float  # a recovery in place, processes restarted on the same instances (HyperPod's range)


def costs_at(fleet: Fleet, end: str) -> Costs:
    f = {name: figure.at(end) for name, figure in fleet.figures.items()}
    s3 = fleet.s3_gb_per_s.at(end)
    write = fleet.write_gb_per_s.at(end)
    shard = fleet.shard_gb_per_instance
    return Costs(
        work=fleet.work_hours * 3600, prior_hours=fleet.prior_hours, notice=f["notice"],
        provisioning=f["provisioning"], image_pull=f["image_pull"], data_download=f["data_download"],
        checkpoint_download=DEFAULT_KEEP * fleet.checkpoint_gb / s3, imports=f["imports"], data_load=f["data_load"],
        pg_join=f["pg_join"],
        model_load=f["model_load"], tokenize=f["tokenize"], cache_load=f["cache_load"], restore=shard / write,
        blocking_save=shard / write, snapshot=fleet.shard_gb_per_gpu / fleet.snapshot_gb_per_s.at(end),
        background_write=shard / write, upload=shard / s3, evaluation=f["evaluation"],
        final_upload=fleet.model_gb / s3, exit=f["exit"], fault_detect=f["fault_detect"],
        crash_detect=f["crash_detect"], stall_detect=f["stall_detect"], in_place=f["in_place"])
