"""princeton-nlp/SimCSE; faulty: the model stays in eval mode after the first evaluation, dropout off."""
from _r_simcse import SOURCE, run as _train

LABEL = {
    "family": "contrastive",
    "optimizer": "adamw",
    "loss_reduction": "mean",
    "healthy": False,
    "cause": 'train-in-eval-mode',
    "source": SOURCE,
    "bug_source": 'https://github.com/jingyaogong/minimind/issues/614',
}


def run(run_dir: str, seed: int = 0) -> None:
    _train(run_dir, seed, bug='stays-eval')
