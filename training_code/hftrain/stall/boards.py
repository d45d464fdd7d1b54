"""Where the stall watchdogs' heartbeats live (watchdog.py): torchrun's TCPStore, or memory in one process."""

from __future__ import annotations

import logging
import os
import threading
from datetime import timedelta

logger = logging.getLogger("hftrain")


class LocalBoard:
    """One process (no torchrun), or tests: everything in memory."""

    def __init__(self) -> None:
        self.values: dict[str, str] = {}
        self.lock = threading.Lock()

    def set(self, key: str, value: str) -> None:
        with self.lock:
            self.values[key] = value

    def get(self, key: str) -> str | None:
        with self.lock:
            return self.values.get(key)

    def get_many(self, keys: list[str]) -> list[str | None]:
        with self.lock:
            return [self.values.get(k) for k in keys]

    def add(self, key: str, amount: int) -> int:
        with self.lock:
            value = int(self.values.get(key) or 0) + amount
            self.values[key] = str(value)
            return value


class StoreBoard:
    """The TCPStore torchrun's agent hosts (MASTER_ADDR:MASTER_PORT), through this thread's own client."""

    def __init__(self, host: str, port: int, timeout: float = 30.0) -> None:
        import torch.distributed as dist

        self.store = dist.TCPStore(host, port, is_master=False, timeout=timedelta(seconds=timeout),
                                   wait_for_workers=False)

    def set(self, key: str, value: str) -> None:
        self.store.set(key, value)

    def get(self, key: str) -> str | None:
        return self.store.get(key).decode() if self.store.check([key]) else None

    def get_many(self, keys: list[str]) -> list[str | None]:
        return [self.get(k) for k in keys]

    def add(self, key: str, amount: int) -> int:
        return int(self.store.add(key, amount))


def board_from_env(environ: dict[str, str] | None = None) -> LocalBoard | StoreBoard:
    env = os.environ if environ is None else environ
    if int(env.get("WORLD_SIZE", "1") or 1) > 1 and env.get("MASTER_ADDR") and env.get("MASTER_PORT"):
        try:
            return StoreBoard(env["MASTER_ADDR"], int(env["MASTER_PORT"]))
        except Exception as err:  # noqa: BLE001 - watch this process alone rather than not at all
            logger.warning("stall watchdog: cannot reach the store at %s:%s (%s): watching this rank alone",
                           env["MASTER_ADDR"], env["MASTER_PORT"], err)
    return LocalBoard()
