"""Scripts as sqlcmd reads them (sqlcmd-utility.md, sqlcmd-commands.md): lines are gathered into
a batch until a ``GO [count]`` line, which runs it; ``$(name)`` is replaced by the scripting
variable's value (``-v name=value``, ``:setvar name "value"``); ``:r file`` reads a file in
place; ``:on error exit | ignore`` says whether a failing batch ends the script (as ``-b``
does); ``:connect server`` switches the run to another instance (when the runner can: the
batch gathered so far runs first, where it was gathered); ``:exit`` / ``exit`` / ``quit`` end it.
The other commands and ``!!`` (an operating-system command) are refused by name.
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


_CLOSING = {"'": "'", '"': '"', "[": "]"}


def _scan(line: str, state: str) -> str:
    """The lexical state at the end of ``line`` ('' code, '/*' once per level of nested
    comment, "'" in a string, '"' or '[' in a delimited name) when it starts in ``state`` (a GO
    inside a comment, a string or a name is not a batch end)."""
    i = 0
    n = len(line)
    depth = state.count("/*")
    quote = _CLOSING.get(state, "")
    opened = state if quote else ""
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
                quote = opened = ""
        elif line.startswith("--", i):
            break
        elif line.startswith("/*", i):
            depth = 1
            i += 2
            continue
        elif ch in _CLOSING:
            quote = _CLOSING[ch]
            opened = ch
        i += 1
    if depth:
        return "/*" * depth
    return opened


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
            batch = "\n".join(lines)
            if batch.strip():
                for _ in range(int(match.group(1) or 1)):
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
    connect: Callable[[str], None] | None = None
    """``:connect server``: switch the run to another instance (``-S``'s forms); None: the
    command is refused."""
    failed: bool = False
    exited: bool = False
    _depth: int = field(default=0, init=False, repr=False)  # :r files read one inside another

    def run_file(self, path: str) -> None:
        """Run the script in file ``path``.

        Raises:
            TSqlError: the file cannot be read (sqlcmd's "Invalid filename") or is not text.
        """
        self.run_text(_read(Path(path)), base=Path(path).parent)

    def run_text(self, text: str, base: Path | None = None) -> None:
        """Run script ``text``; ``:r`` paths are read relative to ``base``.

        Raises:
            TSqlError: a sqlcmd error (an undefined ``$(name)``, an unknown command, a file
                ``:r`` cannot read); the script stops there, as sqlcmd's does.
        """
        lines: list[str] = []
        state = ""
        for number, line in enumerate(text.replace("\r\n", "\n").split("\n"), start=1):
            if self.exited:
                return
            if not state:
                command = _COMMAND.match(line)
                go = _GO.match(line)
                if go is not None:
                    batch = "\n".join(lines)
                    lines = []
                    if batch.strip():
                        for _ in range(int(go.group(1) or 1)):
                            if self._run(batch):
                                return
                    continue
                if command is not None:
                    self._command(command.group(1).lower(), command.group(2), base, lines, number)
                    continue
                if line.lstrip().startswith("!!"):
                    raise TSqlError(
                        0,
                        f"Sqlcmd: Error: Syntax error at line {number} near command '!!': "
                        f"servicebroker sqlcmd runs no operating-system commands.",
                        severity=16,
                        line=number,
                    )
                if line.strip().lower() in ("exit", "quit", "exit()"):
                    batch = "\n".join(lines)
                    lines = []
                    if batch.strip():
                        self._run(batch)
                    self.exited = True
                    return
            lines.append(self._substitute(line, number))
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

    def _substitute(self, line: str, number: int) -> str:
        def value(match: re.Match[str]) -> str:
            name = match.group(1)
            for key, found in self.variables.items():
                if key.casefold() == name.casefold():
                    return found
            raise TSqlError(
                0,
                f"Sqlcmd: Error: Syntax error at line {number} near command '$({name})': "
                f"'{name}' scripting variable not defined.",
                severity=16,
                line=number,
            )

        return _VARIABLE.sub(value, line)

    def _command(
        self, name: str, rest: str, base: Path | None, lines: list[str], number: int
    ) -> None:
        if name == "setvar":
            parts = rest.split(None, 1)
            if not parts:
                return
            value = parts[1] if len(parts) > 1 else ""
            if len(value) >= 2 and value[0] == value[-1] == '"':
                value = value[1:-1].replace('""', '"')
            self.variables[parts[0]] = value
        elif name == "r":
            path = Path(self._substitute(rest, number).strip().strip('"'))
            if base is not None and not path.is_absolute():
                path = base / path
            if self._depth >= _MAX_INCLUDES:
                raise TSqlError(
                    0,
                    f"Sqlcmd: Error: Syntax error at line {number} near command ':r': "
                    f"'{path}' is read {_MAX_INCLUDES} files deep (a file that reads itself?).",
                    severity=16,
                    line=number,
                )
            text = _read(path)
            # :r puts the file's lines into the current batch; its own GO lines split batches
            pending = "\n".join(lines)
            lines.clear()
            self._depth += 1
            try:
                self.run_text(pending + "\n" + text if pending.strip() else text, base=path.parent)
            finally:
                self._depth -= 1
        elif name == "on":
            words = rest.lower().split()
            if words[:1] == ["error"] and len(words) > 1:
                self.exit_on_error = words[1] == "exit"
        elif name in ("exit", "quit"):
            self.exited = True
        elif name == "connect" and self.connect is not None:
            words = self._substitute(rest, number).split()
            if not words:
                raise TSqlError(
                    0,
                    f"Sqlcmd: Error: Syntax error at line {number} near command ':connect': "
                    f"it names no server.",
                    severity=16,
                    line=number,
                )
            # the batch typed so far runs where it was typed, as sqlcmd runs it at :connect
            pending = "\n".join(lines)
            lines.clear()
            if pending.strip() and self._run(pending):
                return
            self.connect(words[0].strip('"'))  # -l timeout, -U user, -P password: not needed
        else:
            raise TSqlError(
                0,
                f"Sqlcmd: Error: the command ':{name}' is not supported by servicebroker sqlcmd "
                f"(it runs :setvar, :r, :on error, :connect, :exit).",
                severity=16,
                line=number,
            )


_MAX_INCLUDES = 32
"""How many ``:r`` files may be read one inside another (a file that reads itself stops here)."""


def _read(path: Path) -> str:
    """The text of script file ``path``: UTF-16 with its byte-order mark (as SSMS saves Unicode
    scripts), else UTF-8 (a BOM skipped).

    Raises:
        TSqlError: the file cannot be read (sqlcmd's "Invalid filename") or is not text.
    """
    try:
        data = path.read_bytes()
    except OSError:
        raise TSqlError(0, f"Sqlcmd: '{path}': Invalid filename.", severity=16) from None
    encoding = "utf-16" if data[:2] in (b"\xff\xfe", b"\xfe\xff") else "utf-8-sig"
    try:
        return data.decode(encoding)
    except UnicodeDecodeError as exc:
        raise TSqlError(
            0,
            f"Sqlcmd: '{path}': not {encoding.upper().removesuffix('-SIG')} text "
            f"(byte {exc.start}).",
            severity=16,
        ) from None
