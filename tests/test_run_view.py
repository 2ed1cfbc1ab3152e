"""One view of a run (:mod:`esnb.views.protocol`): a local runner and an attached run offer
every member the figure, the live plot, the panel and the dashboard read."""

from __future__ import annotations

import inspect
import re

from conftest import SMALL_NOISE

import esnb
from esnb.remote.attach import AttachedControls, AttachedRun
from esnb.runners.base import Runner
from esnb.views.protocol import ControlsView, RunView, SteeredRun


def members(protocol: type) -> set[str]:
    """The names a protocol asks for (its annotations, methods and properties, inherited)."""
    out: set[str] = set()
    for cls in protocol.__mro__:
        if cls in (object,) or not getattr(cls, "_is_protocol", False):
            continue
        out |= set(getattr(cls, "__annotations__", {}))
        out |= {k for k, v in vars(cls).items()
                if not k.startswith("_") and (callable(v) or isinstance(v, property))}
    return out


def test_the_protocols_name_what_the_views_read():
    assert members(RunView) >= {"history", "records", "changes", "controls", "state",
                                "panels", "dashboard_link", "plot", "iteration_column"}
    assert members(SteeredRun) - members(RunView) >= {"start", "pause", "resume", "step",
                                                      "stop", "acting_policy", "video"}
    assert members(ControlsView) == {"schema", "version", "as_dict", "set"}


def test_a_local_runner_is_a_steered_run():
    runner = esnb.ES("CartPole-v1", client=False, population=8, noise_size=SMALL_NOISE)
    runner.step(1)
    for name in members(SteeredRun):
        assert hasattr(runner, name), name
    for name in members(ControlsView):
        assert hasattr(runner.controls, name), name
    assert runner.dashboard_link is None  # inline
    assert [p.title for p in runner.panels()][:2] == ["return vs {x}", "return vs {x}"]
    assert isinstance(Runner.drawing, str) and isinstance(Runner.renderer, str)


def test_an_attached_run_is_a_steered_run():
    """Checked on the class (an attached run needs a served one: tests/test_attach.py): every
    member is the class's, or set by its constructor."""
    made = {m for line in inspect.getsource(AttachedRun.__init__).splitlines()
             for m in re.findall(r"self\.(\w+)", line.split("=")[0])}
    for name in members(SteeredRun):
        assert hasattr(AttachedRun, name) or name in made, name
    for name in members(ControlsView):
        assert hasattr(AttachedControls, name), name
