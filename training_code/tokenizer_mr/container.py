"""The SageMaker Processing container contract: paths under /opt/ml (or SAGEMAKER_BASE_DIR), the host list,
logging, and the one-line failure reason."""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("tokenizer_mr")


class JobError(RuntimeError):
    """A failure with a one-line reason that says what to do (exit code 2)."""


def base_dir() -> Path:
    return Path(os.environ.get("SAGEMAKER_BASE_DIR") or "/opt/ml")


def default_path(relative: str) -> str:
    return str(base_dir() / relative)


@dataclass(frozen=True)
class HostInfo:
    current_host: str
    hosts: tuple[str, ...]

    @property
    def index(self) -> int:
        return self.hosts.index(self.current_host)


def read_host_info() -> HostInfo:
    """This host and all hosts, from `<base>/config/resourceconfig.json` (processing jobs write it there)."""
    path = base_dir() / "config" / "resourceconfig.json"
    if not path.exists():
        log.info("no %s: running as the only host algo-1", path)
        return HostInfo("algo-1", ("algo-1",))
    try:
        cfg = json.loads(path.read_text(encoding="utf-8"))
        current = str(cfg["current_host"])
        hosts = tuple(str(h) for h in cfg.get("hosts") or [current])
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise JobError(f"cannot read {path}: {exc}") from None
    if current not in hosts:
        raise JobError(f"{path}: current_host {current!r} is not in hosts {list(hosts)}")
    return HostInfo(current, hosts)


class _StdoutHandler(logging.StreamHandler):
    """Writes to whatever `sys.stdout` is at the time (stays correct when tests swap it)."""

    @property
    def stream(self):  # type: ignore[override]
        return sys.stdout

    @stream.setter
    def stream(self, value) -> None:
        pass


def setup_logging(name: str) -> None:
    """Our records (logger `tokenizer_mr`) go to stdout, one line each, with the job name; root is untouched."""
    logger = logging.getLogger("tokenizer_mr")
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = _StdoutHandler()
    handler.setFormatter(logging.Formatter(f"%(asctime)s %(levelname)s {name}: %(message)s"))
    logger.addHandler(handler)
    logger.setLevel(os.environ.get("TOKENIZER_LOG_LEVEL", "INFO"))
    logger.propagate = False


EXIT_MESSAGE_BYTES = 1024  # DescribeProcessingJob's ExitMessage: the first 1 KB of the file


def clip_utf8_bytes(text: str, limit: int) -> str:
    """The longest prefix of text whose UTF-8 encoding fits in limit bytes (no half characters)."""
    return text.encode("utf-8")[:limit].decode("utf-8", "ignore")


def write_exit_message(text: str) -> None:
    """`<base>/output/message`: SageMaker shows its first KB (UTF-8) as the job's ExitMessage."""
    try:
        path = base_dir() / "output" / "message"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(clip_utf8_bytes(text.rstrip("\n"), EXIT_MESSAGE_BYTES - 1) + "\n", encoding="utf-8")
    except OSError:
        pass


def run_main(name: str, body: Callable[[], str]) -> int:
    """Run a job body; errors become a one-line reason on stderr and in the exit message."""
    setup_logging(name)
    t0 = time.perf_counter()
    try:
        summary = body()
    except JobError as exc:
        reason = f"{name} failed: {exc}"
        print(f"ERROR: {reason}", file=sys.stderr, flush=True)
        write_exit_message(reason)
        return 2
    except MemoryError:
        reason = f"{name} failed: out of memory; use an instance type with more memory (see docs/tokenizer.md)"
        print(f"ERROR: {reason}", file=sys.stderr, flush=True)
        write_exit_message(reason)
        return 3
    except Exception as exc:
        log.exception("unexpected error")
        reason = f"{name} failed: {type(exc).__name__}: {exc}".splitlines()[0]
        print(f"ERROR: {reason}", file=sys.stderr, flush=True)
        write_exit_message(reason)
        return 1
    log.info("done in %.1f s: %s", time.perf_counter() - t0, summary)
    write_exit_message(f"{name}: {summary}")
    return 0


def human_bytes(n: float) -> str:
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"


def available_memory_bytes() -> int | None:
    """MemAvailable from /proc/meminfo, capped by a cgroup limit when there is one."""
    avail = None
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except OSError:
        return None
    for cg in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            raw = Path(cg).read_text().strip()
        except OSError:
            continue
        if raw.isdigit() and int(raw) < (1 << 60):
            usage_file = "memory.current" if cg.endswith("memory.max") else "memory.usage_in_bytes"
            try:
                used = int((Path(cg).parent / usage_file).read_text().strip())
            except (OSError, ValueError):
                used = 0
            limit_left = int(raw) - used
            avail = limit_left if avail is None else min(avail, limit_left)
        break
    return avail


def peak_rss_bytes() -> int:
    """Peak resident memory of this process (VmHWM: unlike ru_maxrss, not inherited from a forking parent)."""
    try:
        with open("/proc/self/status", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
