"""The newest checkpoint made whole on every host from its peers, before a recovered generation resumes.

A host's /opt/ml/checkpoints holds what its own ranks wrote (global rank 0's host: the weights and the optimizer;
every host: its ranks' RNG states and its completion marker). A new attempt gets the whole checkpoint on every
host from SageMaker's download of the S3 prefix; a recovery in place downloads nothing, so the hosts exchange the
parts they lack: for the newest checkpoint that every host marked complete, each host's missing marker and every
file another host's marker lists are sent from that host over the process group (in chunks; the gloo control
group next to NCCL). The resume planner (checkpoint/resume.py) then verifies the checkpoint as it would after a
download: every file's size and hash against the markers.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path

from contract.checkpoint_marker import marker_name, parse_marker, step_of
from hftrain.parallel import process_group as distributed

logger = logging.getLogger("hftrain")
CHUNK_BYTES = 16 * 1024 * 1024


def _inventory(root: str, host: str) -> dict[str, dict]:
    """{checkpoint name: {"marker": this host's marker text, "files": {name: size}}} for every checkpoint this host
    marked complete."""
    found: dict[str, dict] = {}
    base = Path(root)
    if not base.is_dir():
        return found
    for entry in base.iterdir():
        marker = entry / marker_name(host)
        if step_of(entry.name) is None or not marker.is_file():
            continue
        files = {}
        for path in entry.rglob("*"):
            if path.is_file():
                files[path.relative_to(entry).as_posix()] = path.stat().st_size
        found[entry.name] = {"marker": marker.read_text(encoding="utf-8"), "files": files}
    return found


def _listed(marker_text: str) -> dict[str, int]:
    try:
        files = parse_marker(marker_text).get("files") or {}
    except ValueError:
        return {}
    return {name: int((info or {}).get("size") or 0) for name, info in files.items() if isinstance(name, str)}


def plan(inventories: dict[int, tuple[str, dict]], hosts: list[str]) -> tuple[str | None, list[tuple[str, int, list[int]]]]:
    """(the checkpoint, [(file, owner rank, receiver ranks)]) for the newest checkpoint every host marked. Pure.

    `inventories`: {the global rank of each host's local rank 0: (host, _inventory)}."""
    by_host = {host: (rank, inventory) for rank, (host, inventory) in inventories.items()}
    if any(h not in by_host for h in hosts):
        return None, []
    names = set.intersection(*(set(by_host[h][1]) for h in hosts)) if hosts else set()
    if not names:
        return None, []
    newest = max(names, key=lambda n: step_of(n) or -1)
    transfers: list[tuple[str, int, list[int]]] = []
    seen: set[str] = set()
    for owner_host in hosts:
        owner_rank, inventory = by_host[owner_host]
        entry = inventory[newest]
        wanted = {marker_name(owner_host): None, **_listed(entry["marker"])}
        for name in sorted(wanted):
            if name in seen or name not in entry["files"]:
                continue
            seen.add(name)
            size = entry["files"][name]
            receivers = [by_host[h][0] for h in hosts
                         if h != owner_host and by_host[h][1][newest]["files"].get(name) != size]
            if receivers:
                transfers.append((name, owner_rank, sorted(set(receivers))))
    return newest, transfers


def complete_from_peers(root: str, host: str, hosts: list[str]) -> int:
    """Every rank calls it (collectives); returns the bytes this host received."""
    if len(hosts) < 2 or not distributed.is_distributed():
        return 0
    import torch.distributed as dist

    leader = distributed.local_rank() == 0
    mine = (host, _inventory(root, host)) if leader else None
    gathered = distributed.all_gather_objects(mine)
    inventories = {rank: value for rank, value in enumerate(gathered) if value is not None}
    newest, transfers = plan(inventories, hosts)
    me = distributed.rank()
    received = 0
    group, _device = distributed._control()  # noqa: SLF001 - the small-message group (gloo beside NCCL)
    for name, owner, receivers in transfers:
        source = Path(root) / newest / name
        target = Path(root) / newest / name
        size = source.stat().st_size if me == owner else None
        size = distributed.all_gather_objects(size)[owner]
        handle = open(source, "rb") if me == owner else None  # noqa: SIM115
        out = None
        if me in receivers:
            target.parent.mkdir(parents=True, exist_ok=True)
            out = open(target.with_name(f".{target.name}.peer"), "wb")  # noqa: SIM115
        try:
            sent = 0
            while sent < size or (size == 0 and sent == 0):
                box = [handle.read(CHUNK_BYTES) if handle is not None else None]
                dist.broadcast_object_list(box, src=owner, group=group)
                chunk = box[0] or b""
                if out is not None:
                    out.write(chunk)
                sent += len(chunk)
                if not chunk:
                    break
        finally:
            if handle is not None:
                handle.close()
            if out is not None:
                out.close()
        if me in receivers:
            os.replace(target.with_name(f".{target.name}.peer"), target)
            received += size
    distributed.barrier()  # a host's other ranks read what its leader just wrote
    if transfers and distributed.rank() == 0:
        logger.info("recovery in place: %s made whole on every host from its peers (%d file(s))", newest,
                    len(transfers))
    return received
