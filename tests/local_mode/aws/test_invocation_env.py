"""Each emulated Lambda invocation has its own environment; the local jobs' threads never see it.

The stress test is the race behind a flaky `make demo` (KeyError 'PIPELINE_SETTINGS' in a job thread while the
router had written a function's variables into os.environ): many concurrent invocations of functions with
different variables, while job threads copy the environment, build their processes' environment and create
AWS clients. On the old router (os.environ.update / pop around each invocation) the job threads see the
functions' variables and the test fails.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import pytest

from local_mode.aws import invocation_env
from local_mode.aws.clients import job_client
from local_mode.aws.emulator import FunctionSpec, LambdaRouter
from local_mode.sagemaker.job import LocalJob
from local_mode.sagemaker.settings import LocalSageMakerSettings

HANDLER = '''
import os
import time


def echo(event, context):
    first = os.environ.get("PIPELINE_SETTINGS")
    time.sleep(0.0005)
    os.environ["SCRATCH_" + context.function_name] = str(event["i"])  # a handler's write stays inside
    return {"settings": first, "again": os.environ["PIPELINE_SETTINGS"], "region": os.environ.get("AWS_REGION"),
            "scratch": os.environ["SCRATCH_" + context.function_name], "i": event["i"]}
'''


@pytest.fixture
def router(tmp_path: Path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "stress_handlers.py").write_text(HANDLER)
    router = LambdaRouter()
    for n in range(4):
        router.register(FunctionSpec(name=f"fn-{n}", code_dir=code, handler="stress_handlers.echo",
                                     environment={"PIPELINE_SETTINGS": f'{{"function": {n}}}',
                                                  "AWS_REGION": f"eu-west-{n + 1}"}))
    router.install()
    try:
        yield router
    finally:
        router.uninstall()


def test_concurrent_invocations_never_reach_job_threads(router: LambdaRouter, tmp_path: Path) -> None:
    assert "PIPELINE_SETTINGS" not in os.environ
    job = LocalJob({}, name="stress", arn="arn:aws:sagemaker:us-east-1:123456789012:training-job/stress",
                   region="us-east-1", settings=LocalSageMakerSettings(work_dir=tmp_path / "jobs"))
    stop = threading.Event()
    problems: list[str] = []
    results: list[dict] = []
    lock = threading.Lock()

    def invoker(worker: int) -> None:
        for i in range(30):
            name = f"fn-{(worker + i) % 4}"
            result, errored = router.invoke(name, {"i": i})
            with lock:
                results.append({"name": name, "errored": errored, **result})

    def job_thread() -> None:
        while not stop.is_set():
            try:
                env = os.environ.copy()
                leaked = sorted(k for k in env if k == "PIPELINE_SETTINGS" or k.startswith("SCRATCH_"))
                if leaked:
                    problems.append(f"job thread saw {leaked}")
                if "PIPELINE_SETTINGS" in job.base_env():
                    problems.append("a job process environment holds PIPELINE_SETTINGS")
                client = job_client("s3", "us-east-1")
                if client.meta.region_name != "us-east-1":
                    problems.append(f"job client in {client.meta.region_name}")
            except Exception as exc:  # noqa: BLE001 - any error here is the flake this test guards against
                problems.append(f"{type(exc).__name__}: {exc}")

    jobs = [threading.Thread(target=job_thread) for _ in range(3)]
    invokers = [threading.Thread(target=invoker, args=(w,)) for w in range(6)]
    for t in jobs + invokers:
        t.start()
    for t in invokers:
        t.join(120)
    stop.set()
    for t in jobs:
        t.join(30)

    assert problems == [], problems[:5]
    assert len(results) == 6 * 30 and not any(r["errored"] for r in results)
    for r in results:  # every invocation saw its own function's variables, and its own writes
        n = int(r["name"].rsplit("-", 1)[1])
        assert r["settings"] == r["again"] == f'{{"function": {n}}}', r
        assert r["region"] == f"eu-west-{n + 1}" and r["scratch"] == str(r["i"])
    assert not [k for k in os.environ if k == "PIPELINE_SETTINGS" or k.startswith("SCRATCH_")]


def test_outside_an_invocation_os_environ_is_the_process_environment(router: LambdaRouter,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    assert isinstance(os.environ, invocation_env.InvocationEnviron)
    monkeypatch.setenv("LOCAL_MODE_PROBE", "1")
    assert os.environ["LOCAL_MODE_PROBE"] == "1" and os.getenv("LOCAL_MODE_PROBE") == "1"
    with invocation_env.invocation_environment({"LOCAL_MODE_PROBE": "2", "ONLY_INSIDE": "x"}):
        assert os.environ["LOCAL_MODE_PROBE"] == "2" and os.environ["ONLY_INSIDE"] == "x"
        del os.environ["LOCAL_MODE_PROBE"]
        assert "LOCAL_MODE_PROBE" not in os.environ and os.getenv("LOCAL_MODE_PROBE") is None
        assert "ONLY_INSIDE" in os.environ.copy()
    assert os.environ["LOCAL_MODE_PROBE"] == "1" and "ONLY_INSIDE" not in os.environ


def test_uninstall_restores_the_process_environment(tmp_path: Path) -> None:
    router = LambdaRouter()
    router.install()
    assert isinstance(os.environ, invocation_env.InvocationEnviron)
    router.uninstall()
    assert not isinstance(os.environ, invocation_env.InvocationEnviron)
    assert type(os.environ).__name__ == "_Environ"
