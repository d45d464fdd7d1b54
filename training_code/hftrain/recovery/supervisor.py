"""Recovery in place: each rank's process (what torchrun starts: train.py) supervises a worker that trains.

The launch stays the SDK's (the toolkit's torch_distributed launcher runs torchrun, which runs train.py once per
rank). With `in_job_restarts` > 0, train.py's process becomes this supervisor: it imports torch, transformers and
the training code once, then forks a worker that runs the training (hftrain/run/runner.py `main`). When a worker
fails on instances that are healthy, every rank's supervisor ends its own worker, all agree on the cause and on
what to do (decision.py: one precedence, the in-job half of the one action table), and a new generation of workers
is forked on the same instances: no new SageMaker job, no provisioning, image pull, data download or imports. The
workers re-form the process group under the generation's own keys in torchrun's store (generation.py) and resume
from the newest complete local checkpoint (checkpoint/resume.py verifies it: a save cut short is never used).

The supervisors meet in torchrun's agent store (MASTER_ADDR:MASTER_PORT, the store the stall watchdogs use), under
the run's stall-board prefix: `recovery/g<N>/failed` (a worker of generation N failed: end yours after a grace),
`outcome/<rank>` and `reported` (each worker's end), `ready` (every supervisor is ready for generation N + 1).
A supervisor that does not report within GATHER_SECONDS (its host lost) ends the job: a new attempt is the
pipeline's to start. SIGTERM (a spot reclaim, a stop) is passed to the worker, which saves and ends; never
recovered.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import signal
import sys
import tempfile
import time
from pathlib import Path

from contract import recovery_line, stall_board
from hftrain.recovery import generation
from hftrain.recovery.decision import DONE, END, RECOVER, Decision, Outcome, decide
from hftrain.stall.boards import StoreBoard

ARG = "--in_job_restarts"
DEFAULT_RESTARTS = 2  # the `in_job_restarts` hyperparameter's default (hftrain/args.py)
GRACE_SECONDS = 10.0  # a peer's worker may end by itself this long after a failure (its collective fails first)
GATHER_SECONDS = 120.0  # every supervisor reports within this, or the job ends (a host lost)
POLL_SECONDS = 0.2


def restarts_from_argv(argv: list[str]) -> int:
    """The `in_job_restarts` hyperparameter as the toolkit passes it (`--in_job_restarts 2`), default when absent;
    the full parse (hftrain/args.py) refuses a bad value in the worker."""
    for i, arg in enumerate(argv):
        value = arg.partition("=")[2] if arg.startswith(ARG + "=") else (
            argv[i + 1] if arg == ARG and i + 1 < len(argv) else None)
        if value is not None:
            try:
                return max(0, int(value))
            except ValueError:
                return 0  # the worker's parse says what is wrong
    return DEFAULT_RESTARTS


def wanted(argv: list[str], environ: dict[str, str] | None = None) -> bool:
    """Under torchrun (its agent store to meet in) with a restart budget."""
    env = os.environ if environ is None else environ
    return bool(env.get("TORCHELASTIC_RUN_ID") and env.get("MASTER_ADDR") and env.get("MASTER_PORT")) \
        and restarts_from_argv(argv) > 0


def _preimport() -> None:
    """What every worker needs, imported once (a recovery pays none of it again). No torch op runs here: the
    forked worker starts with no threads of the parent's to lose."""
    import torch  # noqa: F401
    import transformers  # noqa: F401

    import hftrain.run.runner  # noqa: F401
    import hftrain.tasks  # noqa: F401


class Supervisor:
    def __init__(self, argv: list[str], environ: dict[str, str] | None = None) -> None:
        self.env = dict(os.environ if environ is None else environ)
        self.argv = argv
        self.budget = restarts_from_argv(argv)
        self.rank = int(self.env.get("RANK", "0") or 0)
        self.local_rank = int(self.env.get("LOCAL_RANK", "0") or 0)
        self.world = int(self.env.get("WORLD_SIZE", "1") or 1)
        self.host = self.env.get("SM_CURRENT_HOST") or "algo-1"
        token = self.env.get(stall_board.VARIABLE)
        self.board_prefix = lambda gen: stall_board.prefix(token, gen)
        self.keys = stall_board.prefix(token) + "recovery/"
        self.earlier: list[str] = []
        self.terminating = False
        self.worker: int | None = None
        self.failure_dir = tempfile.mkdtemp(prefix=f"hftrain-rank{self.rank}-")
        from hftrain.run.goodput import process_started_at

        self.started_at = process_started_at()

    # --- the loop
    def run(self) -> int:
        signal.signal(signal.SIGTERM, self._on_stop)
        signal.signal(signal.SIGINT, self._on_interrupt)
        gen = 0
        try:
            while True:
                outcome = self._generation(gen)
                if self.terminating:
                    return outcome.exit_code if outcome.exit_code >= 0 else 128 - outcome.exit_code
                decision = self._agree(gen, outcome)
                if decision.action == DONE:
                    return 0
                if self.terminating:  # a stop (SIGTERM) while the supervisors agreed: never a new generation
                    return outcome.exit_code if outcome.exit_code > 0 else 1
                if decision.action != RECOVER:
                    self._say_end(decision)
                    return outcome.exit_code if outcome.exit_code > 0 else 1
                self._recover(gen, decision)
                if not self._ready(gen + 1):
                    return outcome.exit_code if outcome.exit_code > 0 else 1
                gen += 1
        finally:
            shutil.rmtree(self.failure_dir, ignore_errors=True)

    def _on_stop(self, signum, frame) -> None:  # noqa: ARG002
        self.terminating = True
        if self.worker is not None:
            with contextlib.suppress(OSError):
                os.kill(self.worker, signal.SIGTERM)

    def _on_interrupt(self, signum, frame) -> None:  # noqa: ARG002
        self.terminating = True  # Ctrl-C reaches the worker through the process group itself

    # --- one generation
    def _generation(self, gen: int) -> Outcome:
        for leftover in Path(self.failure_dir).glob("rank-*.txt"):
            leftover.unlink(missing_ok=True)
        generation.share_progress()
        pid = os.fork()
        if pid == 0:
            self._work(gen)  # never returns
        self.worker = pid
        store = self._store()
        failed_at: float | None = None
        ended_by_me = False
        checked = 0.0
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            now = time.time()
            if store is not None and failed_at is None and now - checked >= 0.5 and not self.terminating:
                checked = now
                try:
                    if store.get(f"{self.keys}g{gen}/failed") is not None:
                        failed_at = now
                except Exception:  # noqa: BLE001 - the store's host may be gone: the worker's collective says so
                    failed_at = now
            if failed_at is not None and not ended_by_me and now - failed_at >= GRACE_SECONDS:
                try:
                    os.kill(pid, signal.SIGKILL)  # stuck in a collective with a dead peer, or frozen
                    ended_by_me = True
                except OSError:
                    pass
            time.sleep(POLL_SECONDS)
        self.worker = None
        code = os.waitstatus_to_exitcode(status)
        outcome = Outcome(rank=self.rank, host=self.host, exit_code=code, text=self._words(),
                          step=generation.last_step(), at=time.time(),
                          ended_by_supervisor=ended_by_me and code == -signal.SIGKILL)
        if code != 0 and store is not None:
            with contextlib.suppress(Exception):  # a store gone is reported below as a lost supervisor
                store.add(f"{self.keys}g{gen}/failed", 1)
        self._store_client = store
        return outcome

    def _work(self, gen: int) -> None:
        """The forked worker: the training run, then exit with its code (no parent cleanup runs here)."""
        code = 1
        try:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)  # the run installs its own (the emergency checkpoint)
            signal.signal(signal.SIGINT, signal.default_int_handler)
            os.environ[generation.ENV] = str(gen)
            if gen == 0:  # the first worker's start-up began with this process (its imports are the run's)
                os.environ[generation.STARTED_ENV] = f"{self.started_at:.3f}"
            else:  # a restarted worker's start-up is the recovery's: from its fork
                os.environ.pop(generation.STARTED_ENV, None)
            from hftrain.run.failure import RANK_FAILURE_DIR_ENV

            os.environ[RANK_FAILURE_DIR_ENV] = self.failure_dir
            if gen:
                _once_only_injections()
            generation.use_own_rendezvous(gen)
            from hftrain.run.runner import main

            code = main(None)
        except SystemExit as err:
            code = err.code if isinstance(err.code, int) else 1
        except BaseException:  # noqa: BLE001 - the traceback is the log's; the code is the supervisor's
            import traceback

            traceback.print_exc()
            code = 1
        finally:
            logging.shutdown()
            for stream in (sys.stdout, sys.stderr):
                with contextlib.suppress(Exception):
                    stream.flush()
            os._exit(code)

    def _store(self) -> StoreBoard | None:
        """This supervisor's client of torchrun's agent store, the stall watchdogs' board (opened after each fork:
        a worker inherits none)."""
        try:
            return StoreBoard(self.env["MASTER_ADDR"], int(self.env["MASTER_PORT"]))
        except Exception as err:  # noqa: BLE001 - without the store this rank cannot agree: no recovery
            sys.stderr.write(f"recovery supervisor (rank {self.rank}): cannot reach torchrun's store: {err}\n")
            return None

    def _words(self) -> str:
        from hftrain.run.failure import rank_failure_path

        try:
            return rank_failure_path(self.failure_dir, self.rank).read_text(encoding="utf-8").strip()
        except OSError:
            return ""

    # --- agreement
    def _agree(self, gen: int, outcome: Outcome) -> Decision:
        store = getattr(self, "_store_client", None)
        if store is None:
            return decide([outcome], earlier=self.earlier, budget=0) if outcome.exit_code else Decision(DONE)
        prefix = f"{self.keys}g{gen}/"
        outcomes: dict[int, Outcome] = {}
        try:
            store.set(f"{prefix}outcome/{self.rank}", json.dumps(outcome.to_json()))
            store.add(f"{prefix}reported", 1)
            deadline = time.monotonic() + GATHER_SECONDS
            while int(store.get(f"{prefix}reported") or 0) < self.world and time.monotonic() < deadline:
                time.sleep(POLL_SECONDS)
            for rank in range(self.world):
                value = store.get(f"{prefix}outcome/{rank}")
                if value:
                    outcomes[rank] = Outcome.from_json(json.loads(value))
        except Exception as err:  # noqa: BLE001 - the store's host is gone (rank 0's instance): no recovery
            sys.stderr.write(f"recovery supervisor (rank {self.rank}): the store went away ({err}): the job ends\n")
            return decide([outcome], earlier=self.earlier, budget=0) if outcome.exit_code else Decision(DONE)
        missing = [r for r in range(self.world) if r not in outcomes]
        if missing:  # a process (or an instance) gone: no recovery in place; the best evidence is still the cause
            found = decide(list(outcomes.values()), earlier=self.earlier, budget=0)
            why = (f"rank {missing[0]}'s supervisor did not report within {GATHER_SECONDS:.0f} s (its process or its "
                   "instance is gone): not recovered in place; a new attempt follows if fallback.max_attempts allows")
            if found.cause is None:
                lost = Outcome(rank=missing[0], host="?", exit_code=1, text=why)
                return Decision(END, lost.evidence(), [], why=why)
            return Decision(END, found.cause, found.consequences, why=why, key=found.key)
        return decide(list(outcomes.values()), earlier=self.earlier, budget=self.budget)

    def _recover(self, gen: int, decision: Decision) -> None:
        self.earlier.append(decision.key)
        if self.local_rank == 0:  # a host's ranks share its failure file: the next failure writes its own
            from hftrain.run.failure import failure_path

            path = failure_path()
            if path.exists():
                with contextlib.suppress(OSError):
                    os.replace(path, path.with_name(f"{path.name}.recovered-{gen}"))
        if self.rank == 0:
            cause = decision.cause
            first = cause.text.strip().splitlines()[0] if cause is not None and cause.text.strip() else "?"
            record = {"generation": gen + 1, "recovery": len(self.earlier), "budget": self.budget,
                      "cause": cause.cause if cause else None, "rank": cause.rank if cause else None,
                      "host": cause.host if cause else None, "step": cause.step if cause else None,
                      "fault_at": round(min((c.at for c in [cause, *decision.consequences] if c and c.at),
                                            default=time.time()), 3),
                      "restart_at": round(time.time(), 3), "text": first[:300]}
            sys.stdout.write(recovery_line.format_line(record) + "\n")
            sys.stdout.write(f"[recovery] {decision.why}; cause: {cause.cause if cause else '?'}: {first[:300]}\n")
            sys.stdout.flush()

    def _ready(self, gen: int) -> bool:
        store = getattr(self, "_store_client", None)
        if store is None:
            return False
        try:
            key = f"{self.keys}g{gen}/ready"
            store.add(key, 1)
            deadline = time.monotonic() + GATHER_SECONDS
            while int(store.get(key) or 0) < self.world:
                if time.monotonic() > deadline or self.terminating:
                    sys.stderr.write(f"recovery supervisor (rank {self.rank}): not every rank was ready for "
                                     f"generation {gen} within {GATHER_SECONDS:.0f} s: the job ends\n")
                    return False
                time.sleep(POLL_SECONDS)
        except Exception as err:  # noqa: BLE001
            sys.stderr.write(f"recovery supervisor (rank {self.rank}): the store went away ({err}): the job ends\n")
            return False
        self._store_client = None  # closed before the fork: the next worker inherits no connection
        return True

    def _say_end(self, decision: Decision) -> None:
        """The job ends: every host's failure file says the one cause all supervisors agreed on (SageMaker's
        FailureReason, what the pipeline classifies), not whichever of its ranks wrote first (often a peer's
        consequential collective error)."""
        if decision.cause is None:
            return
        if self.local_rank == 0:
            from hftrain.run.failure import FAILURE_REASON_LIMIT, clip_utf8, failure_path

            path = failure_path()
            text = f"{decision.reason}\n(in-job recovery: {decision.why})"
            with contextlib.suppress(OSError):
                path.parent.mkdir(parents=True, exist_ok=True)
                tmp = path.with_name(f".{path.name}.{os.getpid()}")
                tmp.write_text(clip_utf8(text, FAILURE_REASON_LIMIT) + "\n", encoding="utf-8")
                os.replace(tmp, path)
        if self.rank == 0:
            sys.stdout.write(f"[recovery] not recovered in place: {decision.why}\n")
            sys.stdout.flush()


def _once_only_injections() -> None:
    """Local mode's injected faults happen once per job: a restarted worker runs without them, except a fault that
    stands for a bug in the script (`raise`: it fails the same way every time)."""
    from hftrain.checkpoint import background
    from hftrain.stall import injection

    fault = os.environ.get(injection.ENV)
    if fault and not fault.strip().endswith(":raise"):
        os.environ.pop(injection.ENV, None)
    os.environ.pop(background.INJECT_ENV, None)
    os.environ.pop(background.DELAY_ENV, None)


def supervise(argv: list[str]) -> int:
    from hftrain.stall import import_watch

    _preimport()
    import_watch.stop()  # the imports are done; each worker's own stall watchdog watches the rest
    return Supervisor(argv).run()
