"""loss-against-objective: a logged objective that gets worse while the loss does not (a flipped
sign); real tiny REINFORCE and classification trainings, and frames for PPO-like returns,
overfitting and a diverging run."""
import copy
import math

import numpy as np
import pandas as pd
import pytest

from tracelab.analyzers._objectives import direction
from tracelab.analyzers.loss_against_objective import loss_against_objective
from tracelab.core.run import Run

torch = pytest.importorskip("torch", reason="the recorder needs torch (extra 'torch')")
nn = torch.nn

import tracelab  # noqa: E402
from _contract_runs import blobs  # noqa: E402

pytestmark = pytest.mark.usefixtures("one_thread")


def _findings(path):
    diagnosis = tracelab.analyze(path)
    assert not diagnosis.errors, diagnosis.errors
    return [f for f in diagnosis.findings if f.rule == "loss-against-objective"]


def _cart_pole(rng, cap: int = 50):
    """Cart-pole (gymnasium's CartPole-v1 equations), reward 1 per step, at most `cap` steps."""
    state = rng.uniform(-0.05, 0.05, 4)
    for t in range(cap):
        action = yield state.astype(np.float32)
        x, x_dot, theta, theta_dot = state
        force = 10.0 if action == 1 else -10.0
        cos, sin = math.cos(theta), math.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        state = np.array([x + 0.02 * x_dot, x_dot + 0.02 * x_acc, theta + 0.02 * theta_dot,
                          theta_dot + 0.02 * theta_acc])
        if abs(state[0]) > 2.4 or abs(state[2]) > 0.21:
            return


def _reinforce(path, sign: float, episodes: int = 80, seed: int = 0, standardize: bool = True):
    """REINFORCE as pytorch/examples writes it: the episode's loss sum(sign * log_prob * R),
    returns discounted and standardized (or raw, as minimalRL leaves them); sign -1 is right,
    +1 the flipped bug."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    policy = nn.Sequential(nn.Linear(4, 64), nn.ReLU(), nn.Linear(64, 2), nn.Softmax(dim=1))
    opt = torch.optim.Adam(policy.parameters(), lr=1e-2)
    with tracelab.Recorder(str(path), model=policy, optimizer=opt) as rec:
        for _ in range(episodes):
            env, log_probs, states = _cart_pole(rng), [], []
            state = next(env)
            try:
                while True:
                    x = torch.from_numpy(state).unsqueeze(0)
                    m = torch.distributions.Categorical(policy(x))
                    action = m.sample()
                    log_probs.append(m.log_prob(action))
                    states.append(x)
                    state = env.send(action.item())
            except StopIteration:
                pass
            n = len(log_probs)
            returns = torch.tensor([(1 - 0.99 ** (n - t)) / 0.01 for t in range(n)])
            if standardize:
                returns = (returns - returns.mean()) / (returns.std() + 1e-7)
            loss = torch.cat([sign * lp * r for lp, r in zip(log_probs, returns)]).sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=torch.cat(states), metrics={"episode_reward": float(n)})
    return path


def test_reinforce_with_the_sign_flipped_fires(tmp_path):
    path = _reinforce(tmp_path / "r", sign=1.0, seed=1)
    [f] = _findings(path)
    assert f.code == "TL614" and f.severity.value == "warning"
    assert f.subject == "train/episode_reward" and "got worse" in f.message
    assert "-log_prob * R" in f.fix
    assert f.evidence["metric_last_half"] < f.evidence["metric_first"]
    assert f.evidence["p_worse"] < 1e-3


def test_reinforce_as_published_stays_quiet(tmp_path):
    path = _reinforce(tmp_path / "r", sign=-1.0, seed=1)
    rewards = tracelab.open_run(path).scalar("episode_reward")
    assert rewards.iloc[40:].median() > 2 * rewards.iloc[:10].median()  # it learns
    assert _findings(path) == []


def _classifier(path, sign: float, steps: int = 120, metric: str = "accuracy",
                split: bool = False):
    """A classifier on noisy blobs (learned over the whole run) logging its batch accuracy (or,
    under an IoU's name, the mean over classes of the batch's intersection over union); sign
    +1 minimizes the cross-entropy, -1 maximizes it. `split`: the weight matrices and the
    biases with an optimizer each, both stepping on the one loss (as Muon with AdamW)."""
    torch.manual_seed(0)
    x, y = blobs(4096)
    x = x + 2 * torch.randn(x.shape, generator=torch.Generator().manual_seed(1))
    model = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4))
    if split:
        opts = [torch.optim.SGD([p for p in model.parameters() if p.ndim == k], lr=0.002)
                for k in (2, 1)]
        optimizer = {"matrices": opts[0], "vectors": opts[1]}
    else:
        opts = [torch.optim.SGD(model.parameters(), lr=0.002)]
        optimizer = opts[0]
    if metric == "codebook_perplexity":
        with torch.no_grad():  # every prediction on one class at first: one code in use
            model[2].bias[0] = 8.0
    with tracelab.Recorder(str(path), model=model, optimizer=optimizer) as rec:
        for step in range(steps):
            i = (step * 32) % (len(x) - 32)
            out = model(x[i:i + 32])
            loss = sign * nn.functional.cross_entropy(out, y[i:i + 32])
            for opt in opts:
                opt.zero_grad()
            loss.backward()
            for opt in opts:
                opt.step()
            pred, truth = out.argmax(1), y[i:i + 32]
            acc = (pred == truth).float().mean()
            if metric == "perplexity":  # a language model's: exp of the cross-entropy
                acc = float(torch.exp(nn.functional.cross_entropy(out.detach(), y[i:i + 32])))
            if metric == "codebook_perplexity":  # a VQ-VAE's: exp of the usage's entropy
                use = torch.bincount(pred, minlength=4).float() / len(pred)
                acc = float(torch.exp(-(use * torch.log(use + 1e-10)).sum()))
            if "iou" in metric.lower():
                acc = np.mean([float(((pred == c) & (truth == c)).sum())
                               / max(float(((pred == c) | (truth == c)).sum()), 1.0)
                               for c in range(4)])
            rec.step(loss=loss, inputs=x[i:i + 32], metrics={metric: acc})
    return path


def test_a_maximized_cross_entropy_fires_on_the_accuracy(tmp_path):
    [f] = _findings(_classifier(tmp_path / "r", sign=-1.0))
    assert f.subject == "train/accuracy" and f.evidence["loss_fell"]
    assert "a significant fall" in f.message


def test_a_minimized_cross_entropy_stays_quiet(tmp_path):
    assert _findings(_classifier(tmp_path / "r", sign=1.0)) == []


def test_two_optimizers_on_one_loss_are_one_player_and_their_accuracy_is_judged(tmp_path):
    # One backward pass per step: no game, whatever the number of optimizers.
    [f] = _findings(_classifier(tmp_path / "flipped", sign=-1.0, split=True))
    assert f.subject == "train/accuracy"
    assert _findings(_classifier(tmp_path / "right", sign=1.0, split=True)) == []


def test_a_mean_iou_named_in_camel_case_is_judged(tmp_path):
    # `mIoU`: cut at its camelCase words it was `m_io_u`, no direction, never judged.
    [f] = _findings(_classifier(tmp_path / "flipped", sign=-1.0, metric="mIoU"))
    assert f.subject == "train/mIoU" and f.evidence["direction"] == "higher"
    assert _findings(_classifier(tmp_path / "right", sign=1.0, metric="mIoU")) == []


def test_a_perplexity_that_is_exp_of_the_loss_is_judged(tmp_path):
    # The cross-entropy maximized: the perplexity, exp of it, rises while the loss (its
    # negation) falls.
    [f] = _findings(_classifier(tmp_path / "flipped", sign=-1.0, metric="perplexity"))
    assert f.subject == "train/perplexity" and f.evidence["direction"] == "lower"
    assert _findings(_classifier(tmp_path / "right", sign=1.0, metric="perplexity")) == []


def test_a_codebook_perplexity_that_is_no_function_of_the_loss_stays_quiet(tmp_path):
    # The usage of the classes (a VQ-VAE's codebook perplexity) rises from 1 as the loss falls:
    # lower-is-better by its name, but its log does not follow the loss.
    path = _classifier(tmp_path / "r", sign=1.0, metric="codebook_perplexity")
    usage = tracelab.open_run(str(path)).scalar("codebook_perplexity", "train")
    usage = usage.to_numpy(dtype=float)
    assert np.median(usage[-30:]) > np.median(usage[:15]) + 0.5
    assert _findings(path) == []


def _dpo(path, sign: float, steps: int = 200):
    """DPO as TRL logs it: a policy fine-tuned (by SFT) on the chosen answers, a frozen copy as
    the reference, the loss -logsigmoid(beta * (chosen - rejected log-ratio)), and the implicit
    rewards `rewards/chosen`, `rewards/rejected`, `rewards/margins`, `rewards/accuracies`; sign
    -1 prefers the rejected answers (the flipped bug)."""
    torch.manual_seed(0)
    prompts, weights = torch.randn(2048, 16), torch.randn(16, 32)
    chosen = (prompts @ weights).argmax(1)
    rejected = torch.randint(0, 32, (2048,))
    rejected = torch.where(rejected == chosen, (rejected + 1) % 32, rejected)
    policy = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 32))
    sft = torch.optim.Adam(policy.parameters(), lr=1e-3)
    for _ in range(100):
        i = torch.randint(0, 2048, (64,))
        sft.zero_grad()
        nn.functional.cross_entropy(policy(prompts[i]), chosen[i]).backward()
        sft.step()
    ref = nn.Sequential(nn.Linear(16, 64), nn.Tanh(), nn.Linear(64, 32))
    ref.load_state_dict(policy.state_dict())
    ref.requires_grad_(False)
    opt = torch.optim.AdamW(policy.parameters(), lr=5e-4)
    beta = 0.1
    with tracelab.Recorder(str(path), model=policy, optimizer=opt) as rec:
        for _ in range(steps):
            i = torch.randint(0, 2048, (64,))
            logp = policy(prompts[i]).log_softmax(-1)
            with torch.no_grad():
                ref_logp = ref(prompts[i]).log_softmax(-1)
            c = (logp - ref_logp).gather(1, chosen[i, None])[:, 0]
            r = (logp - ref_logp).gather(1, rejected[i, None])[:, 0]
            loss = -nn.functional.logsigmoid(sign * beta * (c - r)).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rec.step(loss=loss, inputs=prompts[i], metrics={
                "rewards/chosen": beta * c.mean(), "rewards/rejected": beta * r.mean(),
                "rewards/margins": beta * (c - r).mean(),
                "rewards/accuracies": (c > r).float().mean()})
    return path


def test_dpo_s_rejected_reward_falls_by_design_and_stays_quiet(tmp_path):
    path = _dpo(tmp_path / "dpo", sign=1.0)
    run = tracelab.open_run(path)
    rejected = run.scalar("rewards/rejected")
    assert rejected.iloc[-50:].median() < rejected.iloc[:25].median()  # the pattern is there
    assert run.loss().iloc[-50:].median() < run.loss().iloc[:25].median()
    assert _findings(path) == []


def test_dpo_preferring_the_rejected_answers_fires_on_its_margin(tmp_path):
    [f] = _findings(_dpo(tmp_path / "dpo", sign=-1.0))
    assert f.evidence["metric"] in ("rewards/margins", "rewards/accuracies")
    assert "rewards/chosen" not in f.evidence["also"]
    assert "rewards/rejected" not in f.evidence["also"]


def _gan(path, steps=400):
    """A GAN with its two optimizers: the discriminator's loss falls as it learns to score the
    fakes low, so its logged `fake_score` falls with its loss."""
    torch.manual_seed(0)
    G = nn.Sequential(nn.Linear(4, 32), nn.ReLU(), nn.Linear(32, 2))
    D = nn.Sequential(nn.Linear(2, 32), nn.LeakyReLU(0.2), nn.Linear(32, 1))
    og = torch.optim.Adam(G.parameters(), 2e-4, betas=(0.5, 0.999))
    od = torch.optim.Adam(D.parameters(), 2e-3, betas=(0.5, 0.999))
    bce = nn.BCEWithLogitsLoss()
    with tracelab.Recorder(path, model=nn.ModuleDict({"G": G, "D": D}),
                           optimizer={"g": og, "d": od}, loss_fn=bce) as rec:
        for _ in range(steps):
            real = torch.randn(64, 2) * 0.5 + torch.tensor([2.0, -1.0])
            fake = G(torch.randn(64, 4))
            od.zero_grad()
            dr, df = D(real), D(fake.detach())
            dl = bce(dr, torch.ones_like(dr)) + bce(df, torch.zeros_like(df))
            dl.backward()
            od.step()
            og.zero_grad()
            bce(D(fake), torch.ones(64, 1)).backward()
            og.step()
            rec.step(loss=dl, metrics={"real_score": torch.sigmoid(dr).mean(),
                                       "fake_score": torch.sigmoid(df).mean()})
    return path


def test_a_gan_whose_discriminator_scores_the_fakes_lower_stays_quiet(tmp_path):
    run = tracelab.open_run(_gan(tmp_path / "r"))
    loss, fake = run.loss(), run.scalar("fake_score")
    assert loss.iloc[-20:].median() < loss.iloc[:20].median()  # the judged pattern is there
    assert fake.iloc[-20:].median() < fake.iloc[:20].median()
    assert _findings(tmp_path / "r") == []


def _frames(split_series: dict):
    rows = [{"step": int(s), "split": split, "name": name, "value": float(v)}
            for (split, name), series in split_series.items() for s, v in enumerate(series)]
    return Run.from_frames(scalars=pd.DataFrame(rows))


def test_ppo_like_noisy_returns_stay_quiet():
    # PPO: the episodic return (a running mean, repeated over an iteration's minibatches) rises,
    # falls back towards where it started, while the loss (mostly the value loss) follows the
    # returns' scale.
    rng = np.random.default_rng(0)
    it = np.repeat(np.arange(24), 16)
    curve = 20 + 150 * np.sin(np.pi * it / 24) ** 2 + rng.normal(0, 15, len(it))
    loss = 0.2 * curve + rng.normal(0, 10, len(it))
    assert loss_against_objective(_frames({("train", "loss"): loss,
                                           ("train", "episodic_return"): curve})) == []


def test_overfitting_stays_quiet():
    # The train loss falls while the validation accuracy falls and its loss rises: overfitting,
    # each split's metric agrees with that split's loss; and without a validation loss, the
    # train loss is never set against the validation accuracy.
    n = 64
    train = 2.0 * 0.95 ** np.arange(n)
    val_acc = 0.9 - 0.003 * np.arange(n)
    val_loss = 0.3 + 0.01 * np.arange(n)
    both = {("train", "loss"): train, ("val", "acc"): val_acc}
    assert loss_against_objective(_frames({**both, ("val", "loss"): val_loss})) == []
    assert loss_against_objective(_frames(both)) == []
    # the same validation accuracy against a validation loss that falls is the contract broken
    [f] = loss_against_objective(_frames({**both, ("val", "loss"): val_loss[::-1]}))
    assert f.subject == "val/acc"


def test_a_diverging_run_whose_loss_rises_with_its_error_stays_quiet():
    n = 80
    loss = np.exp(0.05 * np.arange(n))
    assert loss_against_objective(_frames({("train", "loss"): loss,
                                           ("train", "error"): 0.1 + 0.01 * np.arange(n)})) == []
    # lower is better for an error: a falling loss with a rising error fires
    [f] = loss_against_objective(_frames({("train", "loss"): loss[::-1],
                                          ("train", "error"): 0.1 + 0.01 * np.arange(n)}))
    assert f.evidence["direction"] == "lower"


def test_directions_come_from_names():
    assert [direction(n) for n in ("episode_reward", "ep_rew_mean", "val/acc1", "top1_accuracy",
                                   "episodic_return", "f1")] == [1] * 6
    assert [direction(n) for n in ("error", "ppl", "val_mae", "wer")] == [-1] * 4
    assert [direction(n) for n in ("loss_d", "value_loss", "return_std", "d_fake", "ep_len",
                                   "fid_score", "lr/0", "step_time", "mean_gap")] == [0] * 9
    # acronyms with a small letter inside, matched as written as well as cut at camelCase
    assert [direction(n) for n in ("IoU", "val/mIoU", "MeanIoU", "mean_iou", "test_miou")] == \
        [1] * 5
    # one side of a preference pair says no direction; the pair's margin and accuracy do
    assert [direction(n) for n in ("rewards/chosen", "rewards/rejected", "logps/chosen",
                                   "chosen_reward")] == [0] * 4
    assert [direction(n) for n in ("rewards/margins", "rewards/accuracies")] == [1] * 2


def test_a_return_that_dips_and_climbs_back_stays_quiet():
    # A lander: the first updates crash it more often than the random policy did, then it
    # learns, slowly, and ends below where it started: it came back from its worst.
    rng = np.random.default_rng(0)
    t = np.arange(200)
    dip = -180 - 120 * np.exp(-((t - 40) / 40) ** 2) + 0.2 * np.maximum(t - 60, 0) - 40
    ret = np.where(t < 3, -170, dip) + rng.normal(0, 10, len(t))
    loss = rng.normal(0.0, 0.05, len(t))  # a clipped surrogate with normalized advantages
    for name in ("ep_ret", "episode_reward"):
        assert loss_against_objective(_frames({("train", "loss"): loss,
                                               ("train", name): ret})) == []
    # the same fall, held at its worst to the end, is the flipped sign's
    held = np.where(t < 3, -170, -300) + rng.normal(0, 10, len(t))
    [f] = loss_against_objective(_frames({("train", "loss"): loss, ("train", "ep_ret"): held}))
    assert f.evidence["from_first_values"]


def test_an_episode_length_that_holds_its_start_a_block_then_falls_fires():
    # minimalRL's REINFORCE with the minus dropped, scored by the episode's length (whole
    # steps): the second block's median ties the first's before the policy is pushed to the
    # floor of the task and held there; the negated surrogate rises to 0 with the returns.
    rng = np.random.default_rng(2)
    t = np.arange(200)
    score = rng.integers(9, 15, len(t))
    score[:25] = rng.integers(10, 26, 25)
    score[25:50] = rng.permutation(score[:25])
    loss = -6.0 * score + rng.normal(0, 5, len(t))
    run = _frames({("train", "loss"): loss, ("train", "score"): score})
    medians = [np.median(b) for b in np.array_split(score, 8)]
    assert medians[1] == medians[0]  # the pattern the strict fall missed
    [f] = loss_against_objective(run)
    assert f.subject == "train/score"
    # held at its start to the end, dipping only mid-run: nothing was driven down
    back = score.copy()
    back[-25:] = score[:25]
    assert loss_against_objective(_frames({("train", "loss"): loss,
                                           ("train", "score"): back})) == []


def test_a_loss_below_0_at_a_few_steps_keeps_its_veto():
    # A return that collapses after its first values while the loss, a value loss less an
    # entropy bonus, rises with it (a run diverging, the loss agreeing): below 0 at two steps
    # where the fit was near exact, it is no surrogate centred on 0, and its rise vetoes.
    rng = np.random.default_rng(1)
    n = 120
    ret = np.where(np.arange(n) < 3, 50.0, 10.0) + rng.normal(0, 1, n)
    loss = np.linspace(0.05, 1.0, n) + rng.normal(0, 0.02, n)
    loss[[1, 5]] = -0.01
    assert loss_against_objective(_frames({("train", "loss"): loss,
                                           ("train", "ep_ret"): ret})) == []
    # centred on 0 (normalized advantages), the same rise is the surrogate's data, no veto
    centred = loss - np.median(loss)
    [f] = loss_against_objective(_frames({("train", "loss"): centred, ("train", "ep_ret"): ret}))
    assert f.evidence["surrogate"] is True and "policy's surrogate" in f.message


def test_short_or_malformed_scalars_stay_quiet():
    n = 16  # under min_points
    assert loss_against_objective(_frames({("train", "loss"): -np.arange(n),
                                           ("train", "reward"): -np.arange(n)})) == []
    assert loss_against_objective(Run.from_frames(scalars=pd.DataFrame(
        {"step": [0, 1], "split": ["train", "train"], "name": ["loss", "reward"],
         "value": [np.nan, np.inf]}))) == []
    assert loss_against_objective(Run.from_frames()) == []


def test_reinforce_on_raw_returns_with_the_sign_flipped_fires_as_published_stays_quiet(tmp_path):
    """Raw returns: the flipped loss is below 0 on every step and rises towards 0 as the
    episodes shorten; that rise is the returns shrinking, not the loss getting worse."""
    [f] = _findings(_reinforce(tmp_path / "flipped", sign=1.0, seed=1, standardize=False))
    assert f.subject == "train/episode_reward" and f.evidence["surrogate"] is True
    assert "negated surrogate" in f.message
    assert _findings(_reinforce(tmp_path / "right", sign=-1.0, seed=1, standardize=False)) == []


def _actor_critic(path, sign: float, epochs: int = 40, per_epoch: int = 200, seed: int = 0):
    """A vanilla policy gradient with a critic, as spinningup writes it: per epoch, episodes of
    cart-pole until `per_epoch` steps, one Adam step of the policy on sign * mean(log_prob *
    advantage) (advantages: rewards-to-go less the critic's values, normalized), then 20 Adam
    steps of the critic on its squared error, each model with its own optimizer; logged once
    an epoch with the mean episode return as `AverageEpRet`. Sign -1 is right, +1 the
    flipped bug."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    pi = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 2))
    v = nn.Sequential(nn.Linear(4, 32), nn.Tanh(), nn.Linear(32, 1))
    pi_opt, v_opt = torch.optim.Adam(pi.parameters(), lr=1e-2), \
        torch.optim.Adam(v.parameters(), lr=1e-3)
    model = nn.ModuleDict({"pi": pi, "v": v})
    with tracelab.Recorder(str(path), model=model, optimizer={"pi": pi_opt, "v": v_opt}) as rec:
        for _ in range(epochs):
            obs, acts, rets, lengths = [], [], [], []
            while len(obs) < per_epoch:
                env, n = _cart_pole(rng, cap=200), 0
                state = next(env)
                try:
                    while True:
                        x = torch.from_numpy(state)
                        with torch.no_grad():
                            a = int(torch.distributions.Categorical(logits=pi(x)).sample())
                        obs.append(x)
                        acts.append(a)
                        n += 1
                        state = env.send(a)
                except StopIteration:
                    pass
                rets += [float(n - t) for t in range(n)]
                lengths.append(n)
            x, a, ret = torch.stack(obs), torch.tensor(acts), torch.tensor(rets)
            with torch.no_grad():
                adv = ret - v(x)[:, 0]
            adv = (adv - adv.mean()) / (adv.std() + 1e-8)
            logp = torch.distributions.Categorical(logits=pi(x)).log_prob(a)
            loss = sign * (logp * adv).mean()
            pi_opt.zero_grad()
            loss.backward()
            pi_opt.step()
            for _ in range(20):
                v_opt.zero_grad()
                ((v(x)[:, 0] - ret) ** 2).mean().backward()
                v_opt.step()
            rec.step(loss=loss, inputs=x, metrics={"AverageEpRet": float(np.mean(lengths))})
    return path


def test_an_actor_critic_with_the_sign_flipped_fires_on_its_return(tmp_path):
    # Two optimizers (an actor and a critic), a surrogate centred on 0 by the normalized
    # advantages, and a return that falls to its floor within the first updates.
    [f] = _findings(_actor_critic(tmp_path / "flipped", +1.0))
    assert f.evidence["metric"] == "AverageEpRet"
    assert f.evidence["metric_last_half"] < f.evidence["metric_first"]


def test_an_actor_critic_as_published_stays_quiet(tmp_path):
    assert _findings(_actor_critic(tmp_path / "published", -1.0)) == []


def test_returns_are_named_in_rl_s_usual_spellings():
    from tracelab.analyzers._objectives import is_return
    for name in ("ep_ret", "EpRet", "AverageEpRet", "eprewmean", "rollout/ep_rew_mean",
                 "charts/episodic_return"):
        assert direction(name) == 1 and is_return(name), name
    for name in ("return_std", "ret_rms", "interpret", "val_acc", "score", "rewards/margins",
                 "rewards/chosen"):
        assert not is_return(name), name


def _a2c(path, entropy_sign: float, updates: int = 200, n_envs: int = 4, num_steps: int = 5,
         entropy_coef: float = 0.01, seed: int = 0, log_return: bool = True,
         lr: float = 2e-3):
    """A2C as ikostrikov's a2c_acktr.py writes it: n-step returns over a few cart-poles, one
    network with a policy and a value head, loss value_loss * 0.5 + action_loss - dist_entropy
    * entropy_coef (entropy_sign -1; +1 is the bonus added instead, open_spiel#962), RMSprop,
    the three terms and the recent episode return logged beside the loss."""
    torch.manual_seed(seed)
    rng = np.random.default_rng(seed)
    body = nn.Sequential(nn.Linear(4, 64), nn.Tanh())
    pi, v = nn.Linear(64, 2), nn.Linear(64, 1)
    nn.init.orthogonal_(pi.weight, gain=0.01)  # distributions.py's Categorical: near uniform
    nn.init.zeros_(pi.bias)
    model = nn.ModuleDict({"body": body, "pi": pi, "v": v})
    opt = torch.optim.RMSprop(model.parameters(), lr=lr, eps=1e-5, alpha=0.99)
    envs = [_cart_pole(rng, cap=200) for _ in range(n_envs)]
    obs = [next(e) for e in envs]
    lengths, finished = [0] * n_envs, []
    with tracelab.Recorder(str(path), model=model, optimizer=opt) as rec:
        for _ in range(updates):
            xs, acts, rews, masks = [], [], [], []
            for _ in range(num_steps):
                x = torch.from_numpy(np.stack(obs))
                with torch.no_grad():
                    a = torch.distributions.Categorical(logits=pi(body(x))).sample()
                r, m = [], []
                for i, e in enumerate(envs):
                    lengths[i] += 1
                    try:
                        obs[i] = e.send(int(a[i]))
                        m.append(1.0)
                    except StopIteration:
                        finished.append(lengths[i])
                        lengths[i] = 0
                        envs[i] = _cart_pole(rng, cap=200)
                        obs[i] = next(envs[i])
                        m.append(0.0)
                    r.append(1.0)
                xs.append(x)
                acts.append(a)
                rews.append(torch.tensor(r))
                masks.append(torch.tensor(m))
            with torch.no_grad():
                ret = v(body(torch.from_numpy(np.stack(obs))))[:, 0]
            returns = []
            for r, m in zip(reversed(rews), reversed(masks)):
                ret = r + 0.99 * ret * m
                returns.insert(0, ret)
            x, a, ret = torch.cat(xs), torch.cat(acts), torch.cat(returns)
            h = body(x)
            dist = torch.distributions.Categorical(logits=pi(h))
            adv = ret - v(h)[:, 0]
            value_loss = adv.pow(2).mean()
            action_loss = -(adv.detach() * dist.log_prob(a)).mean()
            entropy = dist.entropy().mean()
            loss = value_loss * 0.5 + action_loss + entropy_sign * entropy * entropy_coef
            opt.zero_grad()
            loss.backward()
            nn.utils.clip_grad_norm_(model.parameters(), 0.5)
            opt.step()
            metrics = {"value_loss": value_loss, "action_loss": action_loss,
                       "dist_entropy": entropy}
            if log_return:
                metrics["episode_return"] = float(np.mean(finished[-10:])) if finished else 0.0
            rec.step(loss=loss, inputs=x, metrics=metrics)
    return path


def test_an_a2c_whose_loss_adds_its_entropy_bonus_fires(tmp_path):
    [f] = _findings(_a2c(tmp_path / "added", +1.0))
    assert f.subject == "train/dist_entropy" and f.evidence["bonus"]
    assert f.evidence["coefficient"] == pytest.approx(0.01, rel=1e-3)
    assert f.evidence["terms"]["value_loss"] == pytest.approx(0.5, rel=1e-3)
    assert "Subtract the entropy bonus" in f.fix


def test_an_a2c_that_subtracts_its_entropy_bonus_stays_quiet(tmp_path):
    path = _a2c(tmp_path / "subtracted", -1.0)
    assert _findings(path) == []


def test_an_entropy_minimized_without_a_return_stays_quiet(tmp_path):
    # Without a return logged, no policy: entropy minimization can be the objective itself
    # (semi-supervised EntMin, test-time adaptation).
    assert _findings(_a2c(tmp_path / "no-return", +1.0, log_return=False)) == []


def test_loss_terms_read_only_exact_fits():
    from tracelab.analyzers._objectives import is_bonus, loss_terms
    rng = np.random.default_rng(0)
    v, a, e = rng.gamma(2, 1, 300), rng.normal(0, 1, 300), 0.6 - np.linspace(0, 0.3, 300)
    exact = _frames({("train", "loss"): np.float32(0.5 * v + a + 0.01 * e),
                     ("train", "value_loss"): v, ("train", "action_loss"): a,
                     ("train", "entropy"): e, ("train", "ep_ret"): rng.normal(20, 1, 300)})
    terms, resid = loss_terms(exact, "train")
    assert terms["entropy"] == pytest.approx(0.01, rel=1e-3) and "ep_ret" not in terms
    assert resid < 1e-6
    [f] = loss_against_objective(exact)
    assert f.evidence["bonus"] and f.subject == "train/entropy"
    # A loss that only resembles a sum of the terms (noise of 1 %) is no recorded fact.
    loose = _frames({("train", "loss"): (0.5 * v + a + 0.01 * e) * rng.normal(1, 0.01, 300),
                     ("train", "value_loss"): v, ("train", "action_loss"): a,
                     ("train", "entropy"): e, ("train", "ep_ret"): rng.normal(20, 1, 300)})
    assert loss_terms(loose, "train") is None and loss_against_objective(loose) == []
    assert is_bonus("dist_entropy") and is_bonus("losses/entropy") and is_bonus("entropy")
    for name in ("train/entropy_loss", "neg_entropy", "ent_coef", "cross_entropy"):
        assert not is_bonus(name), name


def _ddpg(path, sign: float, steps: int = 560, seed: int = 0, record_targets: bool = True):
    """DDPG as sfujim/DDPG writes it, shrunk: an actor (tanh output) and a critic, each with its
    own Adam, Polyak-averaged target networks, critic targets r + 0.9 * Q'(s', pi'(s')) under
    no_grad, recorded with targets= and outputs=; the actor's loss sign * Q(s, pi(s)).mean()
    logged as `actor_loss` (sign -1 is right, +1 the flipped bug). The task: a state s in
    [-1, 1], a reward of -|a - s| - 0.5, a fresh state each step; every 40 steps the mean reward
    of the deterministic policy on 64 states is logged as the val `return`. Without
    `record_targets`, step() gets the critic's loss and inputs only."""
    torch.manual_seed(seed)
    g = torch.Generator().manual_seed(seed)
    actor = nn.Sequential(nn.Linear(1, 32), nn.ReLU(), nn.Linear(32, 1), nn.Tanh())
    critic = nn.Sequential(nn.Linear(2, 32), nn.ReLU(), nn.Linear(32, 1))
    actor_t, critic_t = copy.deepcopy(actor), copy.deepcopy(critic)
    a_opt = torch.optim.Adam(actor.parameters(), lr=1e-3)
    c_opt = torch.optim.Adam(critic.parameters(), lr=1e-3)
    reward = lambda s, a: -(a - s).abs() - 0.5  # noqa: E731
    states = torch.rand(256, 1, generator=g) * 2 - 1
    model = nn.ModuleDict({"actor": actor, "critic": critic})
    with tracelab.Recorder(str(path), model=model,
                           optimizer={"actor": a_opt, "critic": c_opt}) as rec:
        for step in range(steps):
            s = torch.rand(32, 1, generator=g) * 2 - 1
            a = torch.rand(32, 1, generator=g) * 2 - 1
            r, s2 = reward(s, a), torch.rand(32, 1, generator=g) * 2 - 1
            with torch.no_grad():
                target = r + 0.9 * critic_t(torch.cat([s2, actor_t(s2)], 1))
            q = critic(torch.cat([s, a], 1))
            critic_loss = nn.functional.mse_loss(q, target)
            c_opt.zero_grad()
            critic_loss.backward()
            c_opt.step()
            actor_loss = sign * critic(torch.cat([s, actor(s)], 1)).mean()
            a_opt.zero_grad()
            actor_loss.backward()
            a_opt.step()
            with torch.no_grad():
                for net, tgt in ((actor, actor_t), (critic, critic_t)):
                    for p, tp in zip(net.parameters(), tgt.parameters()):
                        tp.mul_(0.95).add_(0.05 * p)
            seen = {"targets": target, "outputs": q} if record_targets else {}
            rec.step(loss=critic_loss, inputs=s, metrics={"actor_loss": actor_loss.item()},
                     **seen)
            if step % 40 == 0:
                with torch.no_grad():
                    ret = float(reward(states, actor(states)).mean())
                rec.log("val", metrics={"return": ret})
    return path


def test_a_ddpg_actor_that_minimizes_q_fires(tmp_path):
    # The return has 14 values, too few for the metric's own test: the actor's loss, with the
    # sign of the critic's targets at every profiled step of the last half, says it.
    [f] = _findings(_ddpg(tmp_path / "flipped", +1.0))
    assert f.subject == "train/actor_loss" and f.evidence["actor_q"] is True
    assert f.evidence["same_sign"] == f.evidence["points"] and 0.5 <= f.evidence["ratio"] <= 2


def test_a_ddpg_actor_that_maximizes_q_stays_quiet(tmp_path):
    assert _findings(_ddpg(tmp_path / "published", -1.0)) == []


def test_a_ddpg_actor_that_minimizes_q_without_its_critic_s_targets_stays_quiet(tmp_path):
    # The critic's values are the fact the actor's sign is read against: not recorded, the
    # 14 values of the return alone say nothing.
    assert _findings(_ddpg(tmp_path / "flipped", +1.0, record_targets=False)) == []


def test_actor_losses_are_named_in_rl_s_usual_spellings():
    from tracelab.analyzers._objectives import is_actor_loss
    for name in ("actor_loss", "losses/actor_loss", "train/actor_loss", "LossPi",
                 "policy_loss", "action_loss"):
        assert is_actor_loss(name), name
    for name in ("loss", "critic_loss", "qf1_loss", "value_loss", "losses/qf1_values",
                 "actor_critic_loss", "g_loss", "entropy"):
        assert not is_actor_loss(name), name


def test_a_return_is_said_to_fall_only_against_its_first_quarter_in_every_logged_return():
    # A run that does not learn: its return's first value happened to be its highest, the rest
    # the same noise; one value is a coin flip, its first quarter against its last half is not.
    from tracelab.analyzers.loss_against_objective import _fallen_return
    rng = np.random.default_rng(0)
    flat = rng.normal(0, 1, 40)
    flat[0] = flat.max() + 1
    assert _fallen_return(_frames({("val", "return"): flat})) is None
    fell = np.linspace(0, -2, 40) + rng.normal(0, 0.2, 40)
    name, first, half, last = _fallen_return(_frames({("val", "return"): fell}))
    assert name == "return" and half < first
    # Two returns (train's episodic and an evaluation's): one fell, the other rose.
    assert _fallen_return(_frames({("val", "return"): fell,
                                   ("train", "episodic_return"): -fell})) is None


def test_a_return_evaluated_a_few_times_falls_only_below_its_first_value_at_every_evaluation():
    from tracelab.analyzers.loss_against_objective import _fallen_return
    assert _fallen_return(_frames({("val", "return"): [-36.1, -78.9, -79.3, -79.4, -79.4]}))
    assert _fallen_return(_frames({("val", "return"): [-36.1, -78.9, -20.0, -79.4, -79.4]})) \
        is None
