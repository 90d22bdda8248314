"""d10: bentrevett's seq2seq accumulating with optimizer.zero_grad() before each micro-batch's backward."""
from _d_seq2seq import SOURCE, run as _train

LABEL = {"family": "rnn", "optimizer": "adam", "loss_reduction": "mean",
         "healthy": False, "cause": "gradient-accumulation-bug",
         "source": SOURCE,
         "bug_source": "https://github.com/bytetriper/RAE/issues/67"}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug="accum-zero-inside")
