"""The repository stands on its own: git ignores every file a broker leaves beside its database,
nothing points at files outside the repository, and the descriptions name both backends."""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import servicebroker
from servicebroker import Broker

ROOT = Path(__file__).resolve().parent.parent
OUTSIDE = ".." + "/shared"  # spelled in two parts so that this file does not match itself


def ignored(name: str) -> bool:
    patterns = [
        line.strip()
        for line in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()
        if line.strip() and not line.startswith("#")
    ]
    return any(fnmatch.fnmatch(name, p) for p in patterns)


def test_gitignore_covers_the_files_beside_an_sqlite_database(tmp_path: Path) -> None:
    with Broker.open(str(tmp_path / "app.db")) as broker:
        broker.create_queue("q")
        broker.start()  # a started broker takes the leader lock (<db>-sbleader)
        with broker.transaction() as tx:
            tx.receive("q", timeout=0)  # a RECEIVE records its activity (<db>-sbactivity)
        made = sorted(p.name for p in tmp_path.iterdir())
        broker.stop()
    assert "app.db-sbleader" in made
    assert [name for name in made if not ignored(name)] == []


def test_nothing_points_outside_the_repository() -> None:
    files = [ROOT / "README.md", ROOT / "pyproject.toml", ROOT / "Makefile"]
    for folder, pattern in (("docs", "*.md"), ("scripts", "*"), ("tests", "*.py"), ("src", "*.py")):
        files += [p for p in (ROOT / folder).rglob(pattern) if p.is_file()]
    pointing = [
        str(p.relative_to(ROOT))
        for p in files
        if "__pycache__" not in p.parts
        and OUTSIDE in p.read_text(encoding="utf-8", errors="replace")
    ]
    assert pointing == []


def test_descriptions_name_both_backends() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    docstring = servicebroker.__doc__ or ""
    for text in (project["description"], docstring):
        assert "SQLite" in text and "PostgreSQL" in text, text
