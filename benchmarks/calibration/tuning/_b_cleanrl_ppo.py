"""vwxyzjn/cleanrl cleanrl/ppo.py, shrunk: the same Agent (separate 64-64 tanh actor and critic,
orthogonal init), Adam(lr=2.5e-4, eps=1e-5) annealed linearly per iteration, 4 envs x 128
steps, GAE (gamma 0.99, lambda 0.95), 4 epochs of 4 minibatches, normalized advantages,
clipped surrogate and clipped value loss, entropy bonus, clip_grad_norm_(0.5) before each
step; 24 iterations instead of 500,000 / 512. A numpy CartPole with gym's CartPole-v1 dynamics
(termination at 12 degrees or 2.4 units, truncation at 500 steps, auto-reset) stands in for
gym.vector.SyncVectorEnv, which this environment does not install; learning_rate 1e-3 instead
of 2.5e-4 so that 12,288 environment steps show learning.

Bugs (`bug=`): "actor-only-optimizer" (Adam given agent.actor.parameters(): the critic is
trained by no optimizer), "value-not-flattened" (newvalue.view(-1) left out: (N, 1) values
broadcast against (N,) returns in the value loss)."""
from __future__ import annotations

import numpy as np
import torch
from torch import nn, optim
from torch.distributions.categorical import Categorical

import tracelab


class CartPoleVec:
    """gym's CartPole-v1 for several envs at once, resetting each one that ends."""

    def __init__(self, num_envs: int, seed: int):
        self.n, self.rng = num_envs, np.random.default_rng(seed)
        self.state = self.rng.uniform(-0.05, 0.05, (num_envs, 4))
        self.length = np.zeros(num_envs, dtype=int)
        self.ret = np.zeros(num_envs)

    def step(self, action: np.ndarray):
        x, x_dot, theta, theta_dot = self.state.T
        force = np.where(action == 1, 10.0, -10.0)
        cos, sin = np.cos(theta), np.sin(theta)
        temp = (force + 0.05 * theta_dot ** 2 * sin) / 1.1
        theta_acc = (9.8 * sin - cos * temp) / (0.5 * (4.0 / 3.0 - 0.1 * cos ** 2 / 1.1))
        x_acc = temp - 0.05 * theta_acc * cos / 1.1
        x, x_dot = x + 0.02 * x_dot, x_dot + 0.02 * x_acc
        theta, theta_dot = theta + 0.02 * theta_dot, theta_dot + 0.02 * theta_acc
        self.state = np.stack([x, x_dot, theta, theta_dot], 1)
        self.length += 1
        self.ret += 1.0
        terminated = (np.abs(x) > 2.4) | (np.abs(theta) > 12 * 2 * np.pi / 360)
        truncated = self.length >= 500
        done = terminated | truncated
        finished = self.ret[done].tolist()
        if done.any():
            self.state[done] = self.rng.uniform(-0.05, 0.05, (int(done.sum()), 4))
            self.length[done], self.ret[done] = 0, 0.0
        return self.state.astype(np.float32), np.ones(self.n, dtype=np.float32), done, finished


def layer_init(layer, std=np.sqrt(2), bias_const=0.0):
    torch.nn.init.orthogonal_(layer.weight, std)
    torch.nn.init.constant_(layer.bias, bias_const)
    return layer


class Agent(nn.Module):
    def __init__(self, obs_dim: int = 4, n_actions: int = 2):
        super().__init__()
        self.critic = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 1), std=1.0))
        self.actor = nn.Sequential(
            layer_init(nn.Linear(obs_dim, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, 64)), nn.Tanh(),
            layer_init(nn.Linear(64, n_actions), std=0.01))

    def get_value(self, x):
        return self.critic(x)

    def get_action_and_value(self, x, action=None):
        logits = self.actor(x)
        probs = Categorical(logits=logits)
        if action is None:
            action = probs.sample()
        return action, probs.log_prob(action), probs.entropy(), self.critic(x)


def train(run_dir: str, seed: int = 0, *, bug: str | None = None, num_iterations: int = 24,
          learning_rate: float = 1e-3) -> None:
    torch.set_num_threads(1)
    np.random.seed(seed)
    torch.manual_seed(seed)
    num_envs, num_steps, update_epochs, num_minibatches = 4, 128, 4, 4
    gamma, gae_lambda, clip_coef, ent_coef, vf_coef, max_grad_norm = 0.99, 0.95, 0.2, 0.01, 0.5, 0.5
    batch_size = num_envs * num_steps
    minibatch_size = batch_size // num_minibatches
    envs = CartPoleVec(num_envs, seed)
    agent = Agent()
    trained = agent.actor if bug == "actor-only-optimizer" else agent
    optimizer = optim.Adam(trained.parameters(), lr=learning_rate, eps=1e-5)
    obs = torch.zeros((num_steps, num_envs, 4))
    actions = torch.zeros((num_steps, num_envs))
    logprobs = torch.zeros((num_steps, num_envs))
    rewards = torch.zeros((num_steps, num_envs))
    dones = torch.zeros((num_steps, num_envs))
    values = torch.zeros((num_steps, num_envs))
    next_obs = torch.Tensor(envs.state.astype(np.float32))
    next_done = torch.zeros(num_envs)
    returns_seen: list[float] = []
    config = {"learning_rate": learning_rate, "anneal_lr": True, "num_envs": num_envs,
              "num_steps": num_steps, "max_grad_norm": max_grad_norm}
    with tracelab.Recorder(run_dir, model=agent, optimizer=optimizer, config=config) as rec:
        for iteration in range(1, num_iterations + 1):
            frac = 1.0 - (iteration - 1.0) / num_iterations
            optimizer.param_groups[0]["lr"] = frac * learning_rate
            for step in range(0, num_steps):
                obs[step] = next_obs
                dones[step] = next_done
                with torch.no_grad():
                    action, logprob, _, value = agent.get_action_and_value(next_obs)
                    values[step] = value.flatten()
                actions[step] = action
                logprobs[step] = logprob
                next_obs, reward, next_done, finished = envs.step(action.numpy())
                returns_seen.extend(finished)
                rewards[step] = torch.tensor(reward).view(-1)
                next_obs, next_done = torch.Tensor(next_obs), torch.Tensor(next_done)
            with torch.no_grad():
                next_value = agent.get_value(next_obs).reshape(1, -1)
                advantages = torch.zeros_like(rewards)
                lastgaelam = 0
                for t in reversed(range(num_steps)):
                    if t == num_steps - 1:
                        nextnonterminal = 1.0 - next_done
                        nextvalues = next_value
                    else:
                        nextnonterminal = 1.0 - dones[t + 1]
                        nextvalues = values[t + 1]
                    delta = rewards[t] + gamma * nextvalues * nextnonterminal - values[t]
                    advantages[t] = lastgaelam = (
                        delta + gamma * gae_lambda * nextnonterminal * lastgaelam)
                returns = advantages + values
            b_obs = obs.reshape((-1, 4))
            b_logprobs = logprobs.reshape(-1)
            b_actions = actions.reshape(-1)
            b_advantages = advantages.reshape(-1)
            b_returns = returns.reshape(-1)
            b_values = values.reshape(-1)
            b_inds = np.arange(batch_size)
            recent = float(np.mean(returns_seen[-20:])) if returns_seen else float("nan")
            for _ in range(update_epochs):
                np.random.shuffle(b_inds)
                for start in range(0, batch_size, minibatch_size):
                    mb_inds = b_inds[start:start + minibatch_size]
                    _, newlogprob, entropy, newvalue = agent.get_action_and_value(
                        b_obs[mb_inds], b_actions.long()[mb_inds])
                    logratio = newlogprob - b_logprobs[mb_inds]
                    ratio = logratio.exp()
                    mb_advantages = b_advantages[mb_inds]
                    mb_advantages = ((mb_advantages - mb_advantages.mean())
                                     / (mb_advantages.std() + 1e-8))
                    pg_loss1 = -mb_advantages * ratio
                    pg_loss2 = -mb_advantages * torch.clamp(ratio, 1 - clip_coef, 1 + clip_coef)
                    pg_loss = torch.max(pg_loss1, pg_loss2).mean()
                    if bug != "value-not-flattened":
                        newvalue = newvalue.view(-1)
                    v_loss_unclipped = (newvalue - b_returns[mb_inds]) ** 2
                    v_clipped = b_values[mb_inds] + torch.clamp(
                        newvalue - b_values[mb_inds], -clip_coef, clip_coef)
                    v_loss_clipped = (v_clipped - b_returns[mb_inds]) ** 2
                    v_loss = 0.5 * torch.max(v_loss_unclipped, v_loss_clipped).mean()
                    entropy_loss = entropy.mean()
                    loss = pg_loss - ent_coef * entropy_loss + v_loss * vf_coef
                    optimizer.zero_grad()
                    loss.backward()
                    nn.utils.clip_grad_norm_(agent.parameters(), max_grad_norm)
                    optimizer.step()
                    rec.step(loss=loss, inputs=b_obs[mb_inds], targets=b_returns[mb_inds],
                             outputs=newvalue,
                             metrics={"value_loss": v_loss, "policy_loss": pg_loss,
                                      "entropy": entropy_loss, "episodic_return": recent})
