"""The README's five-minute tour and its first command-line example run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run_first_script(heading: str, folder: Path) -> subprocess.CompletedProcess[str]:
    """Run the first ```sh block of the README's section ``heading`` in ``folder`` with this
    venv's commands on the PATH; asserts it exits 0."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text[text.index(heading) :]
    script = re.findall(r"```sh\n(.*?)```", section, re.S)[0]
    bin_dir = Path(sys.executable).parent
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ.get('PATH', '')}"}
    env.pop("SERVICEBROKER_URL", None)
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", script],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done


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


def test_the_command_line_example_runs(tmp_path: Path) -> None:
    # the first example of "The command line": the catalog from `servicebroker ddl`, then
    # send and receive on it
    done = run_first_script("## The command line", tmp_path)
    lines = done.stdout.splitlines()
    assert lines[0] == "6 statements ran"
    received = json.loads(lines[-1])
    assert (received["message_type_name"], received["message_body"]) == (
        "//orders/Request",
        '<order id="1"/>',
    )


def test_the_two_brokers_example_runs(tmp_path: Path) -> None:
    # "Two brokers talking": two databases, two `servicebroker serve` processes, a message
    # from one to the other over mutual TLS (NET, SEC-1), as a new user runs it
    done = run_first_script("## Two brokers talking", tmp_path)
    received = json.loads(done.stdout.splitlines()[-1])
    assert (received["service_name"], received["message_body"]) == (
        "//warehouse/Orders",
        "hello from the shop",
    )
