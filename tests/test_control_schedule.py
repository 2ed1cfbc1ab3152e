"""Replaying a run's record of control changes (``controls_schedule=``, ``--controls``): a
steered ES run replayed gives bitwise the same theta; a bad record is refused whole, before
anything runs."""

import numpy as np
import pytest

from esnb.cli import main
from esnb.runners.es import ES
from esnb.runners.playback import load_run

CFG = dict(env="CartPole-v1", population=8, sigma=0.05, lr=0.03, seed=3, eval_interval=0,
           noise_size=200_000, tasks_per_worker=100, max_episode_steps=100)


def steered() -> ES:
    """Six generations, a person turning three controls between them."""
    r = ES(**CFG, client=False)
    r.step(2)
    r.controls.set(sigma=0.1)
    r.step(2)
    r.controls.set(lr=0.01, shaping="raw")
    r.step(1)
    r.controls.set(population=12)
    r.step(1)
    return r


@pytest.fixture(scope="module")
def original():
    return steered()


def test_a_replayed_record_gives_bitwise_the_same_theta(original, tmp_path):
    path = tmp_path / "changes.csv"
    original.changes.to_csv(path, index=False)  # what a run folder holds
    for record in (path, tmp_path, original.changes):
        again = ES(**CFG, client=False)
        again.start(generations=6, controls_schedule=record).wait()
        assert np.array_equal(again.theta, original.theta)
        cols = ["generation", "name", "new"]
        assert again.changes[cols].astype(str).equals(original.changes[cols].astype(str))
    unsteered = ES(**CFG, client=False).step(6)
    assert not np.array_equal(unsteered.theta, original.theta)  # the record mattered


@pytest.mark.parametrize("row, message", [
    ({"generation": 2, "name": "sigmaa", "new": "0.1"}, "row 2: unknown control 'sigmaa'"),
    ({"generation": 2, "name": "hidden", "new": "8"}, "row 2: unknown control 'hidden'"),
    ({"generation": 2, "name": "obs_norm", "new": "False"}, "row 2: obs_norm is fixed"),
    ({"generation": 2, "name": "sigma", "new": "-1"}, r"row 2: sigma must be a number in \(0"),
    ({"generation": 0, "name": "sigma", "new": "0.1"}, "row 2: the iteration .* >= 1, got 0"),
    ({"generation": "x", "name": "sigma", "new": "0.1"}, "row 2: the iteration"),
])
def test_a_bad_record_is_refused_whole_and_nothing_runs(row, message):
    r = ES(**CFG, client=False)
    good = {"generation": 1, "name": "lr", "new": "0.02"}
    with pytest.raises(ValueError, match=message):
        r.start(generations=3, controls_schedule=[good, row])
    assert not r.running and r.iteration == 0 and r.controls["lr"] == CFG["lr"]


def test_esnb_train_controls_replays_a_run_folder(original, tmp_path, capsys):
    record = tmp_path / "steered"
    record.mkdir()
    original.changes.to_csv(record / "changes.csv", index=False)
    flags = ["train", "es", "--workers", "0", "--no-progress", "--final-eval", "0",
             "--generations", "6", "--checkpoint-every", "0"]
    flags += [f"--{k.replace('_', '-')}={v}" for k, v in CFG.items()]
    out = tmp_path / "replayed"
    assert main([*flags, "--controls", str(record), "--out", str(out)]) == 0
    assert np.array_equal(load_run(out).theta, original.theta)
    bad = tmp_path / "bad.csv"
    bad.write_text("generation,name,new\n1,population,7\n")  # odd: ES needs pairs
    assert main([*flags, "--controls", str(bad), "--out", str(tmp_path / "no")]) == 2
    err = capsys.readouterr().err
    assert f"--controls {bad} row 1: population" in err and not (tmp_path / "no").exists()
