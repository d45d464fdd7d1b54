"""The test kit: what more than one test module uses (helpers, stand-ins, harnesses, fixture data), imported as
`testkit.<module>`. Test modules import from here, never from each other (tests/test_layout.py); pytest's fixtures
stay in the conftest.py files. Installed with the checkout's packages (pyproject.toml: package-dir)."""

from __future__ import annotations

from pathlib import Path

KIT = Path(__file__).resolve().parent  # scripts the tests run by path (smddp_standin.py, inference_driver.py)
