"""Cost, metrics and notification texts (pure)."""

from __future__ import annotations

import json
from datetime import UTC, datetime

from hfsm_lambda.runs import messages, outcomes


def usage(name, job_type="training", billable=100.0, training=100.0, count=1, spot=False, itype="ml.g5.2xlarge"):
    return {"job_name": name, "job_type": job_type, "instance_type": itype, "instance_count": count, "spot": spot,
            "billable_seconds": billable, "training_seconds": training}


def test_cost_without_prices_reports_instance_seconds():
    cost = outcomes.cost_summary([usage("tok", "processing", 60, 60, 4), usage("a0", billable=300, training=900,
                                                                                 count=2, spot=True)], {})
    assert cost["billable_instance_seconds"] == 840 and cost["training_instance_seconds"] == 2040
    assert cost["cost_usd"] is None and cost["price_source"] is None
    assert cost["spot_saving"] == round(1 - 300 / 900, 4)
    assert cost["run_spot_saving"] == round(1 - 840 / 2040, 4)


def test_cost_with_prices_and_on_demand():
    cost = outcomes.cost_summary([usage("a0", billable=3600, training=3600, count=2)], {"ml.g5.2xlarge": 1.5})
    assert cost["cost_usd"] == 3.0 and cost["spot_saving"] == 0.0


def test_processing_usage_from_its_run_time():
    desc = {"ProcessingJobName": "p", "ProcessingResources": {"ClusterConfig": {"InstanceCount": 3,
                                                                                "InstanceType": "ml.c5.2xlarge"}},
            "ProcessingStartTime": datetime(2025, 1, 1, tzinfo=UTC), "ProcessingEndTime": datetime(2025, 1, 1, 0, 2,
                                                                                                   tzinfo=UTC)}
    assert outcomes.job_usage("processing", desc)["billable_seconds"] == 120


def test_final_metrics_keep_non_finite_values_as_text():
    desc = {"FinalMetricDataList": [{"MetricName": "a", "Value": 1}, {"MetricName": "b", "Value": float("inf")}]}
    assert outcomes.final_metrics(desc) == {"a": 1.0, "b": "inf"}


def test_parse_error_variants():
    assert messages.parse_error({"Error": "States.Timeout", "Cause": "Task timed out"}) == ("States.Timeout",
                                                                                            "Task timed out")
    cause = json.dumps({"errorMessage": "boom", "errorType": "KeyError"})
    assert messages.parse_error({"Error": "States.TaskFailed", "Cause": cause}) == ("KeyError", "boom")
    assert messages.parse_error(None) == ("UnknownError", "(no cause given)")


def test_subject_is_short_ascii(settings):
    summary = {"run_id": "r" * 200, "error": "SpecError", "reason": "x\u00e9", "links": {}}
    subject, message = messages.failure_notification(settings, summary)
    assert len(subject) <= 100 and subject.isascii() and "\n" not in subject
    assert "Fix the fields listed above" in message


def test_a_failure_text_promises_a_link_only_when_it_gives_one(settings):
    """'(link below)' is followed by that link (the job's CloudWatch log streams, the execution); without it the
    hint is said without the promise (issue 22: a MaxRuntimeExceeded text promised a link it did not give)."""
    region, name = settings.region, "hfsm-dev-r-train0"
    with_job = {"run_id": "r", "error": "TrainingJobFailed", "reason": "x", "job_name": name,
                "links": messages.run_links(settings, None, name)}
    _, message = messages.failure_notification(settings, with_job)
    assert "CloudWatch logs (link below)" in message
    assert f"  logs: {messages.naming.job_logs_url(region, name)}" in message
    assert "logStreamNameFilter" in messages.naming.job_logs_url(region, name)
    for links in ({}, {"execution": "https://console/x"}):  # no job: no logs link to point at
        _, message = messages.failure_notification(settings, {**with_job, "job_name": None, "links": links})
        assert "link below" not in message and "Read the training job's CloudWatch logs, fix" in message
    _, message = messages.failure_notification(settings, {"run_id": "r", "error": "UnknownError", "reason": "x",
                                                           "links": {"execution": "https://console/x"}})
    assert "event history (link below)" in message and "  execution: https://console/x" in message


def test_a_failed_processing_job_says_the_scripts_reason_first():
    desc = {"ProcessingJobName": "tok", "ProcessingJobStatus": "Failed",
            "FailureReason": "AlgorithmError: See job logs for more information",
            "ExitMessage": "tokenizer-map failed: no text in field 'body' of 3 files; set tokenizer.text_field\n"}
    status = outcomes.classify("processing", desc)
    assert status["state"] == "failed"
    assert status["failure_reason"] == ("tokenizer-map failed: no text in field 'body' of 3 files; set "
                                        "tokenizer.text_field (AlgorithmError: See job logs for more information)")
    completed = {**desc, "ProcessingJobStatus": "Completed", "FailureReason": None, "ExitMessage": "done"}
    assert outcomes.classify("processing", completed)["state"] == "completed"


def test_interruptions_count_the_interrupted_transitions():
    transitions = [{"Status": s} for s in ("Starting", "Training", "Interrupted", "Starting", "Training",
                                           "Interrupted", "Starting", "Training", "Completed")]
    assert outcomes.interruptions({"SecondaryStatusTransitions": transitions}) == 2
    assert outcomes.interruptions({}) == 0
