"""The network before the work: NCCL's transport at the first step on an EFA instance type (hftrain/parallel/nccl.py) and
the all-reduce bandwidth probe (hftrain/parallel/bandwidth.py)."""

from __future__ import annotations

import logging
from types import SimpleNamespace

import pytest

from hftrain.parallel import bandwidth, nccl

# NCCL 2.2x INIT/NET lines as the three transports write them (aws-ofi-nccl for EFA)
EFA = ("NCCL INFO NET/OFI Using aws-ofi-nccl 1.13.2\nNCCL INFO NET/OFI Selected Provider is efa (found 4 nics)\n"
       "NCCL INFO Using network AWS Libfabric\n")
IB = "NCCL INFO NET/IB : Using [0]mlx5_0:1/IB\nNCCL INFO Using network IB\n"
SOCKET = ("NCCL INFO NET/OFI No eligible providers were found\nNCCL INFO NET/Socket : Using [0]eth0:10.0.0.5<0>\n"
          "NCCL INFO Using network Socket\n")
STATE = SimpleNamespace(is_world_process_zero=True)


@pytest.mark.parametrize(("text", "chosen"), [(EFA, "efa (AWS Libfabric)"), (IB, "IB"), (SOCKET, "Socket (TCP)"),
                                              ("NCCL INFO Bootstrap : Using eth0\n", None)])
def test_transport_of_each_network(text, chosen):
    assert nccl.transport(text) == chosen


def _step(tmp_path, text: str, **env: str):
    debug = tmp_path / "nccl-debug.log"
    debug.write_text(text)
    callback = nccl.NcclTransportCallback(environ={"NCCL_DEBUG_FILE": str(debug), **env})
    return callback.on_step_end(None, STATE, "control")


@pytest.mark.parametrize("text", [IB, SOCKET])
def test_a_transport_other_than_efa_on_an_efa_type_ends_the_job_saying_what_to_check(tmp_path, text):
    with pytest.raises(nccl.NetworkError) as failed:
        _step(tmp_path, text, HFTRAIN_EXPECT_EFA="1")
    message = str(failed.value)
    assert message.startswith(f"NCCL uses {nccl.transport(text)}, not EFA, on an EFA instance type")
    for hint in ("self-referencing rules", "FI_PROVIDER", "aws-ofi-nccl", "network.require_efa to false"):
        assert hint in message


def test_efa_passes_and_other_types_or_an_opt_out_only_log(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=nccl.logger.name)
    assert _step(tmp_path, EFA, HFTRAIN_EXPECT_EFA="1", HFTRAIN_REQUIRE_EFA="1") == "control"
    assert "NCCL transport: efa (AWS Libfabric)" in caplog.text
    assert _step(tmp_path, SOCKET) == "control"  # not an EFA instance type: TCP is what it has
    assert _step(tmp_path, SOCKET, HFTRAIN_EXPECT_EFA="1", HFTRAIN_REQUIRE_EFA="0") == "control"
    assert "EFA is NOT in use (network.require_efa is false, so the job goes on" in caplog.text


def test_every_rank_checks_but_only_rank_zero_logs(tmp_path, caplog):
    caplog.set_level(logging.INFO, logger=nccl.logger.name)
    debug = tmp_path / "nccl.log"
    debug.write_text(SOCKET)
    other_rank = SimpleNamespace(is_world_process_zero=False)
    callback = nccl.NcclTransportCallback(environ={"NCCL_DEBUG_FILE": str(debug), "HFTRAIN_EXPECT_EFA": "1"})
    with pytest.raises(nccl.NetworkError):
        callback.on_step_end(None, other_rank, "control")
    quiet = nccl.NcclTransportCallback(environ={"NCCL_DEBUG_FILE": str(debug)})
    quiet.on_step_end(None, other_rank, "control")
    assert "NCCL transport" not in caplog.text


def test_bandwidth_verdicts():
    assert bandwidth.bus_bandwidth(64 * 2**20, 0.01, 16) == pytest.approx(64 * 2**20 / 0.01 * 30 / 16 / 1e9)
    line, failure = bandwidth.verdict(42.0, "ml.p4d.24xlarge", 2)
    assert failure is None and "42.0 GB/s across 2 hosts (ml.p4d.24xlarge: network 50 GB/s, floor 5.0 GB/s)" in line
    line, failure = bandwidth.verdict(1.2, "ml.p4d.24xlarge", 2)
    assert "1.2 GB/s, below the floor of 5.0 GB/s" in failure and "aws-ofi-nccl" in failure
    assert bandwidth.verdict(1.2, "ml.p4d.24xlarge", 1)[1] is None  # one host: NVLink, not the network
    assert bandwidth.verdict(1.2, "ml.g5.2xlarge", 2)[1] is None  # no published figure: not checked


def test_the_probe_is_skipped_on_cpu_and_says_so(monkeypatch):
    import torch.distributed as dist

    assert bandwidth.probe(instance_type="ml.p4d.24xlarge", hosts=2, require=True) == \
        "bandwidth probe: skipped (one process)"
    monkeypatch.setattr(dist, "is_initialized", lambda: True)
    monkeypatch.setattr(dist, "get_world_size", lambda: 4)
    monkeypatch.setattr(dist, "get_backend", lambda: "gloo")
    assert bandwidth.probe(instance_type="ml.p4d.24xlarge", hosts=2, require=True) == (
        "bandwidth probe: skipped (gloo backend on CPU: the GB/s of gloo says nothing about EFA)")
