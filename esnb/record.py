"""Files of a run: checkpoints (safe to load) and the output folder (history, summary, plot).

A checkpoint is one ``.npz`` file: named numpy arrays plus a JSON document (stored as bytes in
the array ``__meta__``). It loads with ``allow_pickle=False``, so opening a checkpoint never
runs code, and a file of another algorithm, another format or damaged bytes is refused with a
:class:`CheckpointError` that says which.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
import os
import tempfile
import zipfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

if TYPE_CHECKING:  # pandas is imported by runner.history, when a run is saved
    import pandas as pd

log = logging.getLogger("esnb.record")

FORMAT = "esnb-checkpoint"
FORMAT_VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint that cannot be used: damaged, not esnb's, or of another algorithm."""


def restore_rng(rng: np.random.Generator, state: Any, name: str) -> None:
    """Put a checkpoint's ``state`` back into ``rng``; a state that is not its bit generator's
    is one ``ValueError`` naming the generator (``rng``, ``eval_rng``...)."""
    try:
        rng.bit_generator.state = state
    except (TypeError, ValueError, KeyError) as exc:
        raise ValueError(f"{name} is not the state of a {type(rng.bit_generator).__name__} "
                         f"generator ({type(exc).__name__}: {exc})") from None


def _digest(arrays: dict[str, np.ndarray]) -> str:
    h = hashlib.sha256()
    for name in sorted(arrays):
        a = np.ascontiguousarray(arrays[name])
        h.update(name.encode())
        h.update(str(a.dtype).encode())
        h.update(str(a.shape).encode())
        h.update(a.tobytes())
    return h.hexdigest()


#: rows of an array are read, sent and written in pieces of about this many bytes
CHUNK_BYTES = 32 << 20


def row_chunks(shape: tuple[int, ...], itemsize: int,
               chunk_bytes: int = CHUNK_BYTES) -> list[tuple[int, int]]:
    """``(start, stop)`` row ranges of an array of ``shape`` in pieces of about
    ``chunk_bytes`` (one piece for a 0-d array: ``(0, 0)``, meaning the whole array)."""
    if len(shape) == 0:
        return [(0, 0)]
    row = max(1, math.prod(shape[1:]) * int(itemsize))
    step = max(1, int(chunk_bytes) // row)
    return [(a, min(a + step, shape[0])) for a in range(0, shape[0], step)] or [(0, 0)]


def save_checkpoint(path: str | os.PathLike, algorithm: str, meta: dict[str, Any],
                    arrays: dict[str, np.ndarray]) -> Path:
    """Write ``arrays`` and JSON-able ``meta`` atomically: a temporary file in the same folder,
    fsynced, then renamed over ``path`` (the previous checkpoint stays whole until then)."""
    arrays = {k: np.asarray(v) for k, v in arrays.items()}
    shapes = {k: (v.dtype, v.shape) for k, v in arrays.items()}
    return write_checkpoint(path, algorithm, meta, shapes,
                            lambda name, a, b: arrays[name][a:b] if b else arrays[name])


def write_checkpoint(path: str | os.PathLike, algorithm: str, meta: dict[str, Any],
                     shapes: dict[str, tuple], rows, chunk_bytes: int = CHUNK_BYTES) -> Path:
    """Write a checkpoint whose arrays arrive piece by piece (a replay's, from the worker
    holding it): the same file as :func:`save_checkpoint`, atomically, never holding more
    than one piece in memory.

    Parameters
    ----------
    shapes : dict
        ``{name: (dtype, shape)}`` of every array.
    rows : callable
        ``rows(name, start, stop)``: rows ``start:stop`` of array ``name`` (``0, 0``: the
        whole of a 0-d array), in the pieces :func:`row_chunks` cuts.

    The arrays are written in the digest's order (by name) and hashed as they pass; the JSON
    document with the digest goes last (``np.load`` reads members in any order).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    shapes = {k: (np.dtype(d), tuple(int(n) for n in s)) for k, (d, s) in shapes.items()}
    for k, (dtype, _) in shapes.items():
        if dtype.hasobject:
            raise TypeError(f"checkpoint array {k!r} has dtype object; only plain arrays are saved")
    fd, tmp = tempfile.mkstemp(prefix=path.name, suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            h = hashlib.sha256()
            with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as z:
                for name in sorted(shapes):
                    dtype, shape = shapes[name]
                    h.update(name.encode())
                    h.update(str(dtype).encode())
                    h.update(str(_digest_shape(shape)).encode())
                    with z.open(f"{name}.npy", "w", force_zip64=True) as member:
                        np.lib.format.write_array_header_2_0(
                            member, {"descr": np.lib.format.dtype_to_descr(dtype),
                                     "fortran_order": False, "shape": shape})
                        for a, b in row_chunks(shape, dtype.itemsize, chunk_bytes):
                            piece = np.asarray(rows(name, a, b), dtype=dtype, order="C")
                            want = shape if not b else (b - a, *shape[1:])
                            if piece.shape != want:
                                raise ValueError(f"checkpoint array {name!r}: rows {a}:{b} "
                                                 f"came as {piece.shape}, expected {want}")
                            data = memoryview(piece.reshape(-1)).cast("B")
                            h.update(data)
                            member.write(data)
                doc = {"format": FORMAT, "format_version": FORMAT_VERSION,
                       "algorithm": algorithm, "digest": h.hexdigest(), "meta": meta}
                blob = np.frombuffer(json.dumps(doc).encode(), dtype=np.uint8)
                with z.open("__meta__.npy", "w", force_zip64=True) as member:
                    np.lib.format.write_array(member, blob, allow_pickle=False)
            f.flush()
            os.fsync(f.fileno())  # on disk before it replaces the previous good checkpoint
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a checkpoint is an ordinary file
        os.replace(tmp, path)
        _fsync_dir(path.parent)  # the rename itself survives a crash
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise
    return path


def read_checkpoint_rows(path: str | os.PathLike, algorithm: str,
                         chunk_bytes: int = CHUNK_BYTES):
    """Read a checkpoint piece by piece (to send a replay to the worker that will hold it),
    never holding more than one piece in memory.

    Returns
    -------
    meta : dict
    shapes : dict
        ``{name: (dtype, shape)}``.
    pieces : iterator
        ``(name, start, rows)`` in :func:`row_chunks`' pieces; it checks the digest as the
        rows pass and raises :class:`CheckpointError` after the last one if they do not match
        (so a receiver commits only once the iterator is exhausted).
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        z = zipfile.ZipFile(path)
        with z.open("__meta__.npy") as member:
            doc = json.loads(np.lib.format.read_array(member, allow_pickle=False)
                             .tobytes().decode())
        shapes = {}
        for info in z.infolist():
            name = info.filename[:-len(".npy")]
            if name == "__meta__" or not info.filename.endswith(".npy"):
                continue
            with z.open(info) as member:
                shapes[name] = _npy_header(member)
            if shapes[name][0].hasobject:
                raise ValueError(f"array {name!r} holds Python objects (never unpickled)")
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError,
            UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path} is damaged or not an esnb checkpoint ({type(exc).__name__}: {exc})"
        ) from exc
    _check_doc(path, doc, algorithm)

    def pieces():
        h = hashlib.sha256()
        try:
            for name in sorted(shapes):
                dtype, shape = shapes[name]
                for text in (name, str(dtype), str(_digest_shape(shape))):
                    h.update(text.encode())
                with z.open(f"{name}.npy") as member:
                    _npy_header(member)
                    for a, b in row_chunks(shape, dtype.itemsize, chunk_bytes):
                        want = shape if not b else (b - a, *shape[1:])
                        nbytes = math.prod(want) * dtype.itemsize
                        data = member.read(nbytes)
                        if len(data) != nbytes:
                            raise CheckpointError(f"{path} is damaged: array {name!r} ends "
                                                  f"early")
                        h.update(data)
                        yield name, a, np.frombuffer(data, dtype=dtype).reshape(want)
        finally:
            z.close()
        if doc.get("digest") != h.hexdigest():
            raise CheckpointError(f"{path} is damaged: its arrays do not match their digest")

    return doc["meta"], shapes, pieces()


def _digest_shape(shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape :func:`_digest` hashes: ``np.ascontiguousarray`` makes a 0-d array 1-d."""
    return shape if shape else (1,)


def _npy_header(member) -> tuple[np.dtype, tuple[int, ...]]:
    version = np.lib.format.read_magic(member)
    read = (np.lib.format.read_array_header_1_0 if version == (1, 0)
            else np.lib.format.read_array_header_2_0)
    shape, fortran, dtype = read(member)
    if fortran and len(shape) > 1:
        raise ValueError("a Fortran-ordered array (esnb writes C order)")
    return np.dtype(dtype), tuple(int(n) for n in shape)


def _check_doc(path: Path, doc: Any, algorithm: str | None) -> None:
    """Refuse a document that is not an esnb checkpoint of this format (and ``algorithm``)."""
    if not isinstance(doc, dict) or doc.get("format") != FORMAT:
        raise CheckpointError(f"{path} is not an esnb checkpoint")
    if doc.get("format_version") != FORMAT_VERSION:
        raise CheckpointError(
            f"{path} has checkpoint format {doc.get('format_version')}, this esnb reads "
            f"{FORMAT_VERSION}"
        )
    if algorithm is not None and doc.get("algorithm") != algorithm:
        raise CheckpointError(
            f"{path} holds a {doc.get('algorithm')!r} run, not {algorithm!r}"
        )


def _fsync_dir(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:  # some file systems cannot open a folder: the rename is still atomic
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def checkpoint_of(path: str) -> Path:
    """``--resume``'s checkpoint: the file itself, or ``checkpoint.npz`` in a run folder."""
    p = Path(path)
    if p.is_dir():
        p = p / "checkpoint.npz"
    if not p.exists():
        raise FileNotFoundError(f"no checkpoint at {p}")
    return p


def load_checkpoint(path: str | os.PathLike, algorithm: str | None = None
                    ) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read a checkpoint; returns ``(meta, arrays)``.

    Raises
    ------
    CheckpointError
        If the file is damaged, is not an esnb checkpoint, or holds another ``algorithm``.
    FileNotFoundError
        If there is no file at ``path``.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        with np.load(path, allow_pickle=False) as z:
            arrays = {k: z[k] for k in z.files}
        doc = json.loads(arrays.pop("__meta__").tobytes().decode())
    except (zipfile.BadZipFile, ValueError, KeyError, OSError, EOFError,
            UnicodeDecodeError) as exc:
        raise CheckpointError(
            f"{path} is damaged or not an esnb checkpoint ({type(exc).__name__}: {exc})"
        ) from exc
    _check_doc(path, doc, algorithm)
    if doc.get("digest") != _digest(arrays):
        raise CheckpointError(f"{path} is damaged: its arrays do not match their digest")
    return doc["meta"], arrays


def finite_float(value: Any, bools: bool = True) -> float | None:
    """``value`` as a finite float, or None for what is not one: None, text, NaN, inf, and
    booleans unless ``bools``. History rows hold all of these."""
    if value is None or isinstance(value, (str, bytes)) or (not bools and isinstance(value, bool)):
        return None
    try:
        out = float(value)
    except (TypeError, ValueError):
        return None
    return out if math.isfinite(out) else None


def strict(obj: Any) -> Any:
    """``obj`` with every non-finite float replaced by None (JSON has no NaN)."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [strict(v) for v in obj]
    if hasattr(obj, "item") and getattr(obj, "shape", None) == ():  # numpy scalars
        return strict(obj.item())
    return obj


def write_json(path: str, obj: Any) -> None:
    """Write ``obj`` as strict JSON (readable by any parser: NaN becomes null)."""
    with open(path, "w") as f:
        json.dump(strict(obj), f, indent=2, allow_nan=False, default=str)


def history_to_json(records: list[dict]) -> list[dict]:
    """History rows with numpy scalars turned into plain Python values."""
    out = []
    for r in records:
        out.append({k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()})
    return out


def write_run_folder(runner, out: str | os.PathLike, summary: dict | None = None,
                     checkpoint: bool = True) -> Path:
    """Write ``history.csv``, ``changes.csv``, ``summary.json``, ``plot.html`` and (unless
    ``checkpoint`` is False: written already) ``checkpoint.npz`` of ``runner`` into ``out``."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    history: pd.DataFrame = runner.history
    history.to_csv(out / "history.csv", index=False)
    runner.changes.to_csv(out / "changes.csv", index=False)
    doc = {"algorithm": runner.algorithm, "config": runner.config_dict(),
           "controls": runner.controls.as_dict(), **(summary or {})}
    if getattr(runner, "parent", None):
        doc["parent"] = runner.parent
    if len(history):
        last = history.iloc[-1].to_dict()
        doc["last"] = {k: (v.item() if isinstance(v, np.generic) else v) for k, v in last.items()}
    write_json(out / "summary.json", doc)
    if checkpoint:
        runner.save(out / "checkpoint.npz")
    try:  # last: a plotting problem must never cost the run's data
        from bokeh.embed import file_html
        from bokeh.resources import INLINE

        fig = runner.plot()
        html = file_html(fig, INLINE, title=f"esnb {runner.title} {runner.name}")
        (out / "plot.html").write_text(html)
    except Exception:
        log.exception("could not draw the plot of %s", runner.name)
    return out
