"""Evolution strategies: the mathematics, with no Dask inside (torch loads on first use)."""

from esnb.lazy import lazy_names

_LAZY = {"OpenAIES": "esnb.es.openai_es", "Step": "esnb.es.openai_es",
         "IWUpdate": "esnb.es.iw", "es_gradient": "esnb.es.gradient",
         "weighted_noise_sum": "esnb.es.gradient", "SHAPINGS": "esnb.es.shaping",
         "get_shaping": "esnb.es.shaping"}
__all__ = sorted(_LAZY)
__getattr__, __dir__ = lazy_names(__name__, _LAZY)
