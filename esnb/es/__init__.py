"""Evolution strategies: the mathematics, with no Dask inside."""

from esnb.es.openai_es import OpenAIES, es_gradient, weighted_noise_sum
from esnb.es.shaping import SHAPINGS, get_shaping

__all__ = ["SHAPINGS", "OpenAIES", "es_gradient", "get_shaping", "weighted_noise_sum"]
