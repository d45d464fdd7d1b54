"""EFA on every EFA instance type: the request sets what the pinned toolkit would not, from one table that also
feeds pre-flight's free-IP check; the training code names NCCL's transport."""

from __future__ import annotations

import pytest
import sagemaker_training
from testkit.lambdas import settings_dict

from contract import stall_board
from hfsm_lambda import settings as settings_module
from hfsm_lambda.errors import PreflightError
from hfsm_lambda.plan import efa, job_requests
from hfsm_lambda.runs.prepare import prepare_run

SPEC = {"version": 1, "name": "efa", "task": "text-classification", "model": "bert-base-uncased",
        "data": {"train": {"s3": "s3://hfsm-dev-data/datasets/x/"}},
        "compute": {"instance_type": "ml.p5en.48xlarge", "instance_count": 2}}


def _settings(types):
    return settings_module.Settings.from_dict(settings_dict(allowed_instance_types=types))


def test_the_table_agrees_with_the_pinned_toolkit():
    nccl, rdma = set(sagemaker_training.SM_EFA_NCCL_INSTANCES), set(sagemaker_training.SM_EFA_RDMA_INSTANCES)
    assert nccl <= set(efa.EFA_INSTANCE_TYPES)  # every type the toolkit knows is in the table
    for name, kind in efa.EFA_INSTANCE_TYPES.items():
        assert kind.toolkit_knows == (name in nccl), name
        if kind.toolkit_knows:
            assert kind.rdma == (name in rdma), name
    assert {"ml.p5en.48xlarge", "ml.p6-b200.48xlarge"} <= {n for n, k in efa.EFA_INSTANCE_TYPES.items()
                                                          if not k.toolkit_knows}


@pytest.mark.parametrize(("instance_type", "expected"), [
    ("ml.p5en.48xlarge", {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "RDMAV_FORK_SAFE": "1"}),
    ("ml.p6-b200.48xlarge", {"FI_PROVIDER": "efa", "FI_EFA_USE_DEVICE_RDMA": "1", "RDMAV_FORK_SAFE": "1"}),
    ("ml.p4d.24xlarge", {}),  # the toolkit sets them itself
    ("ml.g5.12xlarge", {}),
])
def test_training_request_environment(instance_type, expected):
    settings = _settings([instance_type])
    run = prepare_run({**SPEC, "compute": {"instance_type": instance_type, "instance_count": 2}}, settings)
    env = job_requests.training_request(run, settings)["Environment"]
    assert {k: v for k, v in env.items() if k.startswith(("FI_", "RDMAV_"))} == expected
    assert env["NCCL_DEBUG_SUBSYS"] == "INIT,NET" and env["NCCL_DEBUG_FILE"].startswith("/tmp/")
    assert (env.get("HFTRAIN_EXPECT_EFA") == "1") == efa.is_efa(instance_type)


def test_single_process_cpu_jobs_get_no_efa_or_nccl_environment():
    settings = _settings(["ml.m5.xlarge"])
    spec = {**SPEC, "compute": {"instance_type": "ml.m5.xlarge", "instance_count": 1},
            "distribution": {"strategy": "none"}}
    run = prepare_run(spec, settings)
    # only the run's stall-board token (contract/stall_board.py), which every training job gets
    assert job_requests.training_request(run, settings)["Environment"] == {
        stall_board.VARIABLE: run.stall_board_token}


class FakeEc2:
    def __init__(self, free):
        self.free, self.calls = free, 0

    def describe_subnets(self, SubnetIds):  # noqa: N803 - boto3's parameter name
        self.calls += 1
        return {"Subnets": [{"SubnetId": s, "AvailableIpAddressCount": self.free.get(s, 250)} for s in SubnetIds]}


def test_preflight_checks_free_ips_per_efa_instance():
    settings = _settings(["ml.p5en.48xlarge", "ml.g5.12xlarge"])
    spec = {**SPEC, "fallback": {"options": [{"instance_type": "ml.g5.12xlarge"}, {"spot": False}]}}
    ec2 = FakeEc2({settings.subnet_ids[0]: 7})
    with pytest.raises(PreflightError) as info:
        prepare_run(spec, settings, ec2=ec2)
    first, last = info.value.problems  # the first attempt and the on-demand retry of the same type
    assert last.startswith("fallback.options[1].instance_type: 2 x ml.p5en.48xlarge (EFA)")
    assert first.startswith("compute.instance_type: 2 x ml.p5en.48xlarge (EFA) need about 10 free private IPs "
                              f"in subnet {settings.subnet_ids[0]}, which has 7")
    assert ec2.calls == 1  # the two EFA attempts share one look-up; the g5 attempt needs none
    prepare_run(spec, settings, ec2=FakeEc2({}))  # enough addresses: passes


def test_nccl_transport_is_read_from_its_debug_output():
    from hftrain.parallel import nccl

    assert nccl.transport("NCCL INFO NET/OFI Selected Provider is efa\nNCCL INFO Using network AWS Libfabric\n") \
        == "efa (AWS Libfabric)"
    assert nccl.transport("NCCL INFO NET/Socket : Using [0]eth0:10.0.0.1<0>\nNCCL INFO Using network Socket\n") \
        == "Socket (TCP)"
    assert nccl.transport("nothing about networks") is None
    assert nccl.debug_file("/tmp/nccl-debug.%h.%p.log").endswith(f".{__import__('os').getpid()}.log")


def test_unknown_subnets_are_reported_not_raised():
    from botocore.exceptions import ClientError

    class Missing:
        def describe_subnets(self, SubnetIds):  # noqa: N803
            raise ClientError({"Error": {"Code": "InvalidSubnetID.NotFound", "Message": "no such subnet"}},
                              "DescribeSubnets")

    with pytest.raises(PreflightError) as info:
        prepare_run(SPEC, _settings(["ml.p5en.48xlarge"]), ec2=Missing())
    assert "settings.subnet_ids: cannot check free IPs for EFA instances" in info.value.problems[0]
    assert "InvalidSubnetID.NotFound" in info.value.problems[0]
