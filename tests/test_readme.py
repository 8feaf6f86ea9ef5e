"""The README's five-minute tour runs as written."""

from __future__ import annotations

import os
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_tour_runs(tmp_path: Path) -> None:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    tour = re.findall(r"```python\n(.*?)```", text, re.S)[0]
    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        exec(compile(tour, "README.md", "exec"), {})
    finally:
        os.chdir(cwd)
    assert (tmp_path / "orders.db").exists()
