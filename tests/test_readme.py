"""The README's five-minute tour and its first command-line example run as written."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

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


def python_blocks() -> list[str]:
    """Every ```python block of the README, in order."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return re.findall(r"```python\n(.*?)```", text, re.S)


def run_blocks(blocks: list[str], folder: Path) -> dict[str, object]:
    """Run ``blocks`` one after the other in ``folder``, in one namespace, as a reader pasting
    them into one Python session would; returns the namespace."""
    namespace: dict[str, object] = {}
    cwd = os.getcwd()
    os.chdir(folder)
    try:
        for block in blocks:
            exec(compile(block, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace


def test_tour_runs(tmp_path: Path) -> None:
    run_blocks(python_blocks()[:1], tmp_path)
    assert (tmp_path / "orders.db").exists()


@pytest.mark.spark
@pytest.mark.slow
def test_every_python_block_runs_as_written(tmp_path: Path) -> None:
    """The tour, then Spark's batch write and its streaming answer, pasted into one Python
    process started in an empty folder (Spark's workers resolve ``sqlite:///orders.db`` from
    the folder the session started in, as a reader's would): the orders reach the shop, each
    is answered with a receipt and its dialog ended."""
    from .conftest import need_spark

    need_spark()
    blocks = python_blocks()
    assert len(blocks) == 3, "a new Python block in the README: run it here"
    check = """
from servicebroker import END_DIALOG, Broker
spark.stop()
b = Broker.open("orders.db")
got = b.peek("client_q")
b.close()
print(sorted(m.message_body.decode() for m in got if m.message_type_name == "//shop/Receipt"))
print(sum(m.message_type_name == END_DIALOG for m in got))
"""
    (tmp_path / "readme.py").write_text("\n".join([*blocks, check]), encoding="utf-8")
    done = subprocess.run(
        [sys.executable, "readme.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    receipts, ended = done.stdout.splitlines()[-2:]
    assert receipts == str(['{"sku": "A-1"}', '{"sku": "B-7"}', '{"sku": "C-3"}'])
    assert ended == "3"  # each customer's dialog, answered and ended


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
    last = done.stdout.splitlines()[-1] if done.stdout.strip() else ""
    logs = {name: (tmp_path / name).read_text() for name in ("shop.log", "warehouse.log")}
    assert last.startswith("{"), (done.stdout, done.stderr, logs)  # once seen failing under load
    received = json.loads(last)
    assert (received["service_name"], received["message_body"]) == (
        "//warehouse/Orders",
        "hello from the shop",
    )


def test_the_sqlcmd_example_runs(tmp_path: Path) -> None:
    done = run_first_script("## Bring your T-SQL", tmp_path)
    assert done.stdout.split("\n")[0].strip() == "received"
    assert '<order id="1"/>' in done.stdout
    assert done.stdout.rstrip().endswith("(1 row affected)")
