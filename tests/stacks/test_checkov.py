"""checkov (pinned, offline, its own venv: requirements-checkov.txt) over every synthesized template, once.

0 failed checks outside tests/stacks/checkov_skips.json, which holds one reason per check id and the resources it
covers; a skip that matches no failure fails too (the list stays true)."""

from __future__ import annotations

import fnmatch
import json
import os
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from testkit.synth import Synthesized

REPO = Path(__file__).resolve().parents[2]
CHECKOV = REPO / ".venv-checkov" / "bin" / "checkov"
SKIPS: dict[str, Any] = {k: v for k, v in json.loads((REPO / "tests/stacks/checkov_skips.json").read_text()).items()
                         if not k.startswith("_")}


@pytest.fixture(scope="session")
def checkov_failures(dev: Synthesized, prod: Synthesized, dev_scratch_fsx: Synthesized,
                     tmp_path_factory: pytest.TempPathFactory) -> list[dict[str, Any]]:
    assert CHECKOV.exists(), "checkov is installed by `make setup` (.venv-checkov, requirements-checkov.txt)"
    templates = sorted(str(p) for s in (dev, prod, dev_scratch_fsx) for p in s.outdir.glob("*.template.json"))
    assert len(templates) == 9
    home = tmp_path_factory.mktemp("checkov-home")
    # Offline: --skip-download (no Prisma Cloud / policy downloads), no API key, a clean HOME and environment.
    env = {"PATH": os.environ["PATH"], "HOME": str(home), "LANG": "C.UTF-8"}
    args = [str(CHECKOV), "--framework", "cloudformation", "--skip-download", "--quiet", "-o", "json"]
    for t in templates:
        args += ["-f", t]
    proc = subprocess.run(args, capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode in (0, 1), proc.stderr[-3000:]
    reports = json.loads(proc.stdout)
    reports = reports if isinstance(reports, list) else [reports]
    failures = [dict(f, template=Path(f["file_path"]).name) for r in reports
                for f in r.get("results", {}).get("failed_checks", [])]
    counts = Counter(f["check_id"] for f in failures)
    print(f"checkov {reports[0]['summary']['checkov_version']}: {sum(r['summary']['passed'] for r in reports)} "
          f"passed, {len(failures)} failed before the skip list: {dict(sorted(counts.items()))}")
    return failures


def _skipped(failure: dict[str, Any]) -> bool:
    skip = SKIPS.get(failure["check_id"])
    return bool(skip) and any(fnmatch.fnmatchcase(failure["resource"], r) for r in skip["resources"])


def test_no_failed_check_outside_the_skip_list(checkov_failures: list[dict[str, Any]]) -> None:
    unexpected = [f"{f['check_id']} {f['check_name']}: {f['resource']} in {f['template']}"
                  for f in checkov_failures if not _skipped(f)]
    assert unexpected == [], "\n".join(unexpected)


def test_every_skip_has_a_reason_and_still_matches_a_failure(checkov_failures: list[dict[str, Any]]) -> None:
    for check_id, skip in SKIPS.items():
        assert len(skip["reason"]) > 80, check_id
        assert any(f["check_id"] == check_id and _skipped(f) for f in checkov_failures), \
            f"{check_id} no longer fails: remove it from checkov_skips.json"
