"""docs/rules.md states every rule in the project's own words, and its test lines — written by
scripts/rule_index.py from the rule names in tests/ — are kept in step with the tests, from the
repository alone."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RULES = {
    "ACT": 9,
    "TICK": 4,
    "PRI": 18,
    "QUE": 3,
    "RCV": 5,
    "DLG": 9,
    "SYS": 2,
    "POI": 1,
    "EVT": 1,
    "NET": 8,
    "RTE": 4,
    "FWD": 3,
    "SEC": 4,
}
"""Each rule family and how many rules it has."""


def run_index(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(root / "scripts" / "rule_index.py"), *args],
        capture_output=True,
        text=True,
        cwd=root,
    )


def statements(text: str) -> dict[str, str]:
    """Rule → its statement (the entry's lines without the generated test lines)."""
    found: dict[str, str] = {}
    rule = None
    for line in text.splitlines():
        m = re.match(r"^- \*\*([A-Z]+-\d+)\*\* (.*)$", line)
        if m:
            rule = m.group(1)
            found[rule] = m.group(2)
        elif rule and line.startswith("  ") and not line.startswith("  - test: "):
            found[rule] += " " + line.strip()
        elif not line.startswith("  - test: "):
            rule = None
    return found


def test_rule_index_is_current() -> None:
    result = run_index(ROOT, "--check")
    assert result.returncode == 0, result.stderr


def test_every_rule_is_stated() -> None:
    stated = statements((ROOT / "docs" / "rules.md").read_text(encoding="utf-8"))
    expected = [f"{family}-{n}" for family, count in RULES.items() for n in range(1, count + 1)]
    assert list(stated) == expected  # all of them, each once, in order
    for rule, text in stated.items():
        assert len(text.split()) >= 8, f"{rule} is not stated: {text!r}"


FOREIGN_RULES = "# Other rules\n\n- **ACT-1** Something else entirely.\n- **NET-2** Not ours.\n"
"""A rules file in a folder beside the clone, as a checkout inside a bigger tree may have one;
the index must never read it."""


def copy_repo(into: Path) -> Path:
    """The parts of the repository the index is made from, copied to ``into``/repo."""
    repo = into / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "docs").mkdir()
    shutil.copy(ROOT / "scripts" / "rule_index.py", repo / "scripts")
    shutil.copy(ROOT / "docs" / "rules.md", repo / "docs")
    shutil.copytree(ROOT / "tests", repo / "tests", ignore=shutil.ignore_patterns("__pycache__"))
    return repo


def exercise(repo: Path) -> str:
    """Make the index stale in three ways and regenerate it; returns the final docs/rules.md."""
    rules_md = repo / "docs" / "rules.md"
    assert run_index(repo, "--check").returncode == 0
    # a new test naming a rule (a part of one, PRI-1b), after the rule's tests are taken away
    # (so the rule has none): stale until regenerated
    for test in (repo / "tests").glob("*.py"):
        text = test.read_text(encoding="utf-8")
        test.write_text(re.sub(r"rule PRI-1 ", "rule PRI-one ", text), encoding="utf-8")
    assert run_index(repo).returncode == 0
    new = repo / "tests" / "test_new.py"
    new.write_text("def test_new() -> None:\n    # rule PRI-1b\n    pass\n")
    before = rules_md.read_text(encoding="utf-8")
    stale = run_index(repo, "--check")
    assert stale.returncode == 1 and "docs/rules.md is stale" in stale.stderr
    assert rules_md.read_text(encoding="utf-8") == before  # --check writes nothing
    assert run_index(repo).returncode == 0
    after = rules_md.read_text(encoding="utf-8")
    assert "  - test: `test_new.py::test_new`" in after.split("- **PRI-1**")[1].split("- **")[0]
    covered = re.search(r"^(\d+) of 71 rules have a test\.$", before, re.M)
    assert covered and f"{int(covered.group(1)) + 1} of 71 rules have a test." in after
    # a statement edited by hand is kept; a test line removed by hand is stale
    edited = after.replace("- **NET-6** Every message", "- **NET-6** Each and every message")
    rules_md.write_text(edited.replace("  - test: `test_new.py::test_new`\n", ""))
    assert run_index(repo, "--check").returncode == 1
    assert run_index(repo).returncode == 0
    final = rules_md.read_text(encoding="utf-8")
    assert "- **NET-6** Each and every message" in final and "`test_new.py::test_new`" in final
    # a test naming a rule that is not stated is an error naming the rule and the test
    new.write_text("def test_new() -> None:\n    # rule NET-99\n    pass\n")
    unknown = run_index(repo, "--check")
    assert unknown.returncode == 2 and "NET-99 in test_new.py::test_new" in unknown.stderr
    return final


def test_the_index_is_made_from_the_repository_alone(tmp_path: Path) -> None:
    # the same steps give the same file whether or not a folder of other rules sits beside the clone
    alone = exercise(copy_repo(tmp_path / "alone"))
    beside = tmp_path / "beside"
    (beside / "shared").mkdir(parents=True)
    (beside / "shared" / "RULES.md").write_text(FOREIGN_RULES)
    assert exercise(copy_repo(beside)) == alone
