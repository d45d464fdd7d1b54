"""The stall watchdog: a thread in every rank that notices when the job stops making progress, says which rank
is silent and where, and ends every process so that SageMaker ends the job (and the pipeline retries it).

Progress (`Heart`, one per process, fed by the training loop): an optimizer step ends, or the phase changes
(a start-up phase, an evaluation or a save begins or ends). `where` (data, forward/backward, ...) only says
where a step is. Each rank's watchdog thread publishes a heartbeat every `poll` seconds: its step, phase, the
time of its last progress, its median step time, its pid and the innermost frames of its main thread, in the
process group's store (the TCPStore torchrun's agent hosts on the first node, reachable from every node: one
client connection per watchdog, independent of the training's own) or, in a single process, in memory.

Global rank 0 and every node leader (local rank 0) judge all heartbeats; a rank is silent when it made no
progress for its phase's limit (`Limits`): training steps `minutes` (`auto`: max(`floor_minutes`, 20 x the
median step time measured so far, the largest median of all ranks)); start-up before the first step,
evaluation, checkpoint saves and the final evaluation/model write have the longer `startup_minutes`. A rank
whose watchdog itself stopped publishing (SIGSTOP, a frozen host) is `frozen`. In data parallel training all
ranks go silent together (the healthy ones wait in a collective for the stuck one), so the named ranks are the
frozen ones, else the silent ranks whose main thread is not waiting in torch.distributed / autograd (the one
stuck in its data loader, its own code, a sleep), else all silent ranks.

On a stall the judge claims it once (store `add`), announces the message, and every rank's watchdog:
dumps the stacks of all its threads (faulthandler) to its log and to `<checkpoint_dir>/_stalls/<job>/
rank-<r>.txt` (synced to S3 with the checkpoints), writes the failure file (first line: "stall watchdog: rank 3
(algo-2, local rank 1) made no progress for 12.0 min at step 57; last in ...", which becomes the job's
FailureReason), kills the frozen ranks of its own host (SIGKILL) and its own children (data loader workers),
waits (at most `ACK_SECONDS`) until every live rank has seen the announcement, and exits with `EXIT_CODE`. The
claimant also appends the stall record `{job, last_progress_at, detected_at, rank, host, ...}` to
`<checkpoint_dir>/_stalls.json` (CONTRACTS.md), from which the pipeline's goodput ledger counts `stalled`.
"""

from __future__ import annotations

import contextlib
import faulthandler
import io
import json
import logging
import os
import signal
import socket
import statistics
import sys
import threading
import time
import traceback
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from contract import heartbeat, stall_board, stall_records, startup_limit
from hftrain.recovery import generation
from hftrain.stall import stragglers
from hftrain.stall.boards import LocalBoard, board_from_env
from hftrain.stall.limits import MEASURED_KINDS, Limits
from hftrain.stall.verdict import STACKS_DIR, judge

logger = logging.getLogger("hftrain")

EXIT_CODE = 75  # EX_TEMPFAIL: the job stopped making progress; the pipeline retries it
KEY = stall_board.FIXED_PREFIX  # without the run's token (local runs); a pipeline job's keys carry its token
ACK_SECONDS = 15.0
# A main thread waiting in one of these is waiting for the other ranks, not the cause of a stall.
WAITING_IN = (f"torch{os.sep}distributed{os.sep}", f"torch{os.sep}autograd{os.sep}",
              f"torch{os.sep}nn{os.sep}parallel{os.sep}", f"accelerate{os.sep}utils{os.sep}operations")
_OWN = Path(__file__).resolve()


# --- what the main thread reports -------------------------------------------------------------------------------
class Heart:
    """This process's progress, written by the training loop (cheap: attributes only), read by the watchdog."""

    def __init__(self, clock: Callable[[], float] = time.time) -> None:
        self.clock = clock
        self.phase, self.kind, self.where = "imports", "startup", ""
        self.step = 0
        self.steps = 0
        self.moved_at = clock()
        self._step_started: float | None = None
        self.step_seconds: deque[float] = deque(maxlen=101)
        self.sections: dict[str, float] = {}  # eval/save: the longest one measured (limits.py derives from it)
        self.own_seconds = 0.0  # this step's own time so far: data and forward, not the wait for the peers
        self.own_steps: deque[tuple[float, float]] = deque(maxlen=4096)  # (step end, own seconds)
        self.since = self.moved_at  # when the current phase began (the heartbeat says "since")

    def mark(self, phase: str, kind: str | None = None) -> None:
        """A phase begins: progress. kind: startup, train, eval, save or final (the limit that applies)."""
        now = self.clock()
        self._section_ends(now)
        self.phase, self.where = phase, ""
        self.kind = kind or self.kind
        self.moved_at = self.since = now
        if self.kind == "train":
            self._step_started = self.moved_at

    def _section_ends(self, now: float) -> None:
        if self.kind in MEASURED_KINDS:
            self.sections[self.kind] = max(self.sections.get(self.kind, 0.0), now - self.since)

    def at(self, where: str) -> None:
        """Where a step is (data, forward_backward, ...): not progress."""
        self.where = where

    def step_ends(self, step: int) -> None:
        now = self.clock()
        if self.kind != "train":
            self._section_ends(now)
            self.since = now
        if self._step_started is not None and self.kind == "train":
            self.step_seconds.append(now - self._step_started)
        self.own_steps.append((now, self.own_seconds))
        self.own_seconds = 0.0
        self.step, self.steps = step, self.steps + 1
        generation.step_done(step)  # the recovery supervisor names it if this process dies without a word
        self.phase, self.kind, self.where = "train", "train", ""
        self.moved_at = self._step_started = now

    def own(self, seconds: float) -> None:
        """Time this rank spent on its own work of the current step (its data, its forward pass)."""
        self.own_seconds += seconds

    @contextlib.contextmanager
    def own_time(self) -> Iterator[None]:
        """Counts the block as this rank's own time of the training step (not in evaluations)."""
        began = time.perf_counter()
        try:
            yield
        finally:
            if self.kind == "train":
                self.own(time.perf_counter() - began)

    def own_step(self, since: float) -> tuple[float | None, int]:
        """(the median own seconds per step of the steps that ended after `since`, how many)."""
        recent = [own for at, own in list(self.own_steps) if at >= since]
        return (statistics.median(recent) if recent else None), len(recent)

    def median_step(self) -> float | None:
        return statistics.median(self.step_seconds) if self.step_seconds else None


HEART = Heart()  # the process's one heart (the training loop marks it; the watchdog reads it)


# --- frames ---------------------------------------------------------------------------------------------------
def main_frames(limit: int = 3) -> tuple[list[str], bool]:
    """The main thread's innermost frames outside the standard library and this module ("function (file:line)",
    innermost first), and whether it waits for other ranks (in torch.distributed / autograd)."""
    frame = sys._current_frames().get(threading.main_thread().ident)  # noqa: SLF001 - the documented way
    names: list[str] = []
    waiting = False
    stdlib = os.path.dirname(os.__file__)
    depth = 0
    while frame is not None and depth < 200:
        path = frame.f_code.co_filename
        if any(part in path for part in WAITING_IN) and not names:
            waiting = True
        if not path.startswith(stdlib) and Path(path).resolve() != _OWN and len(names) < limit:
            names.append(f"{frame.f_code.co_name} ({_short(path)}:{frame.f_lineno})")
        frame, depth = frame.f_back, depth + 1
    return names, waiting


def _short(path: str) -> str:
    for marker in ("site-packages" + os.sep, "dist-packages" + os.sep, "training_code" + os.sep, "code" + os.sep):
        if marker in path:
            return path.rsplit(marker, 1)[1]
    return os.path.basename(path)


# --- the thread -----------------------------------------------------------------------------------------------
@dataclass
class Identity:
    rank: int = 0
    world: int = 1
    local_rank: int = 0
    host: str = "algo-1"
    job: str = "local"
    checkpoint_dir: str | None = None
    hosts: tuple[str, ...] = ()
    local_world: int = 1

    def layout(self, rank: int) -> tuple[str, int]:
        """(host, local rank) of a global rank, as torchrun numbers them (node rank x processes per node + local
        rank, the nodes in SageMaker's host order): for a rank that never published its own."""
        node, local = divmod(rank, max(1, self.local_world))
        return (self.hosts[node] if node < len(self.hosts) else "?"), local

    @classmethod
    def from_env(cls, checkpoint_dir: str | None = None) -> Identity:
        from hftrain.smenv import SageMakerEnv

        env = SageMakerEnv.from_environ()
        return cls(rank=int(os.environ.get("RANK", "0") or 0), world=int(os.environ.get("WORLD_SIZE", "1") or 1),
                   local_rank=int(os.environ.get("LOCAL_RANK", "0") or 0), host=env.current_host, job=env.job_name,
                   checkpoint_dir=checkpoint_dir, hosts=tuple(env.hosts),
                   local_world=int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))


def dump_stacks(handle) -> None:
    """Every thread's stack: faulthandler (C level, also for a thread stuck in C code) when the handle is a real
    file, else the same from Python's frames."""
    try:
        handle.flush()
        faulthandler.dump_traceback(file=handle, all_threads=True)
        return
    except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
        pass
    for ident, frame in sys._current_frames().items():  # noqa: SLF001
        handle.write(f"Thread 0x{ident:x}:\n{''.join(traceback.format_stack(frame))}\n")


def _exit_process(code: int) -> None:
    _kill_children()
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _kill_children() -> None:
    try:
        import psutil

        for child in psutil.Process().children(recursive=True):
            child.kill()
    except Exception:  # noqa: BLE001, S110 - best effort: the container ends them too
        pass


class Watchdog(threading.Thread):
    def __init__(self, who: Identity, limits: Limits, *, board: Any = None, heart: Heart = HEART,
                 poll: float | None = None, clock: Callable[[], float] = time.time,
                 exit: Callable[[int], None] = _exit_process, ack_seconds: float = ACK_SECONDS,
                 frames: Callable[[], tuple[list[str], bool]] = main_frames,
                 straggler_seconds: float = 300.0, straggler_action: str = "warn") -> None:
        super().__init__(name="stall-watchdog", daemon=True)
        self.who, self.limits, self.heart, self.clock = who, limits, heart, clock
        self.board = board  # None: connected in the thread (board_from_env), never blocking the training
        # the run's random token in every key: another job reaching this store cannot name them (contract/stall_board.py)
        self.key = stall_board.prefix(os.environ.get(stall_board.VARIABLE), generation.current())
        shortest = min(limits.seconds("train", None), limits.seconds("startup", None))
        self.poll = poll if poll is not None else min(10.0, max(0.2, shortest / 10))
        self.exit, self.ack_seconds, self.frames = exit, ack_seconds, frames
        self.judging = who.rank == 0 or who.local_rank == 0
        self.ranks = list(range(who.world))  # whose heartbeats this rank reads when it judges
        self.started_at = clock()
        self.stopping = threading.Event()
        self.verdict: dict[str, Any] | None = None  # what this rank acted on
        self.store_errors = 0
        self._file_beat_at: float | None = None
        self.straggler_seconds = straggler_seconds  # the straggler window (stragglers.py)
        self.straggler_action = straggler_action  # warn | end (stall_stragglers)
        self._stragglers_at = self.started_at
        self.stragglers: list[dict[str, Any]] = []  # named at the last look (global rank 0)
        # every rank named in this job, its latest figures while it was slower; `now`: at the last look too
        self.named: dict[int, dict[str, Any]] = {}

    # the loop
    def run(self) -> None:
        if self.board is None:
            self.board = board_from_env()
        if isinstance(self.board, LocalBoard) and self.who.world > 1:
            self.ranks = [self.who.rank]  # no store: this rank can only judge itself
        first = True
        while first or not self.stopping.wait(self.poll):
            first = False  # the first beat at once: a rank frozen before its first poll is still known
            try:
                if self.tick():
                    return
                self.store_errors = 0
            except Exception as err:  # noqa: BLE001 - the store may go away at the job's end
                self.store_errors += 1
                if self.store_errors in (1, 10):
                    logger.warning("stall watchdog (rank %d): %s: %s", self.who.rank, type(err).__name__, err)

    def stop(self) -> None:
        self.stopping.set()
        if self in CURRENT:
            CURRENT.remove(self)

    def beat(self) -> dict[str, Any]:
        heart, now = self.heart, self.clock()
        frames, waiting = self.frames()
        own, own_count = heart.own_step(now - self.straggler_seconds)
        return {"rank": self.who.rank, "host": self.who.host, "local_rank": self.who.local_rank, "pid": os.getpid(),
                "job": self.who.job, "step": heart.step if heart.steps or heart.kind != "startup" else None,
                "phase": heart.phase, "kind": heart.kind, "where": heart.where, "moved_at": heart.moved_at,
                "alive_at": now, "median_step": heart.median_step(), "frames": frames, "waiting": waiting,
                "since": heart.since, "sections": dict(heart.sections),
                "own_step": own, "own_steps": own_count,
                "hostname": socket.gethostname()}

    def tick(self) -> bool:
        """One look; True once this process acted on a stall (it normally does not return from that)."""
        beat = self.beat()
        self.board.set(f"{self.key}beat/{self.who.rank}", json.dumps(beat))
        if self.who.rank == 0:
            self._write_heartbeat(beat)
        announced = self.board.get(f"{self.key}flag")
        beats = None
        if announced is None and self.judging:
            keys = [f"{self.key}beat/{r}" for r in self.ranks]
            beats = {r: (json.loads(v) if v else None) for r, v in zip(self.ranks, self.board.get_many(keys),
                                                                       strict=True)}
            found = judge(beats, self.limits, now=self.clock(), started_at=self.started_at, poll=self.poll,
                          identity=self.who.layout)
            if found is not None and self.board.add(f"{self.key}claim", 1) == 1:
                self.board.set(f"{self.key}flag", json.dumps({"message": found.message, "record": found.record,
                                                         "ranks": found.ranks}))
                self._record(found.record)
                announced = self.board.get(f"{self.key}flag")
        if announced is None:
            if self.who.rank == 0 and len(self.ranks) > 1 and beats is not None:  # rank 0 always judges
                self._look_for_stragglers(beats)
            return False
        self.act(json.loads(announced))
        return True

    def _look_for_stragglers(self, beats: dict[int, dict[str, Any] | None]) -> None:
        """At every look after the first full window: the ranks slower than the fleet by their own time per step
        over the trailing window (each beat carries its median). A rank is named as soon as it becomes one (its
        median crosses once half the window is slow: within one window of the change), then again once per window
        while it stays one; a window that named none says so once."""
        now = self.clock()
        if now - self.started_at < self.straggler_seconds:
            return
        found = stragglers.find(beats)  # the beats this look's stall judgement read
        newly = {s["rank"] for s in found} - {s["rank"] for s in self.stragglers}
        due = now - self._stragglers_at >= self.straggler_seconds
        self.stragglers = found
        for earlier in self.named.values():
            earlier["now"] = False
        self.named.update({s["rank"]: {**s, "now": True} for s in found})
        if not (newly or due):
            return
        self._stragglers_at = now
        for straggler in found:
            logger.warning("%s (over the last %.0f min)", stragglers.describe(straggler), self.straggler_seconds / 60)
        if not found:  # one line per window (5 min by default): a quiet window is seen to have looked
            logger.info("%s", stragglers.window_line(beats, self.straggler_seconds / 60))
        if found and self.straggler_action == "end" and self.board.add(f"{self.key}claim", 1) == 1:
            # announced like a stall (every rank writes it and exits), but no stall record: no time was stalled
            message = stragglers.ending_text(found[0], self.straggler_seconds / 60)
            self.board.set(f"{self.key}flag", json.dumps({"message": message, "record": None, "ranks": []}))

    def act(self, announced: dict[str, Any]) -> None:
        """Stacks, failure file, frozen local ranks ended, everyone told, exit."""
        from hftrain.run.failure import write_failure

        self.verdict = announced
        rank = self.who.rank
        sys.stderr.write(f"\n{announced['message'].splitlines()[0]}\n")
        sys.stderr.write(f"stall watchdog: stacks of rank {rank} ({self.who.host}, pid {os.getpid()}):\n")
        sys.stderr.flush()
        dump_stacks(sys.stderr)
        path = self._write_stacks()
        if path:
            sys.stderr.write(f"stall watchdog: stacks of rank {rank} also in {path}\n")
        write_failure(announced["message"], where=f"seen by rank {rank} on {self.who.host}")
        me = socket.gethostname()
        for beat in announced.get("ranks", []):
            if beat.get("frozen") and beat.get("hostname") == me and beat.get("pid") and beat["pid"] != os.getpid():
                try:
                    os.kill(int(beat["pid"]), signal.SIGKILL)
                    sys.stderr.write(f"stall watchdog: ended frozen rank {beat['rank']} (pid {beat['pid']})\n")
                except OSError:
                    pass
        frozen = sum(1 for b in announced.get("ranks", []) if b.get("frozen"))
        try:
            self.board.add(f"{self.key}ack", 1)
            deadline = time.monotonic() + self.ack_seconds
            while time.monotonic() < deadline and int(self.board.get(f"{self.key}ack") or 0) < self.who.world - frozen:
                time.sleep(min(0.2, self.poll))
        except Exception:  # noqa: BLE001, S110 - the store's host may be gone already: exit anyway
            pass
        sys.stderr.flush()
        self.exit(EXIT_CODE)

    def _write_heartbeat(self, beat: dict[str, Any]) -> None:
        """The heartbeat file (contract/heartbeat.py) every heartbeat.WRITE_SECONDS (SageMaker syncs it to S3): what the
        pipeline's outside watch reads when the job cannot report a stall itself (a frozen instance)."""
        now = beat["alive_at"]
        if not self.who.checkpoint_dir or (self._file_beat_at is not None and
                                           now - self._file_beat_at < heartbeat.WRITE_SECONDS):
            return
        self._file_beat_at = now
        ranks = []
        if self.who.world > 1 and len(self.ranks) > 1:
            try:  # every rank's phase, not only this one's (the outside watch shows them)
                values = self.board.get_many([f"{self.key}beat/{r}" for r in self.ranks])
                ranks = [heartbeat.rank_entry(json.loads(v)) for v in values if v]
            except Exception:  # noqa: BLE001 - the store may be going away; this rank's own line still goes out
                ranks = []
        record = heartbeat.record(job=self.who.job, step=beat["step"], phase=beat["phase"], kind=beat["kind"],
                                  moved_at=beat["moved_at"], at=now,
                                  limit_seconds=self.limits.seconds(beat["kind"], beat["median_step"],
                                                                    beat["sections"]),
                                  since=beat["since"], ranks=ranks,
                                  stragglers=sorted(self.named.values(), key=lambda n: (not n["now"], -n["slower"])))
        path = Path(self.who.checkpoint_dir) / heartbeat.FILE_NAME
        try:
            tmp = path.with_name(f".{heartbeat.FILE_NAME}.{os.getpid()}")
            tmp.write_text(heartbeat.format_heartbeat(record))
            os.replace(tmp, path)
        except (OSError, ValueError):
            pass

    def _write_stacks(self) -> str | None:
        if not self.who.checkpoint_dir:
            return None
        folder = Path(self.who.checkpoint_dir) / STACKS_DIR / self.who.job
        try:
            folder.mkdir(parents=True, exist_ok=True)
            path = folder / stall_records.stacks_file(self.who.rank)
            with path.open("w") as handle:
                dump_stacks(handle)
            return str(path)
        except OSError:
            return None

    def _record(self, record: dict[str, Any]) -> None:
        """The stall record beside the checkpoints (the claimant only), appended to earlier attempts' records."""
        if not self.who.checkpoint_dir:
            return
        try:
            stall_records.append_record(self.who.checkpoint_dir, record)
        except (OSError, ValueError) as err:
            logger.warning("stall watchdog: could not write %s: %s", stall_records.FILE_NAME, err)


def start(limits: Limits, *, checkpoint_dir: str | None, poll: float | None = None,
          straggler_minutes: float = 5.0, straggler_action: str = "warn") -> Watchdog:
    """This rank's watchdog, running; its heart starts counting now."""
    who = Identity.from_env(checkpoint_dir)
    HEART.moved_at = time.time()
    watchdog = Watchdog(who, limits, poll=poll, straggler_seconds=straggler_minutes * 60,
                        straggler_action=straggler_action)
    watchdog.start()
    CURRENT[:] = [watchdog]
    if who.rank == 0:
        logger.info("stall watchdog: every rank; training steps %s; start-up phases %s (evaluations and saves "
                    "too, until one is measured); checked every %.1f s", limits.describe("train", None),
                    startup_limit.describe(limits.startup_minutes, limits.measured_startup), watchdog.poll)
    return watchdog


CURRENT: list[Watchdog] = []  # this process's running watchdog (start), for `peer_failure`


def peer_failure(error: BaseException, step: int | None = None) -> str | None:
    """After this rank's collective failed (gloo "Connection reset by peer", an NCCL error): a stall already
    announced is the cause (this rank's watchdog acts on it and ends the process: wait for it); else the failure
    text that names the peer whose watchdog published last longest ago (the one that ended or froze) and this
    rank's error as a consequence. None when the error is not a collective's or no watchdog runs."""
    from contract import failure_causes

    text = f"{type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else 'no message'}"
    watchdog = CURRENT[-1] if CURRENT else None
    if watchdog is None or not watchdog.is_alive() or failure_causes.classify(text) != failure_causes.COLLECTIVE:
        return None
    try:
        if watchdog.board.get(f"{watchdog.key}flag") is not None:
            watchdog.join(2 * watchdog.poll + watchdog.ack_seconds)  # it writes the stall and exits the process
        keys = [f"{watchdog.key}beat/{r}" for r in range(watchdog.who.world) if r != watchdog.who.rank]
        beats = [json.loads(v) for v in watchdog.board.get_many(keys) if v]
    except Exception:  # noqa: BLE001 - the store's host may be the one that ended
        beats = []
    step = HEART.step if step is None else step
    if not beats:
        return f"a collective failed after step {step} (a peer ended or froze; its heartbeat is unknown): {text}"
    oldest = min(beats, key=lambda b: float(b.get("alive_at") or 0))
    return failure_causes.silent_peer_text(rank=oldest["rank"], host=oldest.get("host") or "?",
                                           local_rank=oldest.get("local_rank") or 0, step=step,
                                           silent_seconds=time.time() - float(oldest.get("alive_at") or 0),
                                           error=text)
