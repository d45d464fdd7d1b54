"""`torchrun` as the sagemaker-training toolkit calls it, with the rendezvous moved onto this machine.

The toolkit builds `torchrun --nnodes N --nproc_per_node M [--master_addr algo-1 --master_port 7777
--node_rank R] script args` (sagemaker_training.torch_distributed). Outside containers "algo-1" does not
resolve and port 7777 would be shared by every job, so the local runner puts this script first on PATH as
`torchrun`: it rewrites the master address to 127.0.0.1, the port to the job's own (LOCAL_SM_MASTER_PORT),
optionally `--nproc_per_node` (LOCAL_SM_NPROC_PER_NODE), and runs the real torchrun with the rest intact.
The rendezvous store listens on 127.0.0.1 only (`loopback_store`). Standalone: imports nothing from local_mode.
"""

from __future__ import annotations

import os
import socket
import sys

# torchrun options that take no value; every other option before the script takes one.
_FLAGS = {"--standalone", "--no-python", "--no_python", "-m", "--module", "--run-path", "--run_path", "--tee"}
_REWRITTEN = {
    "--master_addr",
    "--master-addr",
    "--master_port",
    "--master-port",
    "--nproc_per_node",
    "--nproc-per-node",
}


def rewrite(argv: list[str], *, master_port: str, nproc_per_node: str | None) -> list[str]:
    """The torchrun arguments with the master at 127.0.0.1:<master_port> (and processes per node)."""
    options: list[str] = []
    seen: dict[str, str] = {}
    i = 0
    while i < len(argv) and argv[i].startswith("-"):
        name, eq, value = argv[i].partition("=")
        if name in _FLAGS:
            options.append(argv[i])
            i += 1
            continue
        if not eq:
            value = argv[i + 1] if i + 1 < len(argv) else ""
            i += 1
        i += 1
        if name in _REWRITTEN:
            seen[name.replace("-", "_").lstrip("_")] = value
        else:
            options += [name, value]
    nproc = nproc_per_node or seen.get("nproc_per_node", "1")
    local = ["--nproc_per_node", nproc, "--master_addr", "127.0.0.1", "--master_port", master_port]
    return local + options + argv[i:]


_LISTENERS: list[socket.socket] = []  # kept open for the store's lifetime


def loopback_store() -> None:
    """torchrun's static rendezvous starts its TCPStore server on every interface (the C++ server binds `::`,
    whatever --master_addr says), so a local run would accept connections from the network to a store that
    coordinates processes running this user's code. Node 0's agent hands the server a socket bound to 127.0.0.1
    instead (TCPStore's `master_listen_fd`)."""
    from torch.distributed.elastic.rendezvous import static_tcp_rendezvous

    real = static_tcp_rendezvous.TCPStore

    def store(host_name, port, world_size=None, is_master=False, *args, **kwargs):
        if is_master and kwargs.get("master_listen_fd") is None:
            listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            listener.bind(("127.0.0.1", int(port)))
            listener.listen(socket.SOMAXCONN)
            _LISTENERS.append(listener)
            kwargs["master_listen_fd"] = listener.fileno()
        return real(host_name, port, world_size, is_master, *args, **kwargs)

    static_tcp_rendezvous.TCPStore = store


def main(argv: list[str] | None = None) -> None:
    args = sys.argv[1:] if argv is None else argv
    new_args = rewrite(
        args,
        master_port=os.environ["LOCAL_SM_MASTER_PORT"],
        nproc_per_node=os.environ.get("LOCAL_SM_NPROC_PER_NODE") or None,
    )
    print(
        f"local torchrun: {' '.join(args)}\n  -> torchrun {' '.join(new_args)}", file=sys.stderr, flush=True
    )
    from torch.distributed.run import main as torchrun_main

    loopback_store()
    torchrun_main(new_args)


if __name__ == "__main__":
    main()
