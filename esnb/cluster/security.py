"""TLS for esnb's clusters: the one setting ``esnb.cluster.security``."""

from __future__ import annotations

from typing import Any

from distributed.security import Security


def make_security(setting: Any = None) -> Security | None:
    """The :class:`distributed.security.Security` of a setting (``esnb.cluster.security``).

    Parameters
    ----------
    setting
        ``None``/``False``/``"none"``: plain TCP. ``"temporary"``/``True``: self-signed
        certificates made now, in memory (one LocalCluster, or a jobqueue cluster that writes
        them to its shared temporary directory for the jobs). ``"config"``: dask's own
        ``distributed.comm.tls.*`` settings (certificate files of a real CA). A dict: keyword
        arguments of ``Security`` (``tls_ca_file``, ``tls_scheduler_cert``, ...), dashes
        allowed. A ``Security`` object is returned as is.
    """
    if isinstance(setting, Security):
        return setting
    if setting is None or setting is False or setting in ("none", "null", ""):
        return None
    if setting is True or setting == "temporary":
        try:
            return Security.temporary()
        except ImportError as exc:
            raise ImportError("temporary TLS certificates need the cryptography package: "
                              "pip install cryptography") from exc
    if setting == "config":
        sec = Security(require_encryption=True)
        if not sec.tls_ca_file:
            raise ValueError("esnb.cluster.security is 'config' but distributed.comm.tls.ca-file "
                             "is not set: give dask the certificate files")
        return sec
    if isinstance(setting, dict):
        kw = {k.replace("-", "_"): v for k, v in setting.items()}
        kw.setdefault("require_encryption", True)
        return Security(**kw)
    raise ValueError(f"esnb.cluster.security must be null, 'temporary', 'config', a dict of "
                     f"Security arguments or a Security object; got {setting!r}")
