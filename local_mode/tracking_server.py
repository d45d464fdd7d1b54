"""Local mode's MLflow tracking server: the real `mlflow server` on the loopback interface.

Its SQLite backend and artifacts live under `.local-runs/mlflow/` (`mlflow.db`, `artifacts/`), so runs of every
local session stay in one place and `make mlflow` shows them in a browser. The server is the full `mlflow`
package in a venv of its own (`.venv-mlflow`, requirements-mlflow.txt: its pins conflict with the project's); the
jobs and the tests talk to it with the client the cloud jobs use (mlflow-skinny).
"""

from __future__ import annotations

import os
import socket
import subprocess
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DEFAULT_ROOT = REPO / ".local-runs" / "mlflow"
SERVER_VENV = REPO / ".venv-mlflow"
HOST = "127.0.0.1"
DEFAULT_PORT = 5000
BROWSE_URI = f"http://{HOST}:{DEFAULT_PORT}"  # `make mlflow`
START_TIMEOUT_SECONDS = 120.0


class TrackingServerError(RuntimeError):
    """The server could not start: the message says why and what to do."""


def executable() -> Path:
    path = SERVER_VENV / "bin" / "mlflow"
    if not path.exists():
        raise TrackingServerError(f"{path} is missing: run `make setup` (it installs the MLflow server from "
                                  "requirements-mlflow.txt into .venv-mlflow)")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind((HOST, 0))
        return sock.getsockname()[1]


class TrackingServer:
    """`mlflow server` on 127.0.0.1:`port` over `root` (mlflow.db, artifacts/); a context manager."""

    def __init__(self, root: Path = DEFAULT_ROOT, port: int = 0) -> None:
        self.root = Path(root).resolve()
        self.port = port or free_port()
        self.process: subprocess.Popen | None = None

    @property
    def uri(self) -> str:
        return f"http://{HOST}:{self.port}"

    def command(self) -> list[str]:
        return [str(executable()), "server", "--host", HOST, "--port", str(self.port),
                "--backend-store-uri", f"sqlite:///{self.root / 'mlflow.db'}",
                "--artifacts-destination", str(self.root / "artifacts"), "--workers", "1"]

    def start(self, timeout: float = START_TIMEOUT_SECONDS) -> TrackingServer:
        return self.launch().wait_ready(timeout)

    def launch(self) -> TrackingServer:
        """The server process, started; it answers a few seconds later (`wait_ready`): a caller may do other work
        in between (local mode deploys the emulated stacks meanwhile)."""
        self.root.mkdir(parents=True, exist_ok=True)
        log = open(self.root / "server.log", "ab")  # noqa: SIM115 - the server's, closed with it
        # No job execution: MLflow 3's server otherwise starts a job runner and seven huey consumers (for its GenAI
        # jobs, which tracking never uses): eight more processes to start and stop on a 2-core machine.
        env = {**os.environ, "MLFLOW_HOME": str(self.root), "MLFLOW_SERVER_ENABLE_JOB_EXECUTION": "false"}
        self.process = subprocess.Popen(self.command(), stdout=log, stderr=subprocess.STDOUT, env=env,
                                        start_new_session=True)  # its workers stop with it (stop: the group)
        log.close()
        return self

    def wait_ready(self, timeout: float = START_TIMEOUT_SECONDS) -> TrackingServer:
        """Until the launched server answers /health; TrackingServerError (the server stopped) when it exits or
        stays silent for `timeout` seconds."""
        assert self.process is not None, "launch() first"
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise TrackingServerError(f"mlflow server exited with code {self.process.returncode}; see "
                                          f"{self.root / 'server.log'}")
            if self.healthy():
                return self
            time.sleep(0.2)
        self.stop()
        raise TrackingServerError(f"mlflow server did not answer on {self.uri} within {timeout:g} s; see "
                                  f"{self.root / 'server.log'}")

    def healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.uri}/health", timeout=2) as response:  # noqa: S310 - loopback
                return response.status == 200
        except OSError:
            return False

    def stop(self, *, wait: bool = True) -> None:
        """SIGTERM to the server's process group; `wait=False` returns at once (it takes about 3 s to shut down
        gracefully, on its own: every request it answered is committed to SQLite already)."""
        process, self.process = self.process, None
        if process is None or process.poll() is not None:
            return
        os.killpg(process.pid, 15)
        if not wait:
            return
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, 9)
            process.wait()

    def __enter__(self) -> TrackingServer:
        return self.start() if self.process is None else self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def serve(root: Path = DEFAULT_ROOT, port: int = DEFAULT_PORT) -> int:
    """`make mlflow`: the server in the foreground until Ctrl-C."""
    server = TrackingServer(root, port)
    try:
        server.start()
    except TrackingServerError as exc:
        print(f"error: {exc}")
        return 2
    print(f"MLflow: {server.uri} (runs of every local session, {server.root}); Ctrl-C stops it")
    try:
        while server.process is not None and server.process.poll() is None:
            time.sleep(1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stop()
    return 0
