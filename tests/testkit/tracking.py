"""A real MLflow tracking server for the tests (local_mode/tracking_server.py), and a server that never answers."""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from local_mode.tracking_server import TrackingServer


@contextmanager
def mlflow_server(root: Path) -> Iterator[TrackingServer]:
    with TrackingServer(root=root) as server:
        yield server


@contextmanager
def silent_server() -> Iterator[str]:
    """http://127.0.0.1:PORT that accepts connections and never answers (a hung tracking server)."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(64)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(sock.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(2)
        for conn in held:
            conn.close()
        sock.close()
