"""A world whose help-policy values are exact, played by an agent fitted to the real model.

:class:`FittedWorld` is to the fitted agents (:class:`collect.simulate.FittedAgent`, the
table in ``collect/simulated_real.json``, and :class:`collect.simfeatures.FeatureAgent`,
the logit on task features) what ``helpdp.synthetic.HelpWorld`` is to its hand-set
dynamics: episodes to collect, and the exact (SR, U) of any help policy, so that the
meta-evaluation (``bench/safe_select.py``, kinds ``table`` and ``features``) measures the
protocol's choice without sampling error on an agent shaped like the real one.

The chain is the fitted agent's own (``collect.simulate.simulate_fitted_turn``,
``collect.fit_simulated.simulate_chains``): at turn ``t`` the turn's outcome (working,
failed, unknown_tool, format_error, stop, repeat) is drawn from the agent's row for
(help now, turn, previous class, repeat run) and the task's reference calls and tool
count. A working turn makes the next reference call with probability ``on_path`` (help
now, or not); a repeat keeps the previous class and makes no progress; a format error
ends the episode in failure; a stop succeeds when every reference call has been made;
``horizon`` turns end it in failure. The Markov state is (t, previous class, repeat run
capped at :attr:`FittedWorld.run_cap`, turn of the latest help, reference calls made) and
is the collection's ``state_id``; the logged steps (``kind``, ``tool_name``, ``failure``)
are classified by ``helpdp.events`` as the collector's are, so the data's views hold the
uncapped run.

**Exact values.** :meth:`FittedWorld.exact` pushes the state distribution forward turn
by turn (numpy over the reference-progress axis) and asks the policy once per turn for
every state with mass. The views carry the state (depth, the previous class and its
failure, the repeat run, the latest help, its ``state_id``) but not the episode's
cumulative ``errors``, its expert ``calls`` or its ``past`` states, which the state does
not hold: a policy whose decisions change with them (or with a repeat run beyond the
cap) is refused with a ``ValueError`` rather than valued wrongly. The selection's
candidates (the rungs' tables, the turn rules, event rules without a call cap) read none
of them. Nothing is timed.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

import numpy as np

from collect.simfeatures import FeatureAgent, agent_from_json
from collect.simulate import OUTCOMES, FittedAgent
from helpdp.policies import StateView, action_probs, components
from helpdp.rekey import REPEAT_CAP
from helpdp.splits import stable_int64
from helpdp.synthetic import world_dataset

__all__ = ["AGENTS", "PREV", "FittedWorld", "load_agent"]

ROOT = Path(__file__).resolve().parents[1]
#: the shipped fitted agents (``collect.fit_simulated``): kind -> JSON
AGENTS = {
    "table": ROOT / "collect" / "simulated_real.json",
    "features": ROOT / "collect" / "simulated_features.json",
}
#: the previous turn's class (index 0: no previous turn)
PREV = ("start", "working", "failed", "unknown_tool")
#: the failure logged for a turn of each failing class (``helpdp.events.FAILURES``)
FAILURE_OF = {"failed": "tool_error", "unknown_tool": "unknown_tool"}
_W, _F, _U, _FMT, _STOP, _REP = (
    OUTCOMES.index(x)
    for x in ("working", "failed", "unknown_tool", "format_error", "stop", "repeat")
)
_SID_BITS = 62


@cache
def load_agent(kind: str) -> FittedAgent | FeatureAgent:
    """The shipped agent of ``kind`` (``table`` or ``features``)."""
    if kind not in AGENTS:
        raise ValueError(f"fitted agent {kind!r}: one of {', '.join(AGENTS)}")
    path = AGENTS[kind]
    return agent_from_json(json.loads(path.read_text()), str(path.relative_to(ROOT)))


@dataclass(frozen=True)
class FittedWorld:
    """Tasks of ``n_calls`` reference calls in worlds of ``n_tools`` tools, played by
    ``agent`` for at most ``horizon`` turns (the real pilot's ``env.max_turns=12``)."""

    agent: FittedAgent | FeatureAgent
    n_calls: tuple[int, ...]
    n_tools: tuple[int, ...]
    horizon: int = 12
    _rows: np.ndarray = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if len(self.n_calls) != len(self.n_tools) or not self.n_calls:
            raise ValueError("n_calls and n_tools: one entry per task, at least one task")
        if min(self.n_calls) < 1 or min(self.n_tools) < 1 or self.horizon < 1:
            raise ValueError("n_calls, n_tools and horizon must be at least 1")
        cap = self.run_cap
        # NaN where no state reaches (a previous class only after turn 0, a repeat run
        # of r only from turn r + 1): a table holds no row there
        shape = (len(self.n_calls), 2, self.horizon, len(PREV), cap + 1, len(OUTCOMES))
        rows = np.full(shape, np.nan)
        for i, (nc, nt) in enumerate(zip(self.n_calls, self.n_tools)):
            for a in (0, 1):
                for t in range(self.horizon):
                    for p, prev in enumerate(PREV):
                        if (p == 0) != (t == 0):
                            continue
                        for r in range(min(cap, max(t - 1, 0)) + 1):
                            rows[i, a, t, p, r] = self.agent.row(
                                bool(a), t, prev, r, n_calls=nc, n_tools=nt
                            )
        object.__setattr__(self, "_rows", rows)

    @property
    def run_cap(self) -> int:
        """Repeat runs at or above this are one state (the agent's and the rungs' cap)."""
        return max(int(self.agent.max_run), REPEAT_CAP)

    def row(self, task: int, a: int, t: int, prev: int, run: int) -> np.ndarray:
        """The turn's outcome probabilities over ``OUTCOMES``."""
        p = self._rows[task, a, t, prev, min(run, self.run_cap)]
        if np.isnan(p).any():
            raise ValueError(f"no state reaches turn {t}, previous {PREV[prev]}, run {run}")
        return p

    @staticmethod
    def state_id(task, t, prev, run, last_help, k, end: str = "") -> int:
        return stable_int64("fitted", int(task), int(t), int(prev), int(run), int(last_help),
                            int(k), end)  # fmt: skip

    def view(self, task, t, prev, run, last_help, k, *, episode_id=0, errors=0, calls=0,
             past=()) -> StateView:  # fmt: skip
        cls = PREV[prev]
        return StateView(
            state_id=self.state_id(task, t, prev, run, last_help, k),
            task_id=f"fitted/{task}",
            depth=int(t),
            text="",
            episode_id=int(episode_id),
            last_failure=FAILURE_OF.get(cls),
            errors=int(errors),
            last_help=int(last_help),
            last_class=None if t == 0 else cls,
            repeats=int(run),
            calls=int(calls),
            past=tuple(past),
        )

    # ------------------------------------------------------------------ exact values

    def exact(self, policy) -> tuple[float, float]:
        """Exact (SR, U) of a help policy, the tasks weighted equally (per-episode
        mixtures through ``components``, per-decision randomisation through
        ``action_probs``). A ``ValueError`` for a policy that reads what the state
        does not hold (module docstring)."""
        total_s = total_u = 0.0
        for w, comp in components(policy):
            for task in range(len(self.n_calls)):
                s, u = self._exact_task(comp, task)
                total_s += w * s / len(self.n_calls)
                total_u += w * u / len(self.n_calls)
        return total_s, total_u

    def _decisions(self, policy, task: int, t: int, idx: tuple[np.ndarray, ...]) -> np.ndarray:
        """P(help) at the states ``idx`` (prev, run, lh + 1, k) of turn ``t``, checked
        against views that differ only in what the state does not hold."""
        keys = list(zip(*(x.tolist() for x in idx)))
        views = [self.view(task, t, p, r, lh - 1, k) for p, r, lh, k in keys]
        pa = action_probs(policy, views, 2)[:, 1]
        probe = [
            replace(v, errors=v.errors + 1 + t, calls=v.calls + 1 + t,
                    past=((None, 0, None),) * t,
                    repeats=v.repeats + (v.repeats >= self.run_cap))
            for v in views
        ]  # fmt: skip
        if not np.allclose(action_probs(policy, probe, 2)[:, 1], pa, atol=1e-12):
            raise ValueError(
                f"{getattr(policy, 'name', policy)!r}: its decisions depend on the episode's "
                "errors, calls, past states or a repeat run beyond the cap, which "
                "FittedWorld's state does not hold; its exact value is not defined here"
            )
        return pa

    def _exact_task(self, policy, task: int) -> tuple[float, float]:
        n, horizon, cap = self.n_calls[task], self.horizon, self.run_cap
        q = np.asarray(self.agent.on_path, dtype=float)
        # mass[prev, run, last_help + 1, k]: k = reference calls made (n: all)
        mass = np.zeros((len(PREV), cap + 1, horizon + 1, n + 1))
        mass[0, 0, 0, 0] = 1.0
        success = calls = 0.0
        for t in range(horizon):
            idx = np.nonzero(mass > 0)
            if not len(idx[0]):
                break
            p_help = np.zeros_like(mass)
            p_help[idx] = self._decisions(policy, task, t, idx)
            new = np.zeros_like(mass)
            for a in (0, 1):
                m = mass * (p_help if a else 1.0 - p_help)
                calls += a * m.sum()
                rows = np.nan_to_num(self._rows[task, a, t])  # [prev, run, outcome]
                success += float((m[:, :, :, n] * rows[:, :, None, _STOP]).sum())
                if t + 1 >= horizon:
                    continue
                if a:  # the latest help is now
                    m_lh = np.zeros_like(m)
                    m_lh[:, :, t + 1] = m.sum(axis=2)
                    m = m_lh
                by = {o: (m * rows[:, :, None, None, o]) for o in (_W, _F, _U, _REP)}
                work = by[_W].sum(axis=(0, 1))  # [lh, k]
                moved = work[:, :n] * q[a]
                work[:, :n] -= moved
                work[:, 1:] += moved
                new[1, 0] += work
                new[2, 0] += by[_F].sum(axis=(0, 1))
                new[3, 0] += by[_U].sum(axis=(0, 1))
                rep = by[_REP]
                new[:, 1:] += rep[:, :-1]
                new[:, cap] += rep[:, cap]
            mass = new
        return success, calls

    # ------------------------------------------------------------------ episodes

    def _episode(self, task: int, decide, rng: np.random.Generator, eid: int):
        """One episode: ``decide(view) -> P(help)`` at each turn. Returns (steps, turns,
        success, calls); a step is (episode, t, state, action, next state, failure,
        kind, tool, p_help)."""
        n, cap = self.n_calls[task], self.run_cap
        q = self.agent.on_path
        t, prev, run, lh, k = 0, 0, 0, -1, 0
        calls = errors = 0
        past: list[tuple] = []
        last_call: tuple = (None, None, None)
        steps, success = [], False
        while True:
            v = self.view(task, t, prev, run, lh, k, episode_id=eid, errors=errors,
                          calls=calls, past=tuple(past))  # fmt: skip
            past.append((v.last_class, v.repeats, v.context_tokens))
            p_help = float(decide(v))
            a = int(rng.random() < p_help)
            calls += a
            nlh = t if a else lh
            p = self.row(task, a, t, prev, run)
            o = min(int(np.searchsorted(np.cumsum(p), rng.random(), side="right")), len(p) - 1)
            end = ""
            if o == _REP:
                kind, tool, failure = last_call
                nrun = min(run + 1, cap)
            else:
                nrun = 0
                if o == _W:
                    kind, tool, failure = "call_tool", f"read_{t}", None
                    if k < n and rng.random() < q[a]:
                        k += 1
                elif o == _F:
                    kind, tool, failure = "call_tool", f"update_{t}", FAILURE_OF["failed"]
                elif o == _U:
                    kind, tool, failure = "call_tool", f"missing_{t}", "unknown_tool"
                elif o == _FMT:
                    kind, tool, failure, end = "invalid", None, "invalid_json", "fail"
                else:
                    kind, tool, failure = "final", None, None
                    success = k >= n
                    end = "ok" if success else "fail"
                prev = PREV.index(OUTCOMES[o]) if o in (_W, _F, _U) else prev
            if not end and t + 1 >= self.horizon:
                end = "out"
            errors += failure is not None
            nxt = self.state_id(task, t + 1, prev, nrun, nlh, k, end)
            steps.append((eid, t, v.state_id, a, nxt, failure, kind, tool, p_help))
            last_call = (kind, tool, failure)
            if end:
                return steps, t + 1, success, calls
            t, run, lh = t + 1, nrun, nlh

    def _dataset(self, episodes, generator: str, design: bool):
        states, trans, eps, steps = {}, {}, [], []
        for task, split, seed, p, design_json, (ep_steps, turns, success, calls) in episodes:
            tid = f"fitted/{task}"
            for j, (_eid, t, sid, a, nxt, *_rest) in enumerate(ep_steps):
                states.setdefault(sid, (sid, tid, t, t == 0, False, False))
                last = j == len(ep_steps) - 1
                if last:
                    states[nxt] = (nxt, tid, t + 1, False, True, bool(success))
                trans[(sid, a, nxt)] = trans.get((sid, a, nxt), 0) + 1
            steps += ep_steps
            row = (ep_steps[0][0], tid, split, seed, float(p), turns, success, calls)
            eps.append(row + ((design_json,) if design else ()))
        return world_dataset(
            states, trans, eps, steps, generator,
            episode_extra=["design"] if design else (),
            step_extra=["kind", "tool_name", "p_help"],
        )  # fmt: skip

    def collect(self, seeds: int = 10, probs=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), seed: int = 0):
        """Episodes under the random schedule, one per (task, p, seed), as a
        ``helpdp.data.Dataset`` (``HelpWorld.collect``'s layout, with the steps' ``kind``
        and ``tool_name`` so that the events are classified as the collector's)."""
        rng = np.random.default_rng(seed)
        episodes, eid = [], 0
        for task in range(len(self.n_calls)):
            for p in probs:
                for s in range(seeds):
                    eid += 1
                    ep = self._episode(task, lambda v, p=p: p, rng, eid)
                    episodes.append((task, "train", s, p, None, ep))
        return self._dataset(episodes, "bench.fitted_world.FittedWorld", design=False)

    def collect_design(self, behaviour, episodes_per_task: int, *, seed: int = 0,
                       first_id: int = 10**9):  # fmt: skip
        """Episodes under a stage-2 design (``bench.two_stage.collect_design``'s layout:
        the episodes' ``design`` and ``trigger_p`` = its q, the steps' ``p_help``)."""
        rng = np.random.default_rng(seed)
        spec = behaviour.spec()
        design_json = json.dumps(spec, sort_keys=True)
        episodes, eid = [], first_id
        for task in range(len(self.n_calls)):
            for k in range(episodes_per_task):
                eid += 1
                ep = self._episode(
                    task, lambda v: float(action_probs(behaviour, [v], 2)[0, 1]), rng, eid
                )
                episodes.append((task, "train", k, spec.get("q", 0.0), design_json, ep))
        return self._dataset(episodes, "bench.fitted_world.FittedWorld", design=True)

    def run(self, policy, episodes_per_task: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """On-policy episodes of ``policy`` (its per-episode mixture drawn per episode):
        (success, calls), one entry per episode."""
        rng = np.random.default_rng(seed)
        comps = components(policy)
        w = np.array([c[0] for c in comps])
        success, calls = [], []
        for task in range(len(self.n_calls)):
            for e in range(episodes_per_task):
                comp = comps[int(rng.choice(len(comps), p=w / w.sum()))][1]
                _, _, ok, n = self._episode(
                    task, lambda v, c=comp: float(action_probs(c, [v], 2)[0, 1]), rng, e
                )
                success.append(ok)
                calls.append(n)
        return np.array(success, float), np.array(calls, float)
