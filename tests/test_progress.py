"""The progress bar of ``esnb train``: every budget kind of every algorithm moves and ends at
100%, counters print as whole numbers, and names print as people write them."""

import io
import re

import pytest

from esnb.runners.registry import algorithms
from esnb.session.progress import Progress

#: small runs, inline: (env, settings)
RUNS = {
    "es": ("CartPole-v1", dict(population=10, noise_size=200_000)),
    "aesrl": ("InvertedPendulum-v5", dict(actor_hidden=(16, 16), critic_hidden=(32, 32),
                                          rl_start_step=300, critic_chunk=100,
                                          eval_episodes=2, max_episode_steps=100,
                                          batch_size=32, critic_exclusive=False)),
    "cemrl": ("InvertedPendulum-v5", dict(actor_hidden=(16, 16), critic_hidden=(32, 32),
                                          pop_size=6, rl_start_step=60, max_episode_steps=60,
                                          eval_episodes=2, batch_size=32)),
    "apex": ("CartPole-v1", dict(num_actors=2, min_size=300, eval_interval=0,
                                 replay_checkpoint="", learner_chunk=8,
                                 iteration_seconds=0.01)),
    "apex-dpg": ("InvertedPendulum-v5", dict(num_actors=2, min_size=300, eval_interval=0,
                                             replay_checkpoint="", learner_chunk=8,
                                             iteration_seconds=0.01)),
    "impala": ("CartPole-v1", dict(hidden=(32, 32), envs_per_actor=4, batch_size=8,
                                   unroll_length=10, updates_per_iteration=5,
                                   eval_interval=0)),
    "eorl": ("bitflip", dict(env_kwargs={"n_bits": 4})),
}
#: each budget's amount: a few iterations
AMOUNTS = {"generations": 3, "updates": 4, "learner_steps": 24, "seconds": 2, "episodes": 12}
#: aesrl: InvertedPendulum's early episodes are a few steps each (each one an update with its
#: evaluation); 400 still runs ~25 RL individuals after rl_start_step=300
STEPS = {"es": 1500, "aesrl": 400, "cemrl": 400, "apex": 1500, "apex-dpg": 1500,
         "impala": 1200, "eorl": 60}
CASES = [(name, counter) for name, algo in algorithms().items()
         for counter, _ in algo.budgets.values()]


def test_every_algorithm_and_budget_is_covered():
    assert set(RUNS) == set(algorithms())
    assert {c for _, c in CASES} - {"env_steps"} <= set(AMOUNTS)


def bar_states(text: str) -> list[str]:
    return [s.strip() for line in text.splitlines() for s in line.split("\r") if "|" in s]


@pytest.mark.slow
@pytest.mark.parametrize("name, counter", CASES)
def test_the_bar_of_every_budget_moves_and_ends_at_100_percent(name, counter):
    algo = algorithms()[name]
    env, settings = RUNS[name]
    runner = algo.load_runner()(env, client=False, seed=1, **settings)
    amount = STEPS[name] if counter == "env_steps" else AMOUNTS[counter]
    out = io.StringIO()
    progress = Progress(runner, counter, amount, file=out)
    progress.bar.mininterval = 0  # every iteration drawn: the test sees each state
    try:
        runner.start(**{counter: amount})
        runner.wait()
    finally:
        progress.close()
        runner.close()
    assert runner.state == "finished", runner.error
    states = bar_states(out.getvalue())
    assert states[-1].startswith("100%|"), states[-3:]
    done = runner._progress()[counter]
    assert done >= amount
    # the bar's counter is the budget's, written as a whole number with separators
    assert f"| {done:,.0f}/{max(done, amount):,.0f} {counter.replace('_', ' ')}" in states[-1]
    # ...and it moved: some state between the first and the last shows a partial count
    shown = [float(re.search(r"\| ([\d,]+)/", s).group(1).replace(",", "")) for s in states]
    assert any(0 < x < done for x in shown), states
    if counter == "learner_steps" or name in ("apex", "apex-dpg"):
        assert ".0/" not in states[-1]  # integer counters are not printed as floats
    if name in ("apex", "apex-dpg"):
        last = states[-1]
        assert "replay " in last and "/131k" in last  # the replay's fill, of its capacity
        if counter != "learner_steps":
            assert " updates" in last  # the learner's updates


def test_names_are_written_as_people_write_them():
    titles = {name: algo.load_runner().title for name, algo in algorithms().items()}
    assert titles["apex"] == "Ape-X" and titles["apex-dpg"] == "Ape-X DPG"
    assert titles["impala"] == "IMPALA" and titles["aesrl"] == "AES-RL"
    assert titles["cemrl"] == "CEM-RL" and titles["es"] == "OpenAI-ES"
    # the checkpoint's name is unchanged: old checkpoints still load
    assert algorithms()["apex"].load_runner().algorithm == "ApeX"


def es_lines(generations: int, said_total: int, label: str, **kwargs) -> list[str]:
    """The lines a small inline ES run of ``generations`` says against a total of
    ``said_total`` (``close()`` called twice: it says where the run ended once)."""
    env, settings = RUNS["es"]
    runner = algorithms()["es"].load_runner()(env, client=False, seed=1, **settings)
    out = io.StringIO()
    progress = Progress(runner, "generations", said_total, file=out, lines=label, **kwargs)
    try:
        runner.start(generations=generations)
        runner.wait()
    finally:
        progress.close()
        progress.close()
        runner.close()
    text = out.getvalue()
    assert "\r" not in text and "|" not in text  # none of the bar's carriage returns
    return text.splitlines()


def test_lines_say_each_quarter_of_the_budget_and_the_time_left():
    """Progress as lines (a bench's seeds, a log file): one line each time the counter passes
    another ``every`` of the total, each with the counters, the returns and the time left at the
    rate so far."""
    lines = es_lines(10, 10, "es-cartpole seed 1", every=0.25)
    # said at the first generation (10%), then at the first to pass 25%, 50%, 75% and 100%
    heads = [re.match(r"esnb: es-cartpole seed 1: (\d+)% \((\d+)/10 generations\), ret ",
                      line) for line in lines]
    assert all(heads), lines
    assert [(int(h.group(1)), int(h.group(2))) for h in heads] == [
        (10, 1), (30, 3), (50, 5), (80, 8), (100, 10)]
    assert all(re.search(r", \d+:\d\d left$", line) for line in lines[1:-1]), lines
    assert not lines[0].endswith("left") and not lines[-1].endswith("left")  # no rate; done


def test_lines_say_each_twentieth_once():
    """The default: a line at each 5% of the total, each once (parts counted in integers; in
    floats 0.25 // 0.05 is 4.0, and the 25%, 45%, 50% ... lines were said twice)."""
    said = [int(re.match(r"esnb: es seed 1: \d+% \((\d+)/40 generations\)", line).group(1))
            for line in es_lines(40, 40, "es seed 1")]
    assert said == [1, *range(2, 41, 2)]


def test_lines_say_where_a_stopped_run_ended_once():
    """A run stopped between two lines (a signal): close() says where it stopped, once."""
    lines = es_lines(3, 100, "es seed 1")  # the run's own budget ends it at 3 of the 100 said
    assert [line.split(": ")[2].split(",")[0] for line in lines] == [
        "1% (1/100 generations)", "3% (3/100 generations)"], lines
