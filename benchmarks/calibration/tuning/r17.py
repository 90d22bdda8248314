"""dmlc/dgl GCN example; faulty: the output layer re-created after the optimizer was built, its parameters in no optimizer."""
from _r_dgl_gcn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'param-not-in-optimizer',
    "source": SOURCE,
    "bug_source": 'https://github.com/meta-pytorch/opacus/issues/432',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='new-head')
