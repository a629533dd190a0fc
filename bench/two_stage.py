"""How many episodes does each design need to tell a rule from its event-triggered extension?

    python bench/two_stage.py [--reps 200] [--seeds 10] [--out FILE.json]

On ``helpdp.synthetic.HelpWorld`` (4 tasks, exact values by recursion; :class:`EventWorld`
adds the previous turn's class to its views, so rules over events are exact too), the
rule A = "help at turn 0" and its extension B = "turn 0, then after a failed turn"
(``TurnZeroThen(("failed",))``) are told apart by the importance-sampling estimate
of SR(B) - SR(A) (``helpdp.ope.load_logged``'s mixture behaviour; plain IS, so it is
unbiased under every design). Designs, the same number of episodes N each:

* **grid**: the paper's schedule, one episode per (task, p, seed), p in 0, .1, ..., 1;
* **grid + stage 2**: half of them the grid, half stage 2: the base rule A with the
  help decision randomised (q = 0.5) only at trigger states (after a failed turn;
  ``TriggerRandomised``, ``python -m collect stage2.base=...``), the two weighted as
  one mixture per task;
* **stage 2**: all N at stage 2.

Per design: the mean of the difference estimate over replications (against the
exact difference: bias), its standard deviation, and the episodes needed to resolve a
0.05 difference (two-sided 5% test, 80% power: ``N * (2.80 sd / 0.05)^2``). Nothing
is timed.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from helpdp.data import from_frames
from helpdp.ope import Logged, load_logged
from helpdp.policies import TriggerRandomised, TurnZero, TurnZeroThen, action_probs
from helpdp.synthetic import HelpWorld, world_dataset

PROBS = (0.0, 0.1, 0.3, 0.5, 0.7, 0.9, 1.0)
Z = 1.959964 + 0.841621  # two-sided 5% test at 80% power


@dataclass(frozen=True)
class EventWorld(HelpWorld):
    """``HelpWorld`` whose views carry the previous turn's class (``failed`` after a
    failed turn, ``working`` otherwise; None at turn 0), as ``load_logged`` builds them
    from its steps."""

    def view(self, task: int, t: int, last_help: int, failed: bool, episode_id: int = 0):
        last = None if t == 0 else ("failed" if failed else "working")
        return replace(super().view(task, t, last_help, failed, episode_id), last_class=last)


def collect_design(
    world: HelpWorld,
    behaviour,
    episodes_per_task: int,
    *,
    seed: int = 0,
    first_id: int = 10**9,
    design: dict | None = None,
    seed_of=None,
):
    """Episodes of ``world`` under ``behaviour`` (a stage-2 design: its decisions drawn
    from ``action_probs``), as a dataset: steps carry ``failure`` and ``p_help``,
    episodes ``design`` (``json`` of ``design``, by default ``behaviour.spec()``) and
    ``trigger_p`` = the design's q (unused for a design's episodes)."""
    rng = np.random.default_rng(seed)
    design = design if design is not None else behaviour.spec()
    states, trans, eps, steps = {}, {}, [], []
    eid = first_id
    for task in range(len(world.difficulty)):
        for k in range(episodes_per_task):
            eid += 1
            t, lh, f, calls, success = 0, -1, False, 0, False
            sid = world.state_id(task, t, lh, f)
            states[sid] = (sid, f"toy/{task}", 0, True, False, False)
            past: list[tuple] = []  # StateView.past: the earlier states' events
            while True:
                v = replace(world.view(task, t, lh, f, episode_id=eid), past=tuple(past))
                past.append((v.last_class, v.repeats, v.context_tokens))
                p_help = float(action_probs(behaviour, [v], 2)[0, 1])
                a = int(rng.random() < p_help)
                p_s, p_f = world.step_probs(task, t, lh, f, a)
                u = rng.random()
                calls += a
                nlh = t if a == 1 else lh
                failed_now = p_s <= u < p_s + p_f
                if u < p_s:
                    nxt, end, success = world.state_id(task, t + 1, nlh, f, "ok"), 1, True
                elif failed_now and f:
                    nxt, end = world.state_id(task, t + 1, nlh, True, "fail"), 1
                elif t + 1 >= world.horizon:
                    nxt, end = world.state_id(task, t + 1, nlh, failed_now, "out"), 1
                else:
                    nxt, end = world.state_id(task, t + 1, nlh, failed_now), 0
                states.setdefault(nxt, (nxt, f"toy/{task}", t + 1, False, bool(end), success))
                trans[(sid, a, nxt)] = trans.get((sid, a, nxt), 0) + 1
                steps.append((eid, t, sid, a, nxt, "error" if failed_now else None, p_help))
                if end:
                    break
                t, lh, f, sid = t + 1, nlh, failed_now, nxt
            s_seed = seed_of(k) if seed_of else k
            eps.append(
                (
                    eid,
                    f"toy/{task}",
                    "train",
                    s_seed,
                    float(design.get("q", 0.0)),
                    t + 1,
                    success,
                    calls,
                    json.dumps(design, sort_keys=True),
                )
            )
    return _dataset(states, trans, eps, steps)


def _dataset(states, trans, eps, steps):
    return world_dataset(
        states,
        trans,
        eps,
        steps,
        "bench.two_stage",
        episode_extra=["design"],
        step_extra=["p_help"],
    )


def join(*datasets):
    """One dataset of several collections of one world (what ``collect.merge`` does for
    collector output): states deduplicated, counts summed, episodes and steps stacked
    (a grid's episodes get ``design`` null)."""
    states = pd.concat([d.states for d in datasets]).drop_duplicates("state_id", keep="last")
    trans = pd.concat([d.transitions for d in datasets])
    trans = trans.groupby(["state_id", "action", "next_state_id"], as_index=False)["count"].sum()
    trans = trans.astype({"action": "int8", "count": "int64"})
    eps = pd.concat([d.episodes for d in datasets], ignore_index=True)
    if "design" in eps.columns:
        eps["design"] = eps["design"].astype(object).where(eps["design"].notna(), None)
    steps = pd.concat([d.steps for d in datasets], ignore_index=True)
    if "p_help" in steps.columns:  # a grid's p_help is its trigger probability
        grid = steps["p_help"].isna()
        p = steps["episode_id"].map(eps.set_index("episode_id")["trigger_p"])
        steps.loc[grid, "p_help"] = p[grid]
    st = states.sort_values("state_id").reset_index(drop=True)
    return from_frames(datasets[0].manifest, st, trans, None, episodes=eps, steps=steps)


def is_values(logged: Logged, *policies) -> np.ndarray:
    """Plain trajectory IS of SR for each policy, with ``logged``'s mixture behaviour:
    per task the mean of (target / behaviour) x success, then the mean over tasks."""
    views = logged.views()
    a = logged.steps["action"].to_numpy(np.int64)
    ptr = logged.ep_ptr
    ep_of = np.repeat(np.arange(logged.n_episodes), np.diff(ptr))
    log_mu = np.log(np.maximum(logged.mu, 1e-300))
    beh = np.zeros((logged.n_episodes, logged.mu.shape[1]))
    np.add.at(beh, ep_of, log_mu)
    behaviour = (logged.mix * np.exp(beh)).sum(axis=1)
    tasks = logged.episodes["task_id"].astype(str).to_numpy()
    out = []
    for pol in policies:
        p = action_probs(pol, views, logged.n_actions)[np.arange(len(a)), a]
        tgt = np.ones(logged.n_episodes)
        np.multiply.at(tgt, ep_of, p)
        val = tgt / behaviour * logged.episodes["success"].to_numpy()
        out.append(pd.Series(val).groupby(tasks).mean().mean())
    return np.array(out)


def grid(world: HelpWorld, seeds: int, seed: int):
    return world.collect(seeds=seeds, probs=PROBS, seed=seed)


def run(reps: int = 200, seeds: int = 10, q: float = 0.5, seed: int = 0) -> dict:
    world = EventWorld()
    a, b = TurnZero(), TurnZeroThen(("failed",))
    design = TriggerRandomised("turn0", ("failed",), q)
    exact = world.exact(b)[0] - world.exact(a)[0]
    n = len(world.difficulty) * len(PROBS) * seeds  # episodes per replication, every design
    per_task = n // len(world.difficulty)
    rows = {"grid": [], "grid + stage 2": [], "stage 2": []}
    for r in range(reps):
        s = seed + 1000 * r
        g_full = grid(world, seeds, s)
        g_half = grid(world, max(seeds // 2, 1), s)
        s2_full = collect_design(world, design, per_task, seed=s + 1)
        s2_half = collect_design(
            world, design, per_task - per_task * max(seeds // 2, 1) // seeds, seed=s + 2
        )
        for name, ds in (
            ("grid", g_full),
            ("grid + stage 2", join(g_half, s2_half)),
            ("stage 2", s2_full),
        ):
            va, vb = is_values(load_logged(ds), a, b)
            rows[name].append(vb - va)
    out = {
        "exact": {
            "SR_turn0": world.exact(a)[0],
            "SR_turn0_after_failed": world.exact(b)[0],
            "difference": exact,
        },
        "episodes_per_replication": n,
        "reps": reps,
        "q": q,
        "designs": {},
    }
    for name, d in rows.items():
        d = np.asarray(d)
        sd = float(d.std(ddof=1))
        out["designs"][name] = {
            "mean": float(d.mean()),
            "bias": float(d.mean() - exact),
            "sd": sd,
            "episodes_for_0.05": int(np.ceil(n * (Z * sd / 0.05) ** 2)),
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--q", type=float, default=0.5)
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    res = run(args.reps, args.seeds, args.q)
    text = json.dumps(res, indent=2)
    print(text)
    if args.out:
        with open(args.out, "w") as fh:
            fh.write(text + "\n")


if __name__ == "__main__":
    main()
