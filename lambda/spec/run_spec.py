"""Run spec v1, declared once: every field (kind, bounds, pattern, default, docs) in `SPEC`, the rules across
fields in `RULES`. Pure: no AWS calls.

From this declaration come Prepare's validator (`parse_spec`), the field table in docs/run_spec.md and
docs/run-spec.schema.json (both written by `make docs`; a test fails when they are
stale). `parse_spec` returns the *resolved* spec, the input with every default filled in (so
`parse_spec(parse_spec(x)) == parse_spec(x)`), or raises one `SpecError` whose problems each start with the
JSON path of their field. Adding a field: one entry in `SPEC` (and a rule in `RULES` if it depends on other
fields); see docs/run_spec.md, "Adding a field".
"""

from __future__ import annotations

import json
from typing import Any

from contract import intervals
from hfsm_lambda.errors import SpecError
from hfsm_lambda.naming import INSTANCE_TYPE, NAME
from hfsm_lambda.plan import instance_types, runtime_limits
from hfsm_lambda.plan.sagemaker_limits import (
    MAX_CONTAINER_ARGUMENT,
    MAX_RUNTIME_LIMIT,
    PROCESSING_RUNTIME_LIMIT,
)
from hfsm_lambda.settings import Settings
from hfsm_lambda.spec import hyperparameters, strict_json
from hfsm_lambda.spec.charsets import DESCRIPTION, NO_CONTROL, TAG, VISIBLE, Charset
from hfsm_lambda.spec.schema import (
    ABSENT,
    INVALID,
    Bool,
    Const,
    Context,
    Derived,
    Either,
    Enum,
    Int,
    IntOrWord,
    JsonObject,
    List,
    Map,
    Num,
    Obj,
    Setting,
    Str,
    valid,
)
from hfsm_lambda.training_contract import tokenizer_rules

SPEC_VERSION = 1
TASKS = hyperparameters.tasks()  # the training code's task registry (training_hyperparameters.json)
CHANNELS = ("train", "validation", "test")
DISTRIBUTION_TYPES = ("FullyReplicated", "ShardedByS3Key")
INPUT_MODES = ("File", "FastFile")
STRATEGIES = ("none", "ddp", "smddp", "fsdp")
TOKENIZER_TYPES = tokenizer_rules.TOKENIZER_TYPES
WATCHDOG_ACTIONS = ("warn", "stop", "off")
STALL_ACTIONS = ("retry", "fail", "off")
# The tokenizer jobs' own rules (training_code/tokenizer_mr/tokenizer_rules.py), checked here before any job starts.
# The defaults as the resolved spec holds them: JSON lists.
DEFAULT_SPECIAL_TOKENS = {kind: list(tokens) for kind, tokens in tokenizer_rules.DEFAULT_SPECIAL_TOKENS.items()}
# wordpiece exports with the bert style (`--style auto`), which needs these
WORDPIECE_REQUIRED_TOKENS = tokenizer_rules.STYLE_SPECIAL_TOKENS["bert"]
FSDP_SHARDING_MODES = ("full_shard", "shard_grad_op", "hybrid_shard_zero2", "hybrid_shard", "no_shard")
FSDP_EXTRAS = ("offload", "auto_wrap")
FSDP_OPTIONS = FSDP_SHARDING_MODES + FSDP_EXTRAS
DEFAULT_FSDP_SHARDING = "full_shard auto_wrap"
# FSDP2 unless the spec's config names a version: FSDP1 is deprecated in accelerate and cannot run on CPU
# (local mode); see training_code/hftrain/parallel/fsdp.py.
DEFAULT_FSDP_VERSION = 2
RESERVED_TAG_KEYS = ("project", "environment", "run")
MAX_SPEC_TAGS = 40  # SageMaker allows 50 tags (sagemaker_limits.MAX_TAGS); the pipeline adds 3
MAX_ATTEMPTS_LIMIT = 10

# --- patterns: whole-string, in the regex subset Python and ECMAScript share (see spec_schema) ---------------
_WORD = "[A-Za-z0-9_]"
_HUB_PART = f"{_WORD}(?:[A-Za-z0-9_.-]{{0,94}}{_WORD})?"
# huggingface_hub's validate_repo_id: ASCII, 1-96 per part, no '--' or '..', no '.git' at the end.
HUB_ID = rf"(?![\s\S]*(?:--|\.\.))(?![\s\S]*\.git(?![\s\S]))(?:{_HUB_PART}/)?{_HUB_PART}"
# S3's bucket naming rules (no '..', not an IP address, no reserved prefixes/suffixes); the key is not empty.
BUCKET = (r"(?!xn--|sthree-|amzn-s3-demo-)(?![0-9]+(?:\.[0-9]+){3}/)"
          r"(?![^/]*(?:-s3alias|--ol-s3|\.mrap|--x-s3|--table-s3)/)[a-z0-9](?:[a-z0-9-]|\.(?!\.)){1,61}[a-z0-9]")
S3_URI = rf"s3://{BUCKET}/[\s\S]+"
S3_KEY = r"[A-Za-z0-9][A-Za-z0-9!_.*'()/=+-]{0,900}"
FSX_PATH = r"(?:/[A-Za-z0-9._=+@-]+)+/?"
TEXT_FIELD = r"[A-Za-z0-9_.-]{1,64}"
EXPERIMENT = r"[A-Za-z0-9][A-Za-z0-9_./-]{0,127}"
# CreateModelPackage CustomerMetadataProperties values carry the model: \p{L}\p{N} and _.:/=+-@ (no spaces).
MODEL_URI_CHARS = Charset(("L", "N"), "_.:/=+-@", doc="letters, digits and `_.:/=+-@`")


def _sharding_pattern() -> str:
    """Exactly one sharding mode plus each extra at most once, in any order, separated by spaces."""
    mode = "(?:" + "|".join(FSDP_SHARDING_MODES) + ")"
    orders = [[mode]]
    for extra in FSDP_EXTRAS:
        orders = [o[:i] + [extra] + o[i:] for o in orders for i in range(len(o) + 1)] + orders
    return " *(?:" + "|".join(" +".join(o) for o in sorted(orders, key=len, reverse=True)) + ") *"


def _in_data_bucket(value: str, ctx: Context) -> str:
    """A channel's location as a folder: a prefix without its final '/' would also read its siblings
    (`datasets/x` matches `datasets/x-other/...`), so the '/' is added."""
    uri = value if value.startswith("s3://") else f"s3://{ctx.settings.data_bucket}/{value}"
    return uri if uri.endswith("/") else uri + "/"


def _model_folder(value: str, ctx: Context) -> str:
    """An S3 model is a model.tar.gz object or a folder (as for channels, the '/' is added)."""
    return value if value.endswith(("/", ".tar.gz", ".tgz")) else value + "/"


# S3 keys are literal: no segment is resolved, no escape decoded. Such segments are refused, not normalised (what
# was meant is not certain); only the final '/' is added (see _in_data_bucket).
S3_SEGMENTS = (
    (r"[\s\S]*/\.{1,2}(?:/[\s\S]*)?", "a '.' or '..' segment: S3 keys are literal (datasets/./x is not "
                                     "datasets/x, and '..' does not go up); write the prefix without it"),
    (r"(?:s3://|(?!s3://))[\s\S]*//[\s\S]*", "an empty segment ('//'): S3 keys are literal (datasets//x is not "
                                       "datasets/x); write each '/' once"),
    (r"[\s\S]*%[0-9A-Fa-f]{2}[\s\S]*", "a percent escape such as %2F: S3 keys are literal (%2F is three "
                                   "characters, not a '/'); write the characters themselves"),
)


def _default_wait(siblings: dict[str, Any], ctx: Context) -> int:
    runtime = ctx.root.get("max_runtime_seconds")
    return min(max(ctx.settings.default_max_wait_seconds, runtime if isinstance(runtime, int) else 0),
               MAX_RUNTIME_LIMIT)


def _default_attempts(siblings: dict[str, Any], ctx: Context) -> int:
    options = siblings.get("options")
    return 1 + (len(options) if isinstance(options, list) else 0)


def _default_experiment(siblings: dict[str, Any], ctx: Context) -> Any:
    task = ctx.root.get("task")
    return task if isinstance(task, str) and valid(task) else ABSENT


def _instance_type(what: str, default: Any = ABSENT, doc: str = "") -> Str:
    return Str(what=f"an instance type like {what}", pattern=INSTANCE_TYPE, max_len=64, default=default, doc=doc)


CHANNEL = Obj(doc="a channel: exactly one of `s3` or `fsx`, plus `distribution` and `input_mode`", fields={
    "s3": Str(what="s3://bucket/prefix/, or a key prefix (datasets/squad/train/) in the data bucket",
              pattern=f"{S3_URI}|{S3_KEY}", charset=VISIBLE, max_len=960, normalize=_in_data_bucket,
              forbid=S3_SEGMENTS, doc="must be in the data or artifacts bucket; a folder: a final '/' is added "
                                      "(`datasets/x` reads `datasets/x/...`, never `datasets/x-other/`); `.`, `..`, "
                                      "empty (`//`) segments and percent escapes are refused"),
    "fsx": Str(what="an absolute path under the FSx mount, e.g. /datasets/squad", pattern=FSX_PATH, max_len=1000,
               forbid=((r"[\s\S]*/\.\.(?:/[\s\S]*)?", "'..' is not allowed"),),
               doc="only where the environment has FSx for Lustre; the job then runs in the file system's subnet"),
    "distribution": Enum(values=DISTRIBUTION_TYPES, default="FullyReplicated",
                         doc="ShardedByS3Key: each instance gets about 1/n of the objects (at least one object per "
                             "instance; s3 only)"),
    "input_mode": Enum(values=INPUT_MODES, default="File", doc="FSx channels: `File` only"),
})

SPEC = Obj(fields={
    "version": Const(value=SPEC_VERSION, required=True, why=" (the only version this pipeline reads)"),
    "name": Str(what="1-32 characters [a-z0-9-] starting with a letter", pattern=NAME, required=True,
                doc="The run id is `<name>-<UTC yyyymmddHHMMSS>-<16 hex>`"),
    "description": Str(what=f"at most 256 {DESCRIPTION.doc}", max_len=256, charset=DESCRIPTION,
                       doc="goes into the model package description"),
    "task": Enum(values=TASKS, required=True),
    "model": Either(prefix="s3://", required=True,
                    doc="A Hub id becomes the `model_name_or_path` hyperparameter (the job downloads it: needs "
                        "internet access); an S3 model (a `save_pretrained` prefix or a `model.tar.gz`) is sent as "
                        "the `model` channel and must be in the data or artifacts bucket",
                    with_prefix=Str(what=f"an s3://bucket/prefix/ or s3://.../model.tar.gz URI of at most 256 "
                                         f"{MODEL_URI_CHARS.doc}", pattern=S3_URI, max_len=256,
                                    charset=MODEL_URI_CHARS, forbid=S3_SEGMENTS, normalize=_model_folder),
                    otherwise=Str(what="a Hugging Face Hub id such as 'org/name' (the Hub's rules: [A-Za-z0-9_.-], "
                                       "1-96 per part, starting and ending with a letter, digit or '_', no '--' or "
                                       "'..'), or an s3:// URI of a saved model", pattern=HUB_ID, max_len=193)),
    "data": Obj(required=True, each="<channel>", doc="channel name -> channel; `train` is required",
                fields={name: Obj(fields=CHANNEL.fields, doc=CHANNEL.doc, required=name == "train")
                        for name in CHANNELS}),
    "tokenizer": Obj(doc="train a tokenizer on the data first (map and reduce processing jobs), then pass it to "
                         "training as the `tokenizer` channel", fields={
        "type": Enum(values=TOKENIZER_TYPES, required=True, doc="byte-level BPE or WordPiece"),
        "vocab_size": Int(low=100, high=1_000_000, default=32000,
                          doc=f"at least the initial symbols: bpe: the {tokenizer_rules.BYTE_LEVEL_ALPHABET_SIZE}-symbol "
                              "byte-level alphabet plus the special tokens; wordpiece: the special tokens plus one"),
        "min_frequency": Int(low=1, high=1_000_000, default=2),
        "special_tokens": List(item=Str(what=f"1-64 characters, {NO_CONTROL.doc}", min_len=1, max_len=64,
                                        charset=NO_CONTROL), min_items=1, max_items=100, unique=True,
                               default=Derived("bpe: `" + json.dumps(DEFAULT_SPECIAL_TOKENS["bpe"]) + "`; wordpiece: `"
                                               + json.dumps(DEFAULT_SPECIAL_TOKENS["wordpiece"]) + "`",
                                               lambda s, ctx: DEFAULT_SPECIAL_TOKENS.get(s.get("type"), ABSENT)),
                               doc=f"as JSON at most {MAX_CONTAINER_ARGUMENT} characters; wordpiece needs "
                                   f"{', '.join(WORDPIECE_REQUIRED_TOKENS)}"),
        "text_field": Str(what="a column name of 1-64 characters [A-Za-z0-9_.-]", pattern=TEXT_FIELD,
                          default="text"),
        "lowercase": Bool(default=False),
        "model_max_length": Int(low=1, high=1_000_000, default=512),
        "channel": Enum(values=CHANNELS, default="train",
                        doc="a `data` channel with an `s3` source (processing jobs cannot read FSx)"),
        "instance_type": _instance_type("ml.c5.2xlarge", Setting("tokenizer_instance_types", first=True),
                                        "one of the environment's `tokenizer_instance_types`"),
        "instance_count": Int(low=1, high=100, default=1,
                              doc="hosts of the map job (the reduce job runs on 1); at most the environment's "
                                  "`max_instance_count`; the channel needs at least this many objects"),
        "volume_size_gb": Int(low=1, high=16384, default=30),
        "max_runtime_seconds": Int(low=1, high=PROCESSING_RUNTIME_LIMIT, default=86400, doc="per processing job"),
    }),
    "compute": Obj(default={}, fields={
        "instance_type": _instance_type("ml.g5.2xlarge", Setting("allowed_instance_types", first=True),
                                        "one of the environment's `allowed_instance_types`"),
        "instance_count": Int(low=1, high=10000, default=1, doc="at most the environment's `max_instance_count`"),
        "volume_size_gb": Int(low=1, high=16384, default=100, doc="EBS volume per instance"),
        "processes_per_host": Int(low=1, high=128, doc="processes torchrun starts per host (default: the GPUs of "
                                                       "the instance); not with strategy `none`"),
    }),
    "distribution": Obj(default={}, fields={
        "strategy": Enum(values=STRATEGIES, default="ddp",
                         doc="`none`: one process on one instance; `ddp`: PyTorch DDP launched by torchrun; `smddp`: "
                             "DDP with the SageMaker data parallel backend (only where the training image ships the "
                             "library: PyTorch <= 2.5 images, not the default 2.9 one); `fsdp`: fully sharded data "
                             "parallel"),
        "fsdp": Obj(default=Derived("`{}` with strategy `fsdp`", lambda s, ctx: {} if s.get("strategy") == "fsdp"
                                    else ABSENT), doc="only with strategy `fsdp`", fields={
            "sharding": Str(what="space-separated options: exactly one of " + ", ".join(FSDP_SHARDING_MODES)
                                 + ", plus optionally " + ", ".join(FSDP_EXTRAS) + ", each once",
                            pattern=_sharding_pattern(), max_len=200, default=DEFAULT_FSDP_SHARDING,
                            normalize=lambda v, ctx: " ".join(v.split()), doc="the Trainer's `fsdp` argument"),
            "config": JsonObject(default={}, doc="the Trainer's `fsdp_config`, e.g. `{\"transformer_layer_cls_to_wrap\": "
                                                 "[\"BertLayer\"]}`; at most 2500 characters as JSON", known={
                "version": Int(low=1, high=2, default=DEFAULT_FSDP_VERSION,
                               doc="2: FSDP2 (`torch.distributed.fsdp.fully_shard`, also runs on CPU in local mode); "
                                   "1: FSDP1 (GPU only, deprecated in accelerate)"),
            }),
        }),
    }),
    "max_runtime_seconds": Int(low=1, high=MAX_RUNTIME_LIMIT, default=Setting("default_max_runtime_seconds"),
                               doc="28 days at most"),
    "spot": Obj(default={}, fields={
        "enabled": Bool(default=Setting("spot_default"),
                        doc="managed spot training for the first attempt (fallback options can switch it)"),
        "max_wait_seconds": Int(low=1, high=MAX_RUNTIME_LIMIT,
                                default=Derived("*env*: larger of `default_max_wait_seconds` and "
                                                "`max_runtime_seconds`", _default_wait),
                                doc="waiting plus running; at least `max_runtime_seconds` when any attempt uses spot"),
    }),
    "checkpoint": Obj(default={}, doc="checkpoints go to `s3://<artifacts>/checkpoints/<run_id>/`, the same for "
                                      "every attempt, so a fallback attempt resumes", fields={
        "every_steps": Int(low=1, high=10**9, default=500, doc="the `save_steps` hyperparameter"),
        "every_minutes": IntOrWord(word="auto", number=Int(low=0, high=10080), default="auto",
                                   doc="also save when this many minutes have passed since the last checkpoint, "
                                       "whichever of steps and minutes comes first (the `save_every_minutes` "
                                       "hyperparameter; 0 = by steps only, and no watchdog). `\"auto\"`: the "
                                       "training code chooses the interval as sqrt(2 x C x M), C the blocking save "
                                       "time it measures, M the mean time between interruptions seen in this run, "
                                       "else a prior per instance type and capacity (a conservative guess), clamped "
                                       f"to {intervals.describe_checkpoint_bounds()} minutes, every change logged "
                                       "(`save_interval auto`); the watchdog then measures against "
                                       f"{intervals.CHECKPOINT_MAX_MINUTES}"),
        "watchdog": Obj(default=Derived("all defaults; `{\"action\": \"off\"}` when `every_minutes` is 0",
                                        lambda s, ctx: {} if s.get("every_minutes") else {"action": "off"}),
                        doc="the durability watchdog: while the job is Training, each look at it reads the newest "
                            "checkpoint complete in S3 (`last_durable_step` / `last_durable_at` in the run status)",
                        fields={
            "intervals": Num(low=1.5, high=100, default=3,
                             why=" (checkpoint intervals without a new checkpoint in S3 before the watchdog acts)",
                             doc="act when no new checkpoint has reached S3 for `intervals` x `every_minutes` "
                                 "minutes of training"),
            "action": Enum(values=WATCHDOG_ACTIONS, default="warn",
                           doc="`warn` (one SNS notification per stale period), `stop` (warn, then stop the job as "
                               "retryable so that the next attempt resumes from the last durable checkpoint; needs "
                               "`fallback.max_attempts` >= 2), `off`"),
        }),
    }),
    "stall": Obj(default={}, doc="the stall watchdog: a thread in every rank of the training job ends the job when "
                                 "it stops making progress (a rank stuck in a collective, a hung data loader, a "
                                 "frozen host), naming the silent rank, host, step and function in the failure "
                                 "reason, with every rank's stacks in the log; CheckJob watches the job's progress "
                                 "from outside too", fields={
        "minutes": IntOrWord(word="auto", number=Num(low=0.05, high=10080, why=" minutes"), default="auto",
                             doc="the job is stalled when no optimizer step ends for this many minutes (fractions "
                                 "allowed); `\"auto\"`: max(10 min, 20 x the median step time measured in the job); "
                                 "the `stall_minutes` hyperparameter"),
        "startup_minutes": IntOrWord(word="auto", number=Num(low=0.05, high=10080, why=" minutes"), default="auto",
                                     doc="the longer limit for start-up before the first step (imports, data load, "
                                         "model load, tokenization, rendezvous, checkpoint restore), evaluations and "
                                         "checkpoint saves before their first measurement: minutes without a phase "
                                         "change; `\"auto\"`: 3 x the longest start-up an attempt of the run "
                                         "measured, at least 10 min, 30 min before the first measurement (the "
                                         "`stall_startup_minutes` hyperparameter; the outside watch applies it "
                                         "before the job's first heartbeat)"),
        "stragglers": Enum(values=("warn", "end"), default="warn",
                           doc="a rank at least 20% slower than the fleet's median over a window "
                               "(`straggler_minutes`): `warn` "
                               "names it (log, progress line, summary, notification); `end` ends the job naming it, "
                               "so that a new attempt runs on other instances (needs `fallback.max_attempts` >= 2) "
                               "(the `stall_stragglers` hyperparameter)"),
        "straggler_minutes": Num(low=0.1, high=1440, default=5, why=" minutes",
                                 doc="the straggler window: each rank's own time per step over this many minutes "
                                     "against the fleet's median (the `stall_straggler_minutes` hyperparameter)"),
        "action": Enum(values=STALL_ACTIONS, default="retry",
                       doc="`retry`: a stall is a retryable outcome, the next attempt resumes from the last durable "
                           "checkpoint (counted against `fallback.max_attempts`: raise it to retry); `fail`: the run "
                           "fails, saying what stalled; `off`: no watchdog in the job and none from outside"),
    }),
    "recovery": Obj(default={}, doc="recovery in place: after a failure on healthy instances (a rank stalled, killed "
                                    "by a signal, or a peer's collective failed; the script's own exception once per "
                                    "error), the job restarts its training processes on the same instances from the "
                                    "newest complete local checkpoint, without a new SageMaker job", fields={
        "in_job_restarts": Int(low=0, high=100, default=2,
                               doc="how many recoveries in place one training job may make before it ends (then a "
                                   "new attempt follows if `fallback.max_attempts` allows); 0: none (the "
                                   "`in_job_restarts` hyperparameter)"),
    }),
    "network": Obj(default={}, fields={
        "require_efa": Bool(default=True,
                            doc="on an EFA instance type, a NCCL transport other than EFA at the first step ends the "
                                "job with a failure that says what to check (security group self-rules, FI_PROVIDER, "
                                "the aws-ofi-nccl plugin); `false`: only a warning in the log"),
    }),
    "fallback": Obj(default={}, doc="what to try after a spot timeout (`MaxWaitTimeExceeded`) or a capacity error",
                    fields={
        "options": List(item=Obj(min_fields=1, fields={
                            "instance_type": _instance_type("ml.g5.2xlarge", doc="one of `allowed_instance_types` "
                                                            "(with `smddp`: an SMDDP instance type); default: the "
                                                            "first attempt's"),
                            "spot": Bool(doc="`false` = on-demand; default: the first attempt's"),
                        }), max_items=MAX_ATTEMPTS_LIMIT - 1, default=[],
                        doc="option *k* is applied to attempt *k* (1-based) over the first attempt's "
                            "`compute.instance_type` and `spot.enabled`; attempts beyond the list reuse the last "
                            "option; without options each attempt retries the first one's settings"),
        "max_attempts": Int(low=1, high=MAX_ATTEMPTS_LIMIT, default=Derived("`1 + len(options)`", _default_attempts),
                            doc="attempts in all, the first included"),
    }),
    "hyperparameters": hyperparameters.Hyperparameters(default={}),
    "tags": Map(key=Str(what=f"1-128 {TAG.doc}", min_len=1, max_len=128, charset=TAG,
                        forbid=(("|".join(RESERVED_TAG_KEYS), "reserved: the pipeline sets "
                                 + ", ".join(RESERVED_TAG_KEYS)),
                                ("[aA][wW][sS]:[\\s\\S]*", "the aws: prefix is reserved for AWS"))),
                value=Str(what=f"at most 256 {TAG.doc}", max_len=256, charset=TAG), max_items=MAX_SPEC_TAGS,
                default={}, doc="applied to every job and the model package, after the pipeline's `project`, "
                                "`environment`, `run` tags"),
    "tracking": Obj(default={}, doc="MLflow and TensorBoard (docs/tracking.md): with the environment's tracking server "
                                    "(cdk.json `tracking`, local mode's own server), the run is one MLflow run in "
                                    "`experiment`, its attempts continuing the same curves", fields={
        "enabled": Bool(default=True, doc="log this run to the environment's MLflow tracking server where it has one "
                                          "(elsewhere nothing is logged); `false`: not this run"),
        "experiment": Str(what="an MLflow experiment name of 1-128 characters [A-Za-z0-9_./-] starting with a letter "
                               "or digit", pattern=EXPERIMENT, max_len=128,
                          default=Derived("the `task`", _default_experiment)),
        "tensorboard": Bool(default=False, doc="TensorBoard event files (the Trainer's `report_to` gains "
                                               "`tensorboard`) collected to `s3://<artifacts>/tensorboard/<run_id>/` "
                                               "(the job's TensorBoardOutputConfig); `report_to: tensorboard` in "
                                               "`hyperparameters` does the same"),
    }),
    "local": Obj(doc="honoured only by the local mode", fields={
        "interrupt_at_step": Int(low=1, high=10**9, doc="simulate a spot interruption at this step"),
    }),
    "$schema": Str(what=f"a JSON Schema reference of at most 2048 characters, {NO_CONTROL.doc}", max_len=2048,
                   charset=NO_CONTROL, keep=False,
                   doc="for editors (docs/run-spec.schema.json); ignored by the pipeline"),
})


# --- rules across fields: each adds problems for the fields it names; values that failed their own check ------
# --- are INVALID, and a rule skips them (the field's own problem is reported already) -------------------------
def channel_source(spec: dict[str, Any], ctx: Context) -> None:
    """A channel reads from exactly one of `s3` and `fsx`; FSx channels are `File` and `FullyReplicated`."""
    for name, channel in spec["data"].items() if valid(spec.get("data")) else ():
        path = f"data.{name}"
        if not valid(channel):
            continue
        if ("s3" in channel) == ("fsx" in channel):
            ctx.problems.add(path, "give exactly one of s3 (s3://bucket/prefix/) or fsx (/path/under/the/mount)")
        elif "fsx" in channel:
            mode, distribution = channel["input_mode"], channel["distribution"]
            if valid(mode) and mode != "File":
                ctx.problems.add(f"{path}.input_mode", "FSx channels support only File")
            if valid(distribution) and distribution != "FullyReplicated":
                ctx.problems.add(f"{path}.distribution", "FSx channels support only FullyReplicated "
                                                         "(ShardedByS3Key needs an s3 channel)")


def strategy_fits(spec: dict[str, Any], ctx: Context) -> None:
    """Strategy `none` runs one process on one instance; `distribution.fsdp` only with strategy `fsdp`."""
    compute, distribution = spec.get("compute"), spec.get("distribution")
    if not valid(compute, distribution) or not valid(distribution.get("strategy")):
        return
    strategy = distribution["strategy"]
    count = compute.get("instance_count")
    if strategy == "none" and valid(count) and count > 1:
        ctx.problems.add("distribution.strategy", f"'none' runs one process on one instance, but "
                                                  f"compute.instance_count={count}; use ddp, smddp or fsdp")
    if strategy == "none" and "processes_per_host" in compute:
        ctx.problems.add("compute.processes_per_host", "only used by a distributed strategy (ddp, smddp, fsdp)")
    if "fsdp" in distribution and strategy != "fsdp":
        ctx.problems.add("distribution.fsdp", f"only allowed with strategy 'fsdp' (strategy is {strategy!r})")


def tokenizer_fits(spec: dict[str, Any], ctx: Context) -> None:
    """The tokenizer channel is an s3 channel of `data`; the special tokens fit one container argument;
    wordpiece has its required tokens; the vocabulary holds the initial symbols (the last two: the tokenizer jobs'
    own rules, training_code/tokenizer_mr/tokenizer_rules.py)."""
    tok = spec.get("tokenizer")
    if tok is None or not valid(tok):
        return
    data, channel = spec["data"] if valid(spec.get("data")) else {}, tok["channel"]
    if valid(channel) and channel not in data:
        ctx.problems.add("tokenizer.channel", f"{channel!r} is not in data; have: {', '.join(data) or 'none'}")
    elif valid(channel) and valid(data[channel]) and "s3" not in data[channel]:
        ctx.problems.add("tokenizer.channel", f"data.{channel} reads from FSx; the tokenizer stage needs an s3 channel")
    if valid(tok.get("type"), tok.get("special_tokens")):
        _tokenizer_vocabulary(tok, ctx)


def _tokenizer_vocabulary(tok: dict[str, Any], ctx: Context) -> None:
    kind, special, vocab = tok["type"], tok["special_tokens"], tok["vocab_size"]
    if len(json.dumps(special)) > MAX_CONTAINER_ARGUMENT:
        ctx.problems.add("tokenizer.special_tokens", f"encoded as JSON it is {len(json.dumps(special))} characters; "
                                                     f"one container argument holds at most {MAX_CONTAINER_ARGUMENT}")
    if kind == "wordpiece" and (missing := [t for t in WORDPIECE_REQUIRED_TOKENS if t not in special]):
        ctx.problems.add("tokenizer.special_tokens", f"wordpiece needs {', '.join(missing)} (BERT style)")
    floor = tokenizer_rules.min_vocab_size(kind, special)
    what = (f"the {tokenizer_rules.BYTE_LEVEL_ALPHABET_SIZE}-symbol byte-level alphabet plus the special tokens"
            if kind == "bpe" else "the special tokens plus one character")
    if valid(vocab) and vocab < floor:
        ctx.problems.add("tokenizer.vocab_size", f"{vocab} is smaller than {what} ({floor}); use at least {floor}")


def watchdog_fits(spec: dict[str, Any], ctx: Context) -> None:
    """The watchdog measures against `checkpoint.every_minutes` (> 0 unless its action is `off`); action `stop`
    needs a next attempt to resume the stopped job (`fallback.max_attempts` >= 2)."""
    checkpoint, fallback = spec.get("checkpoint"), spec.get("fallback")
    if not valid(checkpoint) or not valid(checkpoint.get("watchdog"), checkpoint.get("every_minutes")):
        return
    action = checkpoint["watchdog"].get("action")
    if checkpoint["every_minutes"] == 0 and action not in ("off", INVALID):
        ctx.problems.add("checkpoint.watchdog", "needs checkpoint.every_minutes > 0 (the interval it measures "
                                                "against); set every_minutes or watchdog.action 'off'")
    elif action == "stop" and valid(fallback) and valid(attempts := fallback.get("max_attempts")) and attempts < 2:
        ctx.problems.add("checkpoint.watchdog.action", f"'stop' ends the job so that a new attempt resumes from the "
                                                       f"last durable checkpoint, but fallback.max_attempts is "
                                                       f"{attempts}; raise it to at least 2 (or use 'warn')")


def stall_fits(spec: dict[str, Any], ctx: Context) -> None:
    """`stall.minutes` is shorter than the job's `max_runtime_seconds` (else the watchdog could never act; the
    longer start-up limit may exceed a short job's runtime, which then simply ends the job first)."""
    stall, runtime = spec.get("stall"), spec.get("max_runtime_seconds")
    if not valid(stall, runtime) or stall.get("action") == "off":
        return
    value = stall.get("minutes")
    if isinstance(value, int | float) and valid(value) and value * 60 >= runtime:
        ctx.problems.add("stall.minutes", f"{value:g} minutes is not shorter than max_runtime_seconds={runtime} "
                                          f"({runtime / 60:g} min): the watchdog could never act; lower it, or set "
                                          "stall.action 'off'")
    fallback = spec.get("fallback")
    if stall.get("stragglers") == "end" and valid(fallback) and valid(attempts := fallback.get("max_attempts")) \
            and attempts < 2:
        ctx.problems.add("stall.stragglers", f"'end' ends the job so that a new attempt runs on other instances, but "
                                             f"fallback.max_attempts is {attempts}; raise it to at least 2 (or use "
                                             "'warn')")


def _whole(value: Any) -> bool:
    """No INVALID anywhere inside (a field that failed its own check)."""
    if isinstance(value, dict):
        return all(_whole(v) for v in value.values())
    if isinstance(value, list):
        return all(_whole(v) for v in value)
    return valid(value)


def hyperparameters_fit(spec: dict[str, Any], ctx: Context) -> None:
    """The hyperparameters, with those the pipeline sets, pass the training script's rules across
    hyperparameters (training_code/hftrain/hp_rules.py), e.g. not fp16 with bf16, evaluation only with
    validation data, doc_stride below max_seq_length, bf16 only where every attempt's GPUs have it, and the
    pipeline's own: nothing that silently undoes the spec's checkpoints."""
    read = ("task", "model", "data", "compute", "distribution", "spot", "checkpoint", "fallback", "hyperparameters")
    if all(_whole(spec.get(key, ABSENT)) for key in read):  # also when other fields have problems: report all
        for path, message in hyperparameters.rule_problems(spec):
            ctx.problems.add(path, message)


def processes_fit(spec: dict[str, Any], ctx: Context) -> None:
    """`compute.processes_per_host` is at most the GPUs of the first attempt's instance type and of every
    `fallback.options` entry's (lambda/plan/instance_types.py; torchrun would start ranks without a GPU)."""
    compute, fallback = spec.get("compute"), spec.get("fallback")
    if not valid(compute) or "processes_per_host" not in compute or not valid(compute["processes_per_host"],
                                                                               compute.get("instance_type", ABSENT)):
        return
    wanted, first = compute["processes_per_host"], compute["instance_type"]
    attempts = [("compute.processes_per_host", first)]
    if valid(fallback) and valid(fallback.get("options")):
        attempts += [(f"fallback.options[{i}].instance_type", option["instance_type"])
                     for i, option in enumerate(fallback["options"])
                     if valid(option) and valid(option.get("instance_type")) and "instance_type" in option]
    for path, instance_type in attempts:
        gpus = instance_types.gpus(instance_type)
        if gpus is not None and wanted > gpus:
            which = "the first attempt's" if path.startswith("compute") else "this fallback option's"
            ctx.problems.add(path, f"compute.processes_per_host={wanted}, but {which} instance type "
                                   f"{instance_types.describe(instance_type)} has {gpus} GPU(s): one process per GPU "
                                   f"at most; lower processes_per_host to {gpus} (or leave it unset: one per GPU)")


RULES = (channel_source, strategy_fits, tokenizer_fits, watchdog_fits, stall_fits, processes_fit, hyperparameters_fit,
         runtime_limits.runtime_fits)


def parse_spec_text(text: str | bytes) -> Any:
    """JSON text -> object, or SpecError naming the line/column of a syntax error or the path of a bad value."""
    value, problems = strict_json.loads(text)
    if problems:
        raise SpecError([f"{path}: {message}" for path, message in problems])
    return value


def parse_spec(raw: Any, settings: Settings) -> dict[str, Any]:
    """Validate a run spec and return it with defaults applied; SpecError lists every problem (at most 50)."""
    tree = strict_json.tree_problems(raw)
    if tree:
        raise SpecError([f"{path}: {message}" for path, message in tree])
    ctx = Context(settings)
    spec = SPEC.check(raw, "", ctx)
    if valid(spec) and isinstance(spec, dict):
        for rule in RULES:
            apply_rule(rule, spec, ctx)
    if ctx.problems or not isinstance(spec, dict):
        raise SpecError(ctx.problems.lines, omitted=ctx.problems.omitted)
    return spec


def apply_rule(rule: Any, spec: dict[str, Any], ctx: Context) -> None:
    """Run one rule across fields. A rule skips the fields that failed their own check (INVALID); should it still
    stumble over one (a `null` or a number where it expects an object: TypeError, AttributeError, KeyError...),
    that field's problem is reported already and the spec is refused with it: the rule adds nothing, and the spec
    error stays the one answer (issue 36). On a spec without problems the exception is a bug and propagates."""
    try:
        rule(spec, ctx)
    except (TypeError, AttributeError, KeyError, IndexError, ValueError):
        if not ctx.problems:
            raise
