"""Dummy map step: counts the lines of this host's shard, writes counts-<current_host>.json."""

import argparse
import json
import os
from pathlib import Path

parser = argparse.ArgumentParser()
parser.add_argument("--input-dir", required=True)
parser.add_argument("--output-dir", required=True)
args = parser.parse_args()

config = json.loads(
    Path(os.environ.get("SAGEMAKER_BASE_DIR", "/opt/ml"), "config", "resourceconfig.json").read_text()
)
files = sorted(
    p.relative_to(args.input_dir).as_posix() for p in Path(args.input_dir).rglob("*") if p.is_file()
)
lines = sum(len(Path(args.input_dir, f).read_text().splitlines()) for f in files)
out = Path(args.output_dir, f"counts-{config['current_host']}.json")
out.write_text(
    json.dumps(
        {
            "host": config["current_host"],
            "hosts": config["hosts"],
            "files": files,
            "lines": lines,
            "skip_pip": os.environ.get("RUNPROC_SKIP_PIP"),
        }
    )
)
print(f"{config['current_host']}: {len(files)} files, {lines} lines -> {out}", flush=True)
