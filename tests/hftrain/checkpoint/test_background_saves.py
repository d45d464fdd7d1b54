"""Background checkpoint saves (hftrain/checkpoint/background.py): phases in lockstep, one in flight, failures
end the run, snapshots that share nothing with the live state."""

from __future__ import annotations

import threading

import pytest
import torch

from hftrain.checkpoint import background as bg


class Ranks:
    """The SUM all-reduce of `world` ranks that all vote like this one (one process stands in for all)."""

    def __init__(self, world: int = 1) -> None:
        self.world = world
        self.rounds = 0

    def __call__(self, votes: list[float]) -> list[float]:
        self.rounds += 1
        return [v * self.world for v in votes]


def saves(**kw):
    events: list[tuple] = []
    ranks = Ranks()
    made = bg.BackgroundSaves(
        mark=lambda step, path: events.append(("mark", step, path)),
        on_complete=lambda step, seconds: events.append(("complete", step)),
        node_leader=True, agree=ranks, **kw)
    made._world = lambda: ranks.world  # type: ignore[method-assign]
    return made, events, ranks


def step_boundary(made: bg.BackgroundSaves, ranks: Ranks) -> None:
    made.settle(ranks(made.votes()))


def test_a_checkpoint_counts_only_after_write_then_mark_on_every_rank():
    release = threading.Event()
    made, events, ranks = saves()
    made.submit(4, "/ck/checkpoint-4", [lambda: release.wait(5)])
    step_boundary(made, ranks)  # still writing: nothing moves
    assert made.in_flight == 4 and events == []
    release.set()
    made.current.thread.join()
    step_boundary(made, ranks)  # written everywhere: the marker phase starts
    made.current.thread.join()
    assert events == [("mark", 4, "/ck/checkpoint-4")]
    step_boundary(made, ranks)  # marked everywhere: complete
    assert events[-1] == ("complete", 4) and made.in_flight is None and made.completed == [4]


def test_a_phase_waits_for_the_slowest_rank():
    made, events, ranks = saves()
    made.submit(2, "p", [])
    made.current.thread.join()
    # another rank has not finished writing: the SUM of "done" is below the world size
    made.settle([1.0, 0.0], world_size=2)
    assert made.current.phase == bg.WRITING and events == []
    made.settle([2.0, 0.0], world_size=2)
    assert made.current.phase == bg.MARKING


def test_at_most_one_in_flight_and_wait_for_room_completes_it():
    release = threading.Event()
    made, events, ranks = saves()
    made.submit(2, "p2", [lambda: release.wait(5)])
    with pytest.raises(RuntimeError, match="still in flight"):
        made.submit(4, "p4", [])
    threading.Timer(0.3, release.set).start()
    made.wait_for_room()
    assert made.in_flight is None and ("complete", 2) in events and made.waited_seconds >= 0.2
    made.submit(4, "p4", [])
    made.drain()
    assert made.completed == [2, 4]


def test_a_failed_write_ends_the_run_on_every_rank_and_never_counts(monkeypatch):
    from hftrain.parallel import process_group

    monkeypatch.setattr(process_group, "all_gather_objects", lambda obj: [obj])
    made, events, ranks = saves()

    def disk_full():
        raise OSError(28, "No space left on device")

    made.submit(6, "/ck/checkpoint-6", [disk_full])
    made.current.thread.join()
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    with pytest.raises(bg.BackgroundSaveError, match=r"checkpoint 6 .*failed on rank 0 \(algo-2\): OSError: \[Errno 28"):
        step_boundary(made, ranks)
    assert events == [] and made.completed == [] and made.in_flight is None


def test_a_described_failure_is_raised_as_it_is(monkeypatch):
    from hftrain.parallel import process_group

    monkeypatch.setattr(process_group, "all_gather_objects", lambda obj: [obj])

    class VolumeFull(Exception):
        pass

    made, _events, ranks = saves(describe=lambda err, step: VolumeFull(f"volume full at {step}"))
    made.submit(3, "p", [lambda: (_ for _ in ()).throw(OSError(28, "full"))])
    made.current.thread.join()
    monkeypatch.setenv("SM_CURRENT_HOST", "algo-2")
    with pytest.raises(VolumeFull, match=r"volume full at 3 \(the background write of checkpoint 3 on rank 0, algo-2"):
        step_boundary(made, ranks)


def test_the_injected_failure_hits_its_step_and_rank_only():
    assert bg.injected_failure_step(None, 0) is None
    assert bg.injected_failure_step("8", 3) == 8
    assert bg.injected_failure_step("8@1", 1) == 8
    assert bg.injected_failure_step("8@1", 0) is None


def test_the_injected_delay_holds_only_the_writes_of_its_step_and_after():
    """Local mode's `--interrupt-during-save 200` sets HFTRAIN_INJECT_SAVE_DELAY=3@200: the write of checkpoint-100
    completes at once (a delayed one completed just before the loss, too late for the checkpoint sync, and a live
    replay resumed from scratch instead of from checkpoint-100), the write of checkpoint-200 waits."""
    import time

    assert bg.injected_delay(None) == (0.0, 0) and bg.injected_delay("3") == (3.0, 0)
    assert bg.injected_delay("3@200") == (3.0, 200)
    made, events, ranks = saves(inject_delay=(0.5, 200))
    for step in (100, 200):
        started = time.monotonic()
        made.submit(step, f"p{step}", [])
        made.current.thread.join()
        took = time.monotonic() - started
        assert (took >= 0.5) == (step == 200), (step, took)
        made.drain()
    assert made.completed == [100, 200]


def test_snapshot_shares_nothing_and_keeps_tied_weights_tied():
    embed = torch.nn.Parameter(torch.ones(4, 2))
    state = {"embed.weight": embed.data, "head.weight": embed.data, "bias": torch.zeros(2)}
    snap = bg.state_snapshot(state)
    embed.data.add_(1.0)  # the next optimizer step changes the live weights in place
    assert torch.equal(snap["embed.weight"], torch.ones(4, 2))
    assert snap["embed.weight"].data_ptr() == snap["head.weight"].data_ptr()  # still one tensor, as saved
    assert snap["embed.weight"].data_ptr() != embed.data.data_ptr()


def test_optimizer_snapshot_is_deep():
    param = torch.nn.Parameter(torch.ones(3))
    opt = torch.optim.AdamW([param], lr=0.1)
    param.grad = torch.ones(3)
    opt.step()
    snap = bg.snapshot(opt.state_dict())
    before = snap["state"][0]["exp_avg"].clone()
    param.grad = torch.ones(3)
    opt.step()
    opt.param_groups[0]["lr"] = 0.5
    assert torch.equal(snap["state"][0]["exp_avg"], before)
    assert snap["param_groups"][0]["lr"] == 0.1


def test_the_pool_reuses_its_buffers_from_save_to_save():
    pool = bg.SnapshotPool()
    weight = torch.zeros(8)
    first = bg.state_snapshot({"w": weight}, pool)["w"]
    weight.add_(2.0)
    second = bg.state_snapshot({"w": weight}, pool)["w"]
    assert second.data_ptr() == first.data_ptr() and torch.equal(second, torch.full((8,), 2.0))
    bigger = bg.state_snapshot({"w": torch.ones(9)}, pool)["w"]  # another shape: a new buffer
    assert bigger.shape == (9,) and pool.buffers["model/w"] is bigger


@pytest.mark.parametrize(("flags", "why"), [
    ({"is_fsdp_enabled": True}, "FSDP"), ({"is_deepspeed_enabled": True}, "DeepSpeed"),
    ({"push_to_hub": True}, "push_to_hub"), ({"load_best_model_at_end": True}, "load_best_model_at_end"),
])
def test_saves_that_must_block_stay_blocking(flags, why):
    from types import SimpleNamespace

    args = SimpleNamespace(push_to_hub=flags.get("push_to_hub", False),
                           load_best_model_at_end=flags.get("load_best_model_at_end", False))
    trainer = SimpleNamespace(args=args, is_fsdp_enabled=flags.get("is_fsdp_enabled", False),
                              is_deepspeed_enabled=flags.get("is_deepspeed_enabled", False))
    able, reason = bg.eligible(trainer)
    assert not able and why in reason
    plain = SimpleNamespace(args=SimpleNamespace(push_to_hub=False, load_best_model_at_end=False),
                            is_fsdp_enabled=False, is_deepspeed_enabled=False)
    assert bg.eligible(plain) == (True, "")


def test_an_injected_hang_in_the_write_keeps_the_loop_going_until_it_waits_and_says_what_for():
    """`--inject-stall R@N:upload` (hftrain/stall/injection.py) hangs the write of checkpoint N on its thread: the
    loop goes on (nothing blocks at the step boundaries), and the next save's wait first tells the stall watchdog
    which checkpoint it waits for (its heartbeat then says so; the save's limit applies)."""
    from hftrain.stall import injection

    hung = threading.Event()
    waited: list[int] = []
    fault = injection.parse("0@4:upload")
    assert fault.describe() == "rank 0's background write of checkpoint 4 hangs (behind the training loop)"

    def hang(step: int) -> None:
        if fault.how == "upload" and fault.step == step:
            hung.set()
            threading.Event().wait(3600)  # as injection.hang: forever (a daemon thread)

    made, events, ranks = saves(inject_hang=hang, on_wait=waited.append)
    made.submit(4, "/ck/checkpoint-4", [lambda: events.append(("wrote", 4))])
    assert hung.wait(5)
    for _ in range(3):
        step_boundary(made, ranks)  # the loop trains on
    assert made.in_flight == 4 and events == [] and waited == []
    waiter = threading.Thread(target=made.wait_for_room, daemon=True)
    waiter.start()
    waiter.join(0.5)
    assert waiter.is_alive() and waited == [4]  # blocked, having said what for
