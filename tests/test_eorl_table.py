"""EORL tables on a real LocalCluster, the ``esnb train eorl`` trainer and the
``esnb bench eorl-table`` benchmark."""

from __future__ import annotations

import json

import numpy as np
import pytest

from esnb.runners.eorl.table import RunSpec, run_one, run_table, specs_grid, summarise

SPECS = specs_grid(["VAN", "EORL-ACTV"], "bitflip",
                   [{"env_kwargs": {"n_bits": 5}}, {"env_kwargs": {"n_bits": 5, "subgoal": True}}],
                   seeds=[0, 1], episodes=40)


def test_run_one_summarises_a_run():
    row = run_one(RunSpec("EORL-05-05", "gridnav", (("size", 4), ("subgoals", "1")),
                          episodes=120, seed=3))
    assert row["algorithm"] == "EORL-05-05" and row["size"] == 4 and row["subgoals"] == "1"
    assert row["returns"].shape == (120,)
    assert row["last100"] == pytest.approx(row["returns"][-100:].mean(), rel=1e-6)
    assert 0.0 <= row["goal100"] <= 1.0 and row["eps_decay"] == pytest.approx(0.995 ** (1000 / 120))
    assert row["env_steps"] > 0 and row["seconds"] > 0


def test_table_on_a_cluster_equals_the_table_run_inline(client):
    inline = run_table(SPECS, client=None, progress=False)
    dist = run_table(SPECS, client=client, progress=False)
    assert len(dist) == len(SPECS) == 8
    # rows come back in the order of the specs, whatever order they finished in
    assert list(dist.algorithm) == [s.algorithm for s in SPECS]
    assert list(dist.seed) == [s.seed for s in SPECS]
    np.testing.assert_array_equal(dist.last100, inline.last100)
    for a, b in zip(dist.returns, inline.returns):
        np.testing.assert_array_equal(a, b)
    wide = summarise(dist)
    assert list(wide.columns) == ["VAN", "EORL-ACTV"]  # the paper's column order
    assert wide.shape == (2, 2)
    mean = dist[(dist.algorithm == "VAN") & (dist.subgoal == False)].last100.mean()  # noqa: E712
    assert wide.loc[(5, False, 40), "VAN"] == pytest.approx(mean)


def test_a_failing_run_is_named(client):
    bad = RunSpec("VAN", "gridnav", (("size", 1),), episodes=5)
    with pytest.raises(RuntimeError, match=r"run VAN on gridnav\(size=1\) seed 0 failed"):
        run_table([bad] + SPECS[:2], client=client, progress=False)
    with pytest.raises(ValueError, match="unknown algorithm 'ZER'; valid: VAN, CER, HER"):
        RunSpec("ZER", "bitflip")


def test_train_eorl_cli_writes_a_run_folder_and_resumes(tmp_path, capsys):
    from esnb.cli import main

    out = tmp_path / "run"
    code = main(["train", "eorl", "--env", "bitflip", "--size", "5", "--subgoal", "1",
                 "--variant", "EORL-ACTV", "--episodes", "40", "--workers", "0", "--out",
                 str(out), "--final-eval", "3", "--no-progress"])
    assert code == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["algorithm"] == "EORL" and summary["last"]["episode"] == 40
    assert summary["final_eval_episodes"] == 3
    # budgets are the run's totals: 50 episodes in all
    code = main(["train", "eorl", "--env", "bitflip", "--size", "5", "--subgoal", "1",
                 "--episodes", "50", "--workers", "0", "--resume", str(out / "checkpoint.npz"),
                 "--out", str(tmp_path / "more"), "--final-eval", "1", "--no-progress"])
    assert code == 0
    more = json.loads((tmp_path / "more" / "summary.json").read_text())
    assert more["last"]["episode"] == 50
    code = main(["train", "eorl", "--env", "gridnav", "--size", "4", "--subgoal", "2-",
                 "--algorithm", "PER", "--episodes", "5", "--workers", "0", "--out",
                 str(tmp_path / "per"), "--final-eval", "1", "--no-progress"])
    assert code == 0
    assert main(["train", "eorl", "--env", "bitflip", "--subgoal", "2+", "--workers", "0",
                 "--no-progress"]) == 2
    assert "bitflip --subgoal must be 0 or 1" in capsys.readouterr().err


def test_bench_prints_ours_next_to_the_paper(capsys, tmp_path):
    from esnb.cli import main

    code = main(["bench", "eorl-table", "--env", "bitflip", "--sizes", "6", "--seeds", "1",
                 "--algorithms", "VAN", "EORL-FIX", "--episodes", "30", "--workers", "0",
                 "--no-progress", "--json", str(tmp_path / "t.json")])
    assert code == 0
    text = capsys.readouterr().out
    assert "4 runs" in text and "( 7.69)" in text and "( 8.80)" in text  # Table 1, size 6
    doc = json.loads((tmp_path / "t.json").read_text())
    assert doc["rows"][0]["cells"]["VAN"]["paper"] == 7.69


def test_train_eorl_help_shows_every_setting_and_the_environment_flags():
    import contextlib
    import io

    from esnb.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), pytest.raises(SystemExit):
        main(["train", "eorl", "--help"])
    text = " ".join(out.getvalue().split())
    for part in ("--algorithm {EORL,VAN,CER,HER,PER,CBE,EORL-FIX,CEM-RL,", "--size SIZE",
                 "--subgoal {0,1,2+,2-}", "--stochasticity STOCHASTICITY", "--episodes N",
                 "--variant {EORL-FIX,EORL-05-00,EORL-05-05,EORL-10-05,EORL-ACTV}",
                 "--sigma SIGMA std of the multiplicative noise factor N(1, sigma) "
                 "[default: 0.25; live]", "--n N population size [default: 8]",
                 "--preset {laptop,paper}"):
        assert part in text, part
    assert "--env-kwargs" not in text  # --size/--subgoal/--stochasticity give them


def test_train_eorl_refuses_settings_of_another_algorithm(capsys):
    from esnb.cli import main

    assert main(["train", "eorl", "--algorithm", "PER", "--kappa", "0.1", "--workers", "0",
                 "--episodes", "2", "--no-progress"]) == 2
    assert "--kappa do(es) not apply to --algorithm PER" in capsys.readouterr().err
    assert main(["train", "eorl", "--algorithm", "EORL-FIX", "--variant", "EORL-ACTV",
                 "--workers", "0", "--episodes", "2", "--no-progress"]) == 2
    assert "leave out --variant" in capsys.readouterr().err


def test_table_runs_inline_through_an_executor():
    from esnb.runners.executor import InlineExecutor

    specs = SPECS[:2]
    a = run_table(specs, client=InlineExecutor(), progress=False)
    b = run_table(specs, client=False, progress=False)
    for x, y in zip(a.returns, b.returns):
        np.testing.assert_array_equal(x, y)
    assert list(a.seed) == [0, 1]
