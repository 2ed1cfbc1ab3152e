"""The executor layer: the same calls inline and on a real LocalCluster give the same results,
actors come back after their worker dies, channels reach tasks, background loops run."""

import logging
import os
import signal
import time

import distributed
import pytest

from esnb.runners.executor import InlineExecutor, attach, make_executor, resolve_client
from esnb.runners.executor.on_dask import DaskExecutor


class Counter:
    """A small actor."""

    def __init__(self, start: int = 0):
        self.n = start

    def add(self, k: int) -> int:
        self.n += k
        return self.n

    def pid(self) -> int:
        return os.getpid()


def square(x):
    return x * x


def fail(x):
    raise ValueError(f"bad {x}")


def through_actor(handle, k):
    """A task calling an actor it was given a handle of: the same code inline and on Dask."""
    return attach(handle).add(k).result(timeout=10)


def read_channel(channel):
    return channel.get(timeout=10)


def counting_loop(channel, limit):
    """A background loop: counts until the channel says stop (or ``limit``)."""
    n = 0
    while True:
        n += 1
        yield n
        if n >= limit or channel.get(timeout=10).get("stop"):
            return n


@pytest.fixture(params=["inline", "dask"])
def executor(request, client):
    return InlineExecutor() if request.param == "inline" else DaskExecutor(client)


def test_make_executor_decides_once():
    assert isinstance(make_executor(False), InlineExecutor)
    assert isinstance(make_executor(None), InlineExecutor)  # no default client in tests
    ex = InlineExecutor()
    assert make_executor(ex) is ex and resolve_client(ex) is None
    with pytest.raises(TypeError, match="client must be a distributed.Client"):
        make_executor("tcp://127.0.0.1:1")


def test_run_keeps_submission_order_and_put_roundtrips(executor):
    assert executor.run([(square, (i,)) for i in range(7)], "sq") == [i * i for i in range(7)]
    handle = executor.put([1, 2, 3])
    assert executor.run([(len, (handle,))])[0] == 3
    executor.release(handle)
    assert executor.n_workers >= 1 and executor.threads() >= 1 and executor.workers()


def test_submit_errors_and_as_completed(executor):
    ok, bad = executor.submit(square, 3), executor.submit(fail, 4)
    ac = executor.as_completed()
    ac.add(ok)
    ac.add(bad)
    done = []
    deadline = time.monotonic() + 30
    while len(done) < 2 and time.monotonic() < deadline:
        done += ac.next_batch(block=False)
        time.sleep(0.01)
    assert {f.key for f in done} == {ok.key, bad.key}
    assert ok.result() == 9
    assert bad.status == "error" and "bad 4" in str(bad.exception())
    with pytest.raises(ValueError, match="bad 4"):
        bad.result()


def test_actors_are_called_directly_and_from_tasks(executor):
    ref = executor.actor(Counter, 10, key="esnb-test-counter")
    assert ref.submit("add", 5).result() == 15
    assert executor.run([(through_actor, (ref.handle(), 2))])[0] == 17
    assert not ref.lost
    ref.release()


def test_channels_reach_tasks(executor):
    ch = executor.channel("esnb-test-channel")
    ch.set({"x": 1})
    assert executor.run([(read_channel, (ch,))])[0] == {"x": 1}
    ch.publish(list(range(1000)))  # a large value: sent once as a task result
    assert executor.run([(read_channel, (ch,))])[0][-1] == 999
    ch.delete()


def test_background_loops_stop_when_told(executor):
    ch = executor.channel("esnb-test-loop")
    ch.set({"stop": False})
    fut = executor.background(counting_loop, ch, 10_000, key="esnb-test-loop-task")
    for _ in range(3):
        executor.turn()  # inline: three steps; on a cluster it runs by itself
    ch.set({"stop": True})
    executor.finish_background()
    n = fut.result(timeout=30)
    assert n >= 1 if executor.remote else n == 3
    ch.delete()


def test_an_actor_comes_back_after_its_worker_dies(fresh_client):
    ex = DaskExecutor(fresh_client)
    ref = ex.actor(Counter, 0, key="esnb-test-phoenix")
    first = ref.address
    pid = ref.submit("pid").result()
    os.kill(pid, signal.SIGKILL)  # the nanny restarts the process
    deadline = time.monotonic() + 60
    while not ref.lost and time.monotonic() < deadline:
        time.sleep(0.1)
    assert ref.lost and ref.confirm_lost()
    ref.create(100, exclude=(first,))
    assert ref.generation == 1 and ref.address != first and not ref.lost
    assert ref.submit("add", 1).result() == 101
    # the listing of live workers never comes back empty while workers exist
    assert all(len(ex.workers()) >= 1 for _ in range(20))


def test_an_actor_waits_for_its_resource_and_then_says_which_setting(client, caplog):
    """An actor that needs a worker resource (Ape-X's replay on the actor worker) waits for a
    worker with it, as long as ``esnb.cluster.actor-worker-wait`` says (a replaced actor
    worker's batch job may be queued), then fails naming that setting, its task cancelled."""
    import dask

    ex = DaskExecutor(client)
    with dask.config.set({"esnb.cluster.actor-worker-wait": 0.5}):
        with pytest.raises(TimeoutError, match="esnb.cluster.actor-worker-wait"):
            ex.actor(Counter, 0, key="esnb-test-unplaced", resources={"no-such": 1},
                     timeout=0.2)
    assert not any("esnb-test-unplaced" in str(k) for k in client.who_has())
    with dask.config.set({"esnb.cluster.actor-worker-wait": -1}):
        with pytest.raises(ValueError, match=r"esnb.cluster.actor-worker-wait .* must be a number"):
            ex.actor(Counter, 0, key="esnb-test-unplaced", resources={"no-such": 1})


def test_calls_are_placed_on_workers_that_take_tasks(fresh_client):
    """A worker being retired is not listed for placement (a call pinned to it would wait until
    it had gone); the background listing answers one call late, the first call at once."""
    ex = DaskExecutor(fresh_client)
    fresh_client.wait_for_workers(2, timeout=120)
    both = ex.addresses()
    assert len(both) == 2 and ex.addresses(recent=True) == both
    # retired without closing: the worker stays, in closing_gracefully, taking no new task
    fresh_client.retire_workers([both[0]], close_workers=False, remove=False)
    assert ex.addresses() == both[1:]
    assert ex.addresses(recent=True) == both  # fetched before the retirement
    assert ex.addresses(recent=True) == both[1:]
    assert ex.run([(square, (3,))], "placed", workers=both[1:]) == [9]
    with pytest.raises(ValueError, match="bad 1"):  # a call's own error is raised, not retried
        ex.run([(square, (2,)), (fail, (1,))], "placed", workers=both[1:] * 2)


def pid_and_double(x):
    return os.getpid(), 2 * x


def test_a_pinned_result_lost_with_its_worker_is_computed_again_elsewhere(fresh_client):
    """A pinned call that finished on a worker which then died, its result not yet fetched, is
    placed again on a live worker (recomputed where it was pinned, it would wait forever); so
    is a call the scheduler cancelled."""
    ex = DaskExecutor(fresh_client)
    fresh_client.wait_for_workers(2, timeout=120)
    target = ex.addresses()[0]
    pid = fresh_client.run(os.getpid, workers=[target])[target]
    calls = [(pid_and_double, (3,)), (pid_and_double, (4,))]
    futures = [ex._submit_call(fn, args, f"esnb-test-lost-{i}", target)
               for i, (fn, args) in enumerate(calls)]
    with fresh_client.as_current():
        distributed.wait(futures, timeout=60)
    assert all(f.status == "finished" for f in futures)
    os.kill(pid, signal.SIGKILL)  # the results go with the process; the nanny starts another
    fresh_client.cancel(futures[1])
    out = ex.pinned.gather(futures, calls, [target, target], "esnb-test-lost")
    assert [v for _, v in out] == [6, 8] and all(p != pid for p, _ in out)
    for f in futures:
        f.release()


def test_placement_waits_for_a_worker_that_takes_tasks(fresh_client):
    """With every worker being retired, a round's listing waits until a worker takes tasks."""
    ex = DaskExecutor(fresh_client)
    fresh_client.wait_for_workers(2, timeout=120)
    both = ex.addresses(recent=True)
    fresh_client.retire_workers(both, close_workers=False, remove=False)
    assert ex.addresses() == []
    fresh_client.cluster.scale(3)  # the two retired ones still count: one more starts
    assert ex.addresses(recent=True) == both  # fetched before the retirement
    joined = ex.addresses(recent=True)
    assert len(joined) == 1 and joined[0] not in both


def test_both_executors_implement_every_call_of_the_protocol(client):
    """The contract is one typed Protocol: every call it declares is the executor's own."""
    import inspect

    from esnb.runners.executor import Executor

    calls = [n for n, v in vars(Executor).items()
             if not n.startswith("_") and (callable(v) or isinstance(v, property))]
    assert {"submit", "run", "actor", "channel", "background", "on_every_worker"} <= set(calls)
    for executor in (InlineExecutor(), DaskExecutor(client)):
        assert isinstance(executor, Executor)
        for name in calls:  # defined by the executor itself, not inherited as a stub
            owner = next(c for c in type(executor).__mro__ if name in vars(c))
            assert owner is not Executor, (type(executor).__name__, name)
            if callable(getattr(executor, name)):
                proto = inspect.signature(getattr(Executor, name))
                mine = inspect.signature(getattr(type(executor), name))
                assert list(proto.parameters) == list(mine.parameters), (name, proto, mine)
    assert not isinstance(client, Executor)  # a Dask client is no executor


def stall_once(marker: str, release: str, x: int) -> int:
    """``2 * x``; the first call (no ``marker`` yet) blocks until ``release`` exists: a call
    that never finishes on its worker."""
    from pathlib import Path

    if not Path(marker).exists():
        Path(marker).touch()
        for _ in range(6000):  # bounded: the test releases it when done
            if Path(release).exists():
                break
            time.sleep(0.05)
    return 2 * x


def test_a_stalled_gather_after_the_workers_changed_places_its_calls_again(
        fresh_client, tmp_path, caplog):
    """A call on a live worker that never finishes, once a worker of the gather has left, is
    placed again on another worker (after ``stall_poll``); the log says what the scheduler
    knew of it."""
    import threading

    fresh_client.cluster.scale(3)
    fresh_client.wait_for_workers(3, timeout=120)
    ex = DaskExecutor(fresh_client)
    ex.pinned.stall_poll = 1.0
    a, b, _ = ex.addresses()
    marker, release = str(tmp_path / "started"), str(tmp_path / "release")
    calls = [(square, (5,)), (stall_once, (marker, release, 4))]
    futures = [ex._submit_call(fn, args, f"esnb-test-stall-{i}", where)
               for i, ((fn, args), where) in enumerate(zip(calls, [b, a]))]
    out: list = []
    gather = threading.Thread(target=lambda: out.append(
        ex.pinned.gather(futures, calls, [b, a], "esnb-test-stall")))
    try:
        with caplog.at_level(logging.WARNING, logger="esnb.cluster"):
            gather.start()
            with fresh_client.as_current():
                distributed.wait(futures[:1], timeout=60)
            fresh_client.retire_workers([b], close_workers=False, remove=False)
            gather.join(timeout=120)
        assert out == [[25, 8]]
        assert "no call finished" in caplog.text and "esnb-test-stall-1: processing" in caplog.text
    finally:
        open(release, "w").close()
        gather.join(timeout=60)
