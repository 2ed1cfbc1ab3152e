"""Standard normal float32 values that are the same bits on every machine.

The noise table must hold identical values on every host of a cluster: a worker whose table
differed would perturb with other noise and ES would follow a wrong gradient without any error.
NumPy promises that a bit generator's raw stream stays fixed, not that ``Generator``'s
distributions do (their algorithms and tables may change between releases, and its float64
``log``/``exp`` come from CPU-specific SIMD code). So the table is made here from operations
whose results IEEE 754 fixes to the bit on any machine and any numpy build:

1. **Counter-based integers**: the ``i``-th 64-bit word is SplitMix64's output function
   (Steele, Lea & Flood 2014) applied to ``state + (i + 1) * 0x9E3779B97F4A7C15``, where
   ``state`` is the seed passed through the same function: integer xor, shift and wrapping
   multiplication only, so any block of the table can be computed on its own.
2. **Uniforms**: the top 52 bits ``k`` of a word give ``u = (k + 0.5) / 2**52``, exactly
   representable, never 0 or 1, and ``1 - u`` is exact too.
3. **Normals**: ``Φ⁻¹(u)`` by Wichura's AS241 (Applied Statistics 37, 1988: rational
   approximations accurate to about 1e-16), with the logarithm its tails need computed here
   from ``frexp`` and a polynomial (:func:`log`) instead of a library's ``log``.
4. Rounded once to float32.

Every step is integer arithmetic, ``+ - * /``, ``sqrt`` or an exact ``frexp``/cast, each a
separate numpy call (so nothing is fused into an FMA): the same seed gives the same table on
any IEEE 754 machine, whichever numpy, BLAS or CPU. A whole table still carries a digest
(:func:`digest`), which workers compare with the driver's before they use it.
"""

from __future__ import annotations

import hashlib
import os
from concurrent.futures import ThreadPoolExecutor

import numpy as np

#: SplitMix64's increment (the odd integer nearest 2**64 / golden ratio) and multipliers
GAMMA = np.uint64(0x9E3779B97F4A7C15)
_M1 = np.uint64(0xBF58476D1CE4E5B9)
_M2 = np.uint64(0x94D049BB133111EB)
#: values computed per block: small enough for the temporaries to stay in the CPU's cache
BLOCK = 1 << 16

# ln 2 split so that e * LN2_HI is exact for any float64 exponent (fdlibm's split)
_LN2_HI = 6.93147180369123816490e-01
_LN2_LO = 1.90821492927058770002e-10
_SQRT_HALF = 0.70710678118654752440
# bits of 1.0, and 1 - 2**-53 (uniforms: see _uniforms_of)
_ONE_BITS = np.uint64(0x3FF0000000000000)
_ONE_MINUS_HALF_ULP = 1.0 - 2.0 ** -53
#: 2 / (2k + 1), k = 11 .. 1: log(m) = 2 atanh(s) = s * (2 + s² (2/3 + s² (2/5 + ...)))
_ATANH = tuple(2.0 / (2 * k + 1) for k in range(11, 0, -1))

# Wichura (1988), AS241 PPND16: numerator and denominator coefficients, highest power first
_CENTRAL_NUM = (2.5090809287301226727e+3, 3.3430575583588128105e+4, 6.7265770927008700853e+4,
                4.5921953931549871457e+4, 1.3731693765509461125e+4, 1.9715909503065514427e+3,
                1.3314166789178437745e+2, 3.3871328727963666080e+0)
_CENTRAL_DEN = (5.2264952788528545610e+3, 2.8729085735721942674e+4, 3.9307895800092710610e+4,
                2.1213794301586595867e+4, 5.3941960214247511077e+3, 6.8718700749205790830e+2,
                4.2313330701600911252e+1, 1.0)
_NEAR_NUM = (7.7454501427834140764e-4, 2.2723844989269184583e-2, 2.4178072517745061177e-1,
             1.2704582524523683826e+0, 3.6478483247632046050e+0, 5.7694972214606914055e+0,
             4.6303378461565452959e+0, 1.4234371107496835773e+0)
_NEAR_DEN = (1.0507500716444168432e-9, 5.4759380849953449460e-4, 1.5198666563616457197e-2,
             1.4810397642748007459e-1, 6.8976733498510000455e-1, 1.6763848301838038494e+0,
             2.0531916266377588219e+0, 1.0)
_FAR_NUM = (2.0103343992922881327e-7, 2.7115555687434875782e-5, 1.2426609473880784386e-3,
            2.6532189526576123093e-2, 2.9656057182850489123e-1, 1.7848265399172913358e+0,
            5.4637849111641143699e+0, 6.6579046435011037772e+0)
_FAR_DEN = (2.0442631033899397856e-15, 1.4215117583164458887e-7, 1.8463183175100546818e-5,
            7.8686913114561325910e-4, 1.4875361290850614853e-2, 1.3692988092273580531e-1,
            5.9983220655588793769e-1, 1.0)


def _mix(z: np.ndarray, tmp: np.ndarray) -> np.ndarray:
    """SplitMix64's output function, in place on uint64 (multiplication wraps modulo 2**64)."""
    for shift, multiplier in ((30, _M1), (27, _M2)):
        np.right_shift(z, np.uint64(shift), out=tmp)
        np.bitwise_xor(z, tmp, out=z)
        np.multiply(z, multiplier, out=z)
    np.right_shift(z, np.uint64(31), out=tmp)
    np.bitwise_xor(z, tmp, out=z)
    return z


def _state(seed: int) -> np.uint64:
    z = np.array([int(seed) % (1 << 64)], dtype=np.uint64)
    return _mix(z, np.empty_like(z))[0]


def words(seed: int, start: int, n: int) -> np.ndarray:
    """Words ``start .. start + n - 1`` of the seed's stream (uint64)."""
    z = np.arange(start + 1, start + n + 1, dtype=np.uint64)
    with np.errstate(over="ignore"):
        z *= GAMMA
        z += _state(seed)
    return _mix(z, np.empty_like(z))


def _uniforms_of(z: np.ndarray) -> np.ndarray:
    """In place: words -> ``(k + 0.5) / 2**52`` (``k``: a word's top 52 bits), as float64.

    ``k`` becomes the mantissa of a double in [1, 2) (``1 + k / 2**52``, exact, no integer to
    float conversion), and subtracting ``1 - 2**-53`` leaves ``(2k + 1) / 2**53`` exactly.
    """
    np.right_shift(z, np.uint64(12), out=z)
    np.bitwise_or(z, _ONE_BITS, out=z)
    u = z.view(np.float64)
    u -= _ONE_MINUS_HALF_ULP
    return u


def uniforms(seed: int, start: int, n: int) -> np.ndarray:
    """``(k + 0.5) / 2**52`` for the top 52 bits ``k`` of each word: in (0, 1), exact, and
    ``1 - u`` is exact too."""
    return _uniforms_of(words(seed, start, n))


def _horner(coefficients: tuple[float, ...], x: np.ndarray,
            out: np.ndarray | None = None) -> np.ndarray:
    if out is None:
        out = np.empty_like(x)
    out.fill(coefficients[0])
    for c in coefficients[1:]:
        out *= x
        out += c
    return out


def log(x: np.ndarray) -> np.ndarray:
    """Natural log of positive finite float64 values, to about 1 ulp, from ``frexp`` and a
    polynomial: the same bits on every machine (numpy's own ``log`` depends on the CPU)."""
    m, e = np.frexp(x)  # x = m * 2**e, m in [0.5, 1): exact
    low = m < _SQRT_HALF
    m *= 1.0 + low  # exact: [sqrt(1/2), sqrt(2))
    e = e - low
    f = m - 1.0  # exact (Sterbenz)
    s = f / (f + 2.0)  # log(m) = 2 atanh(s), |s| <= 0.172
    s2 = s * s
    series = _horner(_ATANH, s2)
    series *= s2
    series += 2.0
    series *= s
    series += e * _LN2_LO
    series += e * _LN2_HI
    return series


def inverse_normal_cdf(u: np.ndarray) -> np.ndarray:
    """``Φ⁻¹(u)`` for float64 ``u`` in (0, 1) by AS241 (Wichura 1988), with :func:`log`."""
    q = u - 0.5
    r = q * q
    np.subtract(0.180625, r, out=r)
    x = _horner(_CENTRAL_NUM, r)
    x *= q
    x /= _horner(_CENTRAL_DEN, r)
    tail = np.flatnonzero(np.abs(q) > 0.425)
    if tail.size:
        qt = q[tail]
        p = np.minimum(u[tail], 1.0 - u[tail])
        rt = np.sqrt(-log(p))
        far = np.flatnonzero(rt > 5.0)
        rf = rt[far]
        rt -= 1.6
        t = _horner(_NEAR_NUM, rt)
        t /= _horner(_NEAR_DEN, rt)
        if far.size:
            rf -= 5.0
            t[far] = _horner(_FAR_NUM, rf) / _horner(_FAR_DEN, rf)
        np.copysign(t, qt, out=t)
        x[tail] = t
    return x


def fill_standard_normal(seed: int, out: np.ndarray, start: int = 0,
                         threads: int | None = None) -> None:
    """Write values ``start .. start + out.size - 1`` of the seed's normal stream into
    ``out`` (float32, one-dimensional).

    Every value depends only on its index, so blocks are filled by ``threads`` threads at once
    (numpy releases the GIL in its loops; default: one per core, at most 8) with the same bits.
    """
    if out.dtype != np.float32 or out.ndim != 1:
        raise ValueError(f"out must be a one-dimensional float32 array, got {out.dtype} "
                         f"with shape {out.shape}")
    threads = min(8, os.cpu_count() or 1) if threads is None else int(threads)
    spans = np.array_split(np.arange(0, out.size, BLOCK), max(1, threads))
    spans = [(int(s[0]), int(min(s[-1] + BLOCK, out.size))) for s in spans if s.size]
    if len(spans) <= 1:
        _fill(seed, out, start)
        return
    with ThreadPoolExecutor(len(spans)) as pool:
        for done in [pool.submit(_fill, seed, out[a:b], start + a) for a, b in spans]:
            done.result()


def _fill(seed: int, out: np.ndarray, start: int) -> None:
    state = _state(seed)
    z, tmp = np.empty(BLOCK, dtype=np.uint64), np.empty(BLOCK, dtype=np.uint64)
    with np.errstate(over="ignore"):
        for begin in range(0, out.size, BLOCK):
            n = min(BLOCK, out.size - begin)
            zn, tn = z[:n], tmp[:n]
            zn[:] = np.arange(start + begin + 1, start + begin + n + 1, dtype=np.uint64)
            zn *= GAMMA
            zn += state
            out[begin:begin + n] = inverse_normal_cdf(_uniforms_of(_mix(zn, tn)))


def standard_normal(seed: int, n: int, start: int = 0) -> np.ndarray:
    """Values ``start .. start + n - 1`` of the seed's stream as a new float32 array."""
    out = np.empty(int(n), dtype=np.float32)
    fill_standard_normal(seed, out, start)
    return out


def digest(values: np.ndarray) -> str:
    """SHA-256 of an array's bytes (hex): what two hosts compare to know their tables agree."""
    return hashlib.sha256(memoryview(np.ascontiguousarray(values)).cast("B")).hexdigest()
