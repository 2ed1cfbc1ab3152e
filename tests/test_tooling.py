"""The repository's own tooling, run for real: the Makefile's torch install on a machine with and
without a local CPU wheel, the notebook git filter, the committed-notebook check, and pytest's
skip reasons."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
CHECK = ROOT / "scripts" / "check_notebooks.py"


def _fake_pip(tmp_path: Path, fail_first: bool) -> tuple[Path, Path]:
    """A stand-in for pip that logs its arguments; the local-wheel try fails if asked to."""
    log = tmp_path / "pip.log"
    pip = tmp_path / "pip"
    pip.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        echo "$@" >> {log}
        case "$*" in *+cpu*) exit {1 if fail_first else 0} ;; esac
        exit 0
        """))
    pip.chmod(0o755)
    return pip, log


@pytest.mark.parametrize("local_wheel", [True, False], ids=["local-wheel", "no-local-wheel"])
def test_make_installs_the_cpu_torch_with_or_without_a_local_wheel(tmp_path, local_wheel):
    pip, log = _fake_pip(tmp_path, fail_first=not local_wheel)
    p = subprocess.run(["make", "-s", "-C", str(ROOT), "torch", f"PIP={pip}"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    calls = log.read_text().splitlines()
    assert calls[0].startswith("install") and "torch==2.13.0+cpu" in calls[0]
    if local_wheel:
        assert len(calls) == 1  # found through pip's configuration: nothing else asked
    else:
        assert len(calls) == 2 and "no local CPU wheel" in p.stdout
        assert "torch==2.13.0" in calls[1]
        assert "--index-url https://download.pytorch.org/whl/cpu" in calls[1]


def test_readme_keeps_its_two_commands_and_documents_make_lab():
    readme = (ROOT / "README.md").read_text()
    makefile = (ROOT / "Makefile").read_text()
    for target in ("demo", "test", "lab"):
        assert f"make {target}" in readme
        assert f"\n{target}:" in makefile
    assert '".[lab]"' in makefile and "-rs" in makefile


def _notebook(with_outputs: bool) -> str:
    cell = {"cell_type": "code", "execution_count": 3 if with_outputs else None,
            "id": "c1", "metadata": {}, "source": ["print(1)"],
            "outputs": [{"name": "stdout", "output_type": "stream", "text": ["1\n"]}]
            if with_outputs else []}
    nb = {"cells": [cell], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(nb, indent=1, sort_keys=True) + "\n"  # as nbformat writes


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout


@pytest.fixture
def repo(tmp_path) -> Path:
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.org")
    _git(repo, "config", "user.name", "t")
    shutil.copy(ROOT / ".gitattributes", repo / ".gitattributes")
    return repo


def _check(repo: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(CHECK), str(repo)], capture_output=True,
                          text=True, timeout=60)


def test_notebook_check_reads_what_git_stores(repo):
    nb = repo / "nb.ipynb"
    nb.write_text(_notebook(with_outputs=True))
    _git(repo, "add", "nb.ipynb")  # no filter configured: stored with its outputs
    p = _check(repo)
    assert p.returncode == 1 and "nb.ipynb: stored with outputs in code cells [0]" in p.stderr
    nb.write_text(_notebook(with_outputs=False))
    _git(repo, "add", "nb.ipynb")
    nb.write_text(_notebook(with_outputs=True))  # JupyterLab's autosave, not staged
    assert _check(repo).returncode == 0


def test_make_notebook_filter_strips_outputs_when_staged_with_the_environment_inactive(repo):
    """`make lab` installs the filter from its environment; git then runs it from a shell where
    that environment is not active (PATH without it: another python3, or none)."""
    pytest.importorskip("nbstripout")
    p = subprocess.run(["make", "-s", "-f", str(ROOT / "Makefile"), "notebook-filter",
                        "PY=python3"], cwd=repo, capture_output=True, text=True, timeout=60,
                       env={**os.environ, "PATH": f"{Path(sys.executable).parent}:"
                                                  f"{os.environ['PATH']}"})
    assert p.returncode == 0, p.stderr
    assert _git(repo, "config", "filter.nbstripout.required").strip() == "false"
    nb = repo / "nb.ipynb"
    nb.write_text(_notebook(with_outputs=True))
    inactive = {**os.environ, "PATH": "/usr/bin:/bin"}  # the system's python3, if any
    subprocess.run(["git", "add", "nb.ipynb"], cwd=repo, check=True, env=inactive,
                   capture_output=True)
    stored = _git(repo, "show", ":nb.ipynb")
    assert stored == _notebook(with_outputs=False)  # byte for byte, cell id kept
    assert _check(repo).returncode == 0
    assert json.loads(nb.read_text())["cells"][0]["outputs"]  # the working copy keeps them
    _git(repo, "commit", "-qm", "nb")
    nb.write_text(_notebook(with_outputs=True).replace("print(1)", "print(2)"))
    diff = subprocess.run(["git", "diff"], cwd=repo, env=inactive, capture_output=True,
                          text=True, check=True).stdout
    assert "print(2)" in diff and "execution_count" not in diff  # textconv'd, not raw


@pytest.mark.slow
def test_make_lab_starts_jupyterlab_as_whoever_runs_it(tmp_path):
    """scripts/lab (what `make lab` runs): JupyterLab serves the tutorials, also as root, where
    Jupyter refuses to start without --allow-root."""
    import socket
    import urllib.request

    pytest.importorskip("jupyterlab")
    with socket.socket() as sock:  # a free port (Jupyter's --port=0 prints no usable one)
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    env = {**os.environ, "PY": sys.executable, "HOME": str(tmp_path),
           "JUPYTER_RUNTIME_DIR": str(tmp_path / "runtime"),
           "JUPYTER_CONFIG_DIR": str(tmp_path / "config")}
    log = tmp_path / "lab.log"
    with log.open("w") as err:
        lab = subprocess.Popen([str(ROOT / "scripts" / "lab"), "--no-browser", f"--port={port}",
                                "--IdentityProvider.token=t", str(ROOT / "tutorials")],
                               env=env, stderr=err, stdout=err)
    try:
        while "is running at" not in log.read_text():  # the server says it listens
            assert lab.poll() is None, log.read_text()
            time.sleep(0.2)
        # the port it listens on: another process may have taken the free one meanwhile, and
        # Jupyter then moves to the next free port (seen once in a full suite)
        said = re.search(r"https?://(?:127\.0\.0\.1|localhost):(\d+)/", log.read_text())
        url = f"http://127.0.0.1:{said.group(1) if said else port}/api/contents?token=t"
        with urllib.request.urlopen(url, timeout=60) as r:
            names = {item["name"] for item in json.loads(r.read())["content"]}
        assert "01_evolution_strategies.ipynb" in names
        if os.geteuid() == 0:
            assert "started with --allow-root" in log.read_text()
    finally:
        lab.terminate()
        lab.wait(timeout=60)


def test_pytest_says_why_a_test_was_skipped(tmp_path):
    (tmp_path / "test_skip.py").write_text(
        "import pytest\n\ndef test_x():\n    pytest.skip('no Chromium on this machine')\n")
    shutil.copy(ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST_")}
    p = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "test_skip.py"], cwd=tmp_path, capture_output=True, text=True,
                       timeout=120, env=env)
    assert "SKIPPED [1] test_skip.py:4: no Chromium on this machine" in p.stdout, p.stdout


def test_docs_stand_on_their_own_and_the_map_names_every_runner_module():
    """A clone has no ../shared folder and no issue tracker: the docs and notebooks cite
    papers and commits, not those; docs/DESIGN.md's map names every module of esnb/runners."""
    import re

    texts = {p: p.read_text() for p in [ROOT / "README.md", *(ROOT / "docs").glob("*.md"),
                                        *(ROOT / "notebooks").glob("*.ipynb"),
                                        *(ROOT / "tutorials").glob("*.ipynb")]}
    for path, text in texts.items():
        assert "../shared" not in text, path
        assert not re.search(r"\bissue \d+", text, re.IGNORECASE), path
    design = (ROOT / "docs" / "DESIGN.md").read_text()
    missing = [str(p.relative_to(ROOT)) for p in (ROOT / "esnb" / "runners").rglob("*.py")
               if p.name != "__init__.py" and p.stem not in design]
    assert not missing, f"docs/DESIGN.md's map leaves out {missing}"
