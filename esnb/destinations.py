"""Where a command writes, checked before any work starts: a folder to write into, a file to
write, a server to answer. Each check raises one ``ValueError`` line naming the flag (or
argument) and the path; nothing is left behind by a check.

Used by the run's pre-start checks (``--tensorboard DIR``, ``--mlflow URI``), ``esnb export
--out FILE`` and the MLflow tracker."""

from __future__ import annotations

import socket
import time
from pathlib import Path
from urllib.parse import urlsplit

#: seconds a server has to accept a connection (a probe, not the client's retries)
PROBE_TIMEOUT = 5.0


def _nearest(path: Path) -> Path:
    """``path``, or its nearest ancestor that exists (a dangling link counts as there)."""
    found = path
    while not (found.exists() or found.is_symlink()):
        if found.parent == found:
            break
        found = found.parent
    return found


def _probe_write(folder: Path) -> str | None:
    """Why nothing can be written into ``folder`` (None: a file was written and removed)."""
    probe = folder / f".esnb-write-check-{time.monotonic_ns()}"
    try:
        probe.write_bytes(b"")
        probe.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def check_folder(path, flag: str, given=None) -> Path:
    """``path`` is a folder that can be written into, or one that can be made: no part of it
    is a file, and its nearest existing folder takes a file (nothing is made here). The line
    names ``flag`` and ``given`` (default ``path``)."""
    path = Path(path)
    given = path if given is None else given
    there = _nearest(path)
    if there.exists() and not there.is_dir():
        what = "a file" if there.is_file() else "no folder"
        raise ValueError(f"{flag} {given}: {there} is {what}, not a folder")
    if not there.exists():
        raise ValueError(f"{flag} {given}: {there} is a link to nothing")
    why = _probe_write(there)
    if why is not None:
        raise ValueError(f"{flag} {given}: cannot write into {there} ({why})")
    return path


def check_file(path, flag: str, example: str = "") -> Path:
    """``path`` is a file that can be written: not a folder, its folder writable or makeable
    (``example``: a file name a folder given instead could hold, said in the line)."""
    path = Path(path)
    if path.is_dir():
        hint = f" (e.g. {path / example})" if example else ""
        raise ValueError(f"{flag} {path} is a folder: give the file to write{hint}")
    check_folder(path.parent, flag, path)
    return path


def probe_server(
    url: str, flag: str, default_ports: dict[str, int] | None = None, timeout: float = PROBE_TIMEOUT
) -> None:
    """Something accepts a connection at ``url``'s host and port within ``timeout`` seconds
    (through the proxy the environment names for it, if any)."""
    import urllib.request

    ports = {"http": 80, "https": 443, **(default_ports or {})}
    parts = urlsplit(url)
    scheme = parts.scheme.lower().split("+")[0]
    try:
        host, port = parts.hostname, parts.port or ports.get(scheme)
    except ValueError:  # a port that is no number
        raise ValueError(f"{flag} {url}: {parts.netloc!r} is no host:port") from None
    if not host or not port:
        raise ValueError(f"{flag} {url}: no host to connect to")
    where, via = (host, port), ""
    proxy = urllib.request.getproxies().get(scheme)
    if proxy and not urllib.request.proxy_bypass(host):
        proxied = urlsplit(proxy if "://" in proxy else "http://" + proxy)
        if proxied.hostname:
            where, via = (proxied.hostname, proxied.port or 80), f" through the proxy {proxy}"
    try:
        with socket.create_connection(where, timeout=timeout):
            pass
    except socket.gaierror:
        raise ValueError(
            f"{flag} {url}: no host {where[0]!r}{via} (the name does not resolve)"
        ) from None
    except TimeoutError:
        raise ValueError(
            f"{flag} {url}: nothing answers at {where[0]}:{where[1]}{via} within {timeout:g} s"
        ) from None
    except OSError as exc:
        why = (exc.strerror or str(exc)).lower()
        raise ValueError(
            f"{flag} {url}: nothing answers at {where[0]}:{where[1]}{via} ({why})"
        ) from None
