"""EORL's benchmarks (Khadilkar 2023): its Tables 1 and 3 run on Dask, next to the paper's
numbers (:mod:`.tables`), and their cells, averages, figures and verdicts (:mod:`.paper`)."""
