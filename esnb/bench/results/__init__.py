"""The results page (``docs/results.md``): every algorithm at a laptop's budget, over at least
five seeds, beside the source paper's number and a peer's.

- :mod:`.catalogue`: what is run (algorithm, preset, environment, budget) and the published
  numbers set beside it, each with its source.
- :mod:`.runs`: one run per (entry, seed) on a LocalCluster; its curve and the final
  evaluation of its final parameters; one JSON file per entry with the hardware.
- :mod:`.page`: the page and its SVG figures rendered from those files (nothing is run: the
  test suite checks the page against the saved runs).
- :mod:`.svg`: the figures (mean over seeds, the seeds' range shaded).
- :mod:`.command`: ``esnb bench results``.
"""
