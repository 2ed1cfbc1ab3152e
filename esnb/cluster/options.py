"""Keyword arguments of cluster classes from esnb's dask config."""

from __future__ import annotations

from esnb import config


def dashboard_address_for(address: str | None, host: str | None) -> str | None:
    """``address``, with the cluster's host filled in when it names only a port (False: no
    dashboard, None: the config's address)."""
    if address is False:
        return None
    address = address or config.get("cluster.dashboard-address")
    if address and str(address).startswith(":") and host:
        return f"{host}{address}"
    return address


def underscored(kwargs: dict) -> dict:
    """YAML keys as Python keyword names (``job-extra-directives`` -> ``job_extra_directives``)."""
    return {str(k).replace("-", "_"): v for k, v in dict(kwargs).items()}
