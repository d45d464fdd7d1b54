"""Extractive question answering on SQuAD v1/v2-style data."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
from transformers import AutoModelForQuestionAnswering

from hftrain.data.files import DataError
from hftrain.scoring import baselines
from hftrain.scoring import squad as metrics_qa

from .base import Column, LocalMode, Task, Verdict


@dataclass
class QuestionAnsweringArguments:
    """Question answering hyperparameters: the SQuAD columns, chunking, post-processing."""

    question_column: str = field(default="question", metadata={"help": "Question column (question answering)."})
    context_column: str = field(default="context", metadata={"help": "Context column (question answering)."})
    answers_column: str = field(
        default="answers",
        metadata={
            "help": "SQuAD answers column: {'text': [...], 'answer_start': [...]} (a JSON string in CSV files)."
        },
    )
    id_column: str = field(default="id", metadata={"help": "Example id column (question answering; optional)."})
    doc_stride: int = field(
        default=128, metadata={"help": "Question answering: overlap in tokens between chunks of a long context."}
    )
    version_2_with_negative: bool = field(
        default=False, metadata={"help": "Question answering: SQuAD v2 data (some questions have no answer)."}
    )
    null_score_diff_threshold: float = field(
        default=0.0,
        metadata={"help": "SQuAD v2: predict no answer when null score - best span score exceeds this."},
    )
    n_best_size: int = field(default=20, metadata={"help": "Question answering: start/end candidates per feature."})
    max_answer_length: int = field(default=30, metadata={"help": "Question answering: longest answer in tokens."})


class QuestionAnswering(Task):
    name = "question-answering"
    order = 10
    arguments = QuestionAnsweringArguments
    metrics = ("exact_match", "f1", "HasAns_exact", "HasAns_f1", "NoAns_exact", "NoAns_f1")
    baseline_metrics = ("exact_match", "f1")
    columns = (
        Column("question_column", "question"),
        Column("context_column", "context"),
        Column("answers_column", "answers", kind="answers"),
        Column("id_column", "example id", kind="id", required=False),
    )
    verdict = Verdict("f1", 2.0, "SQuAD F1 in points (0-100): 2 points over the strongest trivial answer",
                      baselines=("the empty answer", "the context's first words",
                                 "the sentence with the most question words",
                                 "the span by the window that overlaps the question most"))
    local = LocalMode("question-answering.json", "bert", rows="question_answering_rows",
                      tokenizer_text="context_column")
    auto_model = AutoModelForQuestionAnswering
    default_max_length = 384

    def check_tokenizer(self, tokenizer) -> None:
        if not getattr(tokenizer, "is_fast", True):
            raise DataError("question answering needs a fast tokenizer (offset mappings)")

    def _tokenize(self, tokenizer, config, questions, contexts, *, train: bool):
        a = self.data_args
        if not getattr(tokenizer, "is_fast", True):
            raise DataError("question answering needs a fast tokenizer (offsets); use a tokenizer.json tokenizer")
        pad_right = tokenizer.padding_side == "right"
        max_length = self.max_length(tokenizer, config)
        stride = min(a.doc_stride, max_length // 2)
        questions = [q.lstrip() for q in questions]
        return tokenizer(
            questions if pad_right else contexts,
            contexts if pad_right else questions,
            truncation="only_second" if pad_right else "only_first",
            max_length=max_length,
            stride=stride,
            return_overflowing_tokens=True,
            return_offsets_mapping=True,
            padding="max_length" if a.pad_to_max_length else False,
        ), (1 if pad_right else 0)

    def _positions(self, tokenizer, enc, answers_list, sample_map, offsets_all, context_index):
        """Token start/end of the first answer per feature; the CLS position when it is not in the chunk."""
        starts, ends = [], []
        for i, offsets in enumerate(offsets_all):
            input_ids = enc["input_ids"][i]
            cls_index = input_ids.index(tokenizer.cls_token_id) if tokenizer.cls_token_id in input_ids else 0
            seq_ids = enc.sequence_ids(i)
            answers = metrics_qa.answers(answers_list[sample_map[i]])
            if not answers["answer_start"]:
                starts.append(cls_index)
                ends.append(cls_index)
                continue
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start = 0
            while seq_ids[token_start] != context_index:
                token_start += 1
            token_end = len(input_ids) - 1
            while seq_ids[token_end] != context_index:
                token_end -= 1
            if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
                starts.append(cls_index)  # the answer is not inside this chunk
                ends.append(cls_index)
                continue
            while token_start <= token_end and offsets[token_start][0] <= start_char:
                token_start += 1
            starts.append(token_start - 1)
            while token_end >= 0 and offsets[token_end][1] >= end_char and seq_ids[token_end] == context_index:
                token_end -= 1
            ends.append(token_end + 1)
        return starts, ends

    def tokenize_train(self, dataset, tokenizer, config, map_kwargs: dict):
        a = self.data_args

        def prepare(batch):
            enc, context_index = self._tokenize(
                tokenizer, config, batch[a.question_column], batch[a.context_column], train=True
            )
            sample_map = enc.pop("overflow_to_sample_mapping")
            offsets_all = enc.pop("offset_mapping")
            enc["start_positions"], enc["end_positions"] = self._positions(
                tokenizer, enc, batch[a.answers_column], sample_map, offsets_all, context_index
            )
            return enc

        return dataset.map(prepare, batched=True, remove_columns=dataset.column_names,
                           desc="Tokenizing training data", **map_kwargs)

    def tokenize_eval(self, dataset, tokenizer, config, map_kwargs: dict):
        """Features with labels (for eval_loss, and so the Trainer computes metrics) plus example_id and
        offset_mapping (None outside the context) for post-processing; the Trainer drops the latter two."""
        a = self.data_args
        ids = self._ids(dataset)

        def prepare(batch, indices):
            enc, context_index = self._tokenize(
                tokenizer, config, batch[a.question_column], batch[a.context_column], train=False
            )
            sample_map = enc.pop("overflow_to_sample_mapping")
            enc["start_positions"], enc["end_positions"] = self._positions(
                tokenizer, enc, batch[a.answers_column], sample_map, enc["offset_mapping"], context_index
            )
            enc["example_id"] = []
            for i in range(len(enc["input_ids"])):
                seq_ids = enc.sequence_ids(i)
                enc["example_id"].append(ids[indices[sample_map[i]]])
                enc["offset_mapping"][i] = [
                    o if seq_ids[k] == context_index else None for k, o in enumerate(enc["offset_mapping"][i])
                ]
            return enc

        return dataset.map(prepare, batched=True, with_indices=True, remove_columns=dataset.column_names,
                           desc="Tokenizing validation data", **map_kwargs)

    def _ids(self, dataset) -> list[str]:
        if self.data_args.id_column in dataset.column_names:
            ids = [str(x) for x in dataset[self.data_args.id_column]]
            if len(set(ids)) == len(ids):
                return ids
        return [str(i) for i in range(len(dataset))]

    def baseline_candidates(self, raw_train, raw_eval) -> dict[str, list]:
        a = self.data_args
        train_answers = raw_train[a.answers_column] if raw_train is not None else None
        return baselines.question_answering_candidates(raw_eval[a.question_column], raw_eval[a.context_column],
                                                       train_answers)

    def score_predictions(self, predictions: list, raw_eval) -> tuple[dict[str, float], list[float]]:
        a = self.data_args
        ids = [str(i) for i in range(len(raw_eval))]
        references = {i: metrics_qa.answers(ans)["text"] for i, ans in zip(ids, raw_eval[a.answers_column],
                                                                          strict=True)}
        scores = metrics_qa.squad_scores(dict(zip(ids, predictions, strict=True)), references)
        _, f1 = metrics_qa.example_scores(dict(zip(ids, predictions, strict=True)), references)
        return {"exact_match": scores["exact_match"], "f1": scores["f1"]}, [100.0 * f1[i] for i in ids]

    def compute_metrics(self, eval_examples, eval_features, tokenizer):
        a = self.data_args
        ids = self._ids(eval_examples)
        examples = [
            {"id": ids[i], "context": ctx} for i, ctx in enumerate(eval_examples[a.context_column])
        ]
        references = {ids[i]: metrics_qa.answers(ans)["text"] for i, ans in enumerate(eval_examples[a.answers_column])}
        features = [
            {"example_id": eid, "offset_mapping": off}
            for eid, off in zip(eval_features["example_id"], eval_features["offset_mapping"], strict=True)
        ]

        def compute(eval_pred):
            start_logits, end_logits = eval_pred.predictions[:2] if isinstance(eval_pred.predictions, tuple) \
                else eval_pred.predictions
            predictions = metrics_qa.postprocess_predictions(
                examples=examples,
                features=features,
                start_logits=np.asarray(start_logits),
                end_logits=np.asarray(end_logits),
                version_2_with_negative=a.version_2_with_negative,
                n_best_size=a.n_best_size,
                max_answer_length=a.max_answer_length,
                null_score_diff_threshold=a.null_score_diff_threshold,
            )
            self.example_scores = [100.0 * v for v in metrics_qa.example_scores(predictions, references)[1].values()]
            return metrics_qa.squad_scores(predictions, references)

        return compute
