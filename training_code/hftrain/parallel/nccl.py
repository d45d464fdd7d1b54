"""Which transport NCCL chose, logged once at the first training step (so a silent TCP fallback is visible).

The training request asks NCCL for its INIT/NET debug lines in one file per process (NCCL_DEBUG=INFO,
NCCL_DEBUG_SUBSYS=INIT,NET, NCCL_DEBUG_FILE=/tmp/nccl-debug.%h.%p.log; lambda/plan/efa.py). NCCL writes
`NCCL INFO Using network <name>` when a communicator starts: `AWS Libfabric` (the aws-ofi-nccl plugin, with
`NET/OFI Selected Provider is efa` when EFA is in use), `IB`, or `Socket` (plain TCP). On an EFA instance
(HFTRAIN_EXPECT_EFA=1) anything but EFA ends the job at the first step on every rank (`NetworkError`, which
becomes the failure reason) unless the spec opts out (network.require_efa false: HFTRAIN_REQUIRE_EFA=0), then
it is a warning.
"""

from __future__ import annotations

import logging
import os
import re
import socket

from transformers import TrainerCallback

logger = logging.getLogger(__name__)
CHECKS = ("check the security group's self-referencing rules (all traffic in and out to itself), that FI_PROVIDER "
          "is efa, and that the image has the aws-ofi-nccl plugin (libnccl-net.so) on LD_LIBRARY_PATH")


class NetworkError(RuntimeError):
    """The job's network is not what its instance type promises (a user-facing failure reason)."""


def efa_problem(chosen: str | None, *, expect_efa: bool) -> str | None:
    """Why the transport NCCL chose is wrong for this instance type, else None."""
    if not expect_efa or chosen is None or chosen.lower().startswith("efa"):
        return None
    return (f"NCCL uses {chosen}, not EFA, on an EFA instance type: collectives run over the slower network and "
            f"may hang at scale; {CHECKS}. To run without EFA anyway, set network.require_efa to false in the run "
            "spec")

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
    """At the first optimizer step (NCCL is set up by then) every rank reads its own NCCL debug file: global
    rank 0 logs the transport; on an EFA instance type a transport other than EFA ends the job on every rank at
    the same point (no rank is left waiting in a collective), unless HFTRAIN_REQUIRE_EFA=0."""

    def __init__(self, environ: dict[str, str] | None = None) -> None:
        self.done = False
        self.environ = environ

    def on_step_end(self, args, state, control, **kwargs):
        if self.done:
            return control
        self.done = True
        env = os.environ if self.environ is None else self.environ
        path = debug_file(env.get("NCCL_DEBUG_FILE") or "")
        if path is None or not os.path.isfile(path):
            return control
        with open(path, errors="replace") as handle:
            chosen = transport(handle.read())
        problem = efa_problem(chosen, expect_efa=env.get("HFTRAIN_EXPECT_EFA") == "1")
        if problem and env.get("HFTRAIN_REQUIRE_EFA", "1") != "0":
            raise NetworkError(problem)
        if not state.is_world_process_zero:
            return control
        if chosen is None:
            logger.info("NCCL transport: not reported in %s", path)
        elif problem:
            logger.warning("NCCL transport: %s on an EFA instance type: EFA is NOT in use (network.require_efa is "
                           "false, so the job goes on; %s)", chosen, CHECKS)
        else:
            logger.info("NCCL transport: %s", chosen)
        return control
