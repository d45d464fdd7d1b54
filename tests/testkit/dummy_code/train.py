"""Dummy training entry point for the local SageMaker tests (no Hugging Face: torch.distributed only).

Per step: a gloo all_reduce across every process, a checkpoint by global rank 0 (completion marker written
last, two kept), METRIC/PROGRESS lines. Resumes from the newest complete checkpoint.
"""

import argparse
import json
import os
import shutil
import time
from pathlib import Path

import torch
import torch.distributed as dist

base = os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml")
parser = argparse.ArgumentParser()
parser.add_argument("--max_steps", type=int, default=6)
parser.add_argument("--step_seconds", type=float, default=0.2)
parser.add_argument("--checkpoint_dir", default=os.path.join(base, "checkpoints"))
args = parser.parse_args()

dist.init_process_group("gloo")
rank, world = dist.get_rank(), dist.get_world_size()
checkpoints = Path(args.checkpoint_dir)
complete = sorted(
    int(p.name.split("-")[1]) for p in checkpoints.glob("checkpoint-*") if (p / "done").exists()
)
start = torch.tensor([complete[-1] if complete else 0])
dist.broadcast(start, 0)  # every process continues from rank 0's checkpoint
resumed_from = int(start.item())
if rank == 0 and resumed_from:
    print(f"resuming from checkpoint-{resumed_from}", flush=True)

for step in range(resumed_from + 1, args.max_steps + 1):
    total = torch.tensor([float(rank + 1)])
    dist.all_reduce(total)
    if rank == 0:
        folder = checkpoints / f"checkpoint-{step}"
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "state.json").write_text(json.dumps({"step": step}))
        (folder / "done").write_text("")
        for old in sorted(checkpoints.glob("checkpoint-*"), key=lambda p: int(p.name.split("-")[1]))[:-2]:
            shutil.rmtree(old)
        print(f"METRIC train_loss={1.0 / step:.4f}", flush=True)
        print(f"PROGRESS global_step={step} max_steps={args.max_steps}", flush=True)
    time.sleep(args.step_seconds)

if rank == 0:
    model_dir = Path(os.environ["SM_MODEL_DIR"])
    (model_dir / "model.json").write_text(
        json.dumps(
            {
                "steps": args.max_steps,
                "resumed_from": resumed_from,
                "world_size": world,
                "allreduce": total.item(),
                "hosts": json.loads(os.environ["SM_HOSTS"]),
                "channel_files": sorted(os.listdir(os.environ["SM_CHANNEL_TRAIN"])),
            }
        )
    )
    output = Path(os.environ["SM_OUTPUT_DATA_DIR"])
    (output / "metrics.json").write_text(json.dumps({"train_loss": 1.0 / args.max_steps}))
    print("METRIC eval_accuracy=0.75", flush=True)
dist.barrier()
dist.destroy_process_group()
