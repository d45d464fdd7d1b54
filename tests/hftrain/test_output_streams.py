"""Output that outlives its reader (hftrain/run/output.py): a write to a pipe whose reader is gone is dropped."""

from __future__ import annotations

import contextlib
import os
import sys

from hftrain.run import output


def test_a_write_after_the_reader_is_gone_is_dropped_not_raised():
    read, write = os.pipe()
    stream = os.fdopen(write, "w", buffering=1)
    tolerant = output.TolerantStream(stream)
    assert tolerant.write("one\n") == 4
    assert os.read(read, 100) == b"one\n"
    os.close(read)  # the launcher that read our output is gone
    assert tolerant.write("two\n") == 4 and tolerant.reader_gone  # BrokenPipeError, swallowed
    tolerant.write("three\n")
    tolerant.flush()
    assert tolerant.fileno() == stream.fileno()  # what faulthandler needs still works
    with contextlib.suppress(BrokenPipeError):
        stream.close()


def test_wrapping_is_done_once(monkeypatch):
    monkeypatch.setattr(sys, "stdout", sys.stdout)
    monkeypatch.setattr(sys, "stderr", sys.stderr)
    output.tolerate_closed_output()
    first = sys.stdout
    output.tolerate_closed_output()
    assert sys.stdout is first and isinstance(sys.stderr, output.TolerantStream)
