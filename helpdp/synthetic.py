"""A seeded generator of agent-like MDP datasets (no environments, no models).

This is a *simulation*, not a model rollout: a small, fast, fully documented
source of contract-format datasets with realistic structure, for tests, notebooks
and experiments with the DP (the embedded demo dataset is collected from the demo
worlds instead, see ``helpdp.demo``). Each task needs ``L`` (10-20) correct tool
calls. At every step the agent either makes progress or errs; errors are likelier
early in the episode (format errors that fall as it proceeds), on harder tasks,
and at a few "critical" steps of each task. After an error the agent is stuck and
recovers on its own only with a small probability; three errors in a row, or
six failed steps in all, end the episode in failure. An expert call (the
intervention) gives the correct next call: it fixes an error and makes progress
with high probability, and leaves its plan in context, which lowers the error
rate of the next step. Help is therefore worth a lot at critical steps and after
errors, and little on easy steps: exactly the structure the budgeted DP exploits.

Episodes follow the collection schedule of Min et al. (2025): expert calls are triggered
uniformly at random with probability p in {0, .1, .3, .5, .7, .9, 1} for several
seeds. A state is keyed by (task, progress, failed steps, error streak, plan in
context), so paths that reach the same situation merge (a DAG, as ``state_key=db``
gives); every step adds one to progress or to failed steps, so the depth of a state
is well defined and the graph is acyclic.

``python -m helpdp.synthetic out=OUTDIR`` writes one (identical tables for identical
parameters; ``params.n_tasks=10`` etc. change them, ``--help`` lists them).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from helpdp.cliconf import as_config, run_app
from helpdp.cliconf import doc_field as _f
from helpdp.contract import build_manifest
from helpdp.data import from_frames, write_dataset
from helpdp.policies import StateView, action_probs, components
from helpdp.splits import stable_int64


@dataclass
class SyntheticParams:
    """Parameters of the simulation."""

    n_tasks: int = _f(30, "tasks; each gets its own length, difficulty and critical steps")
    probs: tuple = _f((0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0), "expert-call trigger probabilities")
    seeds: int = _f(3, "collection seeds per (task, probability)")
    episodes_per_seed: int = _f(6, "episodes per (task, probability, seed)")
    seed: int = _f(20250101, "master seed")
    max_errors: int = _f(6, "failed steps in total that end the episode (a step budget)")
    fatal_streak: int = _f(3, "failed steps in a row that end the episode")


@dataclass
class SyntheticConfig:
    """`python -m helpdp.synthetic out=DIR`: write a synthetic dataset (a simulation)."""

    out: str = _f("???", "dataset directory to write (created; must be empty or absent)")
    overwrite: bool = _f(False, "replace the dataset in a non-empty out")
    params: SyntheticParams = _f(SyntheticParams(), "parameters of the simulation")


def _task_params(rng: np.random.Generator, n_tasks: int):
    length = rng.integers(10, 21, n_tasks)
    difficulty = rng.uniform(0.05, 0.6, n_tasks)
    critical = [set(rng.choice(np.arange(1, lv), size=3, replace=False).tolist()) for lv in length]
    return length, difficulty, critical


def _err_prob(t: int, g: int, d: float, crit: bool, plan: bool) -> float:
    p = 0.02 + 0.12 * d + 0.18 * np.exp(-t / 3.0)  # format errors fade with experience
    if crit:
        p += 0.35 + 0.3 * d
    if plan:
        p *= 0.3
    return min(p, 0.95)


def _frames(rows: list, counts: dict, episodes: list, steps: list):
    """The simulation's rows as the dataset's tables (states, transitions, episodes, steps)."""
    states = pd.DataFrame(
        rows, columns=["state_id", "task_id", "depth", "is_start", "terminal", "success", "text"]
    )
    states = states.astype({"state_id": "int64", "depth": "int32"})
    k = np.array(list(counts.keys()), dtype=np.int64)
    transitions = pd.DataFrame(
        {
            "state_id": k[:, 0],
            "action": k[:, 1].astype(np.int8),
            "next_state_id": k[:, 2],
            "count": np.fromiter(counts.values(), np.int64, len(counts)),
        }
    ).sort_values(["state_id", "action", "next_state_id"], ignore_index=True)
    episodes = pd.DataFrame(
        episodes,
        columns=[
            "episode_id",
            "task_id",
            "split",
            "seed",
            "trigger_p",
            "steps",
            "success",
            "reward",
            "expert_calls",
            "blind_calls",
            "recovery_calls",
        ],
    ).astype(
        {
            "episode_id": "int64",
            "seed": "int64",
            "steps": "int32",
            "expert_calls": "int32",
            "blind_calls": "int32",
            "recovery_calls": "int32",
        }
    )
    steps = pd.DataFrame(steps, columns=["episode_id", "t", "state_id", "action", "next_state_id"])
    steps = steps.astype({"episode_id": "int64", "t": "int32", "action": "int8"})
    return states, transitions, episodes, steps


def generate_synthetic(params: SyntheticParams = SyntheticParams()):
    """Return (manifest, states, transitions, episodes, steps) DataFrames."""
    rng = np.random.default_rng(params.seed)
    length, difficulty, critical = _task_params(rng, params.n_tasks)
    key_to_id: dict[tuple, int] = {}
    rows: list[tuple] = []  # state rows in id order
    counts: dict[tuple, int] = {}
    episodes, steps = [], []

    def state(key, task, t, terminal, success, text):
        sid = key_to_id.get(key)
        if sid is None:
            sid = len(rows)
            key_to_id[key] = sid
            rows.append((sid, f"task_{task:03d}", t, t == 0, terminal, success, text))
        return sid

    def render(task, t, g, e, streak, plan):
        lines = [
            f"task_{task:03d}: complete {length[task]} steps",
            f"step {t}: progress {g}/{length[task]}",
        ]
        if e:
            lines.append(f"{e} failed calls so far")
        if streak:
            lines.append(f"last call failed ({streak} in a row)")
        if plan:
            lines.append("expert plan in context")
        if g + 1 in critical[task] and not streak:
            lines.append("next step is tricky")
        return "\n".join(lines)

    split_of = np.array(["train"] * params.n_tasks, dtype=object)
    order = np.random.default_rng(params.seed + 1).permutation(params.n_tasks)
    split_of[order[: params.n_tasks // 5]] = "validation"
    split_of[order[params.n_tasks // 5 : 2 * params.n_tasks // 5]] = "test"
    eid = 0
    for task in range(params.n_tasks):
        lv, d = int(length[task]), float(difficulty[task])
        for p in params.probs:
            for seed in range(params.seeds):
                for rep in range(params.episodes_per_seed):
                    erng = np.random.default_rng([params.seed, task, int(p * 1000), seed, rep])
                    t, g, e, streak, plan = 0, 0, 0, 0, False
                    start = render(task, 0, 0, 0, 0, False)
                    s = state((task, 0, 0, 0, False), task, 0, False, False, start)
                    calls = blind = recovery = 0
                    while True:
                        helped = erng.random() < p
                        u = erng.random()
                        if helped:
                            calls += 1
                            if streak:
                                recovery += 1
                            else:
                                blind += 1
                            ok = u < (0.9 if streak else 0.97)
                            plan = True
                        elif streak:
                            ok = u < 0.3 * (1 - d)  # recovers on its own, rarely
                            plan = False
                        else:
                            ok = u >= _err_prob(t, g, d, g + 1 in critical[task], plan)
                            plan = False
                        if ok:
                            g, streak = g + 1, 0
                        else:
                            e, streak = e + 1, streak + 1
                        t += 1  # every step either progresses or fails: t == g + e
                        if g >= lv:
                            key, text = (task, "success", e), "task complete"
                            term, succ = True, True
                        elif streak >= params.fatal_streak or e >= params.max_errors:
                            key, text = (task, "failure", g, e), "episode failed"
                            term, succ = True, False
                        else:
                            key, term, succ = (task, g, e, streak, plan), False, False
                            text = render(task, t, g, e, streak, plan)
                        s2 = state(key, task, t, term, succ, text)
                        a = int(helped)
                        counts[(s, a, s2)] = counts.get((s, a, s2), 0) + 1
                        steps.append((eid, t - 1, s, a, s2))
                        s = s2
                        if term:
                            break
                    episodes.append(
                        (
                            eid,
                            f"task_{task:03d}",
                            split_of[task],
                            seed,
                            p,
                            t,
                            succ,
                            float(succ),
                            calls,
                            blind,
                            recovery,
                        )
                    )
                    eid += 1
    states, transitions, episodes, steps = _frames(rows, counts, episodes, steps)
    manifest = build_manifest(
        ["nohelp", "expert"],
        gamma=1.0,
        source={
            "generator": "helpdp.synthetic (simulation, not model rollouts)",
            "actor": "synthetic",
            "params": {
                k: list(v) if isinstance(v, tuple) else v for k, v in asdict(params).items()
            },
        },
    )
    return manifest, states, transitions, episodes, steps


def write_synthetic(
    out: str | Path, params: SyntheticParams = SyntheticParams(), *, overwrite: bool = False
) -> Path:
    """Generate a synthetic dataset into directory ``out`` (atomically, checked by the
    loader: :func:`helpdp.data.write_dataset`; a non-empty ``out`` is refused
    unless ``overwrite``)."""
    manifest, states, transitions, episodes, steps = generate_synthetic(params)
    tables = {"states": states, "transitions": transitions, "episodes": episodes, "steps": steps}
    return write_dataset(out, manifest, tables, overwrite=overwrite)


def run_synthetic(cfg) -> Path:
    """The body of ``python -m helpdp.synthetic``."""
    cfg = as_config(SyntheticConfig, cfg)
    params = SyntheticParams(**{**cfg.params, "probs": tuple(float(p) for p in cfg.params.probs)})
    out = write_synthetic(cfg.out, params, overwrite=cfg.overwrite)
    print(f"wrote {out}")
    return out


def main() -> None:

    run_app("helpdp.synthetic", SyntheticConfig, run_synthetic, config_name="synthetic")


if __name__ == "__main__":
    main()


# ---------------------------------------------------------------------------
# a toy help world whose exact values are known (tests of helpdp.ope / rekey)
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class HelpWorld:
    """A small episodic world where the value of any help policy is known exactly.

    Each task ``i`` has a difficulty ``d_i``. A state is (turn t, turn of the latest
    help ``last_help`` (-1: none), last turn failed ``f``). At each turn, with the
    action a (1: help) and ``plan`` = help now or in the last ``memory`` turns:
    the task is solved with probability ``0.12 + 0.30 a + 0.12 plan - 0.2 d``; else
    the turn fails with probability ``(0.35 + 0.3 d)(0.4 if plan else 1) + 0.15 f``
    (two failed turns in a row end the episode in failure); else it goes on.
    ``horizon`` turns without success end in failure. So help pays at the start and
    again once the previous help has worn off, and the coarse key (turn, age of the
    latest help, last failed) is Markov. ``rescue`` > 0 adds a state-dependent advantage
    that no turn rule can take: help right after a failed turn solves with ``rescue``
    more (0: none, the default).
    """

    difficulty: tuple = (0.1, 0.3, 0.5, 0.2)
    horizon: int = 6
    memory: int = 2
    rescue: float = 0.0

    def step_probs(self, task: int, t: int, last_help: int, failed: bool, a: int):
        """(P(solved), P(failed turn)) of one turn."""
        d = self.difficulty[task]
        plan = a == 1 or (last_help >= 0 and t - last_help <= self.memory)
        p_s = 0.12 + 0.30 * a + 0.12 * plan - 0.2 * d + self.rescue * a * bool(failed)
        p_f = (0.35 + 0.3 * d) * (0.4 if plan else 1.0) + 0.15 * failed
        return p_s, (1.0 - p_s) * min(p_f, 1.0)

    def view(self, task: int, t: int, last_help: int, failed: bool, episode_id: int = 0):
        return StateView(
            state_id=self.state_id(task, t, last_help, failed),
            task_id=f"toy/{task}",
            depth=t,
            text="",
            episode_id=episode_id,
            last_failure="error" if failed else None,
            errors=int(failed),
            last_help=last_help,
        )

    @staticmethod
    def state_id(task, t, last_help, failed, end: str = "") -> int:

        return stable_int64("toy", int(task), int(t), int(last_help), bool(failed), end)

    def exact(self, policy) -> tuple[float, float]:
        """Exact (SR, U) of a help policy, averaged over the tasks with equal weight
        (per-episode mixtures through ``components``, per-decision randomisation
        through ``action_probs``)."""

        total_s = total_u = 0.0
        for w, comp in components(policy):
            for task in range(len(self.difficulty)):
                memo: dict = {}

                def value(t, lh, f, task=task, comp=comp, memo=memo):
                    if t >= self.horizon:
                        return 0.0, 0.0
                    key = (t, lh, f)
                    if key not in memo:
                        pa = action_probs(comp, [self.view(task, t, lh, f)], 2)[0]
                        s = u = 0.0
                        for a in (0, 1):
                            if pa[a] <= 0:
                                continue
                            p_s, p_f = self.step_probs(task, t, lh, f, a)
                            nlh = t if a == 1 else lh
                            sf, uf = value(t + 1, nlh, True) if not f else (0.0, 0.0)
                            sg, ug = value(t + 1, nlh, False)
                            p_g = 1.0 - p_s - p_f
                            s += pa[a] * (p_s + p_f * sf + p_g * sg)
                            u += pa[a] * (a + p_f * uf + p_g * ug)
                        memo[key] = (s, u)
                    return memo[key]

                s, u = value(0, -1, False)
                total_s += w * s / len(self.difficulty)
                total_u += w * u / len(self.difficulty)
        return total_s, total_u

    def run(self, policy, episodes_per_task: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """On-policy episodes of ``policy`` (its per-episode mixture drawn with the
        episode's rng, its decisions as ``exact`` reads them): ``episodes_per_task``
        per task; returns (success, calls), one entry per episode."""
        rng = np.random.default_rng(seed)
        comps = components(policy)
        weights = np.array([w for w, _ in comps])
        success, calls = [], []
        for task in range(len(self.difficulty)):
            for _ in range(episodes_per_task):
                comp = comps[int(rng.choice(len(comps), p=weights / weights.sum()))][1]
                t, lh, f, n_calls, ok = 0, -1, False, 0, False
                while t < self.horizon:
                    pa = action_probs(comp, [self.view(task, t, lh, f)], 2)[0]
                    a = int(rng.random() < pa[1])
                    p_s, p_f = self.step_probs(task, t, lh, f, a)
                    u = rng.random()
                    n_calls += a
                    lh = t if a == 1 else lh
                    if u < p_s:
                        ok = True
                        break
                    failed_now = u < p_s + p_f
                    if failed_now and f:
                        break
                    t, f = t + 1, failed_now
                success.append(ok)
                calls.append(n_calls)
        return np.array(success, float), np.array(calls, float)

    def collect(
        self,
        seeds: int = 10,
        probs=(0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0),
        seed: int = 0,
        test_tasks=(),
    ):
        """Episodes under the random schedule: one per (task, p, seed). Returns the
        ``helpdp.data.Dataset`` (states keyed by (task, t, last_help, failed))."""

        rng = np.random.default_rng(seed)
        states, trans, eps, steps = {}, {}, [], []
        eid = 0
        for task in range(len(self.difficulty)):
            split = "test" if task in test_tasks else "train"
            for p in probs:
                for s in range(seeds):
                    eid += 1
                    t, lh, f = 0, -1, False
                    sid = self.state_id(task, t, lh, f)
                    states[sid] = (sid, f"toy/{task}", 0, True, False, False)
                    calls, success = 0, False
                    while True:
                        a = int(rng.random() < p)
                        p_s, p_f = self.step_probs(task, t, lh, f, a)
                        u = rng.random()
                        calls += a
                        nlh = t if a == 1 else lh
                        if u < p_s:
                            nxt, end, success = self.state_id(task, t + 1, nlh, f, "ok"), 1, True
                        elif u < p_s + p_f and f:
                            nxt, end = self.state_id(task, t + 1, nlh, True, "fail"), 1
                        elif t + 1 >= self.horizon:
                            nxt, end = self.state_id(task, t + 1, nlh, u < p_s + p_f, "out"), 1
                        else:
                            nxt, end = self.state_id(task, t + 1, nlh, u < p_s + p_f), 0
                        failed_now = p_s <= u < p_s + p_f
                        states.setdefault(
                            nxt, (nxt, f"toy/{task}", t + 1, False, bool(end), success and end)
                        )
                        if not end:
                            states[nxt] = (nxt, f"toy/{task}", t + 1, False, False, False)
                        trans[(sid, a, nxt)] = trans.get((sid, a, nxt), 0) + 1
                        steps.append((eid, t, sid, a, nxt, "error" if failed_now else None))
                        if end:
                            break
                        t, lh, f, sid = t + 1, nlh, failed_now, nxt
                    eps.append((eid, f"toy/{task}", split, s, float(p), t + 1, success, calls))
        return world_dataset(states, trans, eps, steps, "helpdp.synthetic.HelpWorld")


STATE_COLUMNS = ("state_id", "task_id", "depth", "is_start", "terminal", "success")
EPISODE_COLUMNS = (
    "episode_id",
    "task_id",
    "split",
    "seed",
    "trigger_p",
    "steps",
    "success",
    "expert_calls",
)
STEP_COLUMNS = ("episode_id", "t", "state_id", "action", "next_state_id", "failure")


def world_dataset(states, trans, eps, steps, generator: str, *, episode_extra=(), step_extra=()):
    """A simulated world's rows as a dataset: ``states`` {id: (state_id, task_id, depth,
    is_start, terminal, success)}, ``trans`` {(state, action, next): count}, ``eps``
    (episode_id, task_id, split, seed, trigger_p, steps, success, expert_calls, *episode_extra)
    and ``steps`` (episode_id, t, state_id, action, next_state_id, failure, *step_extra)
    tuples; ``generator`` goes into the manifest's source."""
    states_df = pd.DataFrame(list(states.values()), columns=list(STATE_COLUMNS))
    states_df["text"] = ""
    states_df = states_df.astype({"depth": "int32"})
    tr = pd.DataFrame(
        [(k[0], k[1], k[2], c) for k, c in trans.items()],
        columns=["state_id", "action", "next_state_id", "count"],
    ).astype({"action": "int8", "count": "int64"})
    ep = pd.DataFrame(eps, columns=[*EPISODE_COLUMNS, *episode_extra])
    st = pd.DataFrame(steps, columns=[*STEP_COLUMNS, *step_extra])
    st = st.astype({"t": "int32", "action": "int8"})
    manifest = build_manifest(["nohelp", "expert"], gamma=1.0, source={"generator": generator})
    return from_frames(manifest, states_df, tr, None, episodes=ep, steps=st)
