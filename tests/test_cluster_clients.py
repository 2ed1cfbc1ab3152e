"""A Client whose start fails is gone before its error reaches the caller
(:func:`esnb.cluster.clients.start_client`): left to a later garbage collection, its
``__del__`` takes dask's class-wide LoopRunner lock, which the next Client's start may hold, and
the process waited on itself (a CI run stopped 10 minutes there)."""

import gc

import pytest
from distributed import Client, LocalCluster
from distributed.security import Security

from esnb.cluster.clients import start_client


def clients() -> list:
    return [c for c in gc.get_objects() if isinstance(c, Client)]


def test_a_client_refused_by_a_tls_scheduler_is_collected_and_the_next_one_starts():
    security = Security.temporary()
    with LocalCluster(n_workers=0, processes=False, security=security,
                      dashboard_address=None) as cluster:
        address = cluster.scheduler_address
        assert address.startswith("tls://")
        before = clients()  # held: none of them is collected, no id is reused
        for target, creds in ((address.replace("tls://", "tcp://"), None),
                              (address, Security.temporary())) * 3:
            with pytest.raises(Exception) as err:  # noqa: PT011 - dask's own: OSError, Timeout...
                start_client(target, security=creds, set_as_default=False, timeout=5)
            assert not isinstance(err.value, AssertionError)
            # the failed one closed and collected already
            assert {id(c) for c in clients()} == {id(c) for c in before}
        with start_client(address, security=security, set_as_default=False, timeout=5) as c:
            assert c.status == "running"
