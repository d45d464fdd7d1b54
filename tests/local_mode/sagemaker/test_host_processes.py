"""A stopped host leaves nothing behind, not even children that started sessions of their own; waiting for
hosts ends them all on a failure or a deadline."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from local_mode.sagemaker.host_processes import HostProcess, stop_hosts, wait_for_hosts

# A parent that ignores SIGTERM and a child in a new session (as torchrun starts its workers).
SCRIPT = """
import signal, subprocess, sys, time
signal.signal(signal.SIGTERM, signal.SIG_IGN)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"], start_new_session=True)
print("child", child.pid, flush=True)
time.sleep(60)
"""


def test_stop_hosts_kills_the_whole_tree(tmp_path: Path):
    lines: list[tuple[str, str]] = []
    host = HostProcess(
        "algo-1",
        [sys.executable, "-c", SCRIPT],
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        log_path=tmp_path / "algo-1.log",
        on_line=lambda h, line: lines.append((h, line)),
    )
    host.start()
    deadline = time.monotonic() + 20
    while not lines and time.monotonic() < deadline:
        time.sleep(0.05)
    child_pid = int(lines[0][1].split()[1])
    stop_hosts([host], grace_seconds=0.5)
    assert host.poll() is not None
    assert not psutil.pid_exists(child_pid) or psutil.Process(child_pid).status() == psutil.STATUS_ZOMBIE
    assert (tmp_path / "algo-1.log").read_text().startswith("child ")


def test_exit_code_and_tail(tmp_path: Path):
    host = HostProcess(
        "algo-2",
        [
            sys.executable,
            "-c",
            "import sys; print('one', flush=True); print('two', file=sys.stderr); sys.exit(3)",
        ],
        env={"PATH": "/usr/bin:/bin"},
        cwd=tmp_path,
        log_path=tmp_path / "algo-2.log",
    )
    host.start()
    assert host.finish(timeout=20) == 3
    assert list(host.tail) == ["one", "two"]


def _host(tmp_path: Path, name: str, code: str) -> HostProcess:
    return HostProcess(name, [sys.executable, "-c", code], env={"PATH": "/usr/bin:/bin"}, cwd=tmp_path,
                       log_path=tmp_path / f"{name}.log")


def test_a_deadline_ends_every_host(tmp_path: Path):
    hosts = [_host(tmp_path, f"algo-{i}", "import time; time.sleep(60)") for i in (1, 2)]
    for host in hosts:
        host.start()
    deadline = time.monotonic() + 0.5
    outcome, failed = wait_for_hosts(hosts, grace_seconds=1, poll_seconds=0.05,
                                     after_poll=lambda: "timeout" if time.monotonic() > deadline else None)
    assert (outcome, failed) == ("timeout", None)
    assert all(host.poll() is not None for host in hosts)


def test_one_failed_host_ends_the_others_and_is_named(tmp_path: Path):
    waiting = _host(tmp_path, "algo-1", "import time; time.sleep(60)")
    failing = _host(tmp_path, "algo-2", "import sys; sys.exit(4)")
    for host in (waiting, failing):
        host.start()
    outcome, failed = wait_for_hosts([waiting, failing], grace_seconds=1, poll_seconds=0.05)
    assert (outcome, failed) == ("failed", failing) and failing.poll() == 4
    assert waiting.poll() is not None  # ended, not left waiting for its peer


def test_before_poll_wins_over_exit_codes(tmp_path: Path):
    done = _host(tmp_path, "algo-1", "pass")
    done.start()
    done.finish(timeout=20)
    assert wait_for_hosts([done], grace_seconds=1, poll_seconds=0.05, before_poll=lambda: "stopped") == (
        "stopped", None)
    assert wait_for_hosts([done], grace_seconds=1, poll_seconds=0.05, after_poll=lambda: "late") == (
        "completed", None)
