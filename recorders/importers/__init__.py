"""Importers of other loggers' files: they write (or open in memory) a run in the trace format.
They need neither torch nor the logger that wrote the files, except TensorBoard's reader.

    common.py       tag mapping, and writing or opening the result
    tensorboard.py  TensorBoard event files (scalars, histograms, hparams)
    csv.py          CSV metrics logs (Lightning's metrics.csv and the like)
"""
