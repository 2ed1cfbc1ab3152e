"""Environments: gymnasium ids with clear errors, observation statistics, fast rollouts."""

from esnb.envs.make import env_spaces, make_env
from esnb.envs.obs_stats import ObsStats
from esnb.envs.rollout import Episode, FastEnv, cached_env, run_episode

__all__ = ["Episode", "FastEnv", "ObsStats", "cached_env", "env_spaces", "make_env", "run_episode"]
