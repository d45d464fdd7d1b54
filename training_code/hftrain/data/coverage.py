"""Every object of a channel accounted for, on every host: the objects this host received, the ones it read, the
rows they held, and each one it skipped with the reason.

SageMaker decides which host receives which object of a ShardedByS3Key channel, so a host can receive only objects
the reader does not take (a `.txt` file, a `_SUCCESS` marker): such a host would train on nothing of its own while
the run "succeeds" on part of the data. It fails at once instead (`no_rows_error`), naming the objects and the fix.
Prepare refuses such a channel before any job starts (lambda/data/preflight.py); this is the job's own guard.

Global rank 0 gathers every host's record (`gather`) into the run's history file (`_history.json`'s start record,
`data`), which Finish reads into the run summary's `data_coverage` (lambda/runs/summary_text.py prints it).
"""

from __future__ import annotations

import os
from typing import Any

from hftrain.data.files import DataError, inventory, supported_formats

MAX_NAMED = 20  # skipped objects named per host and channel


def host_record(path: str | None, data_format: str, rows: int) -> dict[str, Any]:
    """{objects, read, rows, skipped: [{name, reason}]} of one channel on this host (no path: nothing received)."""
    if not path or not os.path.exists(path):
        return {"objects": 0, "read": 0, "rows": rows, "skipped": []}
    found, skipped = inventory(path, data_format)
    read = sum(len(files) for files in found.values())
    return {"objects": read + len(skipped), "read": read, "rows": rows,
            "skipped": [{"name": name, "reason": why} for name, why in skipped[:MAX_NAMED]],
            **({"more_skipped": len(skipped) - MAX_NAMED} if len(skipped) > MAX_NAMED else {})}


def no_rows_error(which: str, host: str, record: dict[str, Any]) -> DataError:
    """The message of a host that ends up with no readable rows of its share of a ShardedByS3Key channel."""
    head = f"this host ({host}) has no readable rows of the ShardedByS3Key channel `{which}`"
    if not record["objects"]:
        return DataError(
            f"{head}: SageMaker gave it no object (it gives each instance about 1/n of the channel's objects, and none "
            "to some when there are fewer objects than instances); split the data into at least one file per "
            "instance, use fewer instances, or FullyReplicated")
    named = ", ".join(f"{s['name']} ({s['reason']})" for s in record["skipped"][:5])
    if record["read"]:
        got = f"the {record['read']} data file(s) it received hold no rows" + (f"; it skipped {named}" if named else "")
    else:
        got = f"it received {record['objects']} object(s) and the reader takes none of them: {named}"
    return DataError(
        f"{head}: {got}. SageMaker decides which instance receives which object, so every object under the "
        f"channel's prefix must be a data file the reader takes ({supported_formats()}, or set data_format): "
        "convert the others, or move them to another prefix")


def gather(records: dict[str, dict[str, Any]], host: str, sharded: dict[str, bool], all_gather) -> dict[str, Any]:
    """Every host's records (one per host: its local rank 0's), as {channel: {sharded, hosts: [{host, ...}]}};
    `all_gather(obj)` returns every rank's obj. Called on every rank."""
    from hftrain.parallel import process_group as distributed

    mine = {"host": host, "channels": records} if distributed.local_rank() == 0 else None
    hosts = [entry for entry in all_gather(mine) if entry]
    return {channel: {"sharded": sharded.get(channel, False),
                      "hosts": [{"host": entry["host"], **entry["channels"][channel]} for entry in hosts
                                if channel in entry["channels"]]}
            for channel in records}
