"""Dummy single-process entry point without torch: sleeps, prints progress, fails or writes a model on demand."""

import argparse
import json
import os
import sys
import time
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=3)
parser.add_argument("--step_seconds", type=float, default=0.1)
parser.add_argument("--fail_at_step", type=int, default=0)
args = parser.parse_args()

for step in range(1, args.steps + 1):
    print(f"PROGRESS global_step={step} max_steps={args.steps}", flush=True)
    if step == args.fail_at_step:
        print(f"ValueError: dummy failure at step {step}", file=sys.stderr, flush=True)
        raise ValueError(f"dummy failure at step {step}")
    time.sleep(args.step_seconds)
channel = os.environ.get("SM_CHANNEL_TRAIN")
files = sorted(os.listdir(channel)) if channel else []
Path(os.environ["SM_MODEL_DIR"], "model.json").write_text(json.dumps({"steps": args.steps, "files": files}))
if "RANK" in os.environ:  # launched by torchrun: one file per process
    rank_file = Path(os.environ["SM_MODEL_DIR"], f"rank-{os.environ['RANK']}.json")
    rank_file.write_text(
        json.dumps({"world_size": int(os.environ["WORLD_SIZE"]), "master": os.environ["MASTER_ADDR"]})
    )
