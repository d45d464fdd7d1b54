"""What every task provides to the runner."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from transformers import DataCollatorWithPadding, Trainer

from hftrain.data.files import DataError, require_columns

COLUMN_KINDS = ("text", "label", "answers", "id")


@dataclass(frozen=True)
class Column:
    """A column a task reads, named by a hyperparameter: the one declaration of which hyperparameters name
    columns. The task resolves its columns with it (`Task.resolve_columns`), `hyperparameters.json` exports it
    (the `task` entry's `columns`) and Prepare's data pre-flight checks a sample of the data with it.

    Resolution: a name given (or the hyperparameter's default) must exist, except that a column that is not
    `required` and keeps its default is used only when present; without a name the first of `candidates`
    present is used (none present: an error when `required`); `off` (e.g. "none") means no such column.
    """

    hyperparameter: str  # e.g. "label_column"
    what: str  # how messages call it: "label"
    kind: str = "text"  # what its values are (COLUMN_KINDS): text, label, answers (SQuAD), id
    candidates: tuple[str, ...] = ()  # tried in order when the hyperparameter is unset
    required: bool = True
    off: str | None = None

    def __post_init__(self) -> None:
        if self.kind not in COLUMN_KINDS:
            raise ValueError(f"column kind {self.kind!r}: expected one of {COLUMN_KINDS}")

    def export(self) -> dict:
        return dataclasses.asdict(self) | {"candidates": list(self.candidates)}


@dataclass(frozen=True)
class Verdict:
    """How a finished run is judged (hftrain/scoring/judgement.py, lambda/runs/verdict.py): on `metric`, the
    trained model must beat the strongest of the task's trivial `baselines` and the same model before its first
    step, each by more than the evaluation set's noise (the 95% bootstrap interval of the gain above zero), and the
    strongest baseline also by `margin` (in the metric's own units). A run that did not learn in fewer than
    `min_steps` steps is "not judged" (too short to tell), unless its predictions never changed. Exported in
    hyperparameters.json."""

    metric: str
    margin: float
    why: str
    baselines: tuple[str, ...] = ()  # the names of Task.baseline_candidates, in their order
    min_steps: int = 100

    def export(self) -> dict:
        return dataclasses.asdict(self) | {"baselines": list(self.baselines)}


@dataclass(frozen=True)
class LocalMode:
    """What local mode (local_mode/, which is not shipped) needs to run the task on one machine with no downloads,
    read there through the registry: declared here so that a task's module is the one place that names them.
    Plain names only, nothing of local mode is imported into the training code."""

    example: str  # the shipped example spec, a file name under examples/ (its `task` is this task)
    model_family: str  # the tiny model built from a config (local_mode/synthetic.py MODEL_KINDS) for the task
    rows: str  # the function of local_mode/synthetic.py that generates learnable rows: (n, seed, hyperparameters)
    # the hyperparameter naming the column that a tokenizer stage's `text_field` is filled from
    tokenizer_text: str = "text_column"


class ModelTaskMismatch(ValueError):
    """The model's architecture cannot do the task."""


class Task:
    name = ""  # the `task` hyperparameter's value; a subclass with a name is registered (tasks/__init__.py)
    order = 100  # position in the lists of tasks (choices, error messages)
    arguments = None  # a dataclass of the task's own hyperparameters (fields of DataArguments)
    metrics: tuple[str, ...] = ()  # what compute_metrics returns (logged as eval_<name>)
    baseline_metrics: tuple[str, ...] = ()  # what baseline() returns (logged as eval_baseline_<name>)
    columns: tuple[Column, ...] = ()  # the columns it reads, each named by a hyperparameter (resolve_columns)
    verdict: Verdict | None = None  # the headline metric and margin over the trivial baseline
    local: LocalMode | None = None  # what local mode builds and generates for the task (required of a task)
    auto_model = None  # the transformers Auto* class
    trainer_class = Trainer
    default_max_length = 128

    @classmethod
    def metric_names(cls) -> tuple[str, ...]:
        return tuple(f"eval_{m}" for m in cls.metrics) + tuple(f"eval_baseline_{m}" for m in cls.baseline_metrics)

    @classmethod
    def default_arguments(cls, data_args) -> None:
        """Fill defaults of the task's hyperparameters that depend on others (DataArguments.__post_init__)."""

    def __init__(self, data_args) -> None:
        self.data_args = data_args

    # --- arguments ---
    def adjust_training_args(self, training_args) -> None:
        """Task defaults for Trainer arguments the user left unset (before anything reads them)."""

    def final_eval_kwargs(self, training_args) -> dict:
        """Keyword arguments for the evaluation at the end of training (`Trainer.evaluate`)."""
        return {}

    # --- data ---
    def resolve_columns(self, dataset, what: str) -> None:
        """Pick and check the column names of `columns` on the first dataset seen (raises DataError); the
        names are then `self.column(hyperparameter)`."""
        defaults = {f.name: f.default for f in dataclasses.fields(type(self.data_args))}
        present = dataset.column_names
        self.resolved: dict[str, str | None] = {}
        for col in self.columns:
            value = getattr(self.data_args, col.hyperparameter)
            if col.off and isinstance(value, str) and value.lower() == col.off:
                name = None
            elif value:
                if value not in present and (col.required or value != defaults.get(col.hyperparameter)):
                    require_columns(dataset, [value], what)
                name = value if value in present else None
            else:
                name = next((c for c in col.candidates if c in present), None)
                if name is None and col.required:
                    raise DataError(
                        f"cannot find the {col.what} column in {what}: tried {list(col.candidates)}, the data has "
                        f"{present}; set it with the {col.hyperparameter} hyperparameter")
            self.resolved[col.hyperparameter] = name
        self.check_columns(dataset, what)

    def column(self, hyperparameter: str) -> str | None:
        """The resolved name of the column that `hyperparameter` names (None: the task reads none)."""
        return self.resolved[hyperparameter]

    def check_columns(self, dataset, what: str) -> None:
        """Check a further dataset against the resolved names (an id column is used where present)."""
        kinds = {col.hyperparameter: col.kind for col in self.columns}
        require_columns(dataset, [name for hp, name in self.resolved.items() if name and kinds[hp] != "id"], what)

    def learn_from_data(self, datasets, all_gather) -> None:
        """Read what the task needs from every rank's raw data (`datasets`: this rank's, None where absent) before
        the model config is set; `all_gather(obj)` returns every rank's obj. Called on every rank."""

    def check_tokenizer(self, tokenizer) -> None:
        """Raise DataError when the task cannot work with this tokenizer."""

    # --- model ---
    def check_model(self, config) -> None:
        mapping = self.auto_model._model_mapping
        if type(config) not in mapping:
            raise ModelTaskMismatch(
                f"a {config.model_type!r} model cannot do {self.name}: transformers has no "
                f"{self.auto_model.__name__} for it; pick a model made for the task (e.g. BERT/RoBERTa for "
                "question answering and classification, BART/T5 for summarization)"
            )

    def configure(self, config) -> None:
        """Set task fields on the model config before loading the weights."""

    def model_kwargs(self) -> dict:
        return {}

    # --- metrics ---
    def baseline_candidates(self, raw_train, raw_eval) -> dict[str, list]:
        """The trivial baselines (`verdict.baselines`, in order): name -> a prediction per raw_eval row, as
        `score_predictions` scores them. raw_train may be None (then the candidates that need it are left out)."""
        return {}

    def score_predictions(self, predictions: list, raw_eval) -> tuple[dict[str, float], list[float]]:
        """({metric: value} with the keys `baseline_metrics`, the headline metric per row of raw_eval)."""
        raise NotImplementedError

    # The headline metric per evaluated example, in the order of the raw examples given to compute_metrics (the
    # judged set is tokenized without reordering), set by the last evaluation (scoring/judgement.py reads it).
    example_scores: list[float] | None = None

    # --- tokenization ---
    def max_length(self, tokenizer, config) -> int:
        wanted = self.data_args.max_seq_length or self.default_max_length
        return min(wanted, model_max_length(tokenizer, config))

    def tokenize_train(self, dataset, tokenizer, config, map_kwargs: dict):
        raise NotImplementedError

    def tokenize_eval(self, dataset, tokenizer, config, map_kwargs: dict):
        raise NotImplementedError

    def collator(self, tokenizer, model, training_args):
        multiple = 8 if (training_args.fp16 or training_args.bf16) else None
        return DataCollatorWithPadding(tokenizer, pad_to_multiple_of=None if self.data_args.pad_to_max_length
                                       else multiple)

    def compute_metrics(self, eval_examples, eval_features, tokenizer):
        raise NotImplementedError


def model_max_length(tokenizer, config) -> int:
    """The longest input the model accepts: the tokenizer's limit, else the position embeddings."""
    limits = []
    tok_max = getattr(tokenizer, "model_max_length", None)
    if tok_max and tok_max < 1_000_000:
        limits.append(int(tok_max))
    positions = getattr(config, "max_position_embeddings", None)
    if positions:
        offset = 2 if getattr(config, "model_type", "") in ("roberta", "xlm-roberta", "camembert", "longformer") else 0
        limits.append(int(positions) - offset)
    return min(limits) if limits else 1_000_000
