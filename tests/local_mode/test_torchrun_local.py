"""The torchrun wrapper: the toolkit's command with the rendezvous moved to 127.0.0.1 and the job's port."""

from __future__ import annotations

import shlex

from local_mode.torchrun_local import rewrite

TOOLKIT = "--nnodes 2 --nproc_per_node 1 --master_addr algo-1 --master_port 7777 --node_rank 1 train.py --lr 0.1 --x=y"


def test_multi_node_command_points_at_localhost_and_the_jobs_port():
    args = rewrite(shlex.split(TOOLKIT), master_port="41234", nproc_per_node=None)
    assert args == shlex.split(
        "--nproc_per_node 1 --master_addr 127.0.0.1 --master_port 41234 --nnodes 2 --node_rank 1 train.py --lr 0.1 --x=y"
    )


def test_processes_per_host_override_and_script_arguments_untouched():
    args = rewrite(
        shlex.split("--nnodes 1 --nproc_per_node=1 train.py --master_port 9 --nproc_per_node 5"),
        master_port="5000",
        nproc_per_node="3",
    )
    assert args[:6] == ["--nproc_per_node", "3", "--master_addr", "127.0.0.1", "--master_port", "5000"]
    assert args[6:] == ["--nnodes", "1", "train.py", "--master_port", "9", "--nproc_per_node", "5"]


def test_flags_without_values_are_kept():
    args = rewrite(["--standalone", "--nnodes", "1", "train.py"], master_port="1", nproc_per_node=None)
    assert args[6:] == ["--standalone", "--nnodes", "1", "train.py"]
