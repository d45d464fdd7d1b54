"""The two fleets the table is for, every figure with its source or marked a guess with a range.

Checkpoint bytes are computed, not assumed: AdamW with mixed precision as the HF Trainer runs it (bf16/fp16
autocast over fp32 weights) keeps 12 bytes per parameter in a checkpoint: the fp32 weights (4) and AdamW's two
fp32 moments, exp_avg and exp_avg_sq (4 + 4). Measured here: a 334M-parameter model's checkpoint is 4.0 GB
(12.0 bytes per parameter). The state is sharded across every GPU of the fleet (FSDP full shard: a 7B model's
112 GB of weights, gradients and moments does not fit one 40 GB A100), so each instance writes its share; but
SageMaker restores the whole checkpoint prefix to every instance at a new job's start (CheckpointConfig), so each
instance downloads all of it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from benchmarks.goodput_sim.figures import Figure
from hftrain.checkpoint.manager import DEFAULT_KEEP

GB = 1e9
BYTES_PER_PARAMETER = 12  # fp32 weights + AdamW exp_avg + exp_avg_sq (mixed precision keeps no second weight copy)

# --- sources (cited by the figures below) -------------------------------------------------------------------------
SPOT_NOTICE = ("AWS EC2 User Guide, 'Spot Instance interruption notices': a warning two minutes before EC2 stops or "
               "terminates the instance, https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/"
               "spot-instance-termination-notices.html; SageMaker API 'StoppingCondition': SIGTERM, termination "
               "delayed 120 s, https://docs.aws.amazon.com/sagemaker/latest/APIReference/API_StoppingCondition.html")
BILLING = ("SageMaker API 'DescribeTrainingJob' TrainingStartTime: billed from it to TrainingEndTime; the data "
           "download and the container's size lie inside it (https://docs.aws.amazon.com/sagemaker/latest/"
           "APIReference/API_DescribeTrainingJob.html); the Starting phase before it (provisioning) is not billed "
           "(Managed Spot Training lifecycle, https://docs.aws.amazon.com/sagemaker/latest/dg/"
           "model-managed-spot-training-status.html)")
NETWORK = ("EC2 accelerated computing instance specifications: ml.p4d.24xlarge 400 Gbps (EFA), ml.g5.12xlarge "
           "40 Gbps, https://docs.aws.amazon.com/ec2/latest/instancetypes/ac.html")
S3 = ("Amazon S3 performance guidelines (parallel connections and byte-range fetches scale one instance's "
      "throughput), https://docs.aws.amazon.com/AmazonS3/latest/userguide/optimizing-performance-guidelines.html; "
      "published measurements of one instance's S3 download: 8.0 GB/s c5n.18xlarge, 6.3 GB/s p3dn.24xlarge "
      "(https://github.com/dvassallo/s3-benchmark README); bounded by the instance's network (above)")
FSX = ("FSx for Lustre PERSISTENT_2 SSD: 125, 250, 500 or 1000 MB/s per TiB provisioned, "
       "https://docs.aws.amazon.com/fsx/latest/LustreGuide/ssd-storage.html (not used by the table: a 1.2 TiB file "
       "system at 1000 MB/s/TiB gives the whole fleet 1.2 GB/s, below one instance's S3 rate)")
IMAGE = ("a 10-20 GB image pulled and extracted at 0.07-0.2 GB/s. AWS: DLC images are 'often several tens "
         "of gigabytes', pulling one 'could take minutes' (AWS ML blog, 'Supercharge your auto scaling for "
         "generative AI inference - Introducing Container Caching in SageMaker Inference', re:Invent 2024); the "
         "huggingface/transformers-pytorch-gpu image is 6-8 GB (https://github.com/pepkit/pephub/issues/109)")
HYPERPOD = ("AWS ML blog 'Checkpointless training on Amazon SageMaker HyperPod: Production-scale training with "
            "faster fault recovery' (Dec 2025): recovery 'from 15-30 minutes or more to under 2 minutes', up to 95% "
            "goodput; in-process recovery: https://docs.aws.amazon.com/sagemaker/latest/dg/"
            "sagemaker-eks-checkpointless-in-process-recovery.html. Ours (hftrain/recovery/) measured on 2 local CPU "
            "hosts with a tiny model: 1.7-2.3 s of wall time from the fault to the first step after it "
            "(benchmarks/bench_recovery.py); a fleet adds a NCCL process group over 128 GPUs, the peer copy and "
            "restore of a multi-GB shard and a 10 s grace for a peer stuck in a collective, which the tiny local "
            "run does not pay: the range stays HyperPod's")
MEASURED_H200 = ("measured in this project on one NVIDIA H200 host: a 4.0 GB checkpoint (334M parameters + AdamW) "
                 "blocks the loop 3.8-4.0 s saved blocking (about 1.0 GB/s per process, xxh3 hashing included: "
                 "hashing 4.0 GB took 1.0 s); with background saves it blocks 0.63-0.68 s (the snapshot into reused "
                 "pinned host buffers: 5.9-6.3 GB/s; the first save 2.49 s while allocating them) and is complete, "
                 "written and hashed, 3.4-3.6 s after the snapshot")
PRIOR = "the pipeline's prior for spot capacity of the family (lambda/plan/checkpoint_interval.py)"
STALL = "the stall watchdog's default: stall.minutes auto = max(10 min, 20 x the median step) (hftrain/args.py)"
TORCH_TIMEOUT = ("the upper end is torch.distributed's default NCCL collective timeout, 10 min "
                 "(https://pytorch.org/docs/stable/distributed.html, init_process_group)")


@dataclass(frozen=True)
class Fleet:
    name: str
    instance_type: str
    instances: int
    gpus_per_instance: int
    model: str
    parameters: float
    network_gbps: float
    s3_gb_per_s: Figure  # one instance's S3 throughput (download and upload)
    write_gb_per_s: Figure  # one instance writing and hashing its checkpoint shard to local disk
    snapshot_gb_per_s: Figure  # one GPU copying its shard into pinned host memory (what a background save blocks)
    figures: dict[str, Figure] = field(default_factory=dict)  # per-instance seconds and the rest, by name
    prior_hours: float = 6.0
    work_hours: float = 24.0

    @property
    def checkpoint_gb(self) -> float:
        return self.parameters * BYTES_PER_PARAMETER / GB

    @property
    def shard_gb_per_instance(self) -> float:
        return self.checkpoint_gb / self.instances

    @property
    def shard_gb_per_gpu(self) -> float:
        return self.checkpoint_gb / (self.instances * self.gpus_per_instance)

    @property
    def model_gb(self) -> float:
        return self.parameters * 4 / GB  # the final model, fp32 safetensors

    def sources(self) -> list[tuple[str, str]]:
        rows = [("checkpoint size", f"{self.model}: {self.parameters / 1e9:g}B parameters x {BYTES_PER_PARAMETER} "
                 f"bytes = {self.checkpoint_gb:.1f} GB, sharded over {self.instances} x {self.gpus_per_instance} "
                 f"GPUs: {self.shard_gb_per_instance:.2f} GB per instance, {self.shard_gb_per_gpu:.3f} GB per GPU "
                 "(computed; 12 bytes per parameter measured on the 334M model); a start downloads the prefix: the "
                 f"newest {DEFAULT_KEEP} (save_total_limit's default) to every instance"),
                ("network", f"{self.network_gbps:g} Gbps ({NETWORK})"),
                ("s3 GB/s per instance", self.s3_gb_per_s.describe()),
                ("write+hash GB/s per instance", self.write_gb_per_s.describe()),
                ("snapshot GB/s per GPU", self.snapshot_gb_per_s.describe()),
                ("prior M", f"{self.prior_hours:g} h ({PRIOR})")]
        return rows + [(name, figure.describe()) for name, figure in self.figures.items()]


def _common(tokenize: Figure, cache_load: Figure, pg_join: Figure, model_load: Figure) -> dict[str, Figure]:
    return {
        "notice": Figure.fixed(120, "s", "source", SPOT_NOTICE),
        "provisioning": Figure(120, 300, 600, "s, wall, not billed", "guess", BILLING),
        "image_pull": Figure(60, 150, 300, "s", "guess", IMAGE),
        "data_download": Figure(30, 60, 180, "s", "guess", "the training channel's copy; depends on the data set"),
        "imports": Figure(15, 30, 60, "s", "guess", "the toolkit's launch (its requirements install, torchrun) and "
                          "Python, torch, transformers in the DLC; measured locally per instance (bench_restart.py "
                          "--hosts 2, two instances on 2 cores): launch 4.8-4.9 s, imports 5.8-6.1 s"),
        "data_load": Figure(10, 60, 300, "s", "guess", "reading the raw data files into Arrow, at every start: the "
                            "coverage, column checks and label set come from them, the tokenized cache does not "
                            "skip it; grows with the data; measured locally 0.9-1.1 s per instance for 33 MB"),
        "pg_join": pg_join,
        "model_load": model_load,
        "tokenize": tokenize,
        "cache_load": cache_load,
        "evaluation": Figure(120, 300, 600, "s", "guess", "one evaluation at the end"),
        "exit": Figure(10, 30, 60, "s", "guess", "an interrupted attempt's billed tail until its processes are "
                       "gone; measured locally 7.7 s (make demo)"),
        "fault_detect": Figure(60, 300, 600, "s", "guess", TORCH_TIMEOUT),
        "crash_detect": Figure(5, 15, 60, "s", "guess", "a rank exits: torchrun sees it, the job ends"),
        "stall_detect": Figure.fixed(600, "s", "project default", STALL),
        "in_place": Figure(30, 90, 120, "s", "source (HyperPod); ours measured locally, see the source", HYPERPOD),
    }


P4D = Fleet(
    name="p4d", instance_type="ml.p4d.24xlarge", instances=16, gpus_per_instance=8,
    model="a 7B decoder (Llama-2-7B-sized), AdamW, bf16 mixed precision", parameters=7e9, network_gbps=400,
    s3_gb_per_s=Figure(8, 4, 1, "GB/s", "source + guess", S3),
    write_gb_per_s=Figure(8, 4, 1, "GB/s", "measured (high end) + guess",
                          MEASURED_H200 + "; low end: the 8 GPUs' shards written in parallel to the 8 local NVMe "
                          "drives at the measured 1 GB/s each"),
    snapshot_gb_per_s=Figure(12, 6, 3, "GB/s", "measured (mid) + guess", MEASURED_H200),
    figures=_common(tokenize=Figure(300, 900, 1800, "s", "guess", "first start only: tokenizing the data set"),
                    cache_load=Figure(10, 30, 90, "s", "guess", "loading the tokenized data set kept with the run; "
                                      "measured locally 0.08 s for 107 MB"),
                    pg_join=Figure(10, 30, 90, "s", "guess", "128 ranks' NCCL process-group join"),
                    model_load=Figure(20, 60, 120, "s", "guess", "building the model, loading 28 GB fp32 weights")),
    prior_hours=6.0,
)

G5 = Fleet(
    name="g5", instance_type="ml.g5.12xlarge", instances=4, gpus_per_instance=4,
    model="a 1.3B decoder (OPT-1.3B-sized), AdamW, bf16 mixed precision", parameters=1.3e9, network_gbps=40,
    s3_gb_per_s=Figure(4, 2, 0.5, "GB/s", "source + guess", S3),
    write_gb_per_s=Figure(4, 2, 1, "GB/s", "measured (high end) + guess", MEASURED_H200),
    snapshot_gb_per_s=Figure(12, 6, 3, "GB/s", "measured (mid) + guess", MEASURED_H200),
    figures=_common(tokenize=Figure(120, 300, 900, "s", "guess", "first start only: tokenizing the data set"),
                    cache_load=Figure(5, 15, 60, "s", "guess", "loading the tokenized data set kept with the run"),
                    pg_join=Figure(5, 15, 45, "s", "guess", "16 ranks' NCCL process-group join"),
                    model_load=Figure(10, 20, 45, "s", "guess", "building the model, loading 5.2 GB fp32 weights")),
    prior_hours=12.0,
)

FLEETS = {"p4d": P4D, "g5": G5}
