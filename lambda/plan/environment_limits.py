"""The environment's limits on where a run's phases run (tokenizer, then training and its fallback options),
read straight from the raw spec so that a spec that fails its own checks still hears about every phase (issue 36).

Pre-flight (preflight.py) applies the same limits to the parsed spec; this reads only what is readable (a value of
the wrong type is the spec error's business) and says it in pre-flight's words, so a problem is said once. Pure.
"""

from __future__ import annotations

from typing import Any

from hfsm_lambda.settings import Settings


def _allowed(values: tuple[str, ...]) -> str:
    return ", ".join(values) or "none"


def _obj(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def raw_problems(raw: Any, settings: Settings) -> list[str]:
    """Instance types outside the environment's lists and counts over its limit, for every phase of the spec."""
    spec, env = _obj(raw), settings.environment
    compute, tok, fallback = _obj(spec.get("compute")), _obj(spec.get("tokenizer")), _obj(spec.get("fallback"))
    options = fallback.get("options") if isinstance(fallback.get("options"), list) else []
    typed = [("compute.instance_type", compute.get("instance_type"), settings.allowed_instance_types)]
    typed += [(f"fallback.options[{i}].instance_type", _obj(o).get("instance_type"), settings.allowed_instance_types)
              for i, o in enumerate(options)]
    if tok:
        typed.append(("tokenizer.instance_type", tok.get("instance_type"), settings.tokenizer_instance_types))
    problems = [f"{path}: {value} is not allowed in environment {env}; allowed: {_allowed(allowed)}"
                for path, value, allowed in typed if isinstance(value, str) and value not in allowed]
    counts = [("compute.instance_count", compute.get("instance_count")), ("tokenizer.instance_count",
                                                                         tok.get("instance_count"))]
    problems += [f"{path}: {count} is over environment {env}'s limit of {settings.max_instance_count}"
                 for path, count in counts if _count(count) and count > settings.max_instance_count]
    return problems


def with_spec_problems(spec_problems: list[str], raw: Any, settings: Settings) -> list[str]:
    """The spec's problems, then each phase's environment problem about a field the spec problems do not name."""
    named = {p.split(": ", 1)[0] for p in spec_problems}
    return spec_problems + [p for p in raw_problems(raw, settings) if p.split(": ", 1)[0] not in named]
