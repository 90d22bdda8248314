"""The applications, above the three stages: they may import the stages and the foundation.

    engine.py         analyze(): one loop over the explicit rule list
    sources.py        what a path holds (a run, a TensorBoard log, a CSV log), and opening it
    cli.py            the `tracelab` command
    batch.py          `tracelab batch`: every run of an archive, cached by what it read
    executors.py      where the batch runs: inline, a local process pool or a Dask cluster
    batch_outputs.py  the batch's runs.parquet, findings.parquet and index.html
    diff.py           `tracelab diff`: what differs between a good run and a bad one
    demo.py           `tracelab demo`: tiny real runs with planted defects, analyzed, reported
"""
