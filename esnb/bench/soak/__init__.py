"""Long runs, faults and signals: ES and Ape-X for minutes with memory flat (:mod:`.steady`,
``esnb bench soak``), a seeded schedule of faults with every lost transition counted
(:mod:`.faults`, ``--faults``; what it drives and probes: :mod:`.driver`), and how long each
algorithm's command takes to stop after Ctrl-C or SIGTERM (:mod:`.interrupts`)."""
