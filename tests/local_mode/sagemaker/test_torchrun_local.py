"""The torchrun wrapper: the toolkit's command with the rendezvous moved to 127.0.0.1 and the job's port."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys

from local_mode.sagemaker import torchrun as torchrun_local
from local_mode.sagemaker.torchrun import rewrite
from local_mode.sagemaker.training_hosts import free_port

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


LISTENERS = '''
import json, os, sys
port = int(os.environ["MASTER_PORT"])
found = []
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        local, state = line.split()[1], line.split()[3]
        address, hex_port = local.rsplit(":", 1)
        if int(hex_port, 16) == port and state == "0A":  # LISTEN
            found.append(address)
json.dump(found, open(sys.argv[1], "w"))
'''


def test_the_rendezvous_store_listens_on_loopback_only(tmp_path):
    """Issue 23: torchrun's TCPStore server bound every interface (`::`) during local runs."""
    script, out = tmp_path / "listeners.py", tmp_path / "listeners.json"
    script.write_text(LISTENERS)
    env = {**os.environ, "LOCAL_SM_MASTER_PORT": str(free_port()), "OMP_NUM_THREADS": "1"}
    one_node = shlex.split("--nnodes 1 --nproc_per_node 1 --master_addr algo-1 --master_port 7777")
    done = subprocess.run([sys.executable, torchrun_local.__file__, *one_node, str(script), str(out)],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(out.read_text())
    assert found == ["0100007F"], f"listening on {found} (0100007F is 127.0.0.1; all zeros: every interface)"
