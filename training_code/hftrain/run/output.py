"""Standard output and error that outlive their reader.

On a stop (a spot interruption, StopTrainingJob) the launcher that reads the training processes' output can be
ended before them: then every write to the pipe fails (BrokenPipeError), and a training process that is saving its
emergency checkpoint would die at its next log line, the checkpoint without its marker. `tolerate_closed_output`
wraps both streams so that a write to a pipe whose reader is gone is dropped instead: the checkpoint is finished,
only the lines nobody could read are lost.
"""

from __future__ import annotations

import sys
from typing import Any, TextIO


class TolerantStream:
    """A text stream whose writes and flushes stop, silently, once its reader has gone away."""

    def __init__(self, stream: TextIO) -> None:
        self._stream = stream
        self.reader_gone = False

    def write(self, text: str) -> int:
        if not self.reader_gone:
            try:
                return self._stream.write(text)
            except BrokenPipeError:
                self.reader_gone = True
        return len(text)

    def flush(self) -> None:
        if not self.reader_gone:
            try:
                self._stream.flush()
            except BrokenPipeError:
                self.reader_gone = True

    def __getattr__(self, name: str) -> Any:  # fileno, isatty, encoding, buffer, ... of the stream itself
        return getattr(self._stream, name)


def tolerate_closed_output() -> None:
    """Wrap sys.stdout and sys.stderr (once; call before logging is configured, so its handlers get the wrappers)."""
    if not isinstance(sys.stdout, TolerantStream):
        sys.stdout = TolerantStream(sys.stdout)  # type: ignore[assignment]
    if not isinstance(sys.stderr, TolerantStream):
        sys.stderr = TolerantStream(sys.stderr)  # type: ignore[assignment]
