"""The training-code bundle (stacks/assets/code_asset.py), alone: a deterministic, content-addressed sourcedir.tar.gz that
carries the job wheels. Where the pipeline stack deploys it (code/<sha>/, the deployment role) is wiring:
tests/stacks/test_pipeline_stack.py and test_security_pipeline.py."""

from __future__ import annotations

import io
import tarfile
from io import BytesIO
from pathlib import Path

from stacks.assets.code_asset import WHEELS_DIR, build_code_bundle, sourcedir_bytes

REPO = Path(__file__).resolve().parents[3]


def test_code_bundle_is_deterministic_and_content_addressed(tmp_path: Path) -> None:
    a = sourcedir_bytes(REPO / "training_code")
    b = sourcedir_bytes(REPO / "training_code")
    assert a == b
    folder, sha = build_code_bundle(REPO / "training_code", tmp_path)
    assert (folder / "sourcedir.tar.gz").read_bytes() == a
    with tarfile.open(fileobj=BytesIO(a)) as tar:
        names = tar.getnames()
        assert names == sorted(names) and "requirements.txt" in names
        assert all(m.mtime == 0 and m.uid == 0 for m in tar.getmembers())
        assert not any("__pycache__" in n for n in names)
    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n")
    _, sha1 = build_code_bundle(src, tmp_path / "b1")
    (src / "train.py").write_text("print(2)\n")
    _, sha2 = build_code_bundle(src, tmp_path / "b2")
    assert sha1 != sha2


def test_the_code_bundle_carries_the_wheels(tmp_path):
    wheels = [tmp_path / "a-1.0-py3-none-any.whl", tmp_path / "b-2.0-py3-none-any.whl"]
    for i, path in enumerate(wheels):
        path.write_bytes(bytes([i]) * 10)
    data = sourcedir_bytes(REPO / "training_code", wheels)
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        names = tar.getnames()
    assert [n for n in names if n.startswith(f"{WHEELS_DIR}/")] == ["wheels/a-1.0-py3-none-any.whl",
                                                                   "wheels/b-2.0-py3-none-any.whl"]
    assert "requirements.txt" in names and "requirements-processing.txt" in names
    assert sourcedir_bytes(REPO / "training_code", wheels) == data


def test_parallel_builds_of_the_same_tree_all_get_the_whole_bundle(tmp_path):
    """Test workers and a benchmark synthesize at once into the same build/code/: each builder must end with the
    complete bundle, never a FileNotFoundError from a peer's temp folder (a CI failure of stop 41)."""
    from concurrent.futures import ThreadPoolExecutor

    from stacks.assets.code_asset import ENTRYPOINT

    src = tmp_path / "src"
    src.mkdir()
    (src / "train.py").write_text("print(1)\n" * 20000)
    (src / ENTRYPOINT).write_text("#!/bin/sh\n")
    for round_ in range(5):
        build = tmp_path / f"build{round_}"
        with ThreadPoolExecutor(8) as pool:
            results = list(pool.map(build_code_bundle, [src] * 8, [build] * 8))
        assert len({sha for _, sha in results}) == 1
        folder = results[0][0]
        assert (folder / "sourcedir.tar.gz").read_bytes() == sourcedir_bytes(src)
        assert (folder / ENTRYPOINT).read_text() == "#!/bin/sh\n"
        assert [p.name for p in build.iterdir()] == [folder.name]  # no temp folder left behind
