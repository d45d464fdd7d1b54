"""One torchrun worker of the SMDDP test: the training code's collectives under a stand-in `smddp` backend.

The stand-in behaves the way the SMDDP library documents its backend: importing it registers the `smddp`
process-group backend; `torch.distributed.new_group()` is not supported, and it cannot run alongside another
backend such as gloo. Under the hood it moves bytes with gloo's transport (there is no GPU here), but the code
under test only ever sees one `smddp` default group. Every rank writes `rank-<n>.json` into $STANDIN_RESULTS
(or prints one `RESULT <json>` line when that is unset).
"""

from __future__ import annotations

import json
import os
import tempfile
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import torch
import torch.distributed as dist

CALLS: list[str] = []


class Refused(RuntimeError):
    pass


def install_standin() -> None:
    def create(store, rank, size, timeout):
        return dist.ProcessGroupGloo(store, rank, size, timeout if isinstance(timeout, timedelta) else
                                     timedelta(seconds=60))

    dist.Backend.register_backend("smddp", create, devices=["cpu"])
    original_init = dist.init_process_group

    def init_process_group(backend=None, *args, **kwargs):
        if backend is None or "gloo" in str(backend) or "nccl" in str(backend):
            raise Refused(f"smddp stand-in: cannot run alongside backend {backend!r}")
        return original_init(backend, *args, **kwargs)

    def new_group(*args, **kwargs):
        CALLS.append("new_group")
        raise Refused("smddp stand-in: torch.distributed.new_group() is not supported")

    dist.init_process_group = init_process_group
    dist.new_group = new_group
    dist.new_subgroups = new_group
    for name in ("all_reduce", "all_gather_object", "barrier", "broadcast", "all_gather"):
        original = getattr(dist, name)

        def checked(*args, _original=original, _name=name, **kwargs):
            group = kwargs.get("group")
            if group not in (None, dist.group.WORLD):
                raise Refused(f"smddp stand-in: {_name} on a group other than the default one")
            CALLS.append(_name)
            return _original(*args, **kwargs)

        setattr(dist, name, checked)


def main() -> None:
    install_standin()
    dist.init_process_group("smddp")
    from contract.checkpoint_marker import marker_name
    from hftrain.checkpoint import manager as checkpoints
    from hftrain.data import sharding
    from hftrain.data.raw import gather_sharded
    from hftrain.parallel import process_group as distributed
    from hftrain.run.callbacks import CheckpointCallback, SigtermCallback

    rank, world = dist.get_rank(), dist.get_world_size()
    out: dict = {"rank": rank, "backend": str(dist.get_backend())}
    try:
        dist.new_group(backend="gloo")
        out["new_group_refused"] = False
    except Refused:
        out["new_group_refused"] = True
    CALLS.clear()

    out["any_rank"] = [distributed.any_rank(rank == 1), distributed.any_rank(False)]
    out["gathered"] = distributed.all_gather_objects({"rank": rank})
    distributed.barrier()

    # data layout: two hosts of one rank each on ShardedByS3Key input; the second got no rows and borrows a
    # zero-weight filler row
    rows = 5 if rank == 0 else 0
    layout = sharding.agree_layout(num_rows=rows, sharded=True, batch_size=2, rank=rank, world_size=world,
                                   local_rank=0, local_world_size=1,
                                   first_row_fn=(lambda: {"input_ids": [1, 2]}) if rows else None)
    out["layout"] = {"rows_per_rank": layout.rows_per_rank, "batches": layout.plan.num_batches,
                     "filler": layout.filler_row}

    # resume: checkpoint-4 is complete and verifies, checkpoint-8 is partial (no marker)
    from hftrain.checkpoint import resume

    root = Path(os.environ["STANDIN_CHECKPOINTS"])
    identity = {"task": "text-classification"}
    if rank == 0:
        ckpt = root / "checkpoint-4"
        ckpt.mkdir(parents=True, exist_ok=True)
        for name in ("model.safetensors", "optimizer.pt", "scheduler.pt", "rng_state_0.pth", "rng_state_1.pth"):
            (ckpt / name).write_bytes(name.encode())
        (ckpt / "trainer_state.json").write_text(json.dumps({"global_step": 4}))
        checkpoints.write_node_marker(str(ckpt), host="algo-1", hosts=["algo-1"], step=4, world_size=world,
                                      identity=identity, lineage="standin")
        (root / "checkpoint-8").mkdir(exist_ok=True)
    distributed.barrier()
    decision = resume.ResumePlanner(str(root), identity).plan(resume=True)
    out["resume"] = [os.path.basename(decision.path) if decision.path else None, decision.step]

    # a sharded validation channel: every rank gets every host's rows
    import datasets

    gathered = gather_sharded(datasets.Dataset.from_list([{"x": rank}]))
    out["validation_rows"] = sorted(gathered["x"])

    # SIGTERM on one rank: all stop at the same step and save together
    sigterm = SigtermCallback()
    sigterm.requested = rank == 0
    control = SimpleNamespace(should_save=False, should_evaluate=True, should_training_stop=False)
    sigterm.on_step_end(None, None, control)
    out["sigterm"] = [control.should_save, control.should_training_stop]

    # a checkpoint save: markers and rotation
    saved = root / "checkpoint-12"
    saved.mkdir(exist_ok=True)
    (saved / f"rng_state_{rank}.pth").write_bytes(b"x")
    callback = CheckpointCallback(root=str(root), host="algo-1", hosts=["algo-1"], keep=1, resumed_step=4,
                                  ours=[4], identity=identity, lineage="standin")
    state = SimpleNamespace(global_step=12, is_world_process_zero=rank == 0)
    callback.on_save(None, state, control)
    distributed.barrier()
    out["checkpoint_marked"] = (saved / marker_name("algo-1")).exists()
    out["calls"] = sorted(set(CALLS))
    # one file per rank: two ranks printing to the one stdout torchrun shares can interleave their lines
    results = Path(os.environ["STANDIN_RESULTS"]) if os.environ.get("STANDIN_RESULTS") else None
    if results is not None:
        (results / f"rank-{rank}.json").write_text(json.dumps(out))
    else:
        print("RESULT " + json.dumps(out), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    os.environ.setdefault("STANDIN_CHECKPOINTS", tempfile.mkdtemp())
    torch.set_num_threads(1)
    main()
