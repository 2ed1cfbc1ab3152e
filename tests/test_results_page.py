"""The results page (docs/results.md): rendered from the saved runs, checked for staleness like
docs/settings.md, with intervals, sources and figures that follow from the data."""

import datetime
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from esnb.bench.results import catalogue, page, runs, svg
from esnb.bench.results.command import repo_root
from esnb.cli import main
from esnb.runners.sweep import mean_ci

ROOT = Path(__file__).resolve().parents[1]


def test_the_checked_in_page_is_what_the_saved_runs_render():
    assert repo_root() == ROOT
    assert page.stale(ROOT) == [], "docs/results.md is stale: esnb bench results --render"


def test_every_entry_was_run_with_its_seeds_and_its_sources_are_named():
    """Five seeds an entry (three for an entry of an hour and more a seed on 2 cores); one
    still being run, session after session, says on the page on how many it rests, and one
    whose settings changed says it is not run yet."""
    text = (ROOT / page.PAGE).read_text()
    for e in catalogue.ENTRIES:
        long = e.seeds >= 3 and e.env.startswith("ALE/")  # an hour and more a seed
        assert e.seeds >= 5 or long, e.key
        saved = ROOT / page.DATA / f"{e.key}.json"
        if long and not saved.exists():  # its settings changed: waits for its first seed
            assert f"Not run yet: `esnb bench results --only {e.key}`" in text, e.key
            continue
        doc = json.loads(saved.read_text())
        n = len(doc["seeds"])
        assert n >= e.seeds or f"({n}), {n} of its {e.seeds} seeds so far" in text, e.key
        assert doc["budget"] == e.budget and doc["settings"] == e.settings, \
            f"{e.key} was run with another budget or settings than the catalogue's: re-run it"
        assert doc["hardware"]["cpu"] and doc["hardware"]["cores"] >= 1
        for ref in (e.paper, e.peer):
            assert ref is None or (ref.source and ref.setting and ref.value), e.key
    text = (ROOT / page.PAGE).read_text()
    for e in catalogue.ENTRIES:
        if (ROOT / page.DATA / f"{e.key}.json").exists():
            assert f"results/{e.key}.svg" in text and (ROOT / page.DATA / f"{e.key}.svg").exists()


def _fake_run(root: Path, e, finals, curve_len=5):
    seeds = [{"seed": s, "final": f, "final_std": 1.0, "env_steps": 1000, "wall_s": 10.0,
              "curve": [[100.0 * k, 2.0 * k, f * k / (curve_len - 1)] for k in range(curve_len)]}
             for s, f in enumerate(finals)]
    doc = {"key": e.key, "algorithm": e.algorithm, "preset": e.preset, "env": e.env,
           "budget": e.budget, "settings": e.settings, "eval_episodes": e.eval_episodes,
           "workers": 2, "load_average": [1.0, 1.5],
           "hardware": {"cpu": "Test CPU", "cores": 2, "python": "3.11", "os": "Linux",
                        "versions": {"numpy": "2"}, "commit": "abc1234", "date": "2026-11-27"},
           "seeds": seeds}
    (root / page.DATA).mkdir(parents=True, exist_ok=True)
    (root / page.DATA / f"{e.key}.json").write_text(json.dumps(doc))


def test_the_page_states_the_interval_the_seeds_give_and_whether_the_paper_is_above(tmp_path):
    bitflip = catalogue.entry("eorl-bitflip7")  # the paper's very setting: 8.22
    finals = [5.0, 6.0, 7.0, 6.5, 5.5]
    _fake_run(tmp_path, bitflip, finals)
    text = page.render(tmp_path)[page.PAGE]
    mean, lo, hi = mean_ci(finals, method=runs.CI_METHOD)  # Student-t
    assert runs.CI_METHOD == "t" and "Student-t 95% interval" in text
    assert f"**{mean:,.2f}** [{lo:,.2f}, {hi:,.2f}] (5)" in text
    assert "**Below the paper's 8.22**" in text
    assert "Test CPU, 2 cores" in text
    # an entry with no saved run says how to make one
    assert "Not run yet: `esnb bench results --only es-halfcheetah`" in text
    # a paper number for another task is never called a shortfall
    aes = catalogue.entry("aesrl-invpendulum")
    _fake_run(tmp_path, aes, [900.0, 950.0, 1000.0, 980.0, 990.0])
    text = page.render(tmp_path)[page.PAGE]
    assert "not comparable, shown for scale" in text
    # ... and its summary row says so in the row itself
    row = next(line for line in text.splitlines() if line.startswith(f"| [{aes.title}]"))
    assert "not comparable" in row


def test_an_entry_of_hours_a_seed_shows_on_how_many_of_its_seeds_it_rests(tmp_path):
    """Pong takes an hour and more a seed here: its seeds are run one a session, and until
    all three are in, the score says how many it rests on (one seed: no interval)."""
    pong = catalogue.entry("impala-pong")
    assert pong.seeds == 3
    _fake_run(tmp_path, pong, [19.5])
    text = page.render(tmp_path)[page.PAGE]
    assert "**19.50** [—, —] (1), 1 of its 3 seeds so far" in text
    _fake_run(tmp_path, pong, [19.5, 20.0, 18.5])
    text = page.render(tmp_path)[page.PAGE]
    assert "seeds so far" not in text and "(3)" in text


def test_an_interval_stops_where_the_task_bounds_a_score(tmp_path):
    """Three Pong seeds of 21.0, 20.3 and 14.6: Student-t's 95% interval reaches 27.35, past
    the +21 a game can give; the page cuts it at +21 (its low end, inside, is kept)."""
    pong = catalogue.entry("impala-pong")
    assert pong.score_range == (-21, 21)
    finals = [21.0, 20.3, 14.6]
    mean, lo, hi = mean_ci(finals, method=runs.CI_METHOD)
    assert hi > 21 and lo > -21
    _fake_run(tmp_path, pong, finals)
    text = page.render(tmp_path)[page.PAGE]
    assert f"**{mean:,.2f}** [{lo:,.2f}, 21.00] (3)" in text
    assert f"{hi:,.2f}" not in text
    # an entry the task does not bound keeps the interval as Student-t gives it
    bitflip = catalogue.entry("eorl-bitflip7")
    assert bitflip.score_range is None
    wide = [1.0, 9.0, 4.0]
    _fake_run(tmp_path, bitflip, wide)
    mean, lo, hi = mean_ci(wide, method=runs.CI_METHOD)
    assert f"**{mean:,.2f}** [{lo:,.2f}, {hi:,.2f}] (3)" in page.render(tmp_path)[page.PAGE]


def test_a_task_set_waits_for_two_seeds_of_every_task(tmp_path):
    """A stratified bootstrap needs 2 runs or more of each task: until then the set says
    which entries lack them instead of failing the page."""
    eorl = next(t for t in catalogue.TASK_SETS if t.key == "eorl-tables")
    keys = sorted({k for by_task in eorl.entries.values() for k in by_task.values()})
    for key in keys:
        _fake_run(tmp_path, catalogue.entry(key), [8.0] if key == keys[0] else [8.0, 7.0])
    out = page.render(tmp_path)
    assert f"Not yet: fewer than 2 seeds of {keys[0]} (1)." in out[page.PAGE]
    assert page.DATA / "eorl-tables.json" not in out
    _fake_run(tmp_path, catalogue.entry(keys[0]), [8.0, 7.0])
    out = page.render(tmp_path)
    assert "fewer than 2 seeds" not in out[page.PAGE] and page.DATA / "eorl-tables.json" in out


def test_the_minatar_set_waits_for_two_seeds_of_each_game_then_compares_the_algorithms(
        tmp_path):
    """Across tasks: nothing computed until every entry has 2 seeds or more; then each game
    is scaled from a random policy (0) to the better algorithm's mean (1)."""
    minatar = next(t for t in catalogue.TASK_SETS if t.key == "minatar")
    assert minatar.scale == {"Breakout": (0.4, None), "SpaceInvaders": (4.5, None)}
    finals = {"apex-minatar-breakout": [20.4, 10.4], "impala-minatar-breakout": [5.4, 5.4],
              "apex-minatar-spaceinvaders": [24.5, 24.5],
              "impala-minatar-spaceinvaders": [44.5, 44.5]}
    for key, scores in finals.items():
        _fake_run(tmp_path, catalogue.entry(key), scores[:1])
    text = page.render(tmp_path)[page.PAGE]
    assert "### Across tasks: MinAtar" in text
    assert "Not yet: fewer than 2 seeds of apex-minatar-breakout (1), " in text
    for key, scores in finals.items():
        _fake_run(tmp_path, catalogue.entry(key), scores)
    out = page.render(tmp_path)
    agg = json.loads(out[page.DATA / "minatar.json"])
    # Breakout: 0.4 -> 0, Ape-X's mean 15.4 -> 1; Space Invaders: 4.5 -> 0, IMPALA's 44.5 -> 1
    apex, impala = agg["algorithms"]["Ape-X DQN"], agg["algorithms"]["IMPALA"]
    assert apex["mean"][0] == pytest.approx((1.0 + 0.5) / 2)
    assert impala["mean"][0] == pytest.approx((5.0 / 15.0 + 1.0) / 2)
    assert "| Ape-X DQN | 2 x 2 |" in out[page.PAGE]


def test_check_fails_on_a_stale_page_and_render_repairs_it(tmp_path, capsys):
    shutil.copytree(ROOT / "docs", tmp_path / "docs")
    assert main(["bench", "results", "--check", "--root", str(tmp_path)]) == 0
    key = catalogue.ENTRIES[0].key
    path = tmp_path / page.DATA / f"{key}.json"
    doc = json.loads(path.read_text())
    doc["seeds"][0]["final"] += 1.0
    path.write_text(json.dumps(doc))
    assert main(["bench", "results", "--check", "--root", str(tmp_path)]) == 1
    assert "stale: docs/results.md" in capsys.readouterr().out
    assert main(["bench", "results", "--render", "--root", str(tmp_path)]) == 0
    assert main(["bench", "results", "--check", "--root", str(tmp_path)]) == 0


def _damage(path: Path, how: str) -> None:
    """``path`` (a saved entry) made into what ``how`` names."""
    doc = json.loads(path.read_text())
    if how == "no seeds":
        del doc["seeds"]
    elif how == "a list":
        doc = [doc]
    elif how == "a curve of text":
        doc["seeds"][0]["curve"] = "x"
    if how == "a folder":
        path.unlink()
        path.mkdir()
    elif how == "truncated":
        path.write_text(json.dumps(doc)[:40])
    else:
        path.write_text(json.dumps(doc))


@pytest.mark.parametrize("how, args, message", [
    ("no seeds", [], "{file} is no saved result: it lacks seeds"),
    ("a list", [], "{file} holds a JSON list, not a saved result"),
    ("a folder", [], "{file} is a folder, not a saved result"),
    ("truncated", [], "{file} is no JSON (Unterminated string"),
    ("a curve of text", [], "{file} cannot be rendered: a value of another kind"),
    (None, ["--root", "{tmp}/nowhere"], "--root {tmp}/nowhere does not exist"),
    (None, ["--root", "{tmp}/docs/results.md"], "--root {tmp}/docs/results.md is a file"),
    (None, ["--root", "{tmp}/docs"], "--root {tmp}/docs holds no saved results"),
])
def test_check_names_the_file_that_is_no_saved_result(tmp_path, capsys, how, args, message):
    """``esnb bench results --check`` on a saved result that is none, or a --root that holds
    none: one line naming the file (issue 36), not a traceback, not "stale"."""
    e = catalogue.ENTRIES[0]
    _fake_run(tmp_path, e, [1.0, 2.0, 3.0])
    (tmp_path / page.PAGE).write_text("the page\n")
    file = tmp_path / page.DATA / f"{e.key}.json"
    if how is not None:
        _damage(file, how)
    args = [a.replace("{tmp}", str(tmp_path)) for a in args] or ["--root", str(tmp_path)]
    assert main(["bench", "results", "--check", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and "\n" not in err.strip() and "Traceback" not in err
    assert message.format(file=file, tmp=tmp_path) in err


def test_the_figure_band_is_the_mean_and_range_of_the_seeds_on_a_common_grid():
    a = np.array([[0.0, 0.0], [10.0, 10.0]])
    b = np.array([[0.0, 2.0], [5.0, 2.0], [8.0, 4.0]])  # shorter: the grid stops at 8
    x, mean, low, high = svg.band([a, b])
    assert x[0] == 0.0 and x[-1] == 8.0
    ya, yb = np.interp(x, a[:, 0], a[:, 1]), np.interp(x, b[:, 0], b[:, 1])
    assert np.allclose(mean, (ya + yb) / 2)
    assert np.allclose(low, np.minimum(ya, yb)) and np.allclose(high, np.maximum(ya, yb))
    doc = svg.figure([svg.panel(x, mean, low, high, "t", "x", "y")], "caption")
    assert doc.startswith("<svg") and "<polygon" in doc and "<polyline" in doc


def test_bad_entries_get_one_line():
    with pytest.raises(ValueError, match="no results entry 'nope'; there are: es-halfcheetah"):
        catalogue.entry("nope")
    with pytest.raises(SystemExit) as exc:
        main(["bench", "results", "--only", "nope"])
    assert exc.value.code == 2


def test_a_seed_is_a_real_run_judged_on_its_final_parameters(tmp_path):
    """``run_seed`` trains the entry's runner to its budget, scores the final parameters with
    a fresh evaluation (the same number for the same seed), and its curve follows the history;
    an EORL cell scores the paper's last-100 mean. Saved, the run renders a fresh page."""
    import dataclasses

    from esnb.bench.results.runs import run_seed, save
    from esnb.runners.eorl.tasks import RunSpec, run_one
    from esnb.runners.es import ES

    es = dataclasses.replace(catalogue.entry("es-halfcheetah"), env="CartPole-v1",
                             budget={"generations": 3}, eval_episodes=3,
                             settings={"population": 8, "sigma": 0.05, "lr": 0.03,
                                       "noise_size": 200_000, "max_episode_steps": 100,
                                       "eval_interval": 1})
    a, b = (run_seed(es, 4, client=False) for _ in range(2))
    same = ("final", "final_std", "env_steps")  # seeded: the same run (the clock aside)
    assert [a[k] for k in same] == [b[k] for k in same]
    assert [(r[0], r[2]) for r in a["curve"]] == [(r[0], r[2]) for r in b["curve"]]
    direct = ES("CartPole-v1", client=False, seed=4, **es.settings).step(3)
    assert a["final"] == pytest.approx(direct.evaluate(3).mean())
    assert a["env_steps"] == int(direct.history.env_steps.iloc[-1])
    assert [row[0] for row in a["curve"]] == direct.history.env_steps.tolist()
    assert [row[2] for row in a["curve"]] == pytest.approx(direct.history.eval_return.tolist())

    cell = dataclasses.replace(catalogue.entry("van-bitflip7"), budget={"episodes": 120})
    row = run_seed(cell, 1, client=False)
    spec = RunSpec("VAN", "bitflip", (("n_bits", 7), ("subgoal", 0)), episodes=120, seed=1)
    assert row["final"] == run_one(spec)["last100"]
    assert len(row["curve"]) == 12 and row["curve"][-1][2] == pytest.approx(row["final"], 1e-4)

    save(tmp_path / page.DATA / "van-bitflip7.json", cell, [row, {**row, "seed": 2}], 1,
         (0.5, 0.5))
    out = page.render(tmp_path)
    assert "[VAN (one DQN)](#van-bitflip7) | laptop | bitflip | 120 episodes" in out[page.PAGE]
    assert (page.DATA / "van-bitflip7.svg") in out


def test_a_seed_is_a_session_run_with_its_own_folder_and_resumes_from_it(tmp_path):
    """A seed run into a folder leaves a run folder as ``esnb train`` does; one that stopped
    before its end (a checkpoint, a summary without the final evaluation: what a signal
    leaves) is resumed, and ends as the whole run did."""
    import dataclasses

    from esnb.bench.results.runs import run_seed

    es = dataclasses.replace(catalogue.entry("es-halfcheetah"), env="CartPole-v1",
                             budget={"generations": 3}, eval_episodes=3,
                             settings={"population": 8, "sigma": 0.05, "lr": 0.03,
                                       "noise_size": 200_000, "max_episode_steps": 100,
                                       "eval_interval": 1})
    whole = run_seed(es, 2, client=False, folder=tmp_path / "whole")
    for name in ("history.csv", "summary.json", "checkpoint.npz", "plot.html"):
        assert (tmp_path / "whole" / name).exists(), name
    part = tmp_path / "part"
    run_seed(dataclasses.replace(es, budget={"generations": 2}), 2, client=False, folder=part)
    # as a signal leaves it: the summary written without the final evaluation
    summary = json.loads((part / "summary.json").read_text())
    for key in ("final_eval_mean", "final_eval_std", "final_eval_episodes"):
        del summary[key]
    (part / "summary.json").write_text(json.dumps(summary))
    resumed = run_seed(es, 2, client=False, folder=part)
    assert [r[0] for r in resumed["curve"]] == [r[0] for r in whole["curve"]]
    assert [r[2] for r in resumed["curve"]] == [r[2] for r in whole["curve"]]
    assert (resumed["final"], resumed["env_steps"]) == (whole["final"], whole["env_steps"])
    assert json.loads((part / "summary.json").read_text())["final_eval_mean"] == whole["final"]
    # a finished seed's folder (a results run stopped after it) is read back, not run again
    before = (tmp_path / "whole" / "checkpoint.npz").read_bytes()
    again = run_seed(es, 2, client=False, folder=tmp_path / "whole")
    assert (tmp_path / "whole" / "checkpoint.npz").read_bytes() == before
    assert (again["final"], again["env_steps"]) == (whole["final"], whole["env_steps"])
    assert np.allclose(again["curve"], whole["curve"], rtol=0, atol=1e-4)
    # where it ran is kept beside it and read back with it (a later session, another commit)
    from esnb.bench.results.runs import RAN, _commit

    ran = json.loads((tmp_path / "whole" / RAN).read_text())
    assert ran["commit"] == _commit() and ran["date"] == str(datetime.date.today())
    assert (again["commit"], again["date"]) == (whole["commit"], whole["date"]) == (
        ran["commit"], ran["date"])
    (tmp_path / "whole" / RAN).write_text('{"commit": "abc1234", "date": "2026-11-01"}')
    older = run_seed(es, 2, client=False, folder=tmp_path / "whole")
    assert (older["commit"], older["date"]) == ("abc1234", "2026-11-01")
    (tmp_path / "whole" / RAN).unlink()  # kept before seeds said where they ran
    assert run_seed(es, 2, client=False, folder=tmp_path / "whole")["commit"] is None
    hw = {"date": "2026-11-27", "commit": "def5678"}
    assert page._ran(older, hw) == "2026-11-01, esnb abc1234"
    assert page._ran({"seed": 0}, hw) == "2026-11-27, esnb def5678"


def test_a_results_run_reads_finished_seeds_back_first_and_saves_after_each(tmp_path, capsys):
    """``esnb bench results --runs DIR``: a seed already run to its end in DIR (an earlier
    session's) is read back before the others run, not run again, and the entry is saved with
    every seed it has, in seed order (on a LocalCluster, as the command runs)."""
    import dataclasses

    from esnb.bench.results.command import _run_entries
    from esnb.bench.results.runs import run_seed

    es = dataclasses.replace(catalogue.entry("es-halfcheetah"), env="CartPole-v1",
                             budget={"generations": 3}, eval_episodes=3, seeds=2,
                             settings={"population": 8, "sigma": 0.05, "lr": 0.03,
                                       "noise_size": 200_000, "max_episode_steps": 100,
                                       "eval_interval": 1})
    runs_dir = tmp_path / "seeds"
    done = run_seed(es, 1, client=False, folder=runs_dir / es.key / "seed1")
    before = (runs_dir / es.key / "seed1" / "checkpoint.npz").read_bytes()
    _run_entries([es], tmp_path, None, workers=1, runs=runs_dir)
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith(es.key)]
    assert [line.split(":")[0] for line in said] == [f"{es.key} seed 1", f"{es.key} seed 0"]
    assert (runs_dir / es.key / "seed1" / "checkpoint.npz").read_bytes() == before
    saved = json.loads((tmp_path / page.DATA / f"{es.key}.json").read_text())
    assert [s["seed"] for s in saved["seeds"]] == [0, 1]
    assert saved["seeds"][1]["final"] == done["final"]
    assert (runs_dir / es.key / "seed0" / "summary.json").exists()


def test_a_kept_run_folder_of_other_settings_is_refused_not_read_back(tmp_path, monkeypatch):
    """A seed's kept run folder whose run had other settings than the entry gives it now (a
    preset changed since): refused in one line naming what differs, before a cluster starts,
    whether the run finished (it would be read back as the entry's) or stopped (it would
    resume its old settings); the folder is untouched."""
    import dataclasses

    import esnb.cluster
    from esnb.bench.results.command import _run_entries
    from esnb.bench.results.runs import run_seed

    es = dataclasses.replace(catalogue.entry("es-halfcheetah"), env="CartPole-v1",
                             budget={"generations": 2}, eval_episodes=2, seeds=1,
                             settings={"population": 8, "sigma": 0.05, "lr": 0.03,
                                       "noise_size": 200_000, "max_episode_steps": 50})
    runs_dir = tmp_path / "seeds"
    folder = runs_dir / es.key / "seed0"
    run_seed(es, 0, client=False, folder=folder)
    run_seed(es, 0, client=False, folder=folder)  # the same settings: read back
    before = (folder / "checkpoint.npz").read_bytes()
    other = dataclasses.replace(es, settings={**es.settings, "lr": 0.05})

    def no_cluster(*args, **kwargs):
        raise AssertionError("a cluster started")

    monkeypatch.setattr(esnb.cluster, "make_client", no_cluster)
    said = r"seed0 ran other settings than es-halfcheetah seed 0 has now: lr 0.03 \(now 0.05\)"
    with pytest.raises(ValueError, match=said):
        _run_entries([other], tmp_path, None, workers=1, runs=runs_dir)
    (folder / "summary.json").unlink()  # stopped before its end: it would resume
    with pytest.raises(ValueError, match=said):
        run_seed(other, 0, client=False, folder=folder)
    assert (folder / "checkpoint.npz").read_bytes() == before
    assert not (tmp_path / page.DATA / f"{es.key}.json").exists()


def test_missing_runs_only_the_seeds_an_entry_lacks_and_refuses_other_settings(tmp_path,
                                                                               capsys):
    """``esnb bench results --only KEY --missing``: the seeds the saved entry has are kept as
    saved (their finals, the machine the entry names) and only the others run; a saved entry
    of another budget is refused before anything runs, its file untouched."""
    import dataclasses

    from esnb.bench.results.command import _run_entries
    from esnb.bench.results.runs import save

    es = dataclasses.replace(catalogue.entry("es-halfcheetah"), env="CartPole-v1",
                             budget={"generations": 2}, eval_episodes=2, seeds=2,
                             settings={"population": 8, "sigma": 0.05, "lr": 0.03,
                                       "noise_size": 200_000, "max_episode_steps": 50,
                                       "eval_interval": 1})
    machine = {"cpu": "elsewhere", "cores": 2, "python": "3.11", "os": "Linux",
               "versions": {}, "commit": "abc1234", "date": "2026-11-01"}
    seed1 = {"seed": 1, "final": 123.25, "final_std": 1.0, "env_steps": 800, "wall_s": 9.0,
             "curve": [[800, 9.0, 123.25]], "commit": "abc1234", "date": "2026-11-01"}
    path = tmp_path / page.DATA / f"{es.key}.json"
    save(path, es, [seed1], 1, (0.5, 0.75), machine)
    _run_entries([es], tmp_path, None, workers=1, missing=True)
    said = [line for line in capsys.readouterr().out.splitlines() if line.startswith(es.key)]
    assert [line.split(":")[0] for line in said] == [f"{es.key} seed 0"]
    saved = json.loads(path.read_text())
    assert [s["seed"] for s in saved["seeds"]] == [0, 1]
    assert saved["seeds"][1] == seed1
    assert saved["hardware"] == machine and saved["load_average"][0] == 0.5
    assert saved["interval"]["finals"] == [saved["seeds"][0]["final"], 123.25]

    before = path.read_text()
    longer = dataclasses.replace(es, budget={"generations": 5})
    with pytest.raises(ValueError, match="another budget .*--only es-halfcheetah"):
        _run_entries([longer], tmp_path, None, workers=1, missing=True)
    assert path.read_text() == before
    # as typed: one line naming what differs, exit 2, no cluster started, the file untouched
    real = catalogue.entry("es-halfcheetah")
    _fake_run(tmp_path, dataclasses.replace(real, budget={"env_steps": 1000}), [1.0])
    saved_real = (tmp_path / page.DATA / f"{real.key}.json").read_text()
    capsys.readouterr()
    assert main(["bench", "results", "--root", str(tmp_path), "--only", real.key,
                 "--missing"]) == 2
    out, err = capsys.readouterr()
    assert "\n" not in err.strip() and "Traceback" not in err
    assert f"{real.key}: its saved seeds ran another budget than the catalogue's" in err
    assert (tmp_path / page.DATA / f"{real.key}.json").read_text() == saved_real


def test_a_commit_says_when_the_package_differs_from_it(tmp_path):
    """What a seed records as the code it ran: the commit, ``+changes`` when files under the
    package are modified or new, None outside a git checkout."""
    import subprocess

    from esnb.bench.results.runs import _commit

    assert _commit(tmp_path) is None
    repo, pkg = tmp_path / "repo", tmp_path / "repo" / "pkg"
    pkg.mkdir(parents=True)
    (pkg / "a.py").write_text("x = 1\n")
    (repo / "notes.md").write_text("outside the package\n")
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "."], check=True)
    subprocess.run([*git, "commit", "-qm", "first"], check=True)
    head = subprocess.run([*git, "rev-parse", "--short", "HEAD"], capture_output=True,
                          text=True, check=True).stdout.strip()
    assert _commit(pkg) == head
    (repo / "notes.md").write_text("changed, outside the package\n")
    assert _commit(pkg) == head
    (pkg / "b.py").write_text("y = 2\n")
    assert _commit(pkg) == head + "+changes"
    (pkg / "b.py").unlink()
    (pkg / "a.py").write_text("x = 2\n")
    assert _commit(pkg) == head + "+changes"
