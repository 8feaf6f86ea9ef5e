"""One benchmark run on two versions of the project, side by side in one run: a commit
(``--before``, default ``HEAD~1``) checked out into a temporary
git worktree, and this working tree. Each round runs the benchmark script of each version with
that version's source first on ``PYTHONPATH`` (the same venv, the same machine, the same
arguments), before then after, alternating so that a machine getting busier or quieter weighs
on both alike; the rounds' outputs are printed one after the other, labelled.

    python benchmarks/before_after.py --before 54c538f [--rounds 1] peers.py -- --messages 5000

The script's own arguments follow ``--``. Each version runs its own copy of the script (a
benchmark may import modules that moved between the versions).
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def run(tree: Path, script: str, args: list[str], label: str) -> float:
    """Run ``tree``'s ``benchmarks/script`` with ``tree/src`` first on the path; print its
    output under ``label``; return the seconds it took."""
    env = {**os.environ, "PYTHONPATH": str(tree / "src")}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, str(tree / "benchmarks" / script), *args],
        cwd=tree,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    seconds = time.monotonic() - started
    print(f"\n===== {label} ({seconds:.0f} s, exit {done.returncode}) =====", flush=True)
    print(done.stdout, flush=True)
    if done.returncode:
        print(done.stderr[-4000:], flush=True)
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="HEAD~1", help="the commit to compare against")
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("script", help="a script of benchmarks/, e.g. peers.py")
    parser.add_argument("args", nargs=argparse.REMAINDER, help="-- then the script's arguments")
    ns = parser.parse_args()
    args = ns.args[1:] if ns.args[:1] == ["--"] else ns.args
    with tempfile.TemporaryDirectory(prefix="sb-before-") as tmp:
        before = Path(tmp) / "before"
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(before), ns.before],
            check=True,
        )
        try:
            for i in range(1, ns.rounds + 1):
                run(before, ns.script, args, f"round {i}: before ({ns.before})")
                run(ROOT, ns.script, args, f"round {i}: after (this tree)")
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(before)],
                check=False,
            )


if __name__ == "__main__":
    main()
