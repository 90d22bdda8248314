"""Importers of other loggers' files: they write (or open in memory) a run in the trace format.
They need neither torch nor the logger that wrote the files, except TensorBoard's reader (and
the protobuf package for W&B's records).

    common.py       tag mapping, and writing or opening the result
    tensorboard.py  TensorBoard event files (scalars, histograms, tensor summaries, hparams)
    tfrecord.py     the framing of event files, checked record by record
    csv.py          CSV metrics logs (Lightning's metrics.csv and the like)
    mlflow.py       MLflow runs: the file store (mlruns/) and the SQLite store (mlflow.db)
    wandb.py        W&B runs: the records of a run-*.wandb file
    wandb_log.py    the framing of .wandb files (a LevelDB log), checked record by record
    wandb_records.py  W&B records decoded by protobuf, a message per record (wandb_proto.py)
"""
