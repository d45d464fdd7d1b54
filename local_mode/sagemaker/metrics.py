"""Reading the leader host's log as SageMaker reads it: the job's MetricDefinitions regexes.

SageMaker applies each MetricDefinitions regex to the job's log and takes the first capture group as the
value; FinalMetricDataList holds the last value seen per metric. Values that are not finite numbers are
dropped (CloudWatch cannot store them).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any


@dataclass
class MetricTracker:
    """The last value of each metric defined by the job, fed one log line at a time."""

    definitions: list[dict[str, str]]
    _compiled: list[tuple[str, re.Pattern[str]]] = field(init=False)
    last: dict[str, tuple[float, datetime]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self._compiled = []
        for definition in self.definitions or []:
            try:
                self._compiled.append((definition["Name"], re.compile(definition["Regex"])))
            except re.error:  # SageMaker rejects such a job at creation; here the metric is just absent
                continue

    def feed(self, line: str, when: datetime | None = None) -> list[tuple[str, float]]:
        """Record the metrics one line carries; returns them."""
        found = []
        for name, pattern in self._compiled:
            match = pattern.search(line)
            if not match:
                continue
            text = match.group(1) if pattern.groups else match.group(0)
            try:
                value = float(text)
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                self.last[name] = (value, when or datetime.now(UTC))
                found.append((name, value))
        return found

    def final_metric_data_list(self) -> list[dict[str, Any]]:
        return [
            {"MetricName": name, "Value": value, "Timestamp": when}
            for name, (value, when) in sorted(self.last.items())
        ]
