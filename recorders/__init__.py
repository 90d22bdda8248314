"""What runs inside training and what brings other loggers' files in: both write the trace format.

    torch_recorder.py  Recorder, attached to a PyTorch training loop
    scalars.py         a step's losses and metrics: read, or warned about once when odd
    parameters.py      weight, gradient and update statistics of every parameter
    activations.py     statistics of module outputs (forward hooks)
    inputs.py          the inputs and samples rows of input batches: where each is profiled
    profile.py         per-feature profiles and samples of input batches
    stats.py           the tensor statistics in torch's fused ops (CPU and devices), sparse grads
    cadence.py         which steps record what: fixed in advance, in meta.json
    transfer.py        a step's record of row producers, and its device-to-host copies
    environment.py     the environment, model and optimizer summaries in meta.json
    lightning.py, hf.py, _callbacks.py   PyTorch Lightning and Hugging Face callbacks
    importers/         TensorBoard and CSV logs turned into runs (no torch needed)

Only the recorder needs torch; `tracelab.recorders.importers` imports without it.
"""
