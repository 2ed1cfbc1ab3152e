import threading

import pytest

from esnb.controls import Control, Controls


def make():
    return Controls([
        Control("sigma", "float", 0.02, low=0.0, low_open=True, high=1.0),
        Control("population", "int", 10, low=2,
                check=lambda v: None if v % 2 == 0 else "must be even"),
        Control("shaping", "choice", "a", choices=("a", "b")),
        Control("flag", "bool", False),
        Control("env", "str", "X", live=False),
    ])


def test_defaults_and_set_and_versions():
    c = make()
    assert c["sigma"] == 0.02 and c.version == 0
    assert c.set(sigma=0.1, population=4.0) == 1
    assert c["population"] == 4 and isinstance(c["population"], int)
    assert c.set(sigma=0.1) == 1  # no change, no new version
    snap = c.snapshot()
    c.set(shaping="b")
    assert snap["shaping"] == "a" and snap.version == 1  # a snapshot never moves
    assert [(ch.name, ch.old, ch.new) for ch in c.changes_since(0)] == [
        ("sigma", 0.02, 0.1), ("population", 10, 4), ("shaping", "a", "b")]


@pytest.mark.parametrize("kw, message", [
    ({"sigma": 0}, r"sigma must be a number in \(0, 1\], got 0"),
    ({"sigma": -1}, "sigma must be"),
    ({"sigma": float("nan")}, "sigma must be"),
    ({"sigma": "big"}, "sigma must be"),
    ({"population": 3}, "population must be even, got 3"),
    ({"population": 2.5}, "population must be an integer"),
    ({"shaping": "c"}, "shaping must be one of 'a', 'b'"),
    ({"flag": 1}, "flag must be True or False"),
    ({"env": "Y"}, "env is fixed for this run"),
    ({"nope": 1}, "unknown control.*'nope'.*known: sigma"),
])
def test_bad_values_are_refused_and_nothing_changes(kw, message):
    c = make()
    before = c.as_dict()
    with pytest.raises(ValueError, match=message):
        c.set(sigma=0.5, **kw) if "sigma" not in kw else c.set(population=4, **kw)
    assert c.as_dict() == before and c.version == 0


def test_construction_validates():
    with pytest.raises(ValueError, match="sigma must be"):
        Controls(make().schema, {"sigma": -0.1})


def test_subscribers_and_threads():
    c = make()
    seen = []
    unsubscribe = c.subscribe(lambda changes: seen.extend(changes))

    def worker(k):
        for i in range(100):
            c.set(sigma=(k * 100 + i + 1) / 1000)

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert c.version == len(c.changes) == len(seen) == 400
    assert sorted(ch.version for ch in c.changes) == list(range(1, 401))
    unsubscribe()
    c.set(sigma=0.9)
    assert len(seen) == 400
