"""``esnb bench impala-vs-rllib --to-score``: the score both sides are judged by, the curve and
its lines, esnb's side read from a run folder and trained for real (RLlib's side needs Ray,
which CI does not install: its program is the rate comparison's setup, run by hand, see
BENCHMARKS.md)."""

from __future__ import annotations

import inspect

import pytest

from esnb.bench.peers import impala_to_score as to_score
from esnb.bench.peers import impala_vs_rllib as bench


def test_pooled_is_the_mean_of_the_last_window_games():
    # rows of (games, their mean): the window takes the newest games first
    games = [(3, -21.0), (2, -19.0), (4, -15.0)]
    assert to_score.pooled(games, 10) is None  # 9 games: not yet a score
    assert to_score.pooled(games, 4) == -15.0
    assert to_score.pooled(games, 5) == (4 * -15 + -19) / 5
    assert to_score.pooled(games, 9) == (3 * -21 + 2 * -19 + 4 * -15) / 9
    assert to_score.pooled(games + [(1, -10.0)], 9) == (2 * -21 + 2 * -19 + 4 * -15 - 10) / 9


def test_the_curve_says_the_crossing_once_and_a_line_each_twentieth():
    lines = []
    curve = to_score.Curve("esnb", -15.0, 1000, progress=lines.append)
    for steps, mean in ((40, None), (50, -20.0), (120, -16.0), (130, -14.0), (140, -12.0),
                        (520, -18.0), (1000, -10.0)):
        curve.add({"steps": steps, "seconds": steps / 10, "mean": mean})
    out = curve.result()
    assert (out["steps_to_score"], out["seconds_to_score"]) == (130, 13.0)
    assert out["reached"] and out["best"] == -10.0 and out["steps"] == 1000
    crossing = [line for line in lines if ">=" in line]
    assert crossing == ["  esnb: -14.0 >= -15 at 130 agent steps, 0.2 min"]
    parts = [line.split(":")[1].split("%")[0].strip() for line in lines if "%" in line]
    assert parts == ["5", "10", "50", "100"]  # at 50, 120 (10%: 5% was passed with it), 520
    assert out["curve"][0] == [40, 4.0, None] and out["curve"][-1] == [1000, 100.0, -10.0]
    # each whole score from -20 to the target, where first reached
    assert out["milestones"] == {"-20": [50, 5.0], "-19": [120, 12.0], "-18": [120, 12.0],
                                 "-17": [120, 12.0], "-16": [120, 12.0], "-15": [130, 13.0]}


def test_the_report_compares_the_scores_both_sides_reached(capsys):
    sides = {}
    for name, rate in (("esnb", 10), ("rllib", 5)):
        curve = to_score.Curve(name, -15.0, 10_000, progress=lambda _: None)
        for steps in range(100, 10_001, 100):  # +1 point each 1,000 steps from -21
            mean = -21 + steps / 1000
            if name == "rllib":
                mean = min(mean, -17.5)  # RLlib stalls short of -17
            curve.add({"steps": steps, "seconds": steps / rate, "mean": mean})
        sides[name] = curve.result()
    to_score.report({"env": "ALE/Pong-v5", "score": -15.0, "max_steps": 10_000, "workers": 2,
                     "screen": 84, **sides})
    out = capsys.readouterr().out
    assert "+18" not in out and "-17: " not in out
    assert "-20: esnb 1.7 (0.00M), RLlib 3.3 (0.00M), RLlib / esnb 2.00" in out
    assert "-18: esnb 5.0 (0.00M), RLlib 10.0 (0.00M), RLlib / esnb 2.00" in out
    assert "> 10,000" in out  # RLlib never reached -15: how far it went


def test_a_curve_that_never_gets_there_says_how_far_it_got():
    curve = to_score.Curve("rllib", -15.0, 100, progress=lambda _: None)
    for steps in range(10, 101, 10):
        curve.add({"steps": steps, "seconds": float(steps), "mean": -20.0 + steps / 100})
    out = curve.result()
    assert not out["reached"] and out["steps_to_score"] is None
    assert out["best"] == -19.0 and out["agent_steps_per_s"] == 1.0


def test_a_long_curve_is_thinned_and_keeps_its_ends():
    curve = to_score.Curve("esnb", 0.0, 10**6, progress=lambda _: None)
    for i in range(1, 1002):
        curve.add({"steps": i * 100, "seconds": float(i), "mean": -21.0})
    kept = curve.result()["curve"]
    assert len(kept) <= to_score.CURVE_POINTS + 1
    assert kept[0][0] == 100 and kept[-1][0] == 100_100


def test_esnb_side_is_read_from_a_run_folder(tmp_path):
    # a results seed's history: cumulative games, each row's mean return
    rows = ["iteration,wall_time,env_steps,episodes,return_mean"]
    games = 0
    for i in range(1, 41):
        games += 10
        rows.append(f"{i},{i * 60.0},{i * 1000},{games},{-21 + i * 0.25}")
    (tmp_path / "history.csv").write_text("\n".join(rows) + "\n")
    lines = []
    out = to_score.from_run(tmp_path, -15.0, 10**6, progress=lines.append)
    # the mean of the last 100 games (10 rows of 10) at row n is -21 + 0.25 (n - 4.5): it
    # passes -15 at n = 28.5, so at row 29
    assert out["steps_to_score"] == 29_000 and out["seconds_to_score"] == 29 * 60.0
    assert out["curve"][8][2] is None and out["curve"][9][2] == pytest.approx(-21 + 0.25 * 5.5)
    assert lines == [f"  esnb (read from {tmp_path}, less 0.0 min of evaluations): -15 at "
                     f"29,000 agent steps, 29.0 min"]
    # a budget before the crossing: not reached, how far it got
    short = to_score.from_run(tmp_path, -15.0, 20_000, progress=lambda _: None)
    assert not short["reached"] and short["steps"] == 20_000


def test_a_seeds_evaluations_are_taken_out_of_its_clock(tmp_path):
    """A results seed evaluates greedily every so often: that row (and the next, whose actors
    stalled behind it) take longer; the time beyond the usual row's is not training's."""
    rows = ["iteration,wall_time,env_steps,episodes,return_mean,eval_return"]
    clock, games = 0.0, 0
    for i in range(1, 31):
        # rows of 10 s; row 12 evaluates (+40 s) and row 13 waits behind it (+15 s)
        clock += 10.0 + 40.0 * (i == 12) + 15.0 * (i == 13)
        games += 10
        rows.append(f"{i},{clock},{i * 1000},{games},{-21 + i * 0.25},"
                    f"{-20.0 if i == 12 else ''}")
    (tmp_path / "history.csv").write_text("\n".join(rows) + "\n")
    import pandas as pd

    extra = to_score.evaluation_seconds(pd.read_csv(tmp_path / "history.csv"))
    assert extra[11] == 40.0 and extra[12] == 15.0 and sum(extra) == 55.0
    out = to_score.from_run(tmp_path, -15.0, 10**6, progress=lambda _: None)
    assert out["steps_to_score"] == 29_000 and out["seconds_to_score"] == 290.0
    assert out["evaluation_seconds"] == 55.0


def test_a_folder_without_a_history_is_refused_before_anything_runs(tmp_path):
    with pytest.raises(ValueError, match="no history.csv"):
        bench.measure_to_score(esnb_run=str(tmp_path), python="/nonexistent/python")


def test_esnb_trains_until_the_score_then_stops(monkeypatch):
    """The real child: a LocalCluster, esnb's IMPALA, the pooled score (CartPole here: a random
    policy's games average ~22, so 15 is passed as soon as WINDOW games are in)."""
    monkeypatch.setattr(to_score, "WINDOW", 20)
    settings = "UNROLL, BATCH, SLOTS, ENVS = 8, 2, 1, 4\n"
    lines = []
    out = to_score.esnb_to_score("CartPole-v1", 1, 15.0, 200_000, 84, settings, lines.append)
    assert out["reached"] and out["best"] >= 15.0
    assert (out["unroll"], out["batch"], out["envs"], out["side"]) == (8, 2, 4, None)
    # it stopped at the crossing, far before the budget, and the curve's last point is it
    assert out["steps"] == out["steps_to_score"] < 200_000
    assert out["curve"][-1][0] == out["steps"] and out["curve"][-1][2] >= 15.0
    assert any(">= +15" in line for line in lines)


def test_esnb_stops_at_its_step_budget_without_the_score(monkeypatch):
    settings = "UNROLL, BATCH, SLOTS, ENVS = 8, 2, 1, 4\n"
    out = to_score.esnb_to_score("CartPole-v1", 1, 500.0, 3_000, 84, settings,
                                 progress=lambda _: None)
    assert not out["reached"] and out["steps"] >= 3_000
    assert out["steps"] - out["curve"][-2][0] > 0 and out["curve"][-2][0] < 3_000


STOPPED_BY_CTRL_C = r'''
import json
from esnb.bench.peers import impala_to_score as to_score
to_score.WINDOW = 20
add = to_score.Curve.add
def add_and_say(self, p):
    add(self, p)
    print("POINT", p["steps"], flush=True)
to_score.Curve.add = add_and_say
out = to_score.esnb_to_score("CartPole-v1", 1, 501.0, 10**9, 84,  # 500 is CartPole's most
                             "UNROLL, BATCH, SLOTS, ENVS = 8, 2, 1, 4\n", print)
print("RESULT " + json.dumps(out), flush=True)
'''


def test_a_ctrl_c_stops_a_side_where_it_is_and_keeps_its_curve():
    """A terminal's Ctrl-C reaches the whole process group (the bench and its child run):
    the child stops, and the curve so far comes back, marked stopped, not lost."""
    import json
    import os
    import signal
    import subprocess
    import sys

    proc = subprocess.Popen([sys.executable, "-c", STOPPED_BY_CTRL_C], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True, start_new_session=True)
    try:
        points = 0
        for line in proc.stdout:
            points += line.startswith("POINT ")
            if points == 5:
                os.killpg(proc.pid, signal.SIGINT)
                break
        rest = proc.stdout.read()
        assert proc.wait(timeout=120) == 0
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    out = json.loads(next(line[len("RESULT "):] for line in rest.splitlines()
                          if line.startswith("RESULT ")))
    assert out["stopped"] is True and not out["reached"]
    assert len(out["curve"]) >= 5 and out["steps"] == out["curve"][-1][0] > 0
    assert "esnb: stopped (Ctrl-C) at" in rest


def test_the_report_of_a_bench_stopped_before_rllib_started(capsys):
    side = to_score.Curve("esnb", -15.0, 1_000)
    side.add({"steps": 500, "seconds": 60.0, "mean": -20.5})
    r = {"env": "ALE/Pong-v5", "score": -15.0, "max_steps": 1_000, "workers": 2, "screen": 84,
         "esnb": {**side.result(), "stopped": True}, "rllib": None}
    to_score.report(r)
    out = capsys.readouterr().out
    assert "> 500" in out and "stopped (Ctrl-C)" in out
    assert "rllib   not run (stopped before it)" in out


def test_the_figure_draws_both_curves_over_the_range_both_cover():
    def side(points):
        curve = to_score.Curve("x", -15.0, 10**9, progress=lambda _: None)
        for p in points:
            curve.add(p)
        return curve.result()

    esnb = side([{"steps": 0, "seconds": 0.0, "mean": None},
                 {"steps": 1_000, "seconds": 60.0, "mean": -21.0},
                 {"steps": 3_000, "seconds": 180.0, "mean": -14.0}])
    rllib = side([{"steps": 500, "seconds": 60.0, "mean": -20.5},
                  {"steps": 2_000, "seconds": 300.0, "mean": -19.0}])
    r = {"env": "ALE/Pong-v5", "score": -15.0, "window": 100, "esnb": esnb, "rllib": rllib}
    text = to_score.figure(r)
    assert text.startswith("<svg") and text.count("<polyline") == 4  # 2 sides x 2 panels
    assert "agent steps" in text and "minutes" in text and "RLlib" in text
    assert "stroke-dasharray" in text  # the score
    # esnb alone (a bench stopped before RLlib): one line a panel
    assert to_score.figure({**r, "rllib": None}).count("<polyline") == 2


def test_a_figure_with_no_folder_to_go_in_is_refused_before_anything_runs(tmp_path):
    import subprocess
    import sys

    p = subprocess.run([sys.executable, "-m", "esnb.cli", "bench", "impala-vs-rllib",
                        "--to-score", "-15", "--rllib-python", "/nonexistent/python",
                        "--svg", str(tmp_path / "no" / "such" / "f.svg")],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode != 0 and "--svg" in p.stderr and "no folder" in p.stderr


def test_rllib_s_score_is_pooled_from_its_games_not_its_own_report(capsys, monkeypatch):
    """RLlib's child reads each train() result's lifetime sums (games, whole-game returns, from
    its callback) and pools the last WINDOW games, ignoring RLlib's episode_return_mean (which
    holds only the games since the last report). RLlib stands in as its result dicts: CI
    has no Ray; the real child ran from /work/rllib_venv (BENCHMARKS.md)."""
    import json
    import sys
    import time
    from types import SimpleNamespace

    # lifetime (games, return sum) after each call: 0 games, then 3 at -21, 1 at -19, none,
    # then 2 at -20; RLlib's own report says something else each time
    lifetime = [(0, 0.0), (3, -63.0), (4, -82.0), (4, -82.0), (6, -122.0)]
    calls = iter(range(len(lifetime)))

    def train():
        i = next(calls)
        games, total = lifetime[i]
        return {"env_runners": {"esnb_games": games, "esnb_game_return_sum": total,
                                "episode_return_mean": 99.0},
                "num_env_steps_sampled_lifetime": 1000 * (i + 1)}

    module = SimpleNamespace(parameters=lambda: [SimpleNamespace(numel=lambda: 7)])
    algo = SimpleNamespace(train=train, get_module=lambda: module, stop=lambda: None)
    namespace = {"algo": algo, "json": json, "sys": sys, "time": time,
                 "t0": time.perf_counter(), "WINDOW": 4,
                 "counts": lambda res: (res["num_env_steps_sampled_lifetime"], 0),
                 "ray": SimpleNamespace(__version__="stand-in", shutdown=lambda: None)}
    exec(inspect.getsource(to_score.pooled), namespace)
    monkeypatch.setattr(sys, "argv", ["-c", "rllib", "2", "5000", "84", "ALE/Pong-v5", "-15"])
    exec(to_score.RLLIB_CHILD, namespace)
    lines = [json.loads(line.split(" ", 1)[1]) for line in capsys.readouterr().out.splitlines()
             if line.startswith("ESNB-PROGRESS ")]
    assert [p["games"] for p in lines] == [0, 3, 4, 4, 6]
    # under 4 games: no score; then the last 4 games: (-19 - 21 - 21 - 21) / 4, then
    # (-20 - 20 - 19 - 21) / 4; RLlib's 99.0 never appears
    assert [p["mean"] for p in lines] == [None, None, -20.5, -20.5, -20.0]
