"""Every code block of the README runs as written (the commands at small sizes).

The Python blocks run in order in one interpreter, as a reader pastes them; the shell lines run in
the README's order in one scratch directory (files the README names, such as tests/data/arm7.urdf,
are found through the repository).  Sizes are turned down by the substitutions in SMALL, which only change numbers;
the install line and the test command itself are not run here (CI runs them).
"""
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"

#: the README's sizes -> what the test runs (numbers only; every command keeps its options)
SMALL = [
    (r"nb=1000000\b", "nb=3000"), (r"nb=200000\b", "nb=3000"), (r"nb=100000\b", "nb=2000"),
    (r"--ranks 16\b", "--ranks 4"), (r"--t-end 2\b", "--t-end 0.05"), (r"--t-end 0\.5\b", "--t-end 0.05"),
]

#: shell lines not run here: the install (CI's first step) and the test suite (this test is part of it)
NOT_RUN = (r"^pip install", r"^python -m pytest", r"^sphinx-build")


def _blocks():
    text = README.read_text()
    return [(m.group(1), m.group(2)) for m in re.finditer(r"```(\w+)\n(.*?)```", text, re.S)]


def _small(s):
    for pat, rep in SMALL:
        s = re.sub(pat, rep, s)
    return s


def _shell_lines():
    out = []
    for lang, body in _blocks():
        if lang != "bash":
            continue
        for line in body.splitlines():
            cmd = line.split("  #")[0].split(" # ")[0].strip()
            if cmd and not cmd.startswith("#") and not any(re.match(p, cmd) for p in NOT_RUN):
                out.append(cmd)
    return out


def test_readme_has_the_three_quick_start_commands():
    lines = [line.split("#")[0].strip() for lang, body in _blocks() if lang == "bash" for line in body.splitlines()]
    assert 'pip install -e ".[all]"' in lines
    assert "partree simulate" in lines
    assert "python -m pytest -q" in lines
    assert sum(1 for line in README.read_text().splitlines()) <= 220, "the README is a guide, not a log"


def test_readme_python_blocks_run(tmp_path):
    code = "\n\n".join(_small(body) for lang, body in _blocks() if lang == "python")
    assert "partree" in code
    # run as code typed at the interpreter (python -c), not as a script file: Dask's worker
    # processes would re-import a script that starts a cluster outside ``if __name__ == "__main__"``
    p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, capture_output=True, text=True, timeout=900)
    assert p.returncode == 0, f"README Python blocks failed:\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """One scratch directory for all the README's commands, run in the README's order (a later
    command reads what an earlier one wrote, as for a reader)."""
    return tmp_path_factory.mktemp("readme")


@pytest.mark.parametrize("cmd", _shell_lines())
def test_readme_command_runs(cmd, workdir):
    from partree.mpienv import find_mpiexec

    cmd = _small(cmd)
    argv = shlex.split(cmd)
    if argv[0] == "partree":
        argv = [sys.executable, "-m", "partree", *argv[1:]]
    elif argv[0] == "python":
        argv = [sys.executable, *argv[1:]]
    elif argv[0] == "mpiexec":
        launcher = find_mpiexec()
        if launcher is None:
            pytest.skip("no mpiexec")
        rest = argv[3:] if argv[1] == "-n" else argv[1:]
        if rest[0] == "partree":
            rest = [sys.executable, "-m", "partree", *rest[1:]]
        argv = [launcher, "-n", argv[2], *rest]
    # paths in the repository the README names (tests/data/..., scripts/...)
    argv = [str(ROOT / a) if (ROOT / a).exists() and "/" in a else a for a in argv]
    env = dict(os.environ, MPLBACKEND="Agg")
    p = subprocess.run(argv, cwd=workdir, capture_output=True, text=True, timeout=900, env=env)
    assert p.returncode == 0, f"{cmd}\n{p.stdout[-3000:]}\n{p.stderr[-3000:]}"
    assert "Traceback" not in p.stderr
