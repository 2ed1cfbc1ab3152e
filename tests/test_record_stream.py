"""Checkpoints written and read piece by piece (issue 34: a replay travels from the worker
holding it to the driver, which alone writes files): the same file as ``save_checkpoint``,
digests checked as the pieces pass, damage refused before a receiver commits."""

from __future__ import annotations

import io
import zipfile

import numpy as np
import pytest

from esnb.record import (
    CheckpointError,
    _digest,
    load_checkpoint,
    read_checkpoint_rows,
    row_chunks,
    save_checkpoint,
    write_checkpoint,
)

ARRAYS = {"rows": np.arange(40.0).reshape(10, 4), "scalar": np.float32(3.5),
          "frames": np.arange(5 * 3 * 2, dtype=np.uint8).reshape(5, 3, 2),
          "empty": np.zeros((0, 4)), "fortran": np.asfortranarray(np.arange(12).reshape(3, 4)),
          "flags": np.array([True, False, True])}


def test_row_chunks_cover_every_row_once():
    assert row_chunks((10, 4), 8, chunk_bytes=64) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert row_chunks((), 4) == [(0, 0)]  # a 0-d array: whole
    assert row_chunks((0, 4), 8) == [(0, 0)]
    assert row_chunks((3, 1000), 8, chunk_bytes=10) == [(0, 1), (1, 2), (2, 3)]  # a row each


@pytest.mark.parametrize("chunk", [16, 1 << 20])
def test_pieces_make_the_file_save_checkpoint_makes(tmp_path, chunk):
    whole = save_checkpoint(tmp_path / "whole.npz", "t", {"k": 1}, ARRAYS)
    asked = []

    def rows(name, a, b):
        asked.append((name, a, b))
        return ARRAYS[name][a:b] if b else ARRAYS[name]

    shapes = {k: (np.asarray(v).dtype, np.shape(v)) for k, v in ARRAYS.items()}
    pieces = write_checkpoint(tmp_path / "pieces.npz", "t", {"k": 1}, shapes, rows, chunk)
    if chunk == 16:
        assert len(asked) > len(ARRAYS)  # more than one piece per array
    for path in (whole, pieces):
        meta, arrays = load_checkpoint(path, "t")
        assert meta == {"k": 1} and _digest(arrays) == _digest(ARRAYS)
        for k, v in ARRAYS.items():
            assert arrays[k].dtype == np.asarray(v).dtype and arrays[k].shape == np.shape(v)
            np.testing.assert_array_equal(arrays[k], v)

    meta, shapes_read, it = read_checkpoint_rows(pieces, "t", chunk)
    assert shapes_read == {k: (np.asarray(v).dtype, np.shape(v)) for k, v in ARRAYS.items()}
    got: dict[str, list] = {}
    for name, start, block in it:
        assert start == sum(len(b) for b in got.get(name, [])) or block.ndim == 0
        got.setdefault(name, []).append(block)
    for k, v in ARRAYS.items():
        back = got[k][0] if np.ndim(v) == 0 else np.concatenate(got[k])
        np.testing.assert_array_equal(back, v)


def test_a_piece_of_the_wrong_shape_is_refused_and_nothing_is_left(tmp_path):
    shapes = {"a": (np.float64, (4, 2))}
    with pytest.raises(ValueError, match="rows 0:4 came as"):
        write_checkpoint(tmp_path / "x.npz", "t", {}, shapes, lambda n, a, b: np.zeros((3, 2)))
    assert list(tmp_path.iterdir()) == []  # no half-written file, no temporary


def test_damage_is_found_after_the_last_piece(tmp_path):
    """A flipped byte inside an array: every piece still reads, and the iterator raises once
    the digest is known, before a receiver commits."""
    path = save_checkpoint(tmp_path / "ok.npz", "t", {}, {"a": np.arange(1000.0)})
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    data = bytearray(members["a.npy"])
    data[-8] ^= 0xFF
    members["a.npy"] = bytes(data)
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    _, _, it = read_checkpoint_rows(bad, "t", chunk_bytes=800)
    with pytest.raises(CheckpointError, match="do not match their digest"):
        for _ in it:
            pass
    with pytest.raises(CheckpointError, match="holds a 't' run, not 'u'"):
        read_checkpoint_rows(path, "u")


def test_an_array_of_python_objects_is_refused_unread(tmp_path):
    path = save_checkpoint(tmp_path / "ok.npz", "t", {}, {"a": np.arange(3)})
    with zipfile.ZipFile(path) as z:
        members = {n: z.read(n) for n in z.namelist()}
    buf = io.BytesIO()
    np.save(buf, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    members["a.npy"] = buf.getvalue()
    bad = tmp_path / "bad.npz"
    with zipfile.ZipFile(bad, "w") as z:
        for name, blob in members.items():
            z.writestr(name, blob)
    with pytest.raises(CheckpointError, match="Python objects"):
        read_checkpoint_rows(bad, "t")
