"""``esnb bench apex --env``: one variant on another task (its figures come from full runs, in
BENCHMARKS.md; the bench's budget is seconds, so here only what it refuses)."""

from esnb.cli import main


def test_env_and_target_take_one_variant(capsys):
    for flags in (["--env", "MinAtar/Breakout-v1"], ["--target", "5"]):
        assert main(["bench", "apex", *flags]) == 2
        err = capsys.readouterr().err.strip()
        assert err == ("esnb: error: --env and --target take one variant: --variant dqn or "
                       "dpg")
