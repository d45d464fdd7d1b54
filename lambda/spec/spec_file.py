"""Reading a run spec file: the one reader of `python -m local_mode run/example` and `python -m runctl`.

Standard library only: runctl (the CLI for AWS) imports it from here, as it imports local_mode's cloud assembly
reader; nothing in local_mode imports runctl at import time, so neither package's import pulls in the other's.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any


def read_spec_file(path: str | Path, error: type[Exception]) -> dict[str, Any]:
    """The JSON object in a run spec file; a file that cannot be read, is not JSON or is not an object raises
    `error` (the caller's own: each CLI prints it as one line) with a message that names the file."""
    try:
        spec = json.loads(Path(path).read_text())
    except OSError as exc:
        raise error(f"cannot read {path}: {exc.strerror}") from exc
    except json.JSONDecodeError as exc:
        raise error(f"{path} is not valid JSON: {exc}") from exc
    if not isinstance(spec, dict):
        raise error(f"{path}: a run spec is a JSON object")
    return spec
