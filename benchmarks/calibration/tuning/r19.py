"""dmlc/dgl GCN example; faulty: evaluate() without model.eval(), dropout active in validation."""
from _r_dgl_gcn import SOURCE, run as _train

LABEL = {
    "family": "mlp",
    "optimizer": "adam",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'eval-in-train-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/IBM/molformer/issues/8',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='no-eval')
