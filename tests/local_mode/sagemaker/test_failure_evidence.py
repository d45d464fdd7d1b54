"""local_mode/sagemaker/failure_evidence.py: the local job's FailureReason from every host's evidence."""

from __future__ import annotations

from pathlib import Path

from contract import failure_causes as causes
from local_mode.sagemaker.failure_evidence import HostEnd, job_failure

SIGKILL_LOG = ("[rank1]: INJECTED FAULT\nE1204 16:22:08 api.py:874] failed (exitcode: -9) local_rank: 0 (pid: 4242) "
               "of binary: /usr/bin/python3\n")
TERM_LOG = "E1204 16:22:09 api.py:874] failed (exitcode: -15) local_rank: 0 (pid: 4243) of binary: python3\n"


def host(tmp_path: Path, name: str, index: int, *, failure: str | None = None, log: str = "",
         code: int | None = 1) -> HostEnd:
    folder = tmp_path / name
    folder.mkdir()
    if failure is not None:
        (folder / "failure").write_text(failure)
    (folder / "log.txt").write_text(log)
    return HostEnd(name, index, code, folder / "failure", folder / "log.txt")


def test_a_sigkilled_rank_is_named_with_its_signal_and_its_peers_step(tmp_path):
    peer = causes.silent_peer_text(rank=1, host="algo-2", local_rank=0, step=12, silent_seconds=2,
                                   error="RuntimeError: Connection reset by peer")
    ends = [host(tmp_path, "algo-1", 0, failure=peer, log=TERM_LOG), host(tmp_path, "algo-2", 1, log=SIGKILL_LOG)]
    for order in (ends, ends[::-1]):
        reason = job_failure(order, 1, "fallback")
        first = reason.splitlines()[0]
        assert first == ("rank 1 (algo-2, local rank 0, pid 4242) was killed by signal 9 (SIGKILL) after step 12 "
                         "(the last step its peers completed with it)"), first
        assert reason.splitlines()[-1].startswith(causes.CONSEQUENCES_PREFIX + "algo-1: rank 1 (algo-2, local rank "
                                                  "0) went silent after step 12")
        assert causes.cause_of(reason) == causes.SIGNAL
        assert "exitcode: -15" not in reason and "signal 15" not in reason  # the job's own stop is no cause


def test_a_stall_wins_over_the_peers_errors_and_the_kill_that_ended_the_frozen_rank(tmp_path):
    stall = ("stall watchdog: rank 3 (algo-2, local rank 1) stopped responding (its process is frozen ...)\n"
             "2 of 4 ranks without progress")
    two_per_host_kill = SIGKILL_LOG.replace("local_rank: 0", "local_rank: 1")
    ends = [host(tmp_path, "algo-1", 0, failure="RuntimeError: Connection reset by peer"),
            host(tmp_path, "algo-2", 1, failure=stall, log=two_per_host_kill, code=75)]
    reason = job_failure(ends, 2, "fallback")
    assert reason.startswith(stall.splitlines()[0]) and causes.cause_of(reason) == causes.STALLED
    assert "rank 3 (algo-2): rank 3 (algo-2, local rank 1, pid 4242) was killed by signal 9" in reason


def test_without_evidence_the_failed_hosts_tail_is_the_reason(tmp_path):
    ends = [host(tmp_path, "algo-1", 0), host(tmp_path, "algo-2", 1, log=TERM_LOG)]
    assert job_failure(ends, 1, "algo-1 exited with code 1:\nTraceback") == "algo-1 exited with code 1:\nTraceback"
