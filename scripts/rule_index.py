"""Keep the test lines of docs/rules.md in step with the tests.

    python scripts/rule_index.py [--check]

docs/rules.md states every rule in a hand-written entry (``- **ACT-5** …``, continued on
lines indented by two spaces). This script rewrites only what it generates: under each entry,
one ``  - test: `file::test` `` line per test whose source or docstring names the rule (a
``# rule ACT-5b`` marker counts for ACT-5), or ``  - test: none yet``; and the line counting
the rules that have a test. Everything else in the file is kept as written. The statements
come from this repository alone.

``--check`` writes nothing and exits 1 when the file is stale. Either way the script exits 2
(and names the culprit) when a test names a rule the file does not state, or a rule is stated
twice or without words.
"""

from __future__ import annotations

import ast
import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TARGET = ROOT / "docs" / "rules.md"
FAMILIES = "ACT|TICK|PRI|QUE|RCV|DLG|SYS|POI|EVT|NET|RTE|FWD|SEC"
"""The rule families, as a regular-expression alternation."""
RULE = re.compile(rf"\b({FAMILIES})-(\d+)[a-z]?\b")
"""A rule named in a test: ``ACT-5`` or one of its parts, ``ACT-5b``."""
STATED = re.compile(rf"^- \*\*(({FAMILIES})-\d+)\*\*(.*)$")
"""The first line of a rule's hand-written entry."""
GENERATED = re.compile(r"^  - test: ")
"""A test line written by this script (dropped and written again on every run)."""
COUNT = re.compile(r"^\d+ of \d+ rules have a test\.$")


class RuleIndexError(Exception):
    """docs/rules.md and the tests disagree in a way no regeneration can fix."""


def tests_by_rule(tests: Path) -> dict[str, set[str]]:
    """Rule (``ACT-5``) → the tests (``test_x.py::test_y``) in folder ``tests`` whose source
    or docstring names it."""
    found: dict[str, set[str]] = defaultdict(set)
    for path in sorted(tests.glob("test_*.py")):
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.FunctionDef | ast.ClassDef) and (
                node.name.startswith(("test_", "Test"))
            ):
                body = "\n".join(lines[node.lineno - 1 : node.end_lineno])
                doc = ast.get_docstring(node) or ""
                for m in RULE.finditer(body + "\n" + doc):
                    found[f"{m.group(1)}-{m.group(2)}"].add(f"{path.name}::{node.name}")
    return found


def render(text: str, tests: dict[str, set[str]]) -> str:
    """``text`` (docs/rules.md) with its generated lines written again from ``tests``.

    Raises:
        RuleIndexError: a rule is stated twice or with no words, a test names a rule that is not
            stated, or the count line is missing.
    """
    lines = [line for line in text.splitlines() if not GENERATED.match(line)]
    stated: list[str] = []
    for line in lines:
        m = STATED.match(line)
        if m:
            if m.group(1) in stated:
                raise RuleIndexError(f"docs/rules.md states rule {m.group(1)} twice")
            if not m.group(3).strip():
                raise RuleIndexError(f"docs/rules.md: rule {m.group(1)} has no statement")
            stated.append(m.group(1))
    unknown = sorted(set(tests) - set(stated))
    if unknown:
        where = "; ".join(f"{r} in {', '.join(sorted(tests[r]))}" for r in unknown)
        raise RuleIndexError(f"tests name rules that docs/rules.md does not state: {where}")
    if not any(COUNT.match(line) for line in lines):
        raise RuleIndexError("docs/rules.md lacks the line 'N of M rules have a test.'")
    covered = sum(1 for r in stated if tests.get(r))
    out: list[str] = []
    rule: str | None = None
    for i, line in enumerate(lines):
        m = STATED.match(line)
        if m:
            rule = m.group(1)
        out.append(f"{covered} of {len(stated)} rules have a test." if COUNT.match(line) else line)
        following = lines[i + 1] if i + 1 < len(lines) else ""
        if rule is not None and not (following.startswith("  ") and following.strip()):
            names = sorted(tests.get(rule, ()))
            out.extend(f"  - test: `{t}`" for t in names)
            if not names:
                out.append("  - test: none yet")
            rule = None
    return "\n".join(out) + "\n"


def main(argv: list[str]) -> int:
    """Regenerate docs/rules.md (or, with ``--check``, only compare). Returns the exit code:
    0 done or current, 1 stale (``--check``), 2 an error that needs a hand edit."""
    if not TARGET.exists():
        print(f"{TARGET} does not exist", file=sys.stderr)
        return 2
    current = TARGET.read_text(encoding="utf-8")
    try:
        text = render(current, tests_by_rule(ROOT / "tests"))
    except RuleIndexError as exc:
        print(exc, file=sys.stderr)
        return 2
    if "--check" in argv:
        if current != text:
            print("docs/rules.md is stale: run python scripts/rule_index.py", file=sys.stderr)
            return 1
        return 0
    TARGET.write_text(text, encoding="utf-8")
    print(f"wrote {TARGET}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
