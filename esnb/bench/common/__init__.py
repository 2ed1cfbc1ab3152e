"""What every benchmark shares: its flags that are an algorithm's settings (:mod:`.flags`), what
it prints around its figures (:mod:`.report`), and a program run in a fresh interpreter
(:mod:`.interpreter`)."""
