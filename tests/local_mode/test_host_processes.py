"""A stopped host leaves nothing behind, not even children that started sessions of their own."""

from __future__ import annotations

import sys
import time
from pathlib import Path

import psutil

from local_mode.host_processes import HostProcess, stop_hosts

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
