"""dmlc/dgl GCN example; faulty: most validation nodes are training nodes."""
from _r_dgl_gcn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-val-overlap',
    "source": SOURCE,
    "bug_source": 'https://github.com/electronicarts/rig-inversion/issues/2',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='overlap')
