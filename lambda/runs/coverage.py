"""Data coverage: the rows and objects each host of the final job read, against the channel's totals, and every
object skipped with the reason. Pure.

Source: the training job's own record (hftrain/data/coverage.py: global rank 0 writes every host's counts into
the start record of `_history.json` beside the checkpoints, which Finish already reads), and what Prepare found
the jobs would skip (`Run.data_skipped`). The file is job-written: only the expected shapes are kept.
"""

from __future__ import annotations

from typing import Any

MAX_HOSTS = 100
MAX_NAMED = 20
MAX_TEXT = 300


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _text(value: Any) -> str:
    return str(value)[:MAX_TEXT] if isinstance(value, str) else "?"


def _host(entry: Any) -> dict[str, Any] | None:
    if not isinstance(entry, dict):
        return None
    counts = {key: _count(entry.get(key)) for key in ("objects", "read", "rows")}
    if any(value is None for value in counts.values()):
        return None
    skipped = [{"name": _text(s.get("name")), "reason": _text(s.get("reason"))}
               for s in entry.get("skipped") or [] if isinstance(s, dict)][:MAX_NAMED]
    more = _count(entry.get("more_skipped")) or 0
    return {"host": _text(entry.get("host")), **counts, "skipped": skipped, "more_skipped": more}


def from_history(starts: Any, job_name: str, prepare_skipped: tuple[str, ...] | list[str]) -> dict[str, Any] | None:
    """The summary's `data_coverage`: {channels: {name: {sharded, rows, objects, read, hosts}}, prepare_skipped};
    None when the job left no record (an older training code, or no history file)."""
    data = None
    for start in starts if isinstance(starts, list) else []:
        if isinstance(start, dict) and start.get("job") == job_name and isinstance(start.get("data"), dict):
            data = start["data"]  # the last start of the final job: the attempt that finished
    if data is None:
        return None
    channels = {}
    for name, channel in list(data.items())[:20]:
        if not isinstance(channel, dict) or not isinstance(channel.get("hosts"), list):
            continue
        hosts = [h for h in (_host(e) for e in channel["hosts"][:MAX_HOSTS]) if h is not None]
        if not hosts:
            continue
        sharded = channel.get("sharded") is True
        # sharded: the hosts split the channel's objects; replicated: every host reads all of them
        totals = {key: sum(h[key] for h in hosts) if sharded else hosts[0][key] for key in ("rows", "objects", "read")}
        channels[_text(name)] = {"sharded": sharded, **totals, "hosts": hosts}
    return {"channels": channels, "prepare_skipped": [_text(line) for line in prepare_skipped][:20]}


def coverage_lines(coverage: dict[str, Any] | None) -> list[str]:
    """The summary's lines: per channel its totals and per host what it read; every skipped object named."""
    if not coverage:
        return ["Data coverage: not reported by the job"]
    lines = ["Data coverage (rows and objects read per host, against the channel's totals):"]
    for name, channel in coverage.get("channels", {}).items():
        how = "ShardedByS3Key: each host its own objects" if channel["sharded"] else "every host reads all of it"
        lines.append(f"  {name} ({how}): {channel['rows']:,} rows from {channel['read']} of {channel['objects']} "
                     "object(s)")
        for host in channel["hosts"] if channel["sharded"] or len(channel["hosts"]) == 1 else channel["hosts"][:1]:
            share = f" ({host['rows'] / channel['rows']:.0%} of the rows)" if channel["sharded"] and channel["rows"] \
                else ""
            who = host["host"] if channel["sharded"] else "each host"
            lines.append(f"    {who}: {host['rows']:,} rows from {host['read']} of {host['objects']} "
                         f"object(s){share}")
        for host in channel["hosts"]:
            for skipped in host["skipped"]:
                lines.append(f"    skipped on {host['host']}: {skipped['name']} ({skipped['reason']})")
            if host["more_skipped"]:
                lines.append(f"    skipped on {host['host']}: {host['more_skipped']} more")
            if not channel["sharded"]:
                break  # every host skips the same objects
    lines += [f"  Prepare: {line}" for line in coverage.get("prepare_skipped", [])]
    return lines
