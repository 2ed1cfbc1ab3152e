"""Pixel replay (esnb.replay.frames): frames stored once, stacks rebuilt equal to the env's.

The frames go in as a stream writer of episodes stores them (:class:`Stream`: one new frame per
step, a new episode's stack its first frame repeated); the replay's own writer,
:class:`~esnb.replay.stacks.StackStorage`, finds frames by content instead
(tests/test_apex_ale.py).

Real Pong (ale-py is in the test extra): random play with a short episode cap, so that a few
hundred steps cross several episode ends (truncations: their next_obs matters).
"""

import numpy as np
import pytest

from esnb.envs.make import make_env
from esnb.record import load_checkpoint, save_checkpoint
from esnb.replay import join_state, split_state
from esnb.replay.frames import FrameStorage
from esnb.replay.storage import ArrayStorage

SPEC = {"action": "int64", "reward": "float32", "terminated": "bool"}


def play(seed, steps, cap=40):
    """``steps`` transitions of random Pong: (obs, next_obs, action, reward, terminated,
    first) as the env produced them, ``first`` marking each episode's first transition."""
    env = make_env("ALE/Pong-v5", max_episode_steps=cap)
    rng = np.random.default_rng(seed)
    obs, _ = env.reset(seed=seed)
    out, first = [], True
    for _ in range(steps):
        a = int(rng.integers(0, env.action_space.n))
        nxt, r, terminated, truncated, _ = env.step(a)
        out.append((obs, nxt, a, r, terminated, first))
        first = terminated or truncated
        obs = env.reset()[0] if first else nxt
    env.close()
    return out


@pytest.fixture(scope="module")
def episodes():
    return play(0, 300), play(1, 120)


class Stream:
    """One stream of episodes written into a :class:`FrameStorage`: :meth:`reset` stores an
    episode's first frame (its stack: that frame ``stack`` times), :meth:`step` the newest
    frame of the next observation; both hand out the frame ids of the transition."""

    def __init__(self, storage: FrameStorage):
        self.storage = storage
        self.ids = None

    def reset(self, obs):
        self.ids = np.repeat(self.storage.add_frames(np.asarray(obs)[-1:]), self.storage.stack)

    def step(self, next_obs):
        before = self.ids
        self.ids = np.concatenate([self.ids[1:], self.storage.add_frames(next_obs[-1:])])
        return before, self.ids


def store(storage, stacker, slots, steps):
    for slot, (obs, nxt, a, r, terminated, first) in zip(slots, steps):
        if first:
            stacker.reset(obs)
        obs_ids, next_ids = stacker.step(nxt)
        batch = {"obs_frames": obs_ids[None], "next_frames": next_ids[None],
                 "action": [a], "reward": [r], "terminated": [terminated]}
        n, arrays = storage.check(batch)
        storage.write(np.array([slot]), arrays)


def assert_same(read, steps):
    np.testing.assert_array_equal(read["obs"], np.stack([s[0] for s in steps]))
    np.testing.assert_array_equal(read["next_obs"], np.stack([s[1] for s in steps]))
    np.testing.assert_array_equal(read["action"], [s[2] for s in steps])
    np.testing.assert_array_equal(read["reward"], np.float32([s[3] for s in steps]))


def test_stacks_rebuilt_equal_the_envs_across_episode_ends(episodes):
    steps, _ = episodes
    assert sum(s[5] for s in steps) >= 7  # 300 steps, episodes of 40: several ends
    storage = FrameStorage(len(steps), SPEC)
    store(storage, Stream(storage), range(len(steps)), steps)
    read = storage.read(np.arange(len(steps)))
    assert read["obs"].dtype == np.uint8 and read["obs"].shape == (len(steps), 4, 84, 84)
    assert_same(read, steps)
    # a new episode's stack is its own first frame four times, nothing of the last episode
    starts = [i for i, s in enumerate(steps) if s[5]]
    for i in starts:
        assert (read["obs"][i] == read["obs"][i][0]).all()
    # one frame per transition and one per episode
    assert storage.frame_head == len(steps) + len(starts)


def test_interleaved_streams_and_random_order_sampling(episodes):
    a, b = episodes
    storage = FrameStorage(len(a) + len(b), SPEC)
    sa, sb = Stream(storage), Stream(storage)
    order = []  # two actors, their transitions interleaved in blocks as they arrive
    for k in range(0, max(len(a), len(b)), 7):
        order += [("a", i) for i in range(k, min(k + 7, len(a)))]
        order += [("b", i) for i in range(k, min(k + 7, len(b)))]
    for slot, (who, i) in enumerate(order):
        stream, steps = (sa, a) if who == "a" else (sb, b)
        store(storage, stream, [slot], [steps[i]])
    perm = np.random.default_rng(2).permutation(len(order))
    read = storage.read(perm)
    assert_same(read, [(a if order[p][0] == "a" else b)[order[p][1]] for p in perm])


@pytest.mark.parametrize("frame_capacity, small", [(None, False), (102, True)])
def test_ring_wrap_around(episodes, frame_capacity, small):
    """300 transitions through 100 slots. With the default frame ring every stored transition
    stays readable; with a ring too small (102 frames for 100 transitions and their episodes'
    first frames) exactly the oldest lose a frame, and reading them is refused."""
    steps, _ = episodes
    storage = FrameStorage(100, SPEC, frame_capacity=frame_capacity)
    store(storage, Stream(storage), np.arange(len(steps)) % 100, steps)
    assert storage.frame_head > 2 * storage.frame_capacity  # the frame ring wrapped too
    oldest_first = (np.arange(100) + len(steps)) % 100
    ok = storage.available(oldest_first)
    lost = int((~ok).sum())
    assert ok.tolist() == [False] * lost + [True] * (100 - lost)  # only ever the oldest
    assert (lost > 0) == small
    newest = np.arange(len(steps) - 100, len(steps))[ok]
    assert_same(storage.read(newest % 100), [steps[i] for i in newest])
    if lost:
        with pytest.raises(ValueError, match="frames are all stored"):
            storage.read(oldest_first[:1])


def test_bytes_per_transition_about_one_frame():
    frame = 84 * 84
    storage = FrameStorage(100_000, SPEC)
    assert storage.bytes_per_transition < 1.1 * frame
    assert storage.nbytes == storage.frames.nbytes + storage.transitions.nbytes
    stacked = ArrayStorage(1000, {"obs": ((4, 84, 84), "uint8"),
                                  "next_obs": ((4, 84, 84), "uint8"), **SPEC})
    assert stacked.nbytes / 1000 > 7 * storage.bytes_per_transition  # 8 frames vs ~1


def test_checkpoint_round_trip_one_file(tmp_path, episodes):
    steps, _ = episodes
    storage = FrameStorage(100, SPEC)
    store(storage, Stream(storage), np.arange(len(steps)) % 100, steps)
    meta, arrays = split_state(storage.state_dict())
    path = save_checkpoint(tmp_path / "checkpoint.npz", "ApeX", {"replay": meta}, arrays)
    assert [p.name for p in tmp_path.iterdir()] == ["checkpoint.npz"]
    meta2, arrays2 = load_checkpoint(path, "ApeX")
    back = FrameStorage(100, SPEC)
    back.load_state_dict(join_state(meta2["replay"], arrays2))
    slots = np.flatnonzero(storage.available(np.arange(100)))
    assert back.available(np.arange(100)).tolist() == storage.available(np.arange(100)).tolist()
    a, b = storage.read(slots), back.read(slots)
    for k in a:
        np.testing.assert_array_equal(a[k], b[k])
    # writing goes on where it stopped: the next frame id follows
    assert back.frame_head == storage.frame_head

    other = FrameStorage(50, SPEC)
    before = other.state_dict()
    with pytest.raises(ValueError, match="state of a frame storage"):
        other.load_state_dict(join_state(meta2["replay"], arrays2))
    assert other.frame_head == before["frame_head"] and not other._written.any()


def test_bad_input_one_line_each():
    storage = FrameStorage(10, SPEC, frame_shape=(84, 84))
    with pytest.raises(ValueError, match="frames must be uint8"):
        storage.add_frames(np.zeros((1, 84, 84), np.float32))
    with pytest.raises(ValueError, match="frame storage's own"):
        FrameStorage(10, {"obs": ((4, 84, 84), "uint8")})
    with pytest.raises(ValueError, match="stack must be"):
        FrameStorage(10, SPEC, stack=0)
    ids = np.repeat(storage.add_frames(np.zeros((1, 84, 84), np.uint8)), 4)
    batch = {"obs_frames": (ids + 5)[None], "next_frames": ids[None], "action": [0],
             "reward": [0.0], "terminated": [False]}
    with pytest.raises(ValueError, match="outside the held ids"):
        storage.check(batch)
    with pytest.raises(ValueError, match="hold no transition"):
        storage.read([3])
