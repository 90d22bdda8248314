"""Checks that a framework callback's run reads like the plain Recorder's run of the same model."""
from __future__ import annotations

import re

from tracelab import analyze, open_run
from tracelab.core.findings import INFO


def shape(run) -> dict:
    """What a report is made of: recorded kinds, scalar names per split, tensor names, input
    features (positions and channels folded), whether samples exist."""
    sc, tn, inp = run.scalars, run.tensors, run.inputs
    lr = re.compile(r"^lr/\d+$")  # optimizers may split parameters into more groups
    return {
        "available": sorted(r.key for r in run.available),
        "scalars": sorted({(s, "lr/*" if lr.match(n) else n) for s, n in zip(sc["split"],
                                                                             sc["name"])}),
        "kinds": sorted(tn["kind"].unique()),
        "weights": run.names("weight"),
        "activations": sorted(run.names("activation")),
        "inputs": sorted({(s, f.split("[")[0]) for s, f in zip(inp["split"], inp["feature"])}),
        "samples": sorted(run.samples["split"].unique()),
    }


def assert_equivalent(framework_dir, plain_dir):
    framework, plain = open_run(framework_dir), open_run(plain_dir)
    assert framework.status["state"] == "completed"
    got_shape, want_shape = shape(framework), shape(plain)
    for key, want in want_shape.items():
        assert got_shape[key] == want, f"{key}: {got_shape[key]} != {want} (plain Recorder)"
    got, want = analyze(framework), analyze(plain)
    assert got.errors == [] and want.errors == [], (got.errors, want.errors)
    assert got.rules_run == want.rules_run, (got.rules_run, want.rules_run)
    skipped = [s.rule for s in got.skipped], [s.rule for s in want.skipped]
    assert skipped[0] == skipped[1], skipped
    # No finding the plain run does not have too.
    extra = {(f.rule, f.severity) for f in got.findings} - {(f.rule, f.severity)
                                                            for f in want.findings}
    assert not extra, [f.message for f in got.findings if (f.rule, f.severity) in extra]
    return got, want


def loud(diagnosis) -> list[str]:
    return [f"{f.code} {f.message}" for f in diagnosis.findings if f.severity is not INFO]
