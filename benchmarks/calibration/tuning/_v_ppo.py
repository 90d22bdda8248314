"""nikhilbarhate99/PPO-PyTorch PPO.py (with train.py's CartPole-v1 settings), shrunk: its
ActorCritic (actor and critic MLPs 64-64 with Tanh, the actor ending in Softmax), a
RolloutBuffer, Monte-Carlo returns normalized per update, and PPO.update(): K_epochs passes of
the clipped surrogate `-min(surr1, surr2) + 0.5 * MSE(state_values, rewards) - 0.01 * entropy`
with one Adam over two parameter groups (actor lr 3e-4 in train.py, 1e-3 here for the shorter
run; critic lr 1e-3), then policy_old copies the policy. The cart-pole equations are written out
(no gym); update_timestep 300 and K_epochs 10 instead of 1,600 and 80, max_ep_len 200, 30
updates. The Recorder gets one step per K-epoch pass (the loss, the states, the returns and the
critic's values); the mean episode length of each update is logged as a "val" metric.

`bug` plants one fault (None: the script as published):
- "ascent": the minus sign in front of torch.min(surr1, surr2) left out.
"""
from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.distributions import Categorical

import tracelab
from _v_data import CartPole

SOURCE = ("https://github.com/nikhilbarhate99/PPO-PyTorch/blob/"
          "728cce83d7ab628fe2634eabcdf3239997eb81dd/PPO.py")
BUGS = (None, "ascent")


class ActorCritic(nn.Module):
    def __init__(self, state_dim, action_dim):
        super().__init__()
        self.actor = nn.Sequential(nn.Linear(state_dim, 64), nn.Tanh(), nn.Linear(64, 64),
                                   nn.Tanh(), nn.Linear(64, action_dim), nn.Softmax(dim=-1))
        self.critic = nn.Sequential(nn.Linear(state_dim, 64), nn.Tanh(), nn.Linear(64, 64),
                                    nn.Tanh(), nn.Linear(64, 1))

    def act(self, state):
        dist = Categorical(self.actor(state))
        action = dist.sample()
        return action.detach(), dist.log_prob(action).detach(), self.critic(state).detach()

    def evaluate(self, state, action):
        action_probs = self.actor(state)
        dist = Categorical(action_probs)
        return dist.log_prob(action), self.critic(state), dist.entropy()


def run(run_dir: str, seed: int = 0, bug: str | None = None, updates: int = 30,
        update_timestep: int = 300, K_epochs: int = 10, eps_clip: float = 0.2,
        gamma: float = 0.99, lr_actor: float = 1e-3, lr_critic: float = 1e-3,
        max_ep_len: int = 200) -> None:
    assert bug in BUGS, bug
    torch.set_num_threads(1)
    torch.manual_seed(seed)
    env = CartPole(np.random.default_rng(seed))
    policy = ActorCritic(4, 2)
    optimizer = torch.optim.Adam([{"params": policy.actor.parameters(), "lr": lr_actor},
                                  {"params": policy.critic.parameters(), "lr": lr_critic}])
    policy_old = ActorCritic(4, 2)
    policy_old.load_state_dict(policy.state_dict())
    mse = nn.MSELoss()
    state, ep_len, ep_lens = env.reset(), 0, []
    with tracelab.Recorder(run_dir, model=policy, optimizer=optimizer, loss_fn=mse,
                           config={"lr_actor": lr_actor, "lr_critic": lr_critic,
                                   "gamma": gamma, "K_epochs": K_epochs, "eps_clip": eps_clip,
                                   "update_timestep": update_timestep}) as rec:
        for _update in range(updates):
            states, actions, logprobs, rewards, terminals = [], [], [], [], []
            for _t in range(update_timestep):
                with torch.no_grad():
                    s = torch.FloatTensor(state)
                    action, logprob, _value = policy_old.act(s)
                states.append(s)
                actions.append(action)
                logprobs.append(logprob)
                state, reward, done = env.step(action.item())
                ep_len += 1
                done = done or ep_len >= max_ep_len
                rewards.append(reward)
                terminals.append(done)
                if done:
                    ep_lens.append(ep_len)
                    state, ep_len = env.reset(), 0
            # Monte Carlo estimate of returns
            returns, discounted = [], 0.0
            for reward, is_terminal in zip(reversed(rewards), reversed(terminals)):
                if is_terminal:
                    discounted = 0.0
                discounted = reward + gamma * discounted
                returns.insert(0, discounted)
            returns = torch.tensor(returns, dtype=torch.float32)
            returns = (returns - returns.mean()) / (returns.std() + 1e-7)
            old_states = torch.stack(states).detach()
            old_actions = torch.stack(actions).detach()
            old_logprobs = torch.stack(logprobs).detach()
            with torch.no_grad():
                old_values = policy_old.critic(old_states).squeeze()
            advantages = returns.detach() - old_values.detach()
            for _ in range(K_epochs):
                logp, state_values, dist_entropy = policy.evaluate(old_states, old_actions)
                state_values = torch.squeeze(state_values)
                ratios = torch.exp(logp - old_logprobs.detach())
                surr1 = ratios * advantages
                surr2 = torch.clamp(ratios, 1 - eps_clip, 1 + eps_clip) * advantages
                surrogate = torch.min(surr1, surr2)
                if bug != "ascent":
                    surrogate = -surrogate
                loss = surrogate + 0.5 * mse(state_values, returns) - 0.01 * dist_entropy
                optimizer.zero_grad()
                loss.mean().backward()
                optimizer.step()
                rec.step(loss=loss.mean(), inputs=old_states, targets=returns,
                         outputs=state_values)
            policy_old.load_state_dict(policy.state_dict())
            recent = ep_lens[-10:] or [ep_len]
            rec.log("val", metrics={"episode_length": float(np.mean(recent))})
