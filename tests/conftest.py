"""Shared fixtures: real LocalClusters (worker processes), small noise tables."""

from __future__ import annotations

import logging

import pytest

SMALL_NOISE = 1_000_000  # 4 MB: plenty for test policies, builds in ~10 ms


@pytest.fixture(scope="session")
def client():
    """A 2-worker LocalCluster of real processes, shared by the session.

    It is *not* the default client, so runners created with ``client=None`` in other tests
    really run inline. Tests that kill or add workers make their own cluster.
    """
    from esnb.cluster import make_client

    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()


@pytest.fixture
def fresh_client():
    """A private 2-worker LocalCluster for tests that break or reshape it."""
    from esnb.cluster import make_client

    c = make_client(2, dashboard_address=":0", set_as_default=False,
                    silence_logs=logging.ERROR)
    yield c
    c.close()
