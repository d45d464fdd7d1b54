"""Lambda code asset: cold import time of the handler module and asset size, against baselines of the same run.

Cold import is measured as Lambda does it: a fresh interpreter importing `handlers` from the asset as synth
stages it (lambda/ plus training_code's schema and rules, stacks/assets/lambda_asset.py) without __pycache__ (the asset ships no .pyc and /var/task is read-only, so our modules compile every cold
start). Baseline: the same interpreter importing only boto3 (which every Python Lambda using AWS pays).
Also: a cold Prepare (import + the first prepare of an example spec: schema files loaded, patterns compiled),
and the pure planning path (parse + pre-flight + all requests) per example spec, warm. `--baseline-ref REF`
measures lambda/ as it was at a git ref in the same run, interleaved (e.g. before a change).

    python benchmarks/bench_lambda.py [--repeat N] [--baseline-ref main]
"""

from __future__ import annotations

import argparse
import io
import json
import shutil
import statistics
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from benchmarks.pipeline_settings import SETTINGS
from stacks.assets.lambda_asset import stage

REPO = Path(__file__).resolve().parents[1]
LAMBDA = REPO / "lambda"

EXCLUDE_SUFFIXES = (".pyc", ".md")
LAMBDA_ZIP_LIMIT = 50 * 1024 * 1024  # direct upload limit (zipped)
LAMBDA_UNZIPPED_LIMIT = 250 * 1024 * 1024


def asset_files(asset: Path) -> list[Path]:
    return sorted(p for p in asset.rglob("*") if p.is_file() and "__pycache__" not in p.parts
                  and not p.name.endswith(EXCLUDE_SUFFIXES))


def asset_sizes(asset: Path) -> tuple[int, int, int]:
    files = asset_files(asset)
    raw = sum(p.stat().st_size for p in files)
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
        for path in files:
            archive.write(path, path.relative_to(asset).as_posix())
    return len(files), raw, len(buffer.getvalue())


def _probe(code_dir: Path, statement: str) -> float:
    """Wall time of `statement` in a fresh interpreter (-B: no bytecode written), milliseconds."""
    probe = ("import time, sys; t = time.perf_counter(); " + statement +
             "; sys.stdout.write(str((time.perf_counter() - t) * 1000))")
    env = {"PYTHONDONTWRITEBYTECODE": "1", "PIPELINE_SETTINGS": json.dumps(SETTINGS), "PATH": "/usr/bin:/bin"}
    shutil.rmtree(code_dir / "__pycache__", ignore_errors=True)
    return float(subprocess.run([sys.executable, "-B", "-c", probe], cwd=code_dir, env=env, capture_output=True,
                                text=True, check=True).stdout)


def cold_imports_ms(runs: dict[str, tuple[Path, str]], repeat: int) -> dict[str, float]:
    """Median per (code dir, statement); rounds interleave them so machine load affects all alike."""
    times: dict[str, list[float]] = {name: [] for name in runs}
    for _ in range(repeat):
        for name, (code_dir, statement) in runs.items():
            times[name].append(_probe(code_dir, statement))
    return {name: statistics.median(values) for name, values in times.items()}


def planning_ms(repeat: int) -> float:
    from hfsm_lambda.plan import job_requests
    from hfsm_lambda.runs.prepare import prepare_run
    from hfsm_lambda.settings import Settings

    settings = Settings.from_dict(SETTINGS)
    specs = [json.loads(p.read_text()) for p in sorted((REPO / "examples").glob("*.json"))]
    start = time.perf_counter()
    for _ in range(repeat):
        for spec in specs:
            run = prepare_run(spec, settings)
            for attempt in range(run.max_attempts):
                job_requests.training_request(run, settings, attempt)
    return (time.perf_counter() - start) * 1000 / (repeat * len(specs))


def _extract(ref: str, target: Path) -> None:
    # training_code too: from a ref without the copies committed in lambda/, its lambda/ reads them from there
    archive = subprocess.run(["git", "archive", ref, "lambda", "training_code"], cwd=REPO, capture_output=True,
                             check=True).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(target, filter="data")


def _statements(tmp: Path, package: str) -> dict[str, str]:
    """What each cold-import probe runs; `package` is "hfsm_lambda." for this checkout's asset, "" for a ref from
    before lambda/ was a package (its modules were top-level)."""
    return {"bare": "pass", "boto": "import boto3, botocore.config, botocore.exceptions",
            "handlers": f"import {package}handlers",
            "pure": f"import {package}run_spec, {package}planning, {package}job_requests",
            "prepare": _first_prepare(tmp, package)}


def _first_prepare(tmp: Path, package: str) -> str:
    """The first example without its editor-only `$schema` key (older code refuses the key)."""
    spec = json.loads(sorted((REPO / "examples").glob("*.json"))[0].read_text())
    spec.pop("$schema", None)
    path = tmp / "spec.json"
    path.write_text(json.dumps(spec))
    runs, settings = f"{package}runs", f"{package}settings"
    return (f"import json, {runs}, {settings}; "
            f"{runs}.prepare_run(json.load(open({str(path)!r})), {settings}.load_settings())")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=9)
    parser.add_argument("--baseline-ref", help="also measure lambda/ at this git ref (interleaved)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        code_dir = Path(tmp) / "task"
        stage(code_dir)
        count, raw, zipped = asset_sizes(code_dir)
        statements = _statements(Path(tmp), "hfsm_lambda.")
        runs = {name: (code_dir, statement) for name, statement in statements.items()}
        if args.baseline_ref:
            base = Path(tmp) / "base"
            _extract(args.baseline_ref, base)
            packaged = (base / "lambda" / "__init__.py").is_file()  # the package's parent holds it as hfsm_lambda/
            if packaged:
                (base / "lambda").rename(base / "hfsm_lambda")
            old = _statements(Path(tmp), "hfsm_lambda." if packaged else "")
            runs.update({f"base:{name}": (base if packaged else base / "lambda", old[name])
                         for name in ("handlers", "pure", "prepare")})
        cold = cold_imports_ms(runs, args.repeat)
        bare, boto, handlers, pure = cold["bare"], cold["boto"], cold["handlers"], cold["pure"]
    plan = planning_ms(max(1, args.repeat * 4))
    print(f"lambda asset: {count} files, {raw / 1024:.1f} KiB raw, {zipped / 1024:.1f} KiB zipped "
          f"({zipped / LAMBDA_ZIP_LIMIT:.4%} of the 50 MiB zip limit, {raw / LAMBDA_UNZIPPED_LIMIT:.4%} of 250 MiB)")
    print(f"cold import (median of {args.repeat} fresh interpreters, no .pyc for our modules):")
    print(f"  baseline `import boto3, botocore.config, botocore.exceptions`: {boto:8.1f} ms")
    print(f"  `import handlers` (boto3 included): {handlers:8.1f} ms  ratio to boto3 {handlers / boto:.2f}x, "
          f"own cost {handlers - boto:+.1f} ms")
    print(f"  pure modules (no boto3):            {pure:8.1f} ms  ratio to boto3 {pure / boto:.2f}x")
    print(f"  first prepare (import + one spec):  {cold['prepare']:8.1f} ms")
    print(f"  (timer overhead, `pass`:            {bare:8.3f} ms)")
    if args.baseline_ref:
        print(f"baseline lambda/ at {args.baseline_ref} (same run, interleaved):")
        for name in ("handlers", "pure", "prepare"):
            before, after = cold[f"base:{name}"], cold[name]
            own = "" if name == "pure" else f", own cost (minus boto3) {before - boto:+.1f} -> {after - boto:+.1f} ms"
            print(f"  {name:9s} {before:8.1f} ms -> {after:8.1f} ms  ratio {after / before:.2f}x{own}")
    print(f"warm planning (parse + pre-flight + every request) per example spec: {plan:.2f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
