"""The local run's report: written for failed runs too; a loss curve only when there are points for one."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from local_mode.report import MIN_CURVE_POINTS, write_report
from local_mode.report import state as report_state
from local_mode.session import RunOutcome, failing_state

FAILED_CAUSE = json.dumps({"job_name": "hfsm-dev-x-20250101000000-0123456789abcdef-train0", "job_type": "training",
                           "status": "Failed", "failure_reason": "AlgorithmError: the training data is missing "
                           "column(s) ['sentiment']; it has ['text', 'label'].\n(train.py on algo-1, rank 0)",
                           "state": "failed"})


TRAINED = [{"TrainingJobName": "hfsm-dev-x-1-train0", "TrainingJobStatus": "Completed"}]


def _outcome(**kw) -> RunOutcome:
    base = dict(execution_arn="arn:aws:states:us-east-1:1:execution:sm:x", status="SUCCEEDED",
                states=["Prepare", "StartTraining", "Finish", "RunSucceeded"], output={"result": {"run_id": "x-1"}},
                error=None, cause=None, jobs=TRAINED)
    return RunOutcome(**{**base, **kw})


def test_too_few_points_says_so_instead_of_an_empty_plot(tmp_path: Path) -> None:
    report = write_report(tmp_path, _outcome(losses=[(5, 2.0)]))
    text = report.read_text()
    assert "Too few logged loss points for a curve (1;" in text and "logging_steps" in text
    assert not (tmp_path / "loss.png").exists()


def test_a_curve_when_there_are_points(tmp_path: Path) -> None:
    points = [(i * 5, 3.0 - i * 0.1) for i in range(MIN_CURVE_POINTS + 1)]
    text = write_report(tmp_path, _outcome(losses=points)).read_text()
    assert "![training loss](loss.png)" in text and (tmp_path / "loss.png").stat().st_size > 1000
    assert f"{len(points)} points, loss 3 at step 0 -> 2.7 at step 15 (-10.0%; the y-axis starts at 0)." in text


def test_a_failed_run_gets_a_report_with_the_reason(tmp_path: Path) -> None:
    states = ["Prepare", "StartTraining", "CheckTraining", "TrainingStatus", "TrainingFailed", "NotifyFailure",
              "RunFailed"]
    outcome = _outcome(status="FAILED", states=states, output={}, error="TrainingJobFailed", cause=FAILED_CAUSE,
                       failed_state=failing_state(states), planned_run_id="x-20250101000000-0123456789abcdef")
    report = write_report(tmp_path, outcome)
    text = report.read_text()
    assert text.startswith("# Run x-20250101000000-0123456789abcdef: FAILED")
    assert "run x-20250101000000-0123456789abcdef FAILED in state TrainingFailed" in text
    assert "AlgorithmError: the training data is missing column(s) ['sentiment']" in text
    assert '{"' not in text  # the cause in words, not as JSON
    record = json.loads((tmp_path / "run.json").read_text())
    assert record["failed_state"] == "TrainingFailed" and record["cause"] == FAILED_CAUSE


def test_a_run_that_failed_in_prepare_is_named_after_its_spec_and_gets_no_training_advice(tmp_path: Path) -> None:
    states = ["Prepare", "NotifyFailure", "RunFailed"]
    outcome = _outcome(status="FAILED", states=states, output={}, error="PreflightError", jobs=[],
                       cause='{"errorMessage": "pre-flight checks failed"}', failed_state=failing_state(states),
                       name="imdb-roberta")
    text = write_report(tmp_path, outcome).read_text()
    assert text.startswith("# Run imdb-roberta (no run id: it failed in Prepare): FAILED\n")
    assert "None" not in text.splitlines()[0]
    assert "logging_steps" not in text and "No job ran: the run ended in Prepare before starting one." in text
    assert "## Evaluation" not in text


def test_a_run_that_did_not_learn_says_so_and_plots_the_baseline(tmp_path: Path) -> None:
    result = {"run_id": "x-1", "metrics": {"eval_rougeL": 0.0, "eval_baseline_rougeL": 50.2},
              "verdict": {"verdict": "not-learned", "metric": "eval_rougeL", "text": "not learned (...): ..."}}
    log = tmp_path / "logs" / "algo-1.log"
    outcome = _outcome(output={"result": result}, evals=[(20, "eval_loss", 6.2), (20, "eval_rougeL", 0.0)],
                       host_logs={"hfsm-dev-x-1-train0": [log]})
    text = write_report(tmp_path / "report", outcome).read_text()
    tmp_path = tmp_path / "report"
    assert f"- hfsm-dev-x-1-train0 algo-1: [{log}]({log.as_uri()})" in text
    assert text.startswith("# Run x-1: completed, but the model did not learn\n")
    assert "![evaluation](eval.png)" in text and (tmp_path / "eval.png").stat().st_size > 1000
    assert "1 evaluation(s); eval_rougeL 0 at step 20 (trivial baseline 50.2); the y-axis starts at 0." in text


@pytest.mark.parametrize(("judged", "state"), [
    ({"verdict": "learned", "text": "learned: ..."}, "SUCCEEDED, learned"),
    ({"verdict": "not-judged", "text": "not judged: 20 steps, too short to tell (...): ..."},
     "SUCCEEDED, not judged: 20 steps"),
    ({"verdict": "not-learned", "text": "not learned (...): ..."}, "completed, but the model did not learn"),
])
def test_the_state_a_tally_shows_carries_the_verdict(judged, state) -> None:
    outcome = _outcome(output={"result": {"run_id": "x-1", "verdict": judged}})
    assert report_state(outcome) == state
