"""Importers of other loggers' files: they write (or open in memory) a run in the trace format.
They need neither torch nor the logger that wrote the files, except TensorBoard's reader (and
the protobuf package for W&B's records).

    common.py       tag mapping, and writing or opening the result
    tensorboard.py  TensorBoard event files (scalars, histograms, tensor summaries, hparams)
    tfrecord.py     the framing of event files, checked record by record
    csv.py          CSV metrics logs (Lightning's metrics.csv and the like)
    mlflow.py       MLflow runs: the file store (mlruns/) and the SQLite store (mlflow.db)
    wandb.py        W&B runs: the records of a run-*.wandb file
    records.py      the framing of .wandb files (a LevelDB log), checked record by record
    wandb_exact.py  the reference decoder of W&B records (protobuf, a message per record)
    wandb_fast.py   the bulk decoder of history rows and summaries, in numpy (protowalk.py)
    wandb_frames.py, wandb_kernels.py   the same compiled with numba, where it is installed
"""
