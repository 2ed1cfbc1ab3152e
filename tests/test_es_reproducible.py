"""Bitwise reproducibility of ES: inline, 1 worker, 2 workers, any task batching, resumes."""

import json
import zipfile

import numpy as np
import pytest

from esnb.cluster import make_client
from esnb.record import CheckpointError, load_checkpoint, save_checkpoint
from esnb.runners.es import ES

# Hopper: MuJoCo, early terminations, observation statistics from half the rollouts,
# evaluations every generation: every path that could depend on the worker count.
CFG = dict(env="Hopper-v5", population=12, sigma=0.05, lr=0.03, seed=3, max_episode_steps=150,
           obs_stat_prob=0.5, eval_interval=1, eval_episodes=3, noise_size=1_000_000)
GENS = 4


def fingerprint(r: ES):
    h = r.history
    return (r.theta, r.obs_stats.sum.copy(), h.return_mean.to_numpy(), h.eval_return.to_numpy(),
            h.env_steps.to_numpy())


def assert_same(a, b):
    for x, y in zip(a, b):
        assert np.array_equal(x, y, equal_nan=True)


@pytest.fixture(scope="module")
def inline_run():
    r = ES(**CFG)
    r.step(GENS)
    return fingerprint(r)


def test_two_workers_bitwise_equal_inline(client, inline_run):
    r = ES(**CFG, client=client)
    r.step(GENS)
    assert r.history.workers.iloc[-1] == 2 and (r.history.tasks > 1).all()
    assert_same(fingerprint(r), inline_run)


def test_one_worker_bitwise_equal_inline(inline_run):
    c = make_client(1, dashboard_address=":0", set_as_default=False)
    try:
        r = ES(**CFG, client=c)
        r.step(GENS)
        assert_same(fingerprint(r), inline_run)
    finally:
        c.close()


@pytest.mark.parametrize("tasks_per_worker, per_task", [(1, 3), (2, 2), (3, 1), (100, 1)])
def test_task_batching_never_changes_a_number(client, inline_run, tasks_per_worker, per_task):
    r = ES(**CFG, client=client, tasks_per_worker=tasks_per_worker)
    r.step(GENS)
    history = r.history
    assert (history.pairs_per_task == per_task).all()  # 6 pairs over 2 workers
    assert (history.tasks == -(-6 // per_task)).all()
    assert (history.task_workers == 2).all()  # every worker ran pairs every generation
    assert_same(fingerprint(r), inline_run)


def test_resume_continues_bitwise(tmp_path, client, inline_run):
    r = ES(**CFG)
    r.step(2)
    r.save(tmp_path / "ck.npz")
    resumed = ES.load(tmp_path / "ck.npz", client=client)  # resumed on a cluster
    assert resumed.iteration == 2 and len(resumed.history) == 2
    resumed.step(GENS - 2)
    assert_same(fingerprint(resumed), inline_run)


def test_checkpoint_restores_controls_and_change_log(tmp_path):
    r = ES(**CFG)
    r.step(1)
    r.controls.set(lr=0.01, shaping="sign")
    r.step(1)
    r.save(tmp_path / "ck.npz")
    back = ES.load(tmp_path / "ck.npz")
    assert back.controls["lr"] == 0.01 and back.controls["shaping"] == "sign"
    assert back.controls.version == r.controls.version
    assert back.changes.to_dict() == r.changes.to_dict()
    assert back.wall_time == r.wall_time and back.name == r.name
    # the checkpoint is plain arrays + JSON: loads with allow_pickle=False
    with np.load(tmp_path / "ck.npz", allow_pickle=False) as z:
        assert "theta" in z.files and z["theta"].dtype == np.float32


def test_checkpoint_of_another_algorithm_is_refused(tmp_path):
    save_checkpoint(tmp_path / "apex.npz", "ApeX", {"x": 1}, {"w": np.zeros(3)})
    with pytest.raises(CheckpointError, match="holds a 'ApeX' run, not 'ES'"):
        ES.load(tmp_path / "apex.npz")


def test_damaged_checkpoints_are_refused(tmp_path):
    r = ES(**CFG)
    r.step(1)
    good = r.save(tmp_path / "ck.npz")
    data = good.read_bytes()
    (tmp_path / "trunc.npz").write_bytes(data[: len(data) // 2])
    with pytest.raises(CheckpointError, match="damaged or not an esnb checkpoint"):
        ES.load(tmp_path / "trunc.npz")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(CheckpointError):
        ES.load(tmp_path / "text.npz")
    with pytest.raises(FileNotFoundError):
        ES.load(tmp_path / "missing.npz")
    # arrays altered after saving: the digest no longer matches
    meta, arrays = load_checkpoint(good)
    with zipfile.ZipFile(good) as z:
        doc = json.loads(np.frombuffer(z.read("__meta__.npy")[128:], np.uint8).tobytes())
    arrays["theta"] = arrays["theta"] + 1
    np.savez(tmp_path / "tampered.npz", __meta__=np.frombuffer(json.dumps(doc).encode(), np.uint8),
             **arrays)
    with pytest.raises(CheckpointError, match="digest"):
        ES.load(tmp_path / "tampered.npz")
    # a consistent file whose shapes do not fit the run it declares
    arrays["theta"] = np.zeros(5, np.float32)
    save_checkpoint(tmp_path / "shape.npz", "ES", meta, arrays)
    with pytest.raises(CheckpointError, match="does not match a ES run"):
        ES.load(tmp_path / "shape.npz")


def test_objects_are_never_unpickled(tmp_path):
    np.savez(tmp_path / "obj.npz", __meta__=np.array([{"evil": 1}], dtype=object))
    with pytest.raises(CheckpointError):
        ES.load(tmp_path / "obj.npz")
