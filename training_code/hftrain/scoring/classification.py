"""Text classification scoring: labels compared as strings, accuracy and macro F1 over the label ids."""

from __future__ import annotations

import numpy as np


def label_key(value) -> str:
    """Labels are compared as strings so that 1, '1' and 1.0 from JSON/CSV/Parquet agree."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    return str(value)


def ordered_labels(values) -> list[str]:
    """Sorted label names: numerically when every label is an integer, else alphabetically."""
    keys = {label_key(v) for v in values if v is not None and label_key(v) != ""}
    try:
        return sorted(keys, key=int)
    except ValueError:
        return sorted(keys)


def accuracy_and_macro_f1(predictions: np.ndarray, labels: np.ndarray, num_labels: int) -> dict[str, float]:
    predictions = np.asarray(predictions).reshape(-1)
    labels = np.asarray(labels).reshape(-1)
    mask = labels >= 0
    predictions, labels = predictions[mask], labels[mask]
    if labels.size == 0:
        raise ValueError("no labelled examples to score")
    f1s = []
    for k in range(num_labels):
        tp = float(np.sum((predictions == k) & (labels == k)))
        fp = float(np.sum((predictions == k) & (labels != k)))
        fn = float(np.sum((predictions != k) & (labels == k)))
        if tp + fp + fn == 0:
            continue  # a class absent from both: not part of the macro average
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return {"accuracy": float(np.mean(predictions == labels)), "macro_f1": float(np.mean(f1s)) if f1s else 0.0}
