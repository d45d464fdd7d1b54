"""The demo's generated inputs are built once into a cache named by what makes them, and reused (a second
`make demo` generates nothing); a half-built folder is never taken for a built one."""

from __future__ import annotations

from pathlib import Path

import pytest

from local_mode import demo


def _files(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_inputs_are_built_once_then_reused(tmp_path, monkeypatch):
    built = []
    original = demo.build_inputs
    monkeypatch.setattr(demo, "build_inputs", lambda folder: built.append(folder) or original(folder))
    first = demo.cached_inputs(tmp_path)
    second = demo.cached_inputs(tmp_path)
    assert first == second and len(built) == 1
    assert [p.name for p in tmp_path.iterdir()] == [first.name]  # no temp folder left
    files = _files(first)
    assert "base-models/tiny-bert/config.json" in files and "datasets/demo-qa/validation/part-0.jsonl" in files
    fresh = _files(original(tmp_path / "fresh"))
    assert files.keys() == fresh.keys()
    # the rows are seeded: the same data as a fresh build (the tiny tokenizer may order equal-count words differently)
    assert {k: v for k, v in files.items() if k.startswith("datasets/")} == \
        {k: v for k, v in fresh.items() if k.startswith("datasets/")}


def test_a_build_that_fails_leaves_no_folder_to_reuse(tmp_path, monkeypatch):
    def broken(folder: Path) -> Path:
        (folder / "datasets").mkdir()
        raise OSError("disk full")

    monkeypatch.setattr(demo, "build_inputs", broken)
    with pytest.raises(OSError, match="disk full"):
        demo.cached_inputs(tmp_path)
    assert list(tmp_path.iterdir()) == []
