"""esnb.AESRL on real LocalClusters (the asynchronous loop, live rules, faults, checkpoints)
and in this process (reproducible), its settings and its command line."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from esnb.aes.rules import MEAN_RULES, call_rule
from esnb.record import load_checkpoint
from esnb.runners.aesrl import AESRL, AESRLConfig, CEMRLConfig

#: one test process runs this file: its module-scoped run/cluster is made once, not per process
pytestmark = pytest.mark.xdist_group("aes-runner")

#: InvertedPendulum (obs 4, act 1, short episodes) with small networks: fast on 2 busy cores
SMALL = dict(actor_hidden=(16, 16), critic_hidden=(32, 32), rl_start_step=300,
             critic_chunk=100, eval_episodes=2, max_episode_steps=100, batch_size=32,
             critic_exclusive=False)
ENV = "InvertedPendulum-v5"
SWITCH_AT = 12  # the mean rule changes after this update
BUDGET = 1500


def recomputed_p(row, r=1000.0, f_b=1000.0):
    return call_rule(MEAN_RULES, row["mean_rule"], row["f_z"], row["f_mu"], r=r, p_pos=1.0,
                     p_neg=0.0, f_b=f_b)


@pytest.fixture(scope="module")
def run(client, tmp_path_factory):
    """One run shared by the tests below: 1,500 env steps, the mean rule switched mid-run."""
    runner = AESRL(ENV, seed=0, client=client, name="aes-test", **SMALL)
    mu0 = runner.mu.copy()

    def switch(row):
        if row["update"] == SWITCH_AT:
            runner.controls.set(mean_rule="fixed_linear")

    runner.add_observer(switch)
    runner.start(env_steps=BUDGET).wait(timeout=600)
    path = tmp_path_factory.mktemp("aes") / "run.npz"
    runner.save(path)
    yield runner, mu0, path
    runner.close()


@pytest.mark.slow
def test_async_loop_keeps_in_flight_and_applies_each_result_once(run):
    runner, mu0, _ = run
    h = runner.history
    c = runner.counters
    assert list(h["update"]) == list(range(1, len(h) + 1))
    assert h.individual.is_unique                        # never applied twice
    assert c["duplicates"] == 0 and runner.in_flight == 0
    assert c["created"] == len(h) + c["cancelled"] + c["dropped"]
    assert c["env_steps"] == h.length.sum() >= BUDGET
    # ~2x the worker threads in flight while the budget is far
    target = int(h.target_in_flight.iloc[0])
    assert target == 2 * 2
    # (the runner stops topping up once the episodes in flight would reach the budget)
    early = h[h.env_steps < BUDGET - target * SMALL["max_episode_steps"]]
    assert len(early) > len(h) // 3
    off = early[early.in_flight != target]
    assert off.empty, list(zip(off["update"], off.env_steps, off.in_flight, off.length))
    assert (h.in_flight <= target).all()
    # asynchrony: some individuals were sampled from a mean that has moved since
    assert (h.staleness >= 0).all() and h.staleness.max() >= 1
    assert h.mu_version.iloc[-1] == h.applied.sum()
    assert not np.array_equal(runner.mu, mu0)


def test_rl_individuals_critic_and_evaluation_budget(run):
    runner, _, _ = run
    h = runner.history
    rl = h[h.kind == "RL"]
    assert len(rl) > 5 and (h.kind == "ES").sum() > 5
    assert (rl.actor_steps > 0).all() and (h[h.kind == "ES"].actor_steps == 0).all()
    assert (rl.p_rl > 0).all()
    # no RL individual before the warm-up: the first one is created after 300 env steps
    first_rl = rl.index[0]
    assert h.env_steps.iloc[first_rl - 1] >= 300 - h.length.max() * 4
    # the critic: never more than one update per collected env step, versions published
    assert (h.critic_updates <= h.env_steps).all()
    assert h.critic_updates.iloc[-1] >= 0.5 * BUDGET
    assert h.critic_version.is_monotonic_increasing
    assert (rl.critic_version_used >= 0).all() and rl.critic_version_used.max() > 0
    # f(mu) episodes are counted apart from the training budget
    assert h.eval_steps.iloc[-1] > 0 and runner.counters["eval_steps"] == h.eval_steps.iloc[-1]
    assert h.f_mu.notna().all()


def test_every_update_is_logged_and_matches_its_rule(run):
    runner, _, _ = run
    h = runner.history
    applied = h[h.applied]
    for _, row in applied.iterrows():
        assert row["p"] == pytest.approx(recomputed_p(row), abs=1e-12)
    for col in ("p", "f_z", "f_mu", "kind", "staleness", "var_mean", "var_min", "var_max",
                "mean_rule", "var_rule"):
        assert col in h
    assert runner.plot() is not None  # the live view's drawing, with AES-RL's own panels


def test_switching_the_mean_rule_takes_effect_at_the_next_completion(run):
    runner, _, _ = run
    h = runner.history
    assert (h.mean_rule[h["update"] <= SWITCH_AT] == "relative_baseline").all()
    assert (h.mean_rule[h["update"] > SWITCH_AT] == "fixed_linear").all()
    ch = runner.changes
    assert len(ch) == 1
    change = ch.iloc[0]
    assert (change["name"], change["old"], change["new"]) == (
        "mean_rule", "relative_baseline", "fixed_linear")
    assert change["update"] == SWITCH_AT + 1
    # fixed_linear with p_neg = 0 never moves toward a worse individual
    after = h[(h["update"] > SWITCH_AT) & h.applied]
    assert ((after.f_z <= after.f_mu) == (after.p == 0)).all()


def _count_released_actor_calls(dask_worker):
    """On a worker: count from now on the calls that reached an actor already released
    (the worker logs each as an error with a ``KeyError`` for the actor's key)."""
    import logging

    class Count(logging.Handler):
        def emit(self, record):
            if "esnb-replay" in repr(record.exc_info) + record.getMessage():
                dask_worker.esnb_released_actor_calls += 1

    if not hasattr(dask_worker, "esnb_released_actor_calls"):
        dask_worker.esnb_released_actor_calls = 0
        for name in ("distributed", "tornado"):
            logging.getLogger(name).addHandler(Count(logging.ERROR))


def _released_actor_calls(client) -> int:
    return sum(client.run(lambda dask_worker: dask_worker.esnb_released_actor_calls).values())


def test_checkpoint_round_trip_continues(run, client):
    runner, _, path = run
    loaded = AESRL.load(path, client=client)
    assert np.array_equal(loaded.mu, runner.mu) and np.array_equal(loaded.var, runner.var)
    assert loaded.counters["env_steps"] == runner.counters["env_steps"]
    assert loaded.controls["mean_rule"] == "fixed_linear"
    replay = loaded._replay_restore  # the replay file the checkpoint names, checked on load
    assert os.path.exists(replay["path"])
    assert os.path.dirname(replay["path"]) == os.path.dirname(str(path))
    assert replay["inserted"] >= runner.counters["env_steps"] > 0
    try:
        loaded.step(3)
        h = loaded.history
        assert list(h["update"][-3:]) == [len(h) - 2, len(h) - 1, len(h)]
        assert h["update"].iloc[-1] == runner.iteration + 3
        assert loaded.counters["critic_updates"] >= runner.counters["critic_updates"]
    finally:
        loaded.close()


@pytest.mark.slow
def test_closing_a_finished_run_waits_for_its_cancelled_individuals(client):
    """A run that spent its budget cancels the individuals in flight, but Dask cannot stop a
    running task: they still push transitions. The replay is released only once they have left
    the workers; released under them, every push logged a KeyError traceback on the worker."""
    client.run(_count_released_actor_calls)
    before = _released_actor_calls(client)
    runner = AESRL(ENV, seed=1, client=client, name="aes-close", **SMALL)
    runner.start(env_steps=1200).wait(timeout=600)
    assert runner.counters["cancelled"] > 0  # there were individuals to wait for
    runner.close()
    time.sleep(1.0)
    assert _released_actor_calls(client) == before


@pytest.mark.parametrize("change, match", [
    ({"mean_rule": "linear"}, "mean_rule must be one of 'one_plus_one', 'fixed_linear'"),
    ({"var_rule": "adaptive"}, "var_rule must be one of .*'online_adaptive'"),
    ({"r": 0.0}, r"r must be a number in \(0"),
    ({"r": -3.0}, r"r must be a number in \(0"),
    ({"p_desired": 1.5}, r"p_desired must be a number in \[0, 1\]"),
    ({"p_desired": -0.1}, r"p_desired must be a number in \[0, 1\]"),
    ({"var_floor": 0.0}, r"var_floor must be a number in \(0"),
    ({"f_b_relative": float("nan")}, "f_b_relative"),
])
def test_bad_input_is_refused_and_changes_nothing(client, change, match):
    runner = AESRL(ENV, client=client, **SMALL)
    before = (runner.controls.as_dict(), runner.controls.version, runner.mu.copy(),
              runner.var.copy())
    with pytest.raises(ValueError, match=match):
        runner.controls.set(**change)
    assert runner.controls.as_dict() == before[0] and runner.controls.version == before[1]
    assert np.array_equal(runner.mu, before[2]) and np.array_equal(runner.var, before[3])
    with pytest.raises(ValueError, match=match):
        AESRL(ENV, client=client, **SMALL, **change)


def test_needs_a_box_action_space():
    with pytest.raises(ValueError, match="need a Box action space; CartPole-v1 has Discrete"):
        AESRL("CartPole-v1", client=False)


def _inline_run(seed: int, env_steps: int = 1000) -> AESRL:
    runner = AESRL(ENV, seed=seed, client=False, name=f"aes-inline-{seed}", **SMALL)
    runner.start(env_steps=env_steps).wait(timeout=600)
    runner.close()
    return runner


@pytest.mark.slow
def test_inline_aesrl_is_reproducible_and_keeps_its_books():
    """In this process every task has finished when it is submitted: no cluster, and the same
    seed gives the same run (two individuals in flight, so updates are still one behind)."""
    a, b = _inline_run(0), _inline_run(0)
    h = a.history
    cols = ["kind", "individual", "f_z", "f_mu", "p", "staleness", "length", "actor_steps",
            "critic_updates", "critic_version", "var_mean"]
    pd.testing.assert_frame_equal(h[cols], b.history[cols])
    assert np.array_equal(a.mu, b.mu) and np.array_equal(a.var, b.var)
    assert not np.array_equal(a.mu, _inline_run(1, 300).mu)
    c = a.counters
    assert list(h["update"]) == list(range(1, len(h) + 1)) and h.individual.is_unique
    assert c["created"] == len(h) + c["cancelled"] + c["dropped"] and a.in_flight == 0
    assert c["env_steps"] == h.length.sum() >= 1000
    assert (h.target_in_flight == 2).all() and h.staleness.max() >= 1
    rl = h[h.kind == "RL"]
    assert len(rl) > 3 and (rl.actor_steps > 0).all() and rl.critic_version_used.max() > 0
    assert (h.critic_updates <= h.env_steps).all() and h.critic_updates.iloc[-1] >= 500
    assert h.mu_version.iloc[-1] == h.applied.sum() and h.f_mu.notna().all()
    applied = h[h.applied]
    for _, row in applied.iterrows():
        assert row["p"] == pytest.approx(recomputed_p(row), abs=1e-12)


def test_transitions_a_lost_replay_refused_are_counted_and_the_fitness_kept(monkeypatch):
    """An individual whose replay is gone when it pushes keeps its fitness (the update still
    happens) and its transitions are counted in ``lost_transitions``; any other error in the
    push is a bug and is raised."""
    from esnb.replay.server import ReplayLost, ReplayServer
    from esnb.runners.aesrl.tasks import evaluate_individual
    from esnb.runners.executor import LocalProxy

    refused, add = [], ReplayServer.add

    def flaky_add(self, batch, *args, **kwargs):
        if len(refused) < 3 and len(self.buffer) > 0:
            refused.append(len(batch["obs"]))
            raise ReplayLost("the replay's worker is gone")
        return add(self, batch, *args, **kwargs)

    monkeypatch.setattr(ReplayServer, "add", flaky_add)
    runner = AESRL(ENV, seed=2, client=False, **SMALL)
    runner.step(12)
    h, c = runner.history, runner.counters
    assert len(refused) == 3 and h.applied.sum() >= 10
    in_flight = runner.in_flight * SMALL["max_episode_steps"]
    assert sum(refused) - in_flight <= c["lost_transitions"] <= sum(refused)
    assert c["lost_transitions"] > 0
    # every applied individual's transitions were stored or refused (and those in flight too)
    assert runner.replay.call("stats")["size"] + sum(refused) >= h.length.sum()
    runner.close()

    class Broken:
        def add(self, batch):
            raise KeyError("a bug, not a lost worker")

    with pytest.raises(KeyError, match="a bug"):
        evaluate_individual(runner.task_config, runner.mu, 3, 0.1, LocalProxy(Broken()))


def test_preset_paper_takes_the_published_values():
    cfg = AESRLConfig.build(preset="paper", env="Swimmer-v5")
    assert (cfg.actor_hidden, cfg.critic_hidden) == ((400, 300), (400, 300))
    assert cfg.batch_size == 256 and cfg.replay_capacity == 200_000
    assert (cfg.a_noise, cfg.k_rl, cfg.var_init, cfg.var_floor) == (0.1, 50.0, 1e-3, 1e-5)
    assert (cfg.mean_rule, cfg.var_rule) == ("relative_baseline", "online_adaptive")
    # Table 5 and appendix C for the env, in both presets
    assert (cfg.r, cfg.f_b_absolute, cfg.f_b_relative, cfg.p_desired) == (48.0, -48.0, 48.0, 0.1)
    laptop = AESRLConfig.build(env="Hopper-v5", r=5.0)
    assert (laptop.actor_hidden, laptop.batch_size) == ((64, 64), 100)
    assert (laptop.r, laptop.f_b_relative, laptop.p_desired) == (5.0, 600.0, 0.5)
    cem = CEMRLConfig.build(preset="paper")
    assert cem.replay_capacity == 1_000_000 and cem.antithetic and cem.batch_size == 100
    assert (cem.pop_size, cem.n_rl, cem.eval_episodes, cem.a_noise) == (10, 5, 10, 0.0)
    assert (cem.actor_hidden, cem.critic_hidden) == ((400, 300), (400, 300))
    runner = AESRL("HalfCheetah-v5", preset="paper", client=False)
    assert runner.spec.hidden == (400, 300) and runner.td3.batch_size == 256
    assert runner.controls["r"] == 2000.0 and runner.config_dict()["batch_size"] == 256


def _esnb(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "esnb.cli", *args], capture_output=True,
                          text=True, timeout=timeout)


@pytest.mark.slow
def test_cli_help_and_a_tiny_inline_run(tmp_path):
    text = " ".join(_esnb("train", "aesrl", "--help").stdout.split())
    for flag, shown in (("--batch-size", "[default: 100; paper: 256]"),
                        ("--actor-hidden", "[default: 64 64; paper: 400 300]"),
                        ("--mean-rule", "[default: relative_baseline; live]"),
                        ("--r R", "[default: none; live]"), ("--steps N", "env steps")):
        assert flag in text and shown in text[text.index(flag):], flag
    out = tmp_path / "run"
    p = _esnb("train", "aesrl", "--env", ENV, "--workers", "0", "--steps", "300",
              "--actor-hidden", "16", "16", "--critic-hidden", "16", "16", "--rl-start-step",
              "100", "--critic-chunk", "50", "--batch-size", "16", "--max-episode-steps", "50",
              "--eval-episodes", "2", "--final-eval", "2", "--no-progress", "--out", str(out))
    assert p.returncode == 0, p.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["config"]["batch_size"] == 16 and summary["config"]["r"] == 1000.0
    assert summary["final_eval_episodes"] == 2
    h = pd.read_csv(out / "history.csv")
    assert h.env_steps.iloc[-1] >= 300 and (h.kind == "RL").any()
    record = load_checkpoint(out / "checkpoint.npz")[0]["replay"]
    assert (out / record["file"]).exists() and record["inserted"] >= h.env_steps.iloc[-1]


async def _sigkill():
    os.kill(os.getpid(), signal.SIGKILL)


def _kill(client, address):
    """SIGKILL the worker process at ``address`` (its nanny starts a new one)."""
    client.run(_sigkill, workers=[address], wait=False)


def _mid_run(runner, updates: int = 3, timeout: float = 120.0) -> None:
    """Return once the (re)started run has applied ``updates`` more updates: evaluations and
    critic chunks are in flight then (a fixed sleep raced the run's end on a fast machine)."""
    start, t0 = runner.dist.updates, time.monotonic()
    while runner.dist.updates < start + updates:
        assert runner.running and time.monotonic() - t0 < timeout, "the run ended too soon"
        time.sleep(0.05)


@pytest.mark.slow
def test_killing_workers_mid_run_loses_no_update_state(fresh_client, caplog):
    """Kill the worker holding the replay (it also evaluates), then the critic's worker:
    evaluations are rerun or resubmitted, replay and critic recreated, and the updates go on
    without a gap or a double."""
    caplog.set_level(logging.WARNING, logger="esnb.aes")
    runner = AESRL(ENV, seed=1, client=fresh_client, name="aes-kill", **SMALL)
    try:
        runner.start(env_steps=600).wait(timeout=600)
        state = (runner.mu.copy(), runner.var.copy(), runner.dist.updates)
        replay_worker = runner.replay.address
        runner.start(env_steps=600)
        _mid_run(runner)
        _kill(fresh_client, replay_worker)
        runner.wait(timeout=600)
        critic_worker = runner.critic.address
        # a longer phase: the loss must be noticed (at the next critic result) before the end
        runner.start(env_steps=1200)
        _mid_run(runner)
        _kill(fresh_client, critic_worker)
        runner.wait(timeout=600)
        h = runner.history
        c = runner.counters
        assert list(h["update"]) == list(range(1, len(h) + 1))
        assert h.individual.is_unique and c["duplicates"] == 0
        assert c["replay_recreations"] >= 1 and c["critic_recreations"] >= 1
        assert c["created"] == len(h) + c["cancelled"] + c["dropped"]
        assert c["env_steps"] >= 2400 and c["env_steps"] == h.length.sum()
        # the update state before the kills is where the later updates started from
        first_after = h[h["update"] > state[2]].iloc[0]
        assert first_after["mu_version"] == state[2] + int(first_after["applied"])
        assert runner.dist.updates == h.applied.sum()
        assert h.critic_updates.iloc[-1] >= h.critic_updates[h["update"] == state[2]].iloc[0]
        assert "recreated" in caplog.text
        # the transitions each loss took: inserted before it - inserted in what it restored
        reports = runner.replay.recoveries
        assert len(reports) == c["replay_recreations"] >= 1
        assert all(r["lost"] == r["inserted_before"] - r["inserted_restored"] for r in reports)
        assert runner.replay.lost_items == sum(r["lost"] for r in reports) >= c["replay_lost"]
        assert c["replay_lost"] > 0 and h.replay_lost.is_monotonic_increasing
    finally:
        runner.close()
