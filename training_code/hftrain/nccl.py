"""Which transport NCCL chose, logged once at the first training step (so a silent TCP fallback is visible).

The training request asks NCCL for its INIT/NET debug lines in one file per process (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE=/tmp/nccl-debug.%h.%p.log; lambda/efa.py). NCCL writes
`NCCL INFO Using network <name>` when a communicator starts: `AWS Libfabric` (the aws-ofi-nccl plugin, with
`NET/OFI Selected Provider is efa` when EFA is in use), `IB`, or `Socket` (plain TCP). On an EFA instance
(HFTRAIN_EXPECT_EFA=1) anything but EFA is logged as a warning.
"""

from __future__ import annotations

import logging
import os
import re
import socket

from transformers import TrainerCallback

logger = logging.getLogger(__name__)

_NETWORK = re.compile(r"Using network (?P<name>[^\n]+)")
_PROVIDER = re.compile(r"Selected [Pp]rovider is (?P<name>\w+)")


def transport(debug_text: str) -> str | None:
    """'efa (AWS Libfabric)', 'Socket (TCP)', 'IB', ... from NCCL's debug output; None when it says nothing."""
    network = _NETWORK.search(debug_text)
    if network is None:
        return None
    name = network["name"].strip()
    provider = _PROVIDER.search(debug_text)
    if provider:
        return f"{provider['name']} ({name})"
    return "Socket (TCP)" if name.lower().startswith("socket") else name


def debug_file(pattern: str | None = None) -> str | None:
    pattern = pattern if pattern is not None else os.environ.get("NCCL_DEBUG_FILE")
    if not pattern:
        return None
    return pattern.replace("%h", socket.gethostname()).replace("%p", str(os.getpid()))


class NcclTransportCallback(TrainerCallback):
    """At the first optimizer step (NCCL is set up by then), global rank 0 logs NCCL's transport."""

    def __init__(self) -> None:
        self.done = False

    def on_step_end(self, args, state, control, **kwargs):
        if self.done or not state.is_world_process_zero:
            return control
        self.done = True
        path = debug_file()
        if path is None or not os.path.isfile(path):
            return control
        with open(path, errors="replace") as handle:
            chosen = transport(handle.read())
        expect_efa = os.environ.get("HFTRAIN_EXPECT_EFA") == "1"
        if chosen is None:
            logger.info("NCCL transport: not reported in %s", path)
        elif expect_efa and not chosen.lower().startswith("efa"):
            logger.warning("NCCL transport: %s on an EFA instance type: EFA is NOT in use (check FI_PROVIDER, the "
                           "security group's self-referencing rules and the aws-ofi-nccl plugin)", chosen)
        else:
            logger.info("NCCL transport: %s", chosen)
        return control
