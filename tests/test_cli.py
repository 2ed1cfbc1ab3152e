"""The ``esnb`` command, run as a real subprocess."""

import argparse
import json
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest


def esnb(*args, timeout=300):
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


def test_train_es_writes_a_run_folder_and_resumes(tmp_path):
    out = tmp_path / "run"
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "3", "--workers", "0",
             "--population", "10", "--noise-size", "1000000", "--final-eval", "3",
             "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    for name in ("history.csv", "changes.csv", "summary.json", "plot.html", "checkpoint.npz"):
        assert (out / name).exists(), name
    h = pd.read_csv(out / "history.csv")
    assert h.generation.tolist() == [1, 2, 3]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "ES" and summary["final_eval_episodes"] == 3
    assert "bokeh" in (out / "plot.html").read_text().lower()

    out2 = tmp_path / "run2"  # budgets are the run's totals: 5 generations in all
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "5", "--workers", "0",
             "--resume", str(out / "checkpoint.npz"), "--out", str(out2), "--no-progress",
             "--final-eval", "0")
    assert p.returncode == 0, p.stderr
    assert pd.read_csv(out2 / "history.csv").generation.tolist() == [1, 2, 3, 4, 5]


def test_train_on_a_cluster_with_progress(tmp_path):
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "2", "--workers", "2",
             "--population", "10", "--noise-size", "1000000", "--out", str(tmp_path / "r"))
    assert p.returncode == 0, p.stderr
    # stderr is a pipe, not a terminal (as a batch job's log): progress as lines, no bar
    assert "\r" not in p.stderr and "|" not in p.stderr, p.stderr
    said = [ln for ln in p.stderr.splitlines() if ln.startswith("esnb: r: ")]
    assert [ln.split(",")[0] for ln in said] == ["esnb: r: 50% (1/2 generations)",
                                                 "esnb: r: 100% (2/2 generations)"], said
    assert "esnb: OpenAI-ES on CartPole-v1, dashboard http" in p.stderr  # every train run
    assert pd.read_csv(tmp_path / "r" / "history.csv").workers.tolist() == [2, 2]


@pytest.mark.parametrize("args, message", [
    (["train", "es", "--env", "CartPole-v9", "--workers", "0"], "CartPole-v1"),
    (["train", "es", "--env", "CartPole-v1", "--workers", "0", "--sigma", "-1"], "sigma must be"),
    (["train", "es", "--env", "CartPole-v1", "--workers", "0", "--resume", "/nonexistent.npz"],
     "no checkpoint"),
])
def test_errors_are_one_clear_line(args, message):
    p = esnb(*args)
    assert p.returncode == 2
    assert message in p.stderr and "Traceback" not in p.stderr


@pytest.mark.slow
def test_demo_smoke(tmp_path):
    """The demo's code path on a tiny budget (the full demo is checked by hand: README)."""
    p = esnb("demo", "--steps", "40000", "--out", str(tmp_path / "demo"), "--no-progress")
    assert p.returncode == 0, p.stderr
    summary = json.loads((tmp_path / "demo" / "summary.json").read_text())
    assert summary["config"]["env"] == "HalfCheetah-v5"
    assert summary["last"]["env_steps"] == 40000 and summary["last"]["workers"] == 2


def test_every_train_command_shows_every_setting_with_its_default():
    """`esnb train <algo> --help`: one flag per setting of the algorithm's config, each with
    its default (and the paper's value where it differs), plus a description."""
    from esnb.cli import build_parser
    from esnb.runners.registry import algorithms

    parser = build_parser()
    train = next(a for a in parser._actions if getattr(a, "choices", None)
                 and "train" in a.choices).choices["train"]
    algos = next(a for a in train._actions if getattr(a, "choices", None)).choices
    assert sorted(algos) == sorted(algorithms())  # the registry drives the command
    for name, algo in algorithms().items():
        text = algos[name].format_help().replace("\n", " ")
        assert algo.description.split(".")[0][:40] in " ".join(text.split())
        config = algo.load_config()
        for setting, (meta, _) in config.declarations().items():
            if setting in algo.skip or not meta.cli:
                continue
            flag = meta.flag or "--" + setting.replace("_", "-")
            assert flag in text, (name, flag)
        assert text.count("[default:") >= len(config.declarations()) - len(algo.skip)


def test_preset_paper_from_the_command_line(tmp_path):
    """--preset paper takes the paper's values; flags given beside it still win."""
    out = tmp_path / "run"
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "1", "--workers", "0",
             "--preset", "paper", "--population", "10", "--noise-size", "1000000",
             "--final-eval", "0", "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    config = json.loads((out / "summary.json").read_text())["config"]
    assert config["action_noise"] == 0.01  # the paper's
    assert config["population"] == 10 and config["noise_size"] == 1_000_000  # given


def test_settings_page_is_derived_from_the_code():
    from pathlib import Path

    from esnb.cli.docs import settings_markdown

    page = Path(__file__).resolve().parents[1] / "docs" / "settings.md"
    assert page.read_text() == settings_markdown(), \
        "docs/settings.md is stale: esnb docs settings > docs/settings.md"


def _commands(parser, path=("esnb",)):
    """Every (command path, parser, help line in its parent's list) of the esnb command."""
    yield path, parser, None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                for found in _commands(sub, (*path, name)):
                    yield found if found[0] != (*path, name) else (found[0], sub, helps[name])


def test_every_command_has_a_description_and_every_flag_a_default_and_a_sentence():
    """`esnb --help`, `esnb demo --help`, `esnb train <algo> --help`, `esnb bench <name>
    --help`...: plain text (no RST markup, 2**29 kept), whole one-line summaries, every flag
    with a help and its default in one style, numbers as written, every paper value with its
    reason, and the bracket explained."""
    import re

    from esnb.cli import build_parser
    from esnb.cli.helptext import first_sentence

    problems = []
    for path, parser, summary in _commands(build_parser()):
        command = " ".join(path)
        text = parser.format_help()
        if not parser.description:
            problems.append(f"{command}: no description")
        if "``" in text or ":class:" in text or re.search(r"(?<!\w)\*\*\w", text):
            problems.append(f"{command}: docstring markup in --help")
        if re.search(r"\de\+\d\d", text):
            problems.append(f"{command}: a number in e-notation")
        if path[:2] == ("esnb", "train") and len(path) == 3 \
                and "esnb docs settings" not in " ".join(text.split()):
            problems.append(f"{command}: the [default; paper; live] legend is missing")
        if summary is not None and (summary != first_sentence(parser.description)
                                    or not summary.rstrip(")").endswith((".", ")"))):
            problems.append(f"{command}: one-line help {summary!r} is not its first sentence")
        formatter = parser._get_formatter()
        for action in parser._actions:
            if not action.option_strings or isinstance(action, argparse._HelpAction):
                continue
            help_text = formatter._expand_help(action) if action.help else ""
            flag = action.option_strings[-1]
            if len(help_text.split()) < 3:
                problems.append(f"{command} {flag}: no sentence of help")
            if "default" not in help_text.lower():
                problems.append(f"{command} {flag}: no default in {help_text!r}")
            bracket = re.search(r"\[default: [^\[\]]*\]( -- laptop vs paper: .*)?$",
                                help_text.strip())
            if bracket is None or "default:" in help_text[:bracket.start()]:
                problems.append(f"{command} {flag}: its default is not said once, in the "
                                f"[default: ...] at its end: {help_text!r}")
            if "; paper: " in help_text and "laptop vs paper: " not in help_text:
                problems.append(f"{command} {flag}: a paper value without its reason")
            if action.choices and parser.format_usage().count("{") == 0:
                problems.append(f"{command} {flag}: choices not shown")
    assert not problems, "\n".join(problems)


def test_first_sentence_is_whole():
    from esnb.cli.helptext import first_sentence, plain

    assert first_sentence("OpenAI-ES (Salimans et al. 2017); IW-ES with --iw-k. More.") == \
        "OpenAI-ES (Salimans et al. 2017); IW-ES with --iw-k."
    assert first_sentence("Ape-X on a LocalCluster: CartPole-v1 and\nInvertedPendulum-v5, "
                          "timed.\n\nEach run") == \
        "Ape-X on a LocalCluster: CartPole-v1 and InvertedPendulum-v5, timed."
    assert plain("a :class:`~esnb.replay.server.ReplayServer`, ``env.step`` and **x**") == \
        "a ReplayServer, env.step and x"
    assert plain("at most 2**29 entries, **not** 2**30") == "at most 2**29 entries, not 2**30"


def test_help_renders_bounds_as_written(capsys):
    from esnb.cli import main
    from esnb.controls import bound

    assert [bound(x) for x in (2**29, 1e8, 100_000, 1000, 0.5, 1e-8, 1.0)] == \
        ["2**29", "100,000,000", "100,000", "1000", "0.5", "1e-08", "1"]
    assert main(["train", "es", "--noise-size", str(2**29 + 1)]) == 2
    assert "noise_size must be an integer in [1, 2**29], or None" in capsys.readouterr().err
    page = (Path(__file__).resolve().parents[1] / "docs" / "settings.md").read_text()
    assert "[1, 2**29]" in page and "e+0" not in page


def on_a_terminal(*args: str, timeout: float = 300) -> tuple[int, str]:
    """``esnb`` with its stdout and stderr on a pseudo-terminal of 120 columns, as in a
    person's terminal: its exit status and what the terminal was sent."""
    import fcntl
    import os
    import pty
    import struct
    import termios

    leader, follower = pty.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 40, 120, 0, 0))
    proc = subprocess.Popen([sys.executable, "-m", "esnb.cli", *args], stdin=subprocess.DEVNULL,
                            stdout=follower, stderr=follower)
    os.close(follower)
    sent = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every process holding the terminal has ended
            break
        if not chunk:
            break
        sent.append(chunk)
    os.close(leader)
    return proc.wait(timeout=timeout), b"".join(sent).decode(errors="replace")


def test_progress_bar_one_named_rate_the_budget_note_and_100_percent_when_passed(tmp_path):
    """An env-step budget runs whole generations: said once up front; on a terminal the bar
    names its one throughput figure and ends at 100% although the last generation passes the
    budget."""
    code, shown = on_a_terminal("train", "es", "--env", "CartPole-v1", "--steps", "3000",
                                "--workers", "0", "--population", "10", "--noise-size",
                                "1000000", "--final-eval", "0", "--out", str(tmp_path / "r"))
    assert code == 0, shown
    assert shown.count("runs whole generations") == 1
    assert "reaches 3,000 env steps (it may pass it)" in shown
    assert "esnb: r: " not in shown  # a bar, not lines
    states = [s for line in shown.splitlines() for s in line.split("\r") if "|" in s]
    last = states[-1]
    steps = pd.read_csv(tmp_path / "r" / "history.csv").env_steps.iloc[-1]
    assert steps > 3000  # the last generation passed the budget...
    assert last.startswith("100%|")  # ...and the bar kept its percentage
    assert "env steps/s" in last and last.count("/s") == 1  # one rate, named
    assert sum(s.startswith("100%|") for s in states) == 1  # the last state, once


def test_the_registry_drives_budgets_exports_and_docs():
    """Every algorithm is declared once, in its package: its budgets count what its runner's
    ``_progress()`` counts, ``esnb`` exports its runner and config, the settings page lists
    it."""
    import esnb
    from esnb.cli.docs import settings_markdown
    from esnb.runners.registry import algorithms

    page = settings_markdown()
    small = {"es": dict(noise_size=200_000), "apex": {}, "apex-dpg": {}, "impala": {},
             "eorl": {}, "aesrl": {}, "cemrl": {}}
    for name, algo in algorithms().items():
        runner = algo.load_runner()
        config = algo.load_config()
        for cls in (runner, config):
            assert getattr(esnb, cls.__name__) is cls
        env = {"eorl": "bitflip"}.get(name, "Pendulum-v1" if "dpg" in name or name in (
            "aesrl", "cemrl") else "CartPole-v1")
        progress = runner(env, client=False, **small[name])._progress()
        for flag, (key, _) in algo.budgets.items():
            assert key in progress, (name, flag, key, sorted(progress))
        assert set(algo.default_budget) <= set(progress)
        assert f"## `esnb train {name}`" in page or config.__name__ in page


def test_run_plan_runs_a_planned_run_from_its_file(tmp_path):
    """``esnb run-plan``: a plan written into its folder (what esnb.launch starts) runs as
    ``esnb train`` would run it; a file that is no plan is one line."""
    from esnb.session.options import RunOptions
    from esnb.session.plan import RunPlan, plan

    out = tmp_path / "run"
    planned = plan("es", {"env": "CartPole-v1", "population": 10, "noise_size": 1_000_000},
                   RunOptions.of(workers=0, out=str(out), final_eval=2, progress=False),
                   {"generations": 2})
    path = planned.write()
    assert RunPlan.read(out) == planned  # the file holds the whole plan
    p = esnb("run-plan", str(path))
    assert p.returncode == 0, p.stderr
    assert pd.read_csv(out / "history.csv").generation.tolist() == [1, 2]
    assert json.loads((out / "summary.json").read_text())["final_eval_episodes"] == 2
    (tmp_path / "bad.json").write_text("[1]")
    p = esnb("run-plan", str(tmp_path / "bad.json"))
    assert p.returncode == 2 and "is no run plan" in p.stderr and "Traceback" not in p.stderr


def test_playing_an_es_run_imports_no_torch(tmp_path):
    """``esnb play`` finds a checkpoint's runner by its config (no torch) and imports only
    that runner: an ES run plays back without torch, as its workers run."""
    out = tmp_path / "run"
    p = esnb("train", "es", "--env", "CartPole-v1", "--generations", "2", "--workers", "0",
             "--population", "10", "--noise-size", "1000000", "--final-eval", "1",
             "--out", str(out), "--no-progress")
    assert p.returncode == 0, p.stderr
    code = ("import sys\n"
            "from esnb.cli import main\n"
            f"rc = main(['play', {str(out)!r}, '--episodes', '2', '--json'])\n"
            "print('ESNB-CHECK', rc, 'torch' in sys.modules)\n")
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    assert "ESNB-CHECK 0 False" in p.stdout, p.stdout[-2000:]
    assert '"returns"' in p.stdout
