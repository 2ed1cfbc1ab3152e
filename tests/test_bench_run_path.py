"""``esnb bench run-path --against DIR``: a quick round against a worktree of HEAD gives the
report's shape (every figure's two medians, their ratio, a verdict); a DIR that is not an esnb
tree, or an interpreter that imports another esnb than the asked tree's, is refused in one line;
the figures are read from a run's history and its rows' stamps as documented."""

import json
import math
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from esnb.bench.run_path.cases import CASES, first_row, rate, whole_command
from esnb.bench.run_path.trees import run_once

ROOT = Path(__file__).resolve().parent.parent

#: every figure of the report, by case
FIGURES = {c: [f.key for f in case.figures] for c, case in CASES.items()}
#: the cases the quick round measures
MEASURED = ("es", "impala")


def bench(*args, timeout=120):
    return subprocess.run([sys.executable, "-m", "esnb.cli", "bench", "run-path", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.parametrize("what", ["empty", "missing", "package-only"])
def test_a_folder_that_is_not_an_esnb_tree_is_refused_in_one_line(tmp_path, what):
    folder = tmp_path / "tree"
    if what != "missing":
        folder.mkdir()
    if what == "package-only":  # an esnb package without the CLI it would run
        (folder / "esnb").mkdir()
        (folder / "esnb" / "__init__.py").write_text("")
    p = bench("--against", str(folder), "--quick", "--rounds", "1")
    assert p.returncode == 2, p.stderr
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1, p.stderr
    assert f"--against {folder}: not an esnb tree" in lines[0]
    assert "round" not in p.stdout  # refused before anything is measured


def test_an_interpreter_that_imports_another_esnb_is_refused(tmp_path):
    # PYTHONPATH at a folder without esnb: the child imports the installed one and says so
    with pytest.raises(ValueError, match="imported esnb from .*: it is not the asked tree") as e:
        run_once(tmp_path / "elsewhere", ["train", "es", "--generations", "1"],
                 tmp_path / "run", workers=2)
    assert "\n" not in str(e.value)
    assert not (tmp_path / "run" / "run").exists()  # it ran nothing


def test_figures_are_read_from_the_history_and_the_rows_stamps():
    # rows made at launch + 4, 6, 10 s; the learner first updates in the second row
    history = [{"_iteration": 1.0, "env_steps": 100.0, "learner_steps": 0.0},
               {"_iteration": 2.0, "env_steps": 300.0, "learner_steps": 16.0},
               {"_iteration": 3.0, "env_steps": 1100.0, "learner_steps": 48.0}]
    run = {"launched": 1000.0, "seconds": 12.5, "history": history,
           "stamps": [[1, 1004.0], [2, 1006.0], [3, 1010.0]]}
    assert rate("env_steps")(run) == pytest.approx(1000 / 6)
    assert rate("env_steps", learning=True)(run) == pytest.approx(800 / 4)
    assert rate("learner_steps", learning=True)(run) == pytest.approx(32 / 4)
    assert first_row(run) == pytest.approx(4.0)
    assert whole_command(run) == 12.5
    with pytest.raises(ValueError, match="1 row.* to read a rate over"):
        rate("env_steps")({**run, "stamps": [[1, 1004.0]]})


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_a_quick_round_against_a_worktree_of_head(tmp_path):
    if shutil.which("git") is None or not (ROOT / ".git").exists():
        pytest.skip("needs esnb as a git checkout (a worktree of HEAD)")
    tree = tmp_path / "head"
    subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(tree), "HEAD"],
                   check=True, capture_output=True)
    try:
        # two cases: ES's rates from its first row, IMPALA's from its first learning row (the
        # other two read the same ways; each case costs two esnb train runs)
        p = bench("--against", str(tree), "--quick", "--rounds", "1", "--cases", *MEASURED,
                  "--json", str(tmp_path / "out.json"), timeout=840)
    finally:
        subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(tree)],
                       capture_output=True)
    assert p.returncode == 0, p.stderr[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["settings"]["trees"] == {"this": str(ROOT), "DIR": str(tree.resolve())}
    assert out["settings"]["quick"] and out["settings"]["rounds"] == 1
    assert set(out["commands"]) == set(MEASURED)
    keys = [f"{c}/{f}" for c, figures in FIGURES.items() if c in MEASURED for f in figures]
    assert list(out["figures"]) == keys
    for key, figure in out["figures"].items():
        assert set(figure["median"]) == {"this", "DIR"}
        assert all(v > 0 and math.isfinite(v) for v in figure["median"].values()), key
        assert figure["ratio"] == pytest.approx(figure["median"]["this"]
                                                / figure["median"]["DIR"])
        assert len(figure["ratio_by_round"]) == 1
    assert out["not_slower"] == (not out["slower"])
    report = p.stdout[p.stdout.index("run-path: "):].splitlines()
    assert f"against DIR ({tree.resolve()}, " in report[0]
    for key in MEASURED:  # one line per figure, its medians, ratio and rounds' ratios
        case = CASES[key]
        for f in case.figures:
            assert sum(line.startswith(f"  {case.title}: {f.label} ") for line in report) == 1
    assert sum(line.startswith("round 1/1, ") for line in p.stdout.splitlines()) == 2
    verdicts = [line for line in report if line.startswith("verdict: ")]
    assert len(verdicts) == 1
    assert verdicts[0].startswith(("verdict: not slower", "verdict: SLOWER"))


def test_pong_is_a_case_run_only_when_asked():
    """``--cases impala-pong``: the laptop preset's Atari IMPALA, minutes a run, so not among the
    cases run by default; its budget is a flag like the others'."""
    import argparse

    from esnb.bench.run_path.cases import FULL
    from esnb.bench.run_path.command import add_arguments, budgets

    p = argparse.ArgumentParser()
    add_arguments(p)
    default = p.parse_args(["--against", "elsewhere"])
    assert default.cases == ["es", "apex", "impala", "start-up"]
    assert budgets(default).impala_pong_learner_steps == 150
    asked = p.parse_args(["--against", "elsewhere", "--cases", "impala-pong", "--quick",
                          "--impala-pong-learner-steps", "7"])
    assert asked.cases == ["impala-pong"] and budgets(asked).impala_pong_learner_steps == 7
    assert CASES["impala-pong"].args(FULL, False, 2) == [
        "train", "impala", "--env", "ALE/Pong-v5", "--learner-steps", "150", "--workers", "2",
        "--final-eval", "0", "--no-progress"]
