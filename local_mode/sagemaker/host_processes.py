"""One emulated host = one process tree started here; its output goes to a log file and a line callback.

Every process of a host carries LOCAL_SM_HOST_TOKEN in its environment. torchrun starts its workers in
new sessions and they outlive a killed parent, so a host is stopped by signalling every process with its
token (found by scanning processes), not just its process group: nothing of a stopped host survives,
as nothing survives a stopped container.
"""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from pathlib import Path

import psutil

TOKEN_VAR = "LOCAL_SM_HOST_TOKEN"

LineCallback = Callable[[str, str], None]  # (host name, line without newline)


class HostProcess:
    """The process tree of one host: started once, watched, stopped with SIGTERM then SIGKILL."""

    def __init__(
        self,
        host: str,
        command: Sequence[str],
        *,
        env: dict[str, str],
        cwd: Path,
        log_path: Path,
        on_line: LineCallback | None = None,
        tail_lines: int = 40,
    ) -> None:
        self.host = host
        self.command = list(command)
        self.token = f"{host}-{uuid.uuid4().hex}"
        self._env = {**env, TOKEN_VAR: self.token}
        self._cwd = cwd
        self.log_path = log_path
        self._on_line = on_line
        self.tail: collections.deque[str] = collections.deque(maxlen=tail_lines)
        self._proc: subprocess.Popen[bytes] | None = None
        self._pump: threading.Thread | None = None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            self.command,
            env=self._env,
            cwd=self._cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        self._pump = threading.Thread(target=self._pump_output, name=f"log-{self.host}", daemon=True)
        self._pump.start()

    def _pump_output(self) -> None:
        assert self._proc is not None and self._proc.stdout is not None
        with self.log_path.open("ab") as log:
            for raw in self._proc.stdout:
                log.write(raw)
                log.flush()
                line = raw.decode("utf-8", "replace").rstrip("\r\n")
                self.tail.append(line)
                if self._on_line is not None:
                    self._on_line(self.host, line)

    def poll(self) -> int | None:
        assert self._proc is not None
        return self._proc.poll()

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def processes(self) -> list[psutil.Process]:
        """Every live process of this host: the tree under the launcher plus anything carrying the token."""
        found: dict[int, psutil.Process] = {}
        if self._proc is not None and self._proc.poll() is None:
            try:
                root = psutil.Process(self._proc.pid)
                found[root.pid] = root
                for child in root.children(recursive=True):
                    found[child.pid] = child
            except psutil.NoSuchProcess:
                pass
        for proc in psutil.process_iter():
            if proc.pid in found or proc.pid == os.getpid():
                continue
            try:
                if proc.environ().get(TOKEN_VAR) == self.token:
                    found[proc.pid] = proc
            except (psutil.Error, OSError):
                continue
        return list(found.values())

    def finish(self, timeout: float = 10.0) -> int | None:
        """Reap the launcher and let the log pump drain; returns the exit code."""
        code = None
        if self._proc is not None:
            try:
                code = self._proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                code = None
        if self._pump is not None:
            self._pump.join(timeout=timeout)
        return code


def _signal_all(processes: list[psutil.Process], sig: int) -> None:
    for proc in processes:
        try:
            proc.send_signal(sig)
        except (psutil.NoSuchProcess, psutil.AccessDenied):
            continue


def signal_host(host: HostProcess, sig: int, first_pid: int | None = None) -> None:
    """Send sig to every process of one host now (an instance lost at once: SIGKILL); `first_pid` first, when
    it is one of the host's (its environment carries the host's token): the process that matters most."""
    if first_pid is not None:
        try:
            proc = psutil.Process(first_pid)
            if proc.environ().get(TOKEN_VAR) == host.token:
                proc.send_signal(sig)
        except (psutil.Error, OSError):
            pass
    _signal_all(host.processes(), sig)


def stop_hosts(hosts: Sequence[HostProcess], grace_seconds: float) -> None:
    """SIGTERM every process of every host, SIGKILL what is left after the grace period."""
    targets = [proc for host in hosts for proc in host.processes()]
    _signal_all(targets, signal.SIGTERM)
    deadline = time.monotonic() + grace_seconds
    while time.monotonic() < deadline:
        if not any(_alive(p) for p in targets):
            # Workers started in new sessions after the first scan are found again by token.
            late = [p for h in hosts for p in h.processes()]
            if not late:
                break
            _signal_all(late, signal.SIGTERM)
            targets += late
        time.sleep(0.1)
    leftovers = {p.pid: p for p in targets if _alive(p)}
    for host in hosts:
        leftovers.update({p.pid: p for p in host.processes()})
    _signal_all(list(leftovers.values()), signal.SIGKILL)
    psutil.wait_procs(list(leftovers.values()), timeout=5)
    for host in hosts:
        host.finish(timeout=5)


def wait_for_hosts(
    hosts: Sequence[HostProcess],
    *,
    grace_seconds: float,
    poll_seconds: float,
    before_poll: Callable[[], str | None] | None = None,
    after_poll: Callable[[], str | None] | None = None,
) -> tuple[str, HostProcess | None]:
    """Poll until every host exits 0 ("completed") or one fails ("failed", that host); a reason named by
    before_poll() (ahead of reading the exit codes) or after_poll() (e.g. a deadline) ends them all with that
    outcome. The hosts are down on return."""
    while True:
        reason = before_poll() if before_poll is not None else None
        if reason:
            stop_hosts(hosts, grace_seconds)
            return reason, None
        codes = [(host, host.poll()) for host in hosts]
        failed = next((host for host, code in codes if code not in (None, 0)), None)
        if failed is not None:
            # The others would wait for the failed one forever (rendezvous, collectives): end them.
            stop_hosts(hosts, grace_seconds)
            return "failed", failed
        if all(code == 0 for _, code in codes):
            for host in hosts:
                host.finish()
            return "completed", None
        reason = after_poll() if after_poll is not None else None
        if reason:
            stop_hosts(hosts, grace_seconds)
            return reason, None
        time.sleep(poll_seconds)


def _alive(proc: psutil.Process) -> bool:
    try:
        return proc.is_running() and proc.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False
