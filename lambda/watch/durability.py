"""The durability watchdog: which checkpoint of a running training job has reached S3, and is it fresh enough.

The training code (training_code/hftrain/checkpoint/manager.py) writes a completion marker per node into each
checkpoint directory after the node's files (names and format: contract/checkpoint_marker.py); every node syncs its own directory to the run's checkpoint prefix. A
checkpoint is *durable* when, in S3, a marker (format 2) exists for every host the markers name and every file
a marker lists exists with the listed size (content hashes are checked by the training code at resume; reading
the data here would cost as much as the checkpoint). `last_durable` finds the newest durable one.

`watch` is pure: given the previous look (carried in the state machine's `$.status`), the newest durable
checkpoint, the time and the job's secondary status, it says how old the newest durable checkpoint is and
whether to warn (once per stale episode) or stop the job (once), per the spec's `checkpoint.watchdog`. The
age counts from the later of the checkpoint's save time and the start of the job's current Training period,
so the wait for capacity and a restart after a spot interruption do not count as lost work.
"""

from __future__ import annotations

from collections import defaultdict
from datetime import UTC, datetime
from typing import Any

from contract import checkpoint_marker, run_history
from contract.checkpoint_marker import MARKER_FORMAT, checkpoint_name
from hfsm_lambda.bounded_reads import ObjectTooLarge, read_object

MARKER_RE = checkpoint_marker.MARKER_KEY_RE
MAX_MARKER_READS = 20  # newest steps looked at per check
# What one check may read of what jobs wrote under the checkpoint prefix (CheckJob: 256 MB, 60 s): the listing,
# each marker, all markers together. A marker over its bound is unreadable (its checkpoint not durable here);
# steps past the total bound are pending with that reason; a listing cut short says so (`listing_cut`).
MAX_LISTED_KEYS = 100_000
MAX_MARKER_BYTES = 4 * 1024 * 1024
MAX_MARKER_BYTES_TOTAL = 24 * 1024 * 1024


def utc_now() -> datetime:
    """The clock (a function, so tests can move time forward)."""
    return datetime.now(UTC)


def iso(moment: datetime | None) -> str | None:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ") if moment else None


def parse_time(value: Any) -> datetime | None:
    if isinstance(value, datetime):
        return value if value.tzinfo else value.replace(tzinfo=UTC)
    if isinstance(value, int | float):
        return datetime.fromtimestamp(value, UTC)
    if isinstance(value, str) and value:
        try:
            return datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return None
    return None


def _split(uri: str) -> tuple[str, str]:
    bucket, _, prefix = uri.removeprefix("s3://").partition("/")
    return bucket, prefix.rstrip("/") + "/" if prefix else ""


def list_prefix(s3: Any, uri: str) -> dict[str, dict[str, Any]]:
    """key relative to the prefix -> {size, last_modified}."""
    bucket, prefix = _split(uri)
    out: dict[str, dict[str, Any]] = {}
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix,
                                                             PaginationConfig={"MaxItems": MAX_LISTED_KEYS}):
        for obj in page.get("Contents", []):
            out[obj["Key"][len(prefix):]] = {"size": obj["Size"], "last_modified": obj["LastModified"]}
    return out


def _read(s3: Any, uri: str, relative: str, max_bytes: int) -> bytes:
    bucket, prefix = _split(uri)
    return read_object(s3, bucket, prefix + relative, max_bytes=max_bytes)


def _read_marker(s3: Any, uri: str, relative: str) -> tuple[dict[str, Any] | None, int]:
    """(the marker or None when unreadable, bytes read)."""
    try:
        data = _read(s3, uri, relative, MAX_MARKER_BYTES)
    except ObjectTooLarge:
        return None, MAX_MARKER_BYTES
    try:
        marker = checkpoint_marker.parse_marker(data)
    except (checkpoint_marker.MarkerError, KeyError):
        return None, len(data)
    return (marker if _well_formed(marker) else None), len(data)


def _well_formed(marker: dict[str, Any]) -> bool:
    """The fields durable_verdict reads have their shapes (a job wrote the file: a bad one is unreadable, never
    an exception in CheckJob)."""
    hosts, files = marker.get("hosts", []), marker.get("files") or {}
    return (isinstance(hosts, list) and all(isinstance(h, str) for h in hosts) and isinstance(files, dict)
            and all(isinstance(meta, dict) for meta in files.values()))


def durable_verdict(step: int, markers: list[dict[str, Any]], listing: dict[str, dict[str, Any]]) -> str:
    """'' when checkpoint-<step> is complete in S3 according to its markers, else why not."""
    if not markers or any(not isinstance(m, dict) for m in markers):
        return "no readable marker"
    if any(m.get("format") != MARKER_FORMAT for m in markers):
        return "a marker of an older format (no content hashes)"
    hosts = sorted({h for m in markers for h in m.get("hosts", [])})
    missing = [h for h in hosts if h not in {m.get("host") for m in markers}]
    if missing:
        return f"no marker from {', '.join(missing)} yet"
    for marker in markers:
        for name, meta in (marker.get("files") or {}).items():
            found = listing.get(f"{checkpoint_name(step)}/{name}")
            if found is None:
                return f"{name} (listed by {marker.get('host')}) is not in S3 yet"
            if found["size"] != (meta or {}).get("size"):
                return f"{name} has {found['size']} bytes in S3, the marker says {(meta or {}).get('size')}"
    return ""


def last_durable(s3: Any, uri: str) -> dict[str, Any] | None:
    """The newest checkpoint complete in S3: {step, saved_at, uploaded_at, hosts, pending}, or None."""
    listing = list_prefix(s3, uri)
    markers_by_step: dict[int, list[str]] = defaultdict(list)
    for key in listing:
        match = MARKER_RE.fullmatch(key)
        if match:
            markers_by_step[int(match.group(1))].append(key)
    pending, spent = [], 0
    for step in sorted(markers_by_step, reverse=True)[:MAX_MARKER_READS]:
        if spent >= MAX_MARKER_BYTES_TOTAL:
            pending.append({"step": step, "reason": f"not read: this check read {spent} bytes of markers already"})
            continue
        markers = []
        for key in sorted(markers_by_step[step]):
            marker, size = _read_marker(s3, uri, key)
            markers.append(marker)
            spent += size
        problem = durable_verdict(step, markers, listing)
        if problem:
            pending.append({"step": step, "reason": problem})
            continue
        saved = max((parse_time(m.get("saved_at_unix") or m.get("saved_at")) for m in markers),
                    default=None, key=lambda t: t or datetime.min.replace(tzinfo=UTC))
        uploaded = max(v["last_modified"] for k, v in listing.items() if k.startswith(f"{checkpoint_name(step)}/"))
        return {"step": step, "saved_at": iso(saved), "uploaded_at": iso(parse_time(uploaded)),
                "hosts": sorted({h for m in markers for h in m.get("hosts", [])}), "pending": pending,
                **({"listing_cut": MAX_LISTED_KEYS} if len(listing) >= MAX_LISTED_KEYS else {})}
    return None


def read_history(s3: Any, uri: str) -> dict[str, Any]:
    """The training code's history file (starts, interruptions) from the checkpoint prefix, or {}."""
    try:
        value = run_history.parse_history(_read(s3, uri, run_history.HISTORY_FILE, run_history.MAX_CHARS))
    except Exception:  # noqa: BLE001 - a missing or unreadable history only leaves the summary shorter
        return {}
    return value or {}


def read_progress(s3: Any, uri: str) -> dict[str, Any] | None:
    """The training code's progress file (the step reached) from the checkpoint prefix, or None."""
    try:
        return run_history.parse_progress(_read(s3, uri, run_history.PROGRESS_FILE, run_history.MAX_CHARS))
    except Exception:  # noqa: BLE001 - unknown progress is said as unknown
        return None


def training_since(desc: dict[str, Any]) -> datetime | None:
    """Start of the job's current Training period (None unless it is Training now)."""
    if desc.get("SecondaryStatus") != "Training":
        return None
    for transition in reversed(desc.get("SecondaryStatusTransitions") or []):
        if transition.get("Status") == "Training":
            return parse_time(transition.get("StartTime"))
    return parse_time(desc.get("TrainingStartTime"))


def _durable_fields(durable: dict[str, Any] | None) -> dict[str, Any]:
    """The newest durable checkpoint as the status reports it (all None when there is none yet)."""
    if not durable:
        return {"last_durable_step": None, "last_durable_at": None, "uploaded_at": None, "pending": []}
    return {"last_durable_step": durable["step"], "last_durable_at": durable["saved_at"],
            "uploaded_at": durable["uploaded_at"], "pending": durable.get("pending", [])[:3]}


def _age_minutes(durable: dict[str, Any] | None, now: datetime, since: datetime | None) -> float | None:
    """Minutes since the later of the checkpoint's save and the current Training period's start; None unless
    the job is Training now (a wait for capacity or a restart is not lost work)."""
    saved = parse_time(durable["saved_at"]) if durable else None
    references = [t for t in (saved, since) if t is not None]
    reference = max(references) if references else None
    return (now - reference).total_seconds() / 60 if reference and since else None


def _stop_reason(step: int | None, age: float, every: float, intervals: float, watchdog: dict[str, Any]) -> str:
    where = checkpoint_name(step) if step is not None else "the start (no durable checkpoint yet)"
    return (f"durability watchdog: no new checkpoint reached S3 for {age:.0f} minutes (checkpoint.every_minutes="
            f"{'auto, at most ' if watchdog.get('auto') else ''}{every:g}, watchdog.intervals={intervals:g}); "
            f"stopped so that the next attempt resumes from {where}")


def _stale_actions(prev: dict[str, Any], out: dict[str, Any], *, now: datetime, since: datetime | None,
                   age: float, every: float, intervals: float, watchdog: dict[str, Any]) -> list[str]:
    """On a stale look: warn once per episode (a durable step within one Training period), stop once; `out`
    records what was done."""
    step = out["last_durable_step"]
    actions: list[str] = []
    episode = f"{step}@{iso(since)}"
    if prev.get("warned_episode") != episode:
        actions.append("warn")
        out.update(warned_episode=episode, warned_at=iso(now))
    if out["action"] == "stop" and not prev.get("stopped_at"):
        actions.append("stop")
        out.update(stopped_at=iso(now), stop_reason=_stop_reason(step, age, every, intervals, watchdog))
    return actions


def watch(previous: dict[str, Any] | None, durable: dict[str, Any] | None, *, now: datetime,
          since: datetime | None, watchdog: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """(durability for the status, actions: 'warn' and/or 'stop')."""
    prev = dict(previous or {})
    every = float(watchdog.get("every_minutes") or 0)
    intervals = float(watchdog.get("intervals") or 0)
    action = watchdog.get("action", "warn")
    threshold = every * intervals
    age = _age_minutes(durable, now, since)
    stale = bool(since and threshold > 0 and action != "off" and age is not None and age > threshold)
    out = {
        **_durable_fields(durable),
        "age_minutes": round(age, 1) if age is not None else None,
        "threshold_minutes": round(threshold, 1) if threshold else None,
        "action": action,
        "stale": stale,
        "checked_at": iso(now),
        **{key: prev.get(key) for key in ("warned_episode", "warned_at", "stopped_at", "stop_reason")},
    }
    if not stale or age is None:  # stale implies an age: the second test only narrows the type
        return out, []
    return out, _stale_actions(prev, out, now=now, since=since, age=age, every=every, intervals=intervals,
                               watchdog=watchdog)


def describe(durability: dict[str, Any]) -> str:
    """One line for notifications and `runctl status`."""
    step = durability.get("last_durable_step")
    if step is None:
        text = "no checkpoint in S3 yet"
    else:
        text = f"step {step} saved {durability.get('last_durable_at')}"
    if durability.get("age_minutes") is not None:
        text += f", {durability['age_minutes']:g} min of training since"
    if durability.get("stale"):
        text += f" (over the {durability.get('threshold_minutes'):g} min limit)"
    return text
