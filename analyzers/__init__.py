"""The rules. Registration is this explicit list: adding a rule is one file plus one line here."""
from tracelab.analyzers.loss_oscillation import loss_oscillation
from tracelab.analyzers.loss_spike import loss_spike
from tracelab.analyzers.loss_plateau import loss_plateau
from tracelab.analyzers.nonfinite_values import nonfinite_values
from tracelab.analyzers.overfitting import overfitting
from tracelab.analyzers.metric_stagnation import metric_stagnation
from tracelab.analyzers.run_aborted import run_aborted
from tracelab.analyzers.vanishing_gradients import vanishing_gradients
from tracelab.analyzers.exploding_gradients import exploding_gradients
from tracelab.analyzers.dead_units import dead_units
from tracelab.analyzers.saturated_activations import saturated_activations
from tracelab.analyzers.frozen_parameters import frozen_parameters
from tracelab.analyzers.update_ratio import update_ratio
from tracelab.analyzers.collapsed_outputs import collapsed_outputs
from tracelab.analyzers.learning_rate_too_high import learning_rate_too_high
from tracelab.analyzers.clip_misuse import clip_misuse
from tracelab.analyzers.lr_schedule import lr_schedule
from tracelab.analyzers.weight_decay_too_high import weight_decay_too_high
from tracelab.analyzers.optimizer_step_missing import optimizer_step_missing
from tracelab.analyzers.param_not_in_optimizer import param_not_in_optimizer
from tracelab.analyzers.train_val_mismatch import train_val_mismatch
from tracelab.analyzers.input_collapse import input_collapse
from tracelab.analyzers.unnormalized_inputs import unnormalized_inputs
from tracelab.analyzers.datetime_units import datetime_units
from tracelab.analyzers.data_leak import data_leak
from tracelab.analyzers.nondeterminism_risk import nondeterminism_risk
from tracelab.analyzers.gpu_unused import gpu_unused
from tracelab.analyzers.input_pipeline_bound import input_pipeline_bound
from tracelab.analyzers.rank_divergence import rank_divergence
from tracelab.analyzers.loss_collapse import loss_collapse
from tracelab.analyzers.missing_zero_grad import missing_zero_grad
from tracelab.analyzers.eval_in_train_mode import eval_in_train_mode
from tracelab.analyzers.target_problems import target_problems
from tracelab.analyzers.amp_overflow import amp_overflow
from tracelab.analyzers.train_val_overlap import train_val_overlap
from tracelab.analyzers.loss_input_contract import loss_input_contract
from tracelab.analyzers.shape_broadcast import shape_broadcast
from tracelab.analyzers.train_in_eval_mode import train_in_eval_mode
from tracelab.analyzers.batchnorm_small_batch import batchnorm_small_batch
from tracelab.analyzers.wrong_batch_axis import wrong_batch_axis
from tracelab.analyzers.loss_below_bound import loss_below_bound
from tracelab.analyzers.gradient_accumulation import gradient_accumulation
from tracelab.analyzers.loss_against_objective import loss_against_objective

RULES = [
    loss_oscillation,
    loss_spike,
    loss_plateau,
    nonfinite_values,
    overfitting,
    metric_stagnation,
    run_aborted,
    vanishing_gradients,
    exploding_gradients,
    dead_units,
    saturated_activations,
    frozen_parameters,
    update_ratio,
    collapsed_outputs,
    learning_rate_too_high,
    clip_misuse,
    lr_schedule,
    weight_decay_too_high,
    optimizer_step_missing,
    param_not_in_optimizer,
    train_val_mismatch,
    input_collapse,
    unnormalized_inputs,
    datetime_units,
    data_leak,
    nondeterminism_risk,
    gpu_unused,
    input_pipeline_bound,
    rank_divergence,
    loss_collapse,
    missing_zero_grad,
    eval_in_train_mode,
    target_problems,
    amp_overflow,
    train_val_overlap,
    loss_input_contract,
    shape_broadcast,
    train_in_eval_mode,
    batchnorm_small_batch,
    wrong_batch_axis,
    loss_below_bound,
    gradient_accumulation,
    loss_against_objective,
]
