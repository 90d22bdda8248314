"""nonfinite-values: NaN or Inf appeared, and where it came from first.

What it detects
    The first step at which a NaN or Inf shows up anywhere in the trace: input or target
    batches (profiled every few steps by feature, and checked on every step by the per-batch
    sentinel), module outputs (activations), the loss (the validation loss too), gradients or
    weights. At that step it
    names the earliest source in causal order: inputs, then targets, then activations in
    forward order, then the loss, then gradients (in backward order, output side first), then
    weights.

Why it matters
    Once one NaN enters, it spreads to everything downstream within a step or two, and every
    later statistic is garbage. Only the first source points at the cause: a bad batch, an
    unstable operation (log of 0, division by a vanishing norm), an overflowing loss, or
    gradients that exploded.

Example
    At step 412 the loss and every gradient are NaN, but the first NaN is in the output of
    `encoder.attn` (activations), while the inputs of that batch are finite.

How to fix
    Inputs: clean the data. Activations: guard the named module (epsilons in norms and logs,
    `log_softmax` instead of `log(softmax)`). Loss or gradients: lower the learning rate, clip
    gradients (`clip_grad_norm_`, max_norm about 1), use Kaiming init and check for overflow in
    reduced precision.

False positives
    Mixed precision with a gradient scaler produces Inf gradients by design on the steps the
    scaler skips; when only gradients are ever non-finite (loss and weights stay finite) the
    finding is downgraded to info.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from tracelab.analyzers._learning_rate import lower_lr_fix
from tracelab.analyzers._batches import INPUT_BATCH
from tracelab.analyzers._dynamics import EVAL_SPLITS, OUTCOME
from tracelab.core import causes
from tracelab.core.causes import explains
from tracelab.core.findings import ERROR, INFO, WARNING, Finding
from tracelab.core.rules import Plot, rule
from tracelab.core.run import Run
from tracelab.core.schema import ACTIVATION, GRAD, LOSS_NAME, TRAIN, WEIGHT

_FIX = {
    "input": "Clean the data pipeline: drop or impute NaN/Inf values before batching.",
    "target": "Clean the labels: drop or impute the rows whose target is NaN/Inf before "
              "batching.",
    "activation": "Guard the named module against overflow (epsilons in norms and logs, "
                  "log_softmax instead of log(softmax)) or lower the learning rate.",
    "loss": "Lower the learning rate, clip gradients (clip_grad_norm_, max_norm about 1) and "
            "check the loss for log(0) or division by zero.",
    "grad": "Clip gradients (clip_grad_norm_, max_norm about 1), lower the learning rate, or "
            "check for overflow in reduced precision.",
    "weight": "Lower the learning rate and clip gradients; check the optimizer's epsilon.",
    "eval loss": "Check the evaluation loop: a mean over an empty batch or split is NaN, a log "
                 "of 0 is -Inf, and validation data the training never saw may hold NaN/Inf "
                 "values.",
}
_ORDER = ("input", "target", "activation", "loss", "eval loss", "grad", "weight")



def _from_input(cause: Finding, effect: Finding) -> bool:
    return causes.input_borne(cause) or effect.rule in ("run-aborted", *OUTCOME)


@rule(name="nonfinite-values", code="TL104", merge="source", plot=Plot.NONFINITE,
      unseen=INPUT_BATCH,
      links=(explains("loss-spike", "exploding-gradients", "dead-units", "collapsed-outputs",
                      "run-aborted", *OUTCOME,
                      why="a NaN/Inf input batch makes activations, loss and gradients non-finite",
                      when=_from_input),))
def nonfinite_values(run: Run) -> list[Finding]:
    events = _events(run)
    if events.empty:
        return []
    first_step = int(events["step"].min())
    at = events[events["step"] == first_step].sort_values(["order", "pos"], kind="stable")
    source = at.iloc[0]
    kind = str(source["source"])
    last_step = int(events["step"].max())
    kinds = set(events["source"])
    if kinds & {"loss", "weight"}:
        severity = ERROR
    elif kinds == {"grad"}:
        severity = INFO
    else:
        severity = WARNING
    where = (source["where"] if isinstance(source.get("where"), str) else
             f"the {source['split']} input batch's feature" if kind == "input" else
             {"activation": "the output of module", "loss": "the loss",
              "grad": "the gradient of", "weight": "the weights of"}[kind])
    name = "" if kind in ("loss", "eval loss") else f" '{source['name']}'"
    spread = sorted(set(at["source"]) - {kind}, key=_ORDER.index)
    later = f", then spread to {', '.join(spread)}" if spread else ""
    steps = events["step"].nunique()
    if severity is INFO:
        message = (f"Gradients were non-finite at {steps} steps, first at step {first_step} in "
                   f"'{source['name']}', while the loss and weights stayed finite, as when a "
                   "gradient scaler skips overflowing steps.")
    else:
        message = (f"The first NaN/Inf appeared at step {first_step} in {where}{name} "
                   f"({int(source['nan'])} NaN, {int(source['inf'])} Inf){later}; {steps} "
                   f"steps hold non-finite values, the last at step {last_step}.")
    evidence = {"source": kind, "step": first_step, "nan_count": source["nan"], "inf_count": source["inf"],
                "sources_at_step": len(at), "steps_nonfinite": steps,
                "last_step": last_step}
    subject = "loss" if kind == "loss" else str(source["name"])  # "val loss": its split's
    return [nonfinite_values.finding(severity, subject, (first_step, last_step), message,
                                     evidence, lower_lr_fix(run, _FIX[kind]))]


def _events(run: Run) -> pd.DataFrame:
    """One row per non-finite observation: step, source, name, pos (order within the source)."""
    frames = []
    inp = run.inputs
    bad = inp[(inp["nan_count"].fillna(0) > 0) | (inp["inf_count"].fillna(0) > 0)]
    if len(bad):
        frames.append(pd.DataFrame({"step": bad["step"], "source": "input",
                                    "name": bad["feature"].astype(str), "pos": 0,
                                    "split": bad["split"].astype(str),
                                    "nan": bad["nan_count"], "inf": bad["inf_count"]}))
    # The sentinel: every step's batches, after the profile's rows (which name the feature).
    sb = run.batches
    bad = sb[(sb["nan_count"].fillna(0) > 0) | (sb["inf_count"].fillna(0) > 0)]
    if len(bad):
        frames.append(pd.DataFrame({"step": bad["step"], "source": bad["role"].astype(str),
                                    "name": bad["name"].astype(str), "pos": 1,
                                    "split": bad["split"].astype(str),
                                    "where": "the " + bad["split"].astype(str) + " "
                                             + bad["role"].astype(str) + " batch",
                                    "nan": bad["nan_count"], "inf": bad["inf_count"]}))
    bad = run.nonfinite_tensors()
    if len(bad):
        # Row order within a step is recording order: forward order for activations, model
        # order for parameters. Gradients are produced output side first, so reverse them.
        pos = pd.Series(np.arange(len(bad)), index=bad.index)
        grads = bad["kind"] == GRAD
        pos[grads] = -pos[grads]
        for kind in (ACTIVATION, GRAD, WEIGHT):
            rows = bad[bad["kind"] == kind]
            if len(rows):
                frames.append(pd.DataFrame({
                    "step": rows["step"], "source": kind, "name": rows["name"].astype(str),
                    "pos": pos[rows.index], "nan": rows["nan_count"], "inf": rows["inf_count"]}))
    loss = run.loss(TRAIN)
    values = loss.to_numpy(dtype=float)
    bad_loss = loss[~np.isfinite(values)]
    if len(bad_loss):
        frames.append(pd.DataFrame({"step": bad_loss.index, "source": "loss", "name": LOSS_NAME,
                                    "pos": 0, "nan": np.isnan(bad_loss.to_numpy()).astype(int),
                                    "inf": np.isinf(bad_loss.to_numpy()).astype(int)}))
    for split in (s for s in EVAL_SPLITS if s in run.splits()):  # a NaN validation loss too
        loss = run.loss(split)
        bad_loss = loss[~np.isfinite(loss.to_numpy(dtype=float))]
        if len(bad_loss):
            frames.append(pd.DataFrame({
                "step": bad_loss.index, "source": "eval loss", "name": f"{split} {LOSS_NAME}",
                "pos": 0, "where": f"the {split} loss",
                "nan": np.isnan(bad_loss.to_numpy()).astype(int),
                "inf": np.isinf(bad_loss.to_numpy()).astype(int)}))
    if not frames:
        return pd.DataFrame(columns=["step", "source", "name", "pos", "nan", "inf", "order"])
    events = pd.concat(frames, ignore_index=True)
    events["order"] = events["source"].map({s: i for i, s in enumerate(_ORDER)})
    events["nan"] = events["nan"].fillna(0).astype(int)
    events["inf"] = events["inf"].fillna(0).astype(int)
    return events
