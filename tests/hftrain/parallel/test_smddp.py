"""SMDDP rules: with the `smddp` backend the training code creates no extra process group and never uses
gloo; every collective it needs goes through the one default group (see smddp_standin.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from testkit import KIT

from local_mode.sagemaker.training_hosts import free_port


@pytest.mark.slow
def test_training_collectives_run_on_a_backend_that_refuses_new_group_and_gloo(tmp_path):
    torchrun = str(Path(sys.executable).parent / "torchrun")
    env = {**os.environ, "STANDIN_CHECKPOINTS": str(tmp_path / "checkpoints"), "OMP_NUM_THREADS": "1",
           "HF_DATASETS_CACHE": str(tmp_path / "hf"), "HF_DATASETS_OFFLINE": "1",
           "STANDIN_RESULTS": str(tmp_path)}
    proc = subprocess.run(
        [torchrun, "--nproc_per_node", "2", "--master_port", str(free_port()), str(KIT / "smddp_standin.py")],
        env=env, capture_output=True, text=True, timeout=300,
    )
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    results = [json.loads(path.read_text()) for path in sorted(tmp_path.glob("rank-*.json"))]
    results.sort(key=lambda out: out["rank"])
    assert len(results) == 2
    for out in results:
        assert out["backend"] == "smddp"
        assert out["new_group_refused"] is True  # the stand-in really refuses, so the run proves the code avoids it
        assert out["any_rank"] == [True, False]
        assert out["gathered"] == [{"rank": 0}, {"rank": 1}]
        assert out["layout"]["rows_per_rank"] == [5, 0] and out["layout"]["batches"] == 3
        assert out["resume"] == ["checkpoint-4", 4]
        assert out["validation_rows"] == [0]  # one host: its local rank 0 speaks for the shard
        assert out["sigterm"] == [True, True]
        assert out["checkpoint_marked"] is True
        assert "new_group" not in out["calls"]
        assert {"all_reduce", "all_gather_object", "barrier"} <= set(out["calls"])
    assert results[1]["layout"]["filler"] == {"input_ids": [1, 2]}
