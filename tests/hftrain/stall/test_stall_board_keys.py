"""The stall board's keys carry the run's token (issue 36, finding 4): a process of another job that reaches the
same TCPStore and sets the fixed-prefix flag (or any key it can guess) does not end this run."""

from __future__ import annotations

import json

from contract import stall_board
from hftrain.stall import watchdog as stall
from hftrain.stall.boards import LocalBoard
from hftrain.stall.limits import Limits

TOKEN = "0123456789abcdef0123456789abcdef"
FORGED = json.dumps({"message": "forged stall", "record": {}, "ranks": [0]})


def _watchdog(monkeypatch, board: LocalBoard, token: str | None) -> tuple[stall.Watchdog, list]:
    if token is None:
        monkeypatch.delenv(stall_board.VARIABLE, raising=False)
    else:
        monkeypatch.setenv(stall_board.VARIABLE, token)
    acted: list = []
    who = stall.Identity(rank=1, world=2, local_rank=0, host="algo-2", job="job-1")
    watchdog = stall.Watchdog(who, Limits(minutes=60, startup_minutes=60), board=board, exit=acted.append)
    watchdog.act = acted.append  # what the watchdog would do on a flag: record it instead of exiting
    return watchdog, acted


def test_a_flag_set_under_a_guessable_key_is_not_this_run_s(monkeypatch):
    board = LocalBoard()
    watchdog, acted = _watchdog(monkeypatch, board, TOKEN)
    board.set(f"{stall_board.FIXED_PREFIX}flag", FORGED)  # another job's process, writing the fixed key
    assert watchdog.tick() is False and acted == []
    assert f"{stall_board.FIXED_PREFIX}{TOKEN}/beat/1" in board.values  # its own keys carry the token
    board.set(f"{stall_board.FIXED_PREFIX}{TOKEN}/flag", FORGED)  # only the token's holder can do this
    assert watchdog.tick() is True and acted[0]["message"] == "forged stall"


def test_without_a_token_the_fixed_prefix_is_used(monkeypatch):
    board = LocalBoard()
    watchdog, _ = _watchdog(monkeypatch, board, None)
    assert watchdog.key == stall_board.FIXED_PREFIX == stall.KEY
    assert stall_board.prefix("not-hex/../x") == stall_board.FIXED_PREFIX  # a malformed token is no token
