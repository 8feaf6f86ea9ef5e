"""SQLCMD mode across instances (sqlcmd-commands.md, "Use sqlcmd with scripting variables" and
the ``:connect`` command): one script that works on two instances, switching with
``:connect``, as a team's set-up scripts for two SQL Server instances do; ``!!`` (an
operating-system command) refused by name. Each test runs with the first instance a folder and
a PostgreSQL server; the second is a folder.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from servicebroker.cli import main


def sqlcmd(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(main, ["sqlcmd", *args], catch_exceptions=False)
    return result.exit_code, result.output


def test_connect_moves_the_script_to_another_instance(
    instance_location: str, tmp_path: Path
) -> None:
    other = tmp_path / "other"
    code, output = sqlcmd("-S", str(other), "-Q", "PRINT 'made'")
    assert (code, output) == (0, "made\n")
    script = tmp_path / "both.sql"
    script.write_text(
        "CREATE TABLE Here (id INT);\n"
        "PRINT 'on the first';\n"
        ":connect $(Other)\n"
        "CREATE TABLE There (id INT);\n"
        "SELECT DB_NAME() AS db;\n"
        "GO\n"
        ":connect $(First)\n"
        "SELECT COUNT(*) AS n FROM Here;\n"
        "GO\n"
    )
    code, output = sqlcmd(
        "-S",
        instance_location,
        "-d",
        "master",
        "-v",
        f"Other={other}",
        "-v",
        f"First={instance_location}",
        "-i",
        str(script),
        "-b",
    )
    assert code == 0, output
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    assert lines[0] == "on the first"
    assert "master" in lines  # the other instance's session starts in master
    assert lines[-2:] == ["0", "(1 row affected)"]
    # each table was made where the script was connected
    assert sqlcmd("-S", str(other), "-Q", "SELECT COUNT(*) AS n FROM There")[0] == 0
    code, output = sqlcmd("-S", str(other), "-Q", "SELECT COUNT(*) AS n FROM Here", "-b")
    assert code == 1 and "invalid object name 'here'." in output.lower()
    code, output = sqlcmd("-S", instance_location, "-Q", "SELECT COUNT(*) AS n FROM There", "-b")
    assert code == 1 and "invalid object name 'there'." in output.lower()


def test_connect_to_nothing_and_shell_commands_are_refused(
    instance_location: str, tmp_path: Path
) -> None:
    missing = tmp_path / "nowhere"
    code, output = sqlcmd("-S", instance_location, "-b", "-Q", f":connect {missing}\nPRINT 'no'")
    assert code == 1
    assert output.startswith(f"Sqlcmd: Error: cannot connect to '{missing}': no instance there")
    assert not missing.exists()  # never made by :connect
    code, output = sqlcmd(
        "-S", instance_location, "-b", "-Q", "PRINT 'yes'\nGO\n!! dir\nPRINT 'no'"
    )
    assert code == 1
    assert output.splitlines() == [
        "yes",
        "Sqlcmd: Error: Syntax error at line 3 near command '!!': servicebroker sqlcmd runs no "
        "operating-system commands.",
    ]
