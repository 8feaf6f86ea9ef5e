"""Scripts as sqlcmd reads them (sqlcmd-utility.md, sqlcmd-commands.md): lines are gathered into
a batch until a ``GO [count]`` line, which runs it; ``$(name)`` is replaced by the scripting
variable's value (``-v name=value``, ``:setvar name "value"``); ``:r file`` reads a file in
place; ``:on error exit | ignore`` says whether a failing batch ends the script (as ``-b``
does); ``:exit`` / ``exit`` / ``quit`` end it. ``:connect`` and other commands that need another
server are refused by name.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TSqlError

__all__ = ["Script", "split_batches"]

_GO = re.compile(r"^\s*go(?:\s+(\d+))?\s*(?:--.*)?$", re.I)
_COMMAND = re.compile(r"^\s*:(\w+)\s*(.*?)\s*$")
_VARIABLE = re.compile(r"\$\((\w+)\)")


def _scan(line: str, state: str) -> str:
    """The lexical state at the end of ``line`` ('' code, '/*' in a comment, "'" in a string)
    when it starts in ``state`` (a GO inside a comment or a string is not a batch end)."""
    i = 0
    n = len(line)
    depth = 1 if state == "/*" else 0
    quote = state if state in ("'",) else ""
    while i < n:
        ch = line[i]
        if depth:
            if line.startswith("*/", i):
                depth -= 1
                i += 2
                continue
            if line.startswith("/*", i):
                depth += 1
                i += 2
                continue
        elif quote:
            if ch == quote:
                if i + 1 < n and line[i + 1] == quote:
                    i += 2
                    continue
                quote = ""
        elif line.startswith("--", i):
            break
        elif line.startswith("/*", i):
            depth = 1
            i += 2
            continue
        elif ch == "'":
            quote = "'"
        i += 1
    if depth:
        return "/*"
    return quote


def split_batches(text: str) -> Iterator[tuple[str, int]]:
    """The batches of ``text`` (split at ``GO`` lines, a ``GO n`` repeating its batch ``n``
    times) with the script line each starts on. sqlcmd commands other than GO are not read
    here (:class:`Script` reads them)."""
    lines: list[str] = []
    start = 1
    state = ""
    for number, line in enumerate(text.split("\n"), start=1):
        match = _GO.match(line) if not state else None
        if match is not None:
            count = int(match.group(1) or 1)
            batch = "\n".join(lines)
            for _ in range(count):
                if batch.strip():
                    yield batch, start
            lines = []
            start = number + 1
            continue
        lines.append(line)
        state = _scan(line, state)
    batch = "\n".join(lines)
    if batch.strip():
        yield batch, start


@dataclass
class Script:
    """A sqlcmd run: its scripting variables, whether an error ends it (``-b``, ``:on error
    exit``), and the batches it hands to ``run_batch`` (which returns whether the batch
    failed). ``failed`` says whether a batch failed; ``exited`` whether ``exit`` ended it."""

    run_batch: Callable[[str], bool]
    variables: dict[str, str] = field(default_factory=dict)
    exit_on_error: bool = False
    failed: bool = False
    exited: bool = False

    def run_file(self, path: str) -> None:
        """Run the script in file ``path``.

        Raises:
            TSqlError: the file cannot be read (sqlcmd's "Invalid filename").
        """
        try:
            text = Path(path).read_text(encoding="utf-8-sig")
        except OSError:
            raise TSqlError(0, f"Sqlcmd: '{path}': Invalid filename.", severity=16) from None
        self.run_text(text, base=Path(path).parent)

    def run_text(self, text: str, base: Path | None = None) -> None:
        """Run script ``text``; ``:r`` paths are read relative to ``base``."""
        lines: list[str] = []
        state = ""
        for line in text.replace("\r\n", "\n").split("\n"):
            if self.exited:
                return
            if not state:
                command = _COMMAND.match(line)
                go = _GO.match(line)
                if go is not None:
                    batch = "\n".join(lines)
                    lines = []
                    for _ in range(int(go.group(1) or 1)):
                        if batch.strip() and self._run(batch):
                            return
                    continue
                if command is not None:
                    self._command(command.group(1).lower(), command.group(2), base, lines)
                    continue
                if line.strip().lower() in ("exit", "quit", "exit()"):
                    batch = "\n".join(lines)
                    lines = []
                    if batch.strip():
                        self._run(batch)
                    self.exited = True
                    return
            lines.append(self._substitute(line))
            state = _scan(line, state)
        batch = "\n".join(lines)
        if batch.strip() and not self.exited:
            self._run(batch)

    def _run(self, batch: str) -> bool:
        """Run one batch; True when the script must stop."""
        if self.run_batch(batch):
            self.failed = True
            if self.exit_on_error:
                self.exited = True
                return True
        return False

    def _substitute(self, line: str) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            for key, found in self.variables.items():
                if key.casefold() == name.casefold():
                    return found
            raise TSqlError(
                0,
                f"Sqlcmd: Error: Syntax error at line 1 near command '$({name})': "
                f"'{name}' scripting variable not defined.",
                severity=16,
            )

        return _VARIABLE.sub(value, line)

    def _command(self, name: str, rest: str, base: Path | None, lines: list[str]) -> None:
        if name == "setvar":
            parts = rest.split(None, 1)
            if not parts:
                return
            value = parts[1] if len(parts) > 1 else ""
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('""', '"')
            self.variables[parts[0]] = value
        elif name == "r":
            path = Path(self._substitute(rest).strip().strip('"'))
            if base is not None and not path.is_absolute():
                path = base / path
            try:
                text = path.read_text(encoding="utf-8-sig")
            except OSError:
                raise TSqlError(0, f"Sqlcmd: '{path}': Invalid filename.", severity=16) from None
            # :r puts the file's lines into the current batch; its own GO lines split batches
            pending = "\n".join(lines)
            lines.clear()
            self.run_text(pending + "\n" + text if pending.strip() else text, base=path.parent)
        elif name == "on":
            words = rest.lower().split()
            if words[:1] == ["error"] and len(words) > 1:
                self.exit_on_error = words[1] == "exit"
        elif name in ("exit", "quit"):
            self.exited = True
        else:
            raise TSqlError(
                0,
                f"Sqlcmd: Error: the command ':{name}' is not supported by servicebroker sqlcmd "
                f"(it runs :setvar, :r, :on error, :exit; one instance per run, so no :connect).",
                severity=16,
            )
