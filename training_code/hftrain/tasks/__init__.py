"""One module per task: column checks, tokenization, collator, model class and metrics."""

from __future__ import annotations

from .base import Task


def get_task(name: str, data_args) -> Task:
    if name == "question-answering":
        from .qa import QuestionAnswering

        return QuestionAnswering(data_args)
    if name == "text-classification":
        from .classification import TextClassification

        return TextClassification(data_args)
    if name == "summarization":
        from .summarization import Summarization

        return Summarization(data_args)
    raise ValueError(f"unknown task {name!r}")


__all__ = ["Task", "get_task"]
