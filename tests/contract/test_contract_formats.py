"""The wire formats of the package `contract`: each writer's output read back by its parser, and hostile input
(non-finite numbers, oversize or malformed text, look-alike lines) refused: a parser answers None (or raises
MarkerError for a marker), a writer raises a ValueError that names the format."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from contract import (
    checkpoint_marker,
    goodput_line,
    heartbeat,
    intervals,
    jsontext,
    progress_lines,
    refused_names,
    run_history,
    stall_records,
    summary,
)

NON_FINITE = [math.nan, math.inf, -math.inf]
finite = st.floats(allow_nan=False, allow_infinity=False)
records = st.dictionaries(st.text(max_size=8), st.one_of(st.none(), st.booleans(), st.integers(), finite,
                                                          st.text(max_size=20)), max_size=6)


# --- GOODPUT -------------------------------------------------------------------------------------------------------
@given(records)
def test_goodput_lines_round_trip(record):
    line = goodput_line.format_line(record)
    assert line.startswith(goodput_line.PREFIX) and "\n" not in line
    assert goodput_line.parse_line(line) == record
    assert goodput_line.parse_line("[1,0]<stdout>:" + line) == record  # a launcher's prefix


@pytest.mark.parametrize("value", NON_FINITE)
def test_goodput_lines_refuse_non_finite_numbers(value):
    with pytest.raises(ValueError, match="GOODPUT line: .*non-finite|GOODPUT line: .*not JSON compliant"):
        goodput_line.format_line({"step_seconds": value})
    assert goodput_line.parse_line(f"GOODPUT {{\"step_seconds\": {json.dumps(value)}}}") is None


@pytest.mark.parametrize("line", ["", "GOODPUT ", "GOODPUT [1, 2]", "GOODPUT {not json", "goodput {}", "GOODPUT 3",
                                  "GOODPUT " + "[" * 100_000, "GOODPUT {\"a\": \"" + "x" * 70_000 + "\"}"])
def test_goodput_parser_answers_none_for_what_is_not_a_report(line):
    assert goodput_line.parse_line(line) is None


# --- PROGRESS, METRIC, window lines --------------------------------------------------------------------------------
@given(st.integers(min_value=0, max_value=10**12), st.integers(min_value=0, max_value=10**12))
def test_progress_lines_round_trip(step, max_steps):
    line = progress_lines.progress_line(step, max_steps)
    assert progress_lines.parse_progress(line) == progress_lines.Progress(step, max_steps)
    assert progress_lines.is_progress_line(line)


def test_progress_parser_is_strict():
    assert progress_lines.parse_progress("PROGRESS global_step=4").max_steps is None
    for line in ("progress 4", "PROGRESS global_step=", "PROGRESS global_step=\u0664",  # an Arabic-Indic digit
                 "PROGRESS global_step=" + "9" * 70_000):
        assert progress_lines.parse_progress(line) is None, line


@given(st.from_regex(r"[a-z_]{1,20}", fullmatch=True), st.one_of(finite, st.sampled_from(NON_FINITE)))
def test_metric_lines_round_trip_and_match_their_metric_definition(name, value):
    import re

    line = progress_lines.metric_line(name, value)
    parsed_name, parsed = progress_lines.parse_metric(line)
    assert parsed_name == name and (parsed == value or math.isnan(value) and math.isnan(parsed))
    match = re.search(progress_lines.metric_definition(name)["Regex"], line)
    if math.isfinite(value) or value == math.inf or math.isnan(value):  # SageMaker's regex: -inf is no value
        assert match and float(match.group(1)) == pytest.approx(value, nan_ok=True)


def test_metric_lines_skip_what_is_not_a_number():
    assert progress_lines.metric_lines({"loss": 1.5, "flag": True, "name": "x", "steps": 3}) == [
        "METRIC loss=1.5", "METRIC steps=3.0"]
    assert progress_lines.parse_metric("METRIC loss=fast") is None
    assert progress_lines.parse_metric("METRIC loss=" + "1" * 70_000) is None


def test_window_lines_and_their_metric_definition():
    import re

    line = progress_lines.train_line(step=40, max_steps=300, loss=1.23456, lr=2.9e-3, samples_per_second=52.34,
                                     elapsed=12, eta=78)
    assert line == "[train] step 40/300 (13%) loss=1.2346 lr=2.90e-03 samples/s=52.3 elapsed=0:00:12 eta=0:01:18"
    assert float(re.search(progress_lines.WINDOW_METRICS["samples_per_second"], line).group(1)) == 52.3
    evaluated = progress_lines.eval_line(step=40, max_steps=0, metrics={"eval_loss": math.nan, "eval_runtime": 3,
                                                                        "eval_f1": 41.2, "loss": 1})
    assert evaluated == "[eval] step 40/? eval_loss=nan eval_f1=41.2000"
    assert all(progress_lines.is_window_line(x) for x in (line, evaluated, progress_lines.setup_line("model loaded")))
    assert progress_lines.clock(math.inf) == progress_lines.clock(-1) == "?"


# --- files beside the checkpoints ----------------------------------------------------------------------------------
def test_heartbeat_round_trip_and_hostile_text():
    beat = heartbeat.record(job="j-1", step=None, phase="imports", kind="startup", moved_at=1.23456, at=2.34567,
                            limit_seconds=3600.04)
    assert beat == {"job": "j-1", "step": None, "phase": "imports", "kind": "startup", "moved_at": 1.235,
                    "at": 2.346, "limit_seconds": 3600.0, "doing": "imports since 00:00:01Z", "ranks": [],
                    "stragglers": []}
    saving = heartbeat.record(job="j-1", step=400, phase="checkpoint save of step 400", kind="save", moved_at=43385,
                              at=43400, limit_seconds=600, since=43385,
                              ranks=[heartbeat.rank_entry({"rank": 1, "host": "algo-2", "step": 400, "kind": "train",
                                                           "phase": "train", "moved_at": 43380, "alive_at": 43399})])
    assert saving["doing"] == "checkpoint save of step 400 since 12:03:05Z"  # a long save is not a hang
    assert saving["ranks"] == [{"rank": 1, "host": "algo-2", "step": 400, "kind": "train",
                                "doing": "training, step 400", "moved_at": 43380, "at": 43399}]
    assert tuple(beat) == heartbeat.FIELDS
    assert heartbeat.parse_heartbeat(heartbeat.format_heartbeat(beat)) == beat
    assert heartbeat.parse_heartbeat(heartbeat.format_heartbeat(beat).encode()) == beat  # an S3 body
    with pytest.raises(ValueError, match="_heartbeat.json"):
        heartbeat.format_heartbeat({**beat, "at": math.nan})
    for text in (None, b"", "[]", '{"at": NaN}', '{"at": Infinity}', b"\xff\xfe", "{" * 50, " " * 70_000 + "{}"):
        assert heartbeat.parse_heartbeat(text) is None, text
    assert heartbeat.key("checkpoints/r1/") == heartbeat.key("checkpoints/r1") == "checkpoints/r1/_heartbeat.json"
    assert heartbeat.key("") == "_heartbeat.json"


def test_stall_records_round_trip_keep_the_newest_and_refuse_hostile_text():
    many = [{"job": f"j{i}", "detected_at": i} for i in range(stall_records.MAX_RECORDS + 5)]
    assert stall_records.parse_records(stall_records.format_records(many)) == many[-stall_records.MAX_RECORDS:]
    assert stall_records.parse_records('{"stalls": [1, {"job": "a"}]}') == [{"job": "a"}]
    assert stall_records.parse_records('{"stalls": 3}') == stall_records.parse_records("{}") == []
    assert stall_records.parse_records("not json") is None and stall_records.parse_records("[]") is None
    with pytest.raises(ValueError, match="_stalls.json"):
        stall_records.format_records([{"detected_at": math.inf}])
    assert stall_records.says_stall("AlgorithmError: stall watchdog: rank 3 (algo-2) made no progress")
    assert stall_records.says_stall(stall_records.outside_message("job j made no progress"))
    assert not stall_records.says_stall("the instalL watchdog: x") and not stall_records.says_stall("")
    assert stall_records.stacks_prefix("s3://b/checkpoints/r/", "j-1") == "s3://b/checkpoints/r/_stalls/j-1/"


def test_run_history_round_trip_trims_and_refuses_hostile_text():
    history = run_history.with_defaults(None)
    assert history == {"format": 1, "starts": [], "interruptions": []}
    history["starts"] = [{"job": str(i)} for i in range(run_history.MAX_RECORDS + 3)]
    back = run_history.parse_history(run_history.format_history(history))
    assert back["starts"] == history["starts"][-run_history.MAX_RECORDS:] and list(back) == list(history)
    progress = {"job": "j", "step": 7, "at": 1.5, "finished": False, "save_seconds": [0.5]}
    assert run_history.parse_progress(run_history.format_progress(progress)) == progress
    with pytest.raises(ValueError, match="_progress.json"):
        run_history.format_progress({**progress, "at": math.nan})
    for text in (None, "", "[]", '{"step": NaN}', "{oops"):
        assert run_history.parse_progress(text) is None and run_history.parse_history(text) is None
    assert run_history.key("p/", run_history.HISTORY_FILE) == "p/_history.json"


def test_checkpoint_marker_names_and_round_trip():
    assert checkpoint_marker.checkpoint_name(8) == "checkpoint-8"
    assert checkpoint_marker.step_of("checkpoint-8") == 8
    for name in ("checkpoint-8.unverified-1", "checkpoint-8\n", "checkpoint-", "checkpoint-\u0664", "x-8"):
        assert checkpoint_marker.step_of(name) is None, name
    key = f"{checkpoint_marker.checkpoint_name(7)}/{checkpoint_marker.marker_name('algo-2')}"
    assert checkpoint_marker.MARKER_KEY_RE.fullmatch(key).groups() == ("7", "algo-2")
    assert checkpoint_marker.is_marker_name(checkpoint_marker.marker_name("algo-1"))
    assert not checkpoint_marker.is_marker_name("_complete.algo-1.json.tmp")
    marker = {"format": checkpoint_marker.MARKER_FORMAT, "host": "algo-1", "files": {"a": {"size": 1, "hash": "x"}}}
    assert checkpoint_marker.parse_marker(checkpoint_marker.format_marker(marker)) == marker
    with pytest.raises(ValueError, match="checkpoint marker"):
        checkpoint_marker.format_marker({**marker, "saved_at_unix": math.nan})


@pytest.mark.parametrize(("text", "why"), [(None, "not valid JSON"), ("", "not valid JSON"), ("{", "not valid JSON"),
                                           ('{"saved_at_unix": NaN}', "not valid JSON"), ("[]", "not a JSON object"),
                                           ("1" * (checkpoint_marker.MAX_CHARS + 1), "is over")])
def test_a_hostile_marker_is_refused_saying_why(text, why):
    with pytest.raises(checkpoint_marker.MarkerError, match=why):
        checkpoint_marker.parse_marker(text)


# --- the summary, the bounds ---------------------------------------------------------------------------------------
def test_the_summary_writers_take_exactly_the_declared_keys_in_order():
    fields = {k: k for k in summary.SUCCEEDED_KEYS if k != "status"}
    done = summary.succeeded(**fields)
    assert tuple(done) == summary.SUCCEEDED_KEYS and done["status"] == summary.SUCCEEDED
    failed = summary.failed(**{k: None for k in summary.FAILED_KEYS if k != "status"})
    assert tuple(failed) == summary.FAILED_KEYS and failed["status"] == summary.FAILED
    with pytest.raises(TypeError, match=r"missing \['verdict'\], unknown \['verdikt'\]"):
        summary.succeeded(**{**{k: v for k, v in fields.items() if k != "verdict"}, "verdikt": 1})
    assert summary.parse_summary(summary.format_summary(done)) == done
    assert summary.format_summary(done) == json.dumps(done, indent=1, default=str)
    with pytest.raises(ValueError, match="summary.json"):
        summary.format_summary({**done, "metrics": {"eval_loss": math.nan}})
    assert summary.parse_summary('{"cost": NaN}') is None and summary.parse_summary("[]") is None
    assert summary.of_output({summary.OUTPUT_KEY: done}) == done == summary.of_output(json.dumps({"result": done}))
    assert summary.of_output({"result": "x"}) is summary.of_output(None) is summary.of_output("nope") is None
    assert summary.shown_in_status(done) == {k: k for k in summary.STATUS_KEYS}


def test_the_checkpoint_interval_bounds():
    assert (intervals.CHECKPOINT_MIN_MINUTES, intervals.CHECKPOINT_MAX_MINUTES) == (5, 60)
    assert [intervals.clamp_checkpoint_minutes(m) for m in (0, 5, 17.5, 60, 1e9)] == [5.0, 5.0, 17.5, 60.0, 60.0]
    assert intervals.describe_checkpoint_bounds() == "[5, 60]"


def test_the_sides_use_the_one_declaration():
    from hfsm_lambda.plan import checkpoint_interval
    from hftrain.checkpoint import interval

    assert checkpoint_interval.MIN_MINUTES == interval.MIN_MINUTES == intervals.CHECKPOINT_MIN_MINUTES
    assert checkpoint_interval.MAX_MINUTES == interval.MAX_MINUTES == intervals.CHECKPOINT_MAX_MINUTES


def test_jsontext_reads_one_finite_object_only():
    assert jsontext.loads_object('{"a": [1, 2.5, null]}', max_chars=100) == {"a": [1, 2.5, None]}
    assert jsontext.loads_object('{"a": 1}', max_chars=3) is None
    assert jsontext.loads_object('{"a": -Infinity}', max_chars=100) is None
    with pytest.raises(ValueError, match="thing: "):
        jsontext.dumps([math.inf], what="thing")


def test_a_train_window_line_reads_back_its_step_and_rate():
    from contract import progress_lines

    line = progress_lines.train_line(step=30, max_steps=60, loss=1.25, lr=2e-5, samples_per_second=261.94,
                                     elapsed=12.0, eta=12.0)
    assert progress_lines.parse_train_line(line) == (30, 261.9)
    assert progress_lines.parse_train_line(progress_lines.eval_line(step=30, max_steps=60, metrics={})) is None
    assert progress_lines.parse_train_line(line + " " + "x" * progress_lines.MAX_LINE_CHARS) is None


def test_the_train_line_names_a_straggler_and_still_parses():
    line = progress_lines.train_line(step=30, max_steps=60, loss=1.25, lr=2e-5, samples_per_second=261.94,
                                     elapsed=12, eta=12, straggler="rank 3 (algo-2) +35%")
    assert line.endswith(" straggler=rank 3 (algo-2) +35%")
    assert progress_lines.parse_train_line(line) == (30, 261.9)


def test_what_the_training_code_refused_is_found_by_its_names_and_nothing_else():
    """The names hftrain gives what it refused (checkpoint/manager.py quarantine_name; the tokenized cache's
    `<name>.refused-<k>`) are the ones StartTraining moves out of the checkpoint prefix (lambda/runs/set_aside.py)."""
    from hftrain.checkpoint.manager import quarantine_name

    aside = quarantine_name(40, ["checkpoint-40", "checkpoint-40.unverified-1"])
    assert aside == "checkpoint-40.unverified-2"
    digest = "0123456789abcdef0123"
    assert refused_names.CACHE_NAME_RE.fullmatch(f"{digest}.algo-2")["host"] == "algo-2"
    caches = [f"{refused_names.CACHE_DIR}/{digest}{refused_names.REFUSED_TAG}1",
              f"{refused_names.CACHE_DIR}/{digest}.algo-2{refused_names.REFUSED_TAG}3"]
    for directory in [aside, *caches]:
        match = refused_names.REFUSED_KEY_RE.fullmatch(f"{directory}/sub/model.safetensors")
        assert match is not None and match["directory"] == directory, directory
    for kept in ["checkpoint-40/model.safetensors", f"_tokenized/{digest}/train/data.arrow", aside,
                 f"_tokenized/{digest}.refused-1.txt", "user.refused-1/file", f"_tokenized/{digest[:19]}.refused-1/x",
                 "other/checkpoint-40.unverified-1/x"]:
        assert refused_names.REFUSED_KEY_RE.fullmatch(kept) is None, kept
