"""Run spec v1: parse, validate (collecting every problem) and apply the environment's defaults.

Pure: no AWS calls. `parse_spec` returns the *resolved* spec, the same shape as the input with every
default filled in (so `parse_spec(parse_spec(x)) == parse_spec(x)`), or raises one `SpecError` whose
problems each start with the JSON path of the field they are about. Field reference: docs/run_spec.md.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from functools import lru_cache
from pathlib import Path
from typing import Any

from errors import SpecError
from settings import Settings

SPEC_VERSION = 1
TASKS = ("question-answering", "text-classification", "summarization")
CHANNELS = ("train", "validation", "test")
DISTRIBUTION_TYPES = ("FullyReplicated", "ShardedByS3Key")
INPUT_MODES = ("File", "FastFile")
STRATEGIES = ("none", "ddp", "smddp", "fsdp")
TOKENIZER_TYPES = ("bpe", "wordpiece")
WATCHDOG_ACTIONS = ("warn", "stop", "off")
DEFAULT_SPECIAL_TOKENS = {
    "bpe": ["<s>", "<pad>", "</s>", "<unk>", "<mask>"],
    "wordpiece": ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"],
}
# The tokenizer jobs' own rules (training_code/tokenizer_mr/settings.py), checked here before any job starts.
WORDPIECE_REQUIRED_TOKENS = ("[CLS]", "[SEP]", "[UNK]")
FSDP_OPTIONS = ("full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard", "offload",
                "auto_wrap")
FSDP_SHARDING_MODES = ("full_shard", "shard_grad_op", "hybrid_shard", "hybrid_shard_zero2", "no_shard")
DEFAULT_FSDP_SHARDING = "full_shard auto_wrap"
# FSDP2 unless the spec's config names a version: FSDP1 is deprecated in accelerate and cannot run on CPU
# (local mode); see training_code/hftrain/fsdp.py.
DEFAULT_FSDP_VERSION = 2
# Hyperparameters the pipeline sets from other fields (the spec's `hyperparameters` may not set them).
PIPELINE_HYPERPARAMETERS = {
    "task": "task",
    "model_name_or_path": "model",
    "save_steps": "checkpoint.every_steps",
    "save_every_minutes": "checkpoint.every_minutes",
    "fsdp": "distribution.fsdp.sharding",
    "fsdp_config": "distribution.fsdp.config",
    "ddp_backend": "distribution.strategy",
    "checkpoint_dir": "the checkpoint LocalPath (/opt/ml/checkpoints)",
    "output_dir": "the checkpoint LocalPath (/opt/ml/checkpoints); the training code manages it",
}
# Never as hyperparameters: they are visible to anyone who can call DescribeTrainingJob.
SECRET_HYPERPARAMETERS = ("hub_token",)
RESERVED_TAG_KEYS = ("project", "environment", "run")
MAX_SPEC_TAGS = 40
MAX_RUNTIME_LIMIT = 28 * 24 * 3600
PROCESSING_RUNTIME_LIMIT = 777600
MAX_ATTEMPTS_LIMIT = 10
DEFAULTS = {
    "volume_size_gb": 100,
    "checkpoint_every_steps": 500,
    "checkpoint_every_minutes": 30,
    "watchdog_intervals": 3,
    "watchdog_action": "warn",
    "strategy": "ddp",
    "tokenizer_vocab_size": 32000,
    "tokenizer_min_frequency": 2,
    "tokenizer_model_max_length": 512,
    "tokenizer_volume_size_gb": 30,
    "tokenizer_max_runtime_seconds": 86400,
}

NAME_RE = re.compile(r"^[a-z][a-z0-9-]{0,31}$")
HUB_ID_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,95}(/[A-Za-z0-9][A-Za-z0-9_.-]{0,95})?$")
S3_URI_RE = re.compile(r"^s3://(?P<bucket>[a-z0-9][a-z0-9.-]{1,61}[a-z0-9])/(?P<key>[^\s\\]+)$")
S3_KEY_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9!_.*'()/=+-]{0,1000}$")
FSX_PATH_RE = re.compile(r"^(/[A-Za-z0-9._=+@-]+)+/?$")
INSTANCE_TYPE_RE = re.compile(r"^ml\.[a-z0-9-]+\.[a-z0-9]+$")
TEXT_FIELD_RE = re.compile(r"^[A-Za-z0-9_.-]{1,64}$")
TAG_RE = re.compile(r"^[\w .:/=+\-@]*$")
HYPERPARAMETER_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_-]{0,255}$")
_CONTROL_RE = re.compile(r"[\x00-\x1f\x7f]")


@lru_cache(maxsize=1)
def training_hyperparameters() -> dict[str, dict[str, Any]]:
    """The training script's accepted hyperparameters (a copy of training_code/hyperparameters.json)."""
    return json.loads(Path(__file__).with_name("training_hyperparameters.json").read_text())


def parse_s3_uri(uri: str) -> tuple[str, str]:
    match = S3_URI_RE.match(uri)
    if not match:
        raise ValueError(f"not an s3://bucket/key URI: {uri!r}")
    return match["bucket"], match["key"]


def model_source(model: str) -> str:
    """'s3' for a saved model in S3 (sent as the `model` channel), 'hub' for a Hub id."""
    return "s3" if model.startswith("s3://") else "hub"


def uses_spot(spec: dict[str, Any]) -> bool:
    """True when any attempt (first or fallback) runs on managed spot."""
    enabled = spec["spot"]["enabled"]
    return enabled or any(opt.get("spot", enabled) for opt in spec["fallback"]["options"])


def _describe(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else json.dumps(value, default=repr)
    return text if len(text) <= 60 else text[:57] + "..."


class _Checker:
    """Collects problems; each check returns the value when it is valid, else None."""

    def __init__(self) -> None:
        self.problems: list[str] = []

    def add(self, path: str, message: str) -> None:
        self.problems.append(f"{path or '(root)'}: {message}")

    def obj(self, value: Any, path: str, fields: dict[str, bool]) -> dict[str, Any] | None:
        """A JSON object with only `fields` (name -> required)."""
        if not isinstance(value, dict):
            self.add(path, f"expected an object with fields {', '.join(sorted(fields))}, got {_describe(value)}")
            return None
        allowed = ", ".join(sorted(fields))
        for key in value:
            if key not in fields:
                hint = difflib.get_close_matches(str(key), list(fields), n=1)
                suggestion = f" (did you mean {hint[0]!r}?)" if hint else ""
                self.add(_join(path, key), f"unknown field; allowed: {allowed}{suggestion}")
        for key, required in fields.items():
            if required and key not in value:
                self.add(_join(path, key), "required field is missing")
        return value

    def integer(self, value: Any, path: str, low: int, high: int) -> int | None:
        if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
            self.add(path, f"expected an integer from {low} to {high}, got {_describe(value)}")
            return None
        return value

    def boolean(self, value: Any, path: str) -> bool | None:
        if not isinstance(value, bool):
            self.add(path, f"expected true or false, got {_describe(value)}")
            return None
        return value

    def choice(self, value: Any, path: str, allowed: tuple[str, ...]) -> str | None:
        if value not in allowed or not isinstance(value, str):
            self.add(path, f"{_describe(value)} is not allowed; allowed: {', '.join(allowed)}")
            return None
        return value

    def string(self, value: Any, path: str, pattern: re.Pattern[str], what: str) -> str | None:
        if not isinstance(value, str) or not pattern.match(value):
            self.add(path, f"expected {what}, got {_describe(value)}")
            return None
        return value


def _join(path: str, key: Any) -> str:
    return f"{path}.{key}" if path else str(key)


def parse_spec_text(text: str | bytes) -> Any:
    """JSON text -> object, or SpecError naming the position of the syntax error."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise SpecError([f"(root): not valid JSON: {err}"]) from None


def parse_spec(raw: Any, settings: Settings) -> dict[str, Any]:
    """Validate a run spec and return it with defaults applied; SpecError lists every problem."""
    c = _Checker()
    top = c.obj(raw, "", {
        "version": True, "name": True, "task": True, "model": True, "data": True, "description": False,
        "tokenizer": False, "compute": False, "distribution": False, "spot": False,
        "max_runtime_seconds": False, "checkpoint": False, "fallback": False, "hyperparameters": False,
        "tags": False, "local": False,
    })
    if top is None:
        raise SpecError(c.problems)
    spec: dict[str, Any] = {"version": SPEC_VERSION}
    if "version" in top and (top["version"] != SPEC_VERSION or isinstance(top["version"], bool)):
        c.add("version", f"expected {SPEC_VERSION} (the only version this pipeline reads), got "
                         f"{_describe(top['version'])}")
    if "name" in top:
        spec["name"] = c.string(top["name"], "name", NAME_RE,
                                "1-32 characters [a-z0-9-] starting with a letter")
    if "task" in top:
        spec["task"] = c.choice(top["task"], "task", TASKS)
    if "model" in top:
        spec["model"] = _model(c, top["model"])
    if "description" in top:
        desc = top["description"]
        if not isinstance(desc, str) or len(desc) > 256 or _CONTROL_RE.search(desc):
            c.add("description", f"expected a one-line string of at most 256 characters, got {_describe(desc)}")
        spec["description"] = desc
    spec["data"] = _data(c, top["data"], settings) if "data" in top else {}
    spec["compute"] = _compute(c, top.get("compute", {}), settings)
    spec["distribution"] = _distribution(c, top.get("distribution", {}), spec["compute"])
    spec["max_runtime_seconds"] = settings.default_max_runtime_seconds
    if "max_runtime_seconds" in top:
        spec["max_runtime_seconds"] = c.integer(top["max_runtime_seconds"], "max_runtime_seconds", 1,
                                                MAX_RUNTIME_LIMIT)
    spec["spot"] = _spot(c, top.get("spot", {}), settings, spec["max_runtime_seconds"])
    spec["checkpoint"] = _checkpoint(c, top.get("checkpoint", {}))
    spec["fallback"] = _fallback(c, top.get("fallback", {}))
    _checkpoint_fallback_problems(c, spec["checkpoint"], spec["fallback"])
    spec["hyperparameters"] = _hyperparameters(c, top.get("hyperparameters", {}))
    spec["tags"] = _tags(c, top.get("tags", {}))
    if "tokenizer" in top:
        spec["tokenizer"] = _tokenizer(c, top["tokenizer"], settings, spec["data"])
    if "local" in top:
        local = c.obj(top["local"], "local", {"interrupt_at_step": False})
        if local is not None and "interrupt_at_step" in local:
            c.integer(local["interrupt_at_step"], "local.interrupt_at_step", 1, 10**9)
        spec["local"] = dict(local or {})
    if c.problems:
        raise SpecError(c.problems)
    return spec


def _model(c: _Checker, model: Any) -> str | None:
    if isinstance(model, str) and model.startswith("s3://"):
        return c.string(model, "model", S3_URI_RE, "s3://bucket/prefix/ or s3://bucket/.../model.tar.gz")
    return c.string(model, "model", HUB_ID_RE,
                    "a Hugging Face Hub id such as 'org/name', or an s3:// URI of a saved model")


def _data(c: _Checker, data: Any, settings: Settings) -> dict[str, Any]:
    fields = {name: name == "train" for name in CHANNELS}
    channels = c.obj(data, "data", fields)
    out: dict[str, Any] = {}
    for name, channel in (channels or {}).items():
        if name not in fields:
            continue
        path = f"data.{name}"
        body = c.obj(channel, path, {"s3": False, "fsx": False, "distribution": False, "input_mode": False})
        if body is None:
            continue
        if ("s3" in body) == ("fsx" in body):
            c.add(path, "give exactly one of s3 (s3://bucket/prefix/) or fsx (/path/under/the/mount)")
        resolved: dict[str, Any] = {}
        if "s3" in body:
            uri = body["s3"]
            if isinstance(uri, str) and not uri.startswith("s3://") and S3_KEY_RE.match(uri):
                uri = f"s3://{settings.data_bucket}/{uri}"  # a bare key prefix is in the data bucket
            resolved["s3"] = c.string(uri, f"{path}.s3", S3_URI_RE,
                                      "s3://bucket/prefix/ or a key prefix in the data bucket")
        if "fsx" in body:
            resolved["fsx"] = c.string(body["fsx"], f"{path}.fsx", FSX_PATH_RE,
                                       "an absolute path under the FSx mount, e.g. /datasets/squad")
            if isinstance(body["fsx"], str) and ".." in body["fsx"].split("/"):
                c.add(f"{path}.fsx", "'..' is not allowed")
        resolved["distribution"] = c.choice(body.get("distribution", "FullyReplicated"), f"{path}.distribution",
                                            DISTRIBUTION_TYPES)
        resolved["input_mode"] = c.choice(body.get("input_mode", "File"), f"{path}.input_mode", INPUT_MODES)
        if "fsx" in body and "s3" not in body:
            if resolved["input_mode"] not in (None, "File"):
                c.add(f"{path}.input_mode", "FSx channels support only File")
            if resolved["distribution"] not in (None, "FullyReplicated"):
                c.add(f"{path}.distribution", "FSx channels support only FullyReplicated "
                                              "(ShardedByS3Key needs an s3 channel)")
        out[name] = resolved
    return out


def _compute(c: _Checker, compute: Any, settings: Settings) -> dict[str, Any]:
    body = c.obj(compute, "compute", {"instance_type": False, "instance_count": False, "volume_size_gb": False,
                                      "processes_per_host": False}) or {}
    out = {
        "instance_type": c.string(body.get("instance_type", settings.allowed_instance_types[0]),
                                  "compute.instance_type", INSTANCE_TYPE_RE, "an instance type like ml.g5.2xlarge"),
        "instance_count": c.integer(body.get("instance_count", 1), "compute.instance_count", 1, 10000),
        "volume_size_gb": c.integer(body.get("volume_size_gb", DEFAULTS["volume_size_gb"]),
                                    "compute.volume_size_gb", 1, 16384),
    }
    if "processes_per_host" in body:
        out["processes_per_host"] = c.integer(body["processes_per_host"], "compute.processes_per_host", 1, 128)
    return out


def _distribution(c: _Checker, distribution: Any, compute: dict[str, Any]) -> dict[str, Any]:
    body = c.obj(distribution, "distribution", {"strategy": False, "fsdp": False}) or {}
    strategy = c.choice(body.get("strategy", DEFAULTS["strategy"]), "distribution.strategy", STRATEGIES)
    out: dict[str, Any] = {"strategy": strategy}
    count = compute.get("instance_count")
    if strategy == "none" and isinstance(count, int) and count > 1:
        c.add("distribution.strategy", f"'none' runs one process on one instance, but compute.instance_count="
                                       f"{count}; use ddp, smddp or fsdp")
    if strategy == "none" and "processes_per_host" in compute:
        c.add("compute.processes_per_host", "only used by a distributed strategy (ddp, smddp, fsdp)")
    if "fsdp" in body and strategy != "fsdp":
        c.add("distribution.fsdp", f"only allowed with strategy 'fsdp' (strategy is {_describe(strategy)})")
    if strategy == "fsdp":
        fsdp = c.obj(body.get("fsdp", {}), "distribution.fsdp", {"sharding": False, "config": False}) or {}
        sharding = fsdp.get("sharding", DEFAULT_FSDP_SHARDING)
        if not isinstance(sharding, str) or not sharding.split():
            c.add("distribution.fsdp.sharding", f"expected space-separated options from {', '.join(FSDP_OPTIONS)}")
        else:
            words = sharding.split()
            bad = [w for w in words if w not in FSDP_OPTIONS]
            modes = [w for w in words if w in FSDP_SHARDING_MODES]
            if bad:
                c.add("distribution.fsdp.sharding", f"unknown option(s) {', '.join(bad)}; allowed: "
                                                    f"{', '.join(FSDP_OPTIONS)}")
            elif len(modes) != 1 or len(set(words)) != len(words):
                c.add("distribution.fsdp.sharding", f"give exactly one of {', '.join(FSDP_SHARDING_MODES)}, "
                                                    "each option once")
            sharding = " ".join(words)
        config = fsdp.get("config", {})
        if not isinstance(config, dict):
            c.add("distribution.fsdp.config", f"expected a JSON object (HF fsdp_config), got {_describe(config)}")
        else:
            config = {"version": DEFAULT_FSDP_VERSION, **config}
        out["fsdp"] = {"sharding": sharding, "config": config}
    return out


def _spot(c: _Checker, spot: Any, settings: Settings, max_runtime: int | None) -> dict[str, Any]:
    body = c.obj(spot, "spot", {"enabled": False, "max_wait_seconds": False}) or {}
    enabled = c.boolean(body.get("enabled", settings.spot_default), "spot.enabled")
    default_wait = max(settings.default_max_wait_seconds, max_runtime or 0)
    wait = c.integer(body.get("max_wait_seconds", min(default_wait, MAX_RUNTIME_LIMIT)), "spot.max_wait_seconds", 1,
                     MAX_RUNTIME_LIMIT)
    return {"enabled": enabled, "max_wait_seconds": wait}


def _checkpoint(c: _Checker, checkpoint: Any) -> dict[str, Any]:
    body = c.obj(checkpoint, "checkpoint", {"every_steps": False, "every_minutes": False, "watchdog": False}) or {}
    every = c.integer(body.get("every_steps", DEFAULTS["checkpoint_every_steps"]), "checkpoint.every_steps", 1,
                      10**9)
    # --- issue 9: time-bounded loss and the durability watchdog -------------------------------------------
    minutes = c.integer(body.get("every_minutes", DEFAULTS["checkpoint_every_minutes"]), "checkpoint.every_minutes",
                        0, 10080)
    watchdog = c.obj(body.get("watchdog", {}), "checkpoint.watchdog", {"intervals": False, "action": False}) or {}
    intervals = watchdog.get("intervals", DEFAULTS["watchdog_intervals"])
    if isinstance(intervals, bool) or not isinstance(intervals, int | float) or not 1.5 <= intervals <= 100:
        c.add("checkpoint.watchdog.intervals", f"expected a number from 1.5 to 100 (checkpoint intervals without a "
                                               f"new checkpoint in S3 before the watchdog acts), got "
                                               f"{_describe(intervals)}")
        intervals = None
    action = c.choice(watchdog.get("action", DEFAULTS["watchdog_action"]), "checkpoint.watchdog.action",
                      WATCHDOG_ACTIONS)
    if minutes == 0 and "watchdog" in body and action not in (None, "off"):
        c.add("checkpoint.watchdog", "needs checkpoint.every_minutes > 0 (the interval it measures against); "
                                     "set every_minutes or watchdog.action 'off'")
    return {"every_steps": every, "every_minutes": minutes,
            "watchdog": {"intervals": intervals, "action": action if minutes else "off"}}


def _checkpoint_fallback_problems(c: _Checker, checkpoint: dict[str, Any], fallback: dict[str, Any]) -> None:
    """A watchdog that stops the job needs an attempt left to resume it."""
    attempts = fallback.get("max_attempts")
    if checkpoint["watchdog"]["action"] == "stop" and isinstance(attempts, int) and attempts < 2:
        c.add("checkpoint.watchdog.action", f"'stop' ends the job so that a new attempt resumes from the last "
                                            f"durable checkpoint, but fallback.max_attempts is {attempts}; raise it "
                                            "to at least 2 (or use 'warn')")


def _fallback(c: _Checker, fallback: Any) -> dict[str, Any]:
    body = c.obj(fallback, "fallback", {"max_attempts": False, "options": False}) or {}
    options_raw = body.get("options", [])
    options: list[dict[str, Any]] = []
    if not isinstance(options_raw, list) or len(options_raw) > MAX_ATTEMPTS_LIMIT - 1:
        c.add("fallback.options", f"expected a list of at most {MAX_ATTEMPTS_LIMIT - 1} options, got "
                                  f"{_describe(options_raw)}")
        options_raw = []
    for index, option in enumerate(options_raw):
        path = f"fallback.options[{index}]"
        opt = c.obj(option, path, {"instance_type": False, "spot": False})
        if opt is None:
            continue
        if not opt:
            c.add(path, "empty option; set instance_type and/or spot")
        resolved: dict[str, Any] = {}
        if "instance_type" in opt:
            resolved["instance_type"] = c.string(opt["instance_type"], f"{path}.instance_type", INSTANCE_TYPE_RE,
                                                 "an instance type like ml.g5.2xlarge")
        if "spot" in opt:
            resolved["spot"] = c.boolean(opt["spot"], f"{path}.spot")
        options.append(resolved)
    max_attempts = c.integer(body.get("max_attempts", 1 + len(options)), "fallback.max_attempts", 1,
                             MAX_ATTEMPTS_LIMIT)
    return {"max_attempts": max_attempts, "options": options}


def _hyperparameter_value(c: _Checker, path: str, value: Any, meta: dict[str, Any]) -> None:
    """Check a value against the training script's schema type (string/boolean/integer/number/object/array)."""
    kind = str(meta.get("type", "")).lower()
    if isinstance(value, float) and not math.isfinite(value):
        c.add(path, "expected a finite number")
        return
    if kind in ("int", "integer"):
        ok, what = isinstance(value, int) and not isinstance(value, bool), "an integer"
    elif kind in ("float", "number"):
        ok, what = isinstance(value, (int, float)) and not isinstance(value, bool), "a number"
    elif kind in ("bool", "boolean"):
        ok, what = isinstance(value, bool), "true or false"
    elif kind in ("str", "string"):
        ok, what = isinstance(value, str), "a string"
    elif kind == "object":
        ok, what = isinstance(value, dict) or _is_json_object_text(value), "a JSON object"
    elif kind == "array":
        # The toolkit passes one command-line value per hyperparameter: a list cannot reach nargs="+".
        ok = isinstance(value, (str, int, float)) and not isinstance(value, bool) or (
            isinstance(value, list) and len(value) == 1 and isinstance(value[0], (str, int, float)))
        what = "one value (the SageMaker toolkit passes a single argument per hyperparameter)"
    else:
        ok, what = isinstance(value, (str, int, float, bool)), "a string, number or boolean"
    if not ok:
        c.add(path, f"expected {what}, got {_describe(value)}")
        return
    choices = meta.get("choices")
    if choices and str(value) not in [str(x) for x in choices]:
        c.add(path, f"{_describe(value)} is not allowed; allowed: {', '.join(map(str, choices))}")


def _is_json_object_text(value: Any) -> bool:
    if not isinstance(value, str):
        return False
    try:
        return isinstance(json.loads(value), dict)
    except json.JSONDecodeError:
        return False


def hyperparameter_argument(name: str, value: Any) -> Any:
    """The value to JSON-encode for SageMaker so the script receives what its parser expects.

    Objects travel as compact JSON text (the toolkit would render a dict as `k=v,k=v`); a one-element array
    as its element.
    """
    kind = str(training_hyperparameters().get(name, {}).get("type", "")).lower()
    if kind == "object" and isinstance(value, dict):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if kind == "array" and isinstance(value, list) and len(value) == 1:
        return value[0]
    return value


def _hyperparameters(c: _Checker, hyperparameters: Any) -> dict[str, Any]:
    if not isinstance(hyperparameters, dict):
        c.add("hyperparameters", f"expected an object of name -> value, got {_describe(hyperparameters)}")
        return {}
    known = training_hyperparameters()
    settable = sorted(set(known) - set(PIPELINE_HYPERPARAMETERS) - set(SECRET_HYPERPARAMETERS))
    for name, value in hyperparameters.items():
        path = f"hyperparameters.{name}"
        if name.startswith("sagemaker_"):
            c.add(path, "names starting with 'sagemaker_' are reserved for SageMaker")
        elif name in SECRET_HYPERPARAMETERS:
            c.add(path, "secrets must not be hyperparameters (DescribeTrainingJob shows them); stage the model "
                        "in S3 instead")
        elif name in PIPELINE_HYPERPARAMETERS:
            c.add(path, f"set by the pipeline from {PIPELINE_HYPERPARAMETERS[name]}; remove it here")
        elif name not in known:
            hints = difflib.get_close_matches(name, settable, n=3)
            suggestion = f"; did you mean {' or '.join(map(repr, hints))}?" if hints else ""
            c.add(path, f"unknown hyperparameter: the training script accepts the names in "
                        f"training_code/hyperparameters.json ({len(settable)} settable here){suggestion}")
        else:
            _hyperparameter_value(c, path, value, known[name])
    return dict(hyperparameters)


def _tags(c: _Checker, tags: Any) -> dict[str, str]:
    if not isinstance(tags, dict):
        c.add("tags", f"expected an object of key -> value strings, got {_describe(tags)}")
        return {}
    if len(tags) > MAX_SPEC_TAGS:
        c.add("tags", f"at most {MAX_SPEC_TAGS} tags, got {len(tags)}")
    for key, value in tags.items():
        path = f"tags.{key}"
        if key in RESERVED_TAG_KEYS:
            c.add(path, f"reserved: the pipeline sets {', '.join(RESERVED_TAG_KEYS)}")
        elif key.lower().startswith("aws:") or not 1 <= len(key) <= 128 or not TAG_RE.match(key):
            c.add(path, "tag keys are 1-128 characters of letters, digits, spaces and _.:/=+-@, not starting "
                        "with aws:")
        if not isinstance(value, str) or len(value) > 256 or not TAG_RE.match(value):
            c.add(path, f"expected a string of at most 256 letters, digits, spaces and _.:/=+-@, got "
                        f"{_describe(value)}")
    return dict(tags)


@lru_cache(maxsize=1)
def byte_level_alphabet() -> frozenset[str]:
    """The 256 symbols of the byte-level (GPT-2) pre-tokenizer: printable bytes map to themselves."""
    keep = [*range(ord("!"), ord("~") + 1), *range(0xA1, 0xAC + 1), *range(0xAE, 0xFF + 1)]
    chars, extra = [], 0
    for byte in range(256):
        if byte in keep:
            chars.append(chr(byte))
        else:
            chars.append(chr(256 + extra))
            extra += 1
    return frozenset(chars)


def _tokenizer_vocabulary(c: _Checker, kind: str | None, vocab: Any, special: Any) -> None:
    """The vocabulary must hold the initial symbols; wordpiece (BERT style) needs [CLS], [SEP], [UNK]."""
    if not isinstance(special, list) or not all(isinstance(t, str) for t in special):
        return
    if kind == "wordpiece":
        missing = [t for t in WORDPIECE_REQUIRED_TOKENS if t not in special]
        if missing:
            c.add("tokenizer.special_tokens", f"wordpiece needs {', '.join(missing)} (BERT style)")
    if kind in TOKENIZER_TYPES and isinstance(vocab, int) and not isinstance(vocab, bool):
        if kind == "bpe":
            floor, what = len(byte_level_alphabet() | set(special)), "the 256-symbol byte-level alphabet plus the special tokens"
        else:
            floor, what = len(set(special)) + 1, "the special tokens plus one character"
        if vocab < floor:
            c.add("tokenizer.vocab_size", f"{vocab} is smaller than {what} ({floor}); use at least {floor}")


def _tokenizer(c: _Checker, tokenizer: Any, settings: Settings, data: dict[str, Any]) -> dict[str, Any]:
    body = c.obj(tokenizer, "tokenizer", {
        "type": True, "vocab_size": False, "min_frequency": False, "special_tokens": False, "text_field": False,
        "lowercase": False, "model_max_length": False, "channel": False, "instance_type": False,
        "instance_count": False, "volume_size_gb": False, "max_runtime_seconds": False,
    }) or {}
    kind = c.choice(body.get("type"), "tokenizer.type", TOKENIZER_TYPES) if "type" in body else None
    special = body.get("special_tokens", DEFAULT_SPECIAL_TOKENS.get(kind or "", []))
    if (not isinstance(special, list) or not 1 <= len(special) <= 100
            or not all(isinstance(t, str) and 1 <= len(t) <= 64 and not _CONTROL_RE.search(t) for t in special)
            or len(set(special)) != len(special)):
        c.add("tokenizer.special_tokens", f"expected a list of 1-100 distinct non-empty strings, got "
                                          f"{_describe(special)}")
    elif len(json.dumps(special)) > 256:
        c.add("tokenizer.special_tokens", f"encoded as JSON it is {len(json.dumps(special))} characters; one "
                                          "container argument holds at most 256")
    _tokenizer_vocabulary(c, kind, body.get("vocab_size", DEFAULTS["tokenizer_vocab_size"]), special)
    channel = body.get("channel", "train")
    if c.choice(channel, "tokenizer.channel", CHANNELS) is not None:
        if channel not in data:
            c.add("tokenizer.channel", f"{channel!r} is not in data; have: {', '.join(data) or 'none'}")
        elif data[channel].get("s3") is None and "fsx" in data[channel]:
            c.add("tokenizer.channel", f"data.{channel} reads from FSx; the tokenizer stage needs an s3 channel")
    return {
        "type": kind,
        "vocab_size": c.integer(body.get("vocab_size", DEFAULTS["tokenizer_vocab_size"]), "tokenizer.vocab_size",
                                100, 1_000_000),
        "min_frequency": c.integer(body.get("min_frequency", DEFAULTS["tokenizer_min_frequency"]),
                                   "tokenizer.min_frequency", 1, 1_000_000),
        "special_tokens": special,
        "text_field": c.string(body.get("text_field", "text"), "tokenizer.text_field", TEXT_FIELD_RE,
                               "a column name of 1-64 characters [A-Za-z0-9_.-]"),
        "lowercase": c.boolean(body.get("lowercase", False), "tokenizer.lowercase"),
        "model_max_length": c.integer(body.get("model_max_length", DEFAULTS["tokenizer_model_max_length"]),
                                      "tokenizer.model_max_length", 1, 1_000_000),
        "channel": channel,
        "instance_type": c.string(body.get("instance_type", settings.tokenizer_instance_types[0]),
                                  "tokenizer.instance_type", INSTANCE_TYPE_RE, "an instance type like ml.c5.2xlarge"),
        "instance_count": c.integer(body.get("instance_count", 1), "tokenizer.instance_count", 1, 100),
        "volume_size_gb": c.integer(body.get("volume_size_gb", DEFAULTS["tokenizer_volume_size_gb"]),
                                    "tokenizer.volume_size_gb", 1, 16384),
        "max_runtime_seconds": c.integer(body.get("max_runtime_seconds", DEFAULTS["tokenizer_max_runtime_seconds"]),
                                         "tokenizer.max_runtime_seconds", 1, PROCESSING_RUNTIME_LIMIT),
    }
