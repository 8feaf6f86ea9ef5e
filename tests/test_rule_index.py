"""docs/rules.md, the rule-to-test index, is kept in step with the tests."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_rule_index_is_current() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "rule_index.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
