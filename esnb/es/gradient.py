"""The OpenAI-ES gradient from a noise table (numpy only: workers and configs import it
without torch).

In the convention of OpenAI's released code (which the IW-ES paper used), with shaped fitness
``s`` of mirrored pairs,

    g = (1/N) * sum_i s_i * eps_i,     N = 2 * pairs, eps_i signed for the mirrored half.
"""

from __future__ import annotations

import numpy as np

from esnb.es.blas import one_thread
from esnb.noise import NoiseTable

CHUNK = 256  # rows of noise gathered at once, at most...
CHUNK_FLOATS = 1 << 22  # ...and at most 4M floats (16 MB) of them, for large policies


def weighted_noise_sum(noise: NoiseTable, indices: np.ndarray, weights: np.ndarray,
                       dim: int) -> np.ndarray:
    """``sum_j weights[j] * noise[indices[j] : indices[j] + dim]`` in float64.

    Chunks are reduced in a fixed order, so the result depends only on the inputs: the same
    batch gives bitwise the same sum whatever the number of workers that produced it. Each
    chunk is a float32 matrix-vector product (weights rounded to float32: ~1e-7 relative),
    accumulated in float64.
    """
    indices = np.asarray(indices, dtype=np.int64)
    weights = np.asarray(weights, dtype=np.float64)
    if indices.shape != weights.shape:
        raise ValueError(f"indices {indices.shape} and weights {weights.shape} differ")
    total = np.zeros(dim, dtype=np.float64)
    step = max(1, min(CHUNK, CHUNK_FLOATS // max(dim, 1)))
    with one_thread():  # the same bits on a many-core driver and a one-thread worker
        for start in range(0, indices.size, step):
            rows = noise.gather(indices[start : start + step], dim)
            total += weights[start : start + step].astype(np.float32) @ rows
    return total


def es_gradient(noise: NoiseTable, indices: np.ndarray, shaped: np.ndarray, dim: int) -> np.ndarray:
    """The OpenAI-ES gradient ``(1/N) sum_i s_i eps_i`` from mirrored pairs.

    Parameters
    ----------
    indices : int array [pairs]
        Noise offsets; pair ``j`` evaluated ``theta + sigma eps_j`` and ``theta - sigma eps_j``.
    shaped : array [pairs, 2]
        Shaped fitness of the positive and the negative member.
    """
    shaped = np.asarray(shaped, dtype=np.float64)
    n = 2 * shaped.shape[0]
    if n == 0:
        return np.zeros(dim, dtype=np.float64)
    return weighted_noise_sum(noise, indices, shaped[:, 0] - shaped[:, 1], dim) / n
