"""contract/failure_causes.py: one cause per failed attempt by a documented precedence, whatever order the
evidence arrives in; the consequences listed, never taken for the cause."""

from __future__ import annotations

import itertools

from contract import failure_causes as causes

STALL = ("stall watchdog: rank 1 (algo-2, local rank 0) stopped responding (its process is frozen or SIGSTOPped: "
         "not even its watchdog thread runs); no progress for 1.0 min, last heard at after step 19\n"
         "1 of 2 ranks without progress ...; limit stall.minutes=1.")
RESET = "RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection reset by peer"
SIGKILL_LOG = ("E1204 16:22:08 torch/distributed/elastic/multiprocessing/api.py:874] failed (exitcode: -9) "
               "local_rank: 0 (pid: 4242) of binary: /usr/bin/python3\n  traceback : Signal 9 (SIGKILL) received "
               "by PID 4242")
OOM = "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB"


def test_each_text_gets_its_cause():
    assert causes.classify(STALL) == causes.STALLED
    assert causes.classify(SIGKILL_LOG) == causes.SIGNAL and causes.signal_number(SIGKILL_LOG) == 9
    assert causes.classify("algo-2 was killed by signal 11") == causes.SIGNAL
    assert causes.classify("x", exit_code=-9) == causes.SIGNAL
    assert causes.classify(OOM) == causes.OOM
    assert causes.classify(RESET) == causes.COLLECTIVE
    assert causes.classify("label_column: no column 'x' in the data", exit_code=2) == causes.CONFIGURATION
    assert causes.classify("ValueError: something in the script") == causes.EXCEPTION
    assert causes.signal_text(9) == "signal 9 (SIGKILL)"


def test_the_verdict_is_the_same_whatever_order_the_evidence_arrives_in():
    evidence = [
        causes.Evidence(causes.COLLECTIVE, RESET, rank=0, host="algo-1", at=100.0),
        causes.Evidence(causes.EXCEPTION, "ValueError: late", rank=2, host="algo-1", at=90.0),
        causes.Evidence(causes.STALLED, STALL, rank=1, host="algo-2", at=130.0),
        causes.Evidence(causes.SIGNAL, "rank 1 (algo-2, local rank 0) was killed by signal 9 (SIGKILL)", rank=1,
                        host="algo-2", at=131.0),
    ]
    verdicts = {causes.choose(list(order))[0] for order in itertools.permutations(evidence)}
    assert verdicts == {evidence[2]}  # the stall, though the gloo error and the exception came first
    cause, consequences = causes.choose(evidence)
    reason = causes.format_reason(cause, consequences)
    assert reason.startswith(STALL)  # the stall's own words first, whole
    last = reason.splitlines()[-1]
    assert last.startswith(causes.CONSEQUENCES_PREFIX) and "rank 1 (algo-2): rank 1 (algo-2, local rank 0) was " \
        "killed by signal 9" in last and "rank 0 (algo-1): RuntimeError" in last
    assert causes.cause_of(f"AlgorithmError: {reason}") == causes.STALLED
    # without the stall, the signal; without it, out of memory, then the collective, then the script's own error
    for expected in (causes.SIGNAL, causes.COLLECTIVE, causes.EXCEPTION):
        remaining = [e for e in evidence if causes.PRECEDENCE.index(e.cause) >= causes.PRECEDENCE.index(expected)]
        assert causes.choose(remaining)[0].cause == expected
        assert causes.cause_of(causes.format_reason(*causes.choose(remaining))) == expected


def test_every_hosts_copy_of_one_verdict_is_not_a_consequence():
    copy = causes.Evidence(causes.STALLED, STALL.splitlines()[0] + "\n(seen by rank 2 on algo-2)", host="algo-2")
    cause = causes.Evidence(causes.STALLED, STALL, host="algo-1", at=1.0)
    assert causes.format_reason(cause, [copy]) == STALL


def test_among_equal_causes_the_earliest_wins():
    late = causes.Evidence(causes.SIGNAL, "rank 3 was killed by signal 9", rank=3, at=20.0)
    early = causes.Evidence(causes.SIGNAL, "rank 2 was killed by signal 9", rank=2, at=10.0)
    assert causes.choose([late, early])[0] is early and causes.choose([early, late])[0] is early


def test_a_consequence_that_names_a_collective_error_does_not_make_the_cause_a_collective():
    cause = causes.Evidence(causes.EXCEPTION, "ValueError: bad batch at step 7", rank=1, host="algo-2")
    reason = causes.format_reason(cause, [causes.Evidence(causes.COLLECTIVE, RESET, rank=0, host="algo-1")])
    assert causes.cause_of(reason) == causes.EXCEPTION


def test_the_silent_peer_and_torchrun_reports_are_read_back():
    text = causes.silent_peer_text(rank=1, host="algo-2", local_rank=0, step=19, silent_seconds=4.2, error=RESET)
    assert causes.silent_peer(text) == (1, "algo-2", 0, 19) and causes.classify(text) == causes.COLLECTIVE
    assert causes.torchrun_failures(SIGKILL_LOG) == [(0, -9, 4242)]
