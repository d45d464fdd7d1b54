"""What the supervisors do after a generation of training processes ended: one decision, the same on every rank.

Every rank's supervisor publishes its worker's outcome (outcome.py) and reads all of them; `decide` is a pure
function of those outcomes and the recoveries done so far, so every supervisor reaches the same decision without a
leader. The cause is contract/failure_causes.py's (one precedence for the job, the pipeline and the local mode),
and what follows it is that module's IN_JOB_ACTION: the in-job half of the one action table.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from contract import failure_causes as causes

DONE, RECOVER, END = "done", "recover", "end"
ENDED = "ended-by-supervisor"  # a worker its supervisor ended after a peer failed: never the cause


@dataclass(frozen=True)
class Outcome:
    """How one rank's worker ended: its exit status (negative: the signal that killed it), its own words."""

    rank: int
    host: str
    exit_code: int
    text: str = ""
    step: int | None = None  # the last step it completed (its stall heartbeat), when known
    at: float | None = None  # when its supervisor saw it end
    ended_by_supervisor: bool = False

    def to_json(self) -> dict:
        return {"rank": self.rank, "host": self.host, "exit_code": self.exit_code, "text": self.text,
                "step": self.step, "at": self.at, "ended_by_supervisor": self.ended_by_supervisor}

    @classmethod
    def from_json(cls, data: dict) -> Outcome:
        return cls(rank=int(data["rank"]), host=str(data.get("host") or "?"), exit_code=int(data["exit_code"]),
                   text=str(data.get("text") or ""), step=data.get("step"), at=data.get("at"),
                   ended_by_supervisor=bool(data.get("ended_by_supervisor")))

    def words(self) -> str:
        """The worker's own failure text, else what its exit status says."""
        if self.text.strip():
            return self.text.strip()
        after = f" after step {self.step}" if self.step is not None else ""
        if self.exit_code < 0:
            return f"rank {self.rank} ({self.host}) was killed by {causes.signal_text(-self.exit_code)}{after}"
        return f"rank {self.rank} ({self.host}) exited with exit code {self.exit_code}{after}"

    def evidence(self) -> causes.Evidence | None:
        if self.exit_code == 0:
            return None
        words = self.words()
        cause = ENDED if self.ended_by_supervisor else causes.classify(words, self.exit_code)
        rank, host = self.rank, self.host
        if cause in (causes.STALLED, causes.STRAGGLER) and (named := causes.named_rank(words)):
            rank, host = named  # every rank writes the watchdog's verdict: it names the rank it is about
        return causes.Evidence(cause, words, rank=rank, host=host, step=self.step, at=self.at)


@dataclass(frozen=True)
class Decision:
    action: str  # DONE | RECOVER | END
    cause: causes.Evidence | None = None
    consequences: list[causes.Evidence] = field(default_factory=list)
    why: str = ""  # one line: why this action
    key: str = ""  # the error's identity (cause and first line), for the once-per-error rule

    @property
    def reason(self) -> str:
        return causes.format_reason(self.cause, self.consequences) if self.cause is not None else ""


def error_key(evidence: causes.Evidence) -> str:
    first = evidence.text.strip().splitlines()[0] if evidence.text.strip() else ""
    return f"{evidence.cause}: {first}"


def decide(outcomes: list[Outcome], *, earlier: list[str], budget: int) -> Decision:
    """`earlier`: the keys of the recoveries already done in this job; `budget`: recovery.in_job_restarts."""
    evidence = [e for e in (o.evidence() for o in outcomes) if e is not None]
    if not evidence:
        return Decision(DONE, why="every rank finished")
    # Every rank's own end is known here: a peer's collective error (or a worker its supervisor ended) follows
    # from another rank's failure when there is one, whatever the precedence says for a lone failure text.
    own = [e for e in evidence if e.cause not in (causes.COLLECTIVE, ENDED)]
    cause, _ = causes.choose(own or evidence)
    consequences = [e for e in evidence if e is not cause]
    key = error_key(cause)
    action = causes.IN_JOB_ACTION.get(cause.cause, causes.NOT_IN_PLACE)
    if action == causes.NOT_IN_PLACE:
        return Decision(END, cause, consequences, key=key,
                        why=f"a {cause.cause} failure is not recovered in place: the job ends and the pipeline "
                            "decides (lambda/runs/actions.py)")
    if len(earlier) >= budget:
        return Decision(END, cause, consequences, key=key,
                        why=f"the in-job recovery budget is spent ({len(earlier)} of recovery.in_job_restarts="
                            f"{budget}): the job ends; a new attempt follows if fallback.max_attempts allows")
    if action == causes.IN_PLACE_ONCE and key in earlier:
        return Decision(END, cause, consequences, key=key,
                        why="the same error at the same step as the recovery before: the run ends (a restart "
                            "would fail the same way)")
    return Decision(RECOVER, cause, consequences, key=key,
                    why=f"recovery {len(earlier) + 1} of {budget} in place: the training processes restart on the "
                        "same instances from the newest complete local checkpoint")
