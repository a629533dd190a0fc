"""Fit the simulated agent to a real model's data, and check the fit on held-out episodes.

    python -m collect.fit_simulated data=helpdp/data/real-actor out=collect/simulated_real.json

**The table.** Each turn of the real data is one outcome of
:data:`collect.simulate.OUTCOMES`: its class (:func:`helpdp.events.classify_steps`:
working, failed, unknown_tool, format_error, stop) or ``repeat`` (the same call as the
previous turn, whatever its class). Its probability is estimated per cell (help at
this turn or not, turn bucket, the previous turn's class, the previous turn's repeat
run capped at ``max_run``) with a hierarchical Dirichlet prior: a cell's estimate is
``(n_c + prior * p_parent(c)) / (n + prior)``, its parent dropping the last key in
the order run, previous class, bucket; the root (help or not) shrinks the same way to
the pooled outcome frequencies, which have add-one (Laplace) smoothing. ``repeat`` has
probability 0 at turn 0 (there is no previous call).

**Success.** Given the classes, an episode succeeds when it stops after the task's
reference calls are done (the verifier checks the database). A working call is the
next reference call with probability ``on_path.help`` (the expert's advice, when
given at that turn) or ``on_path.nohelp``; else it changes nothing. The class chain
does not depend on these two, so for a simulated chain with ``a`` working turns
without help and ``b`` with help that ends on a stop, success is
``P(Bin(a, q0) + Bin(b, q1) >= n_calls)`` exactly; (q0, q1) maximise the binomial
likelihood of the fit episodes' successes per (task, trigger probability) over a grid
of step ``grid`` (chains simulated with a fixed seed).

**Held out.** Episodes of the ``holdout_seeds`` are left out of the fit (a split by
seed: the same tasks, other episodes); :func:`heldout_table` compares them with a
collection of the fitted agent on the same tasks and trigger probabilities.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pandas as pd

from collect.simulate import OUTCOMES, START
from helpdp.cliconf import doc_field as _f
from helpdp.events import classify_steps
from helpdp.intervals import wilson

if TYPE_CHECKING:
    from collect.simfeatures import FeatureAgent
    from collect.simulate import FittedAgent

#: ``rows(helped, t, prev, run, idx)``: the outcome probabilities [chain, outcome] of the
#: chains ``idx`` at turn ``t`` (:func:`simulate_chains`)
RowProbs = Callable[[np.ndarray, int, np.ndarray, np.ndarray, np.ndarray], np.ndarray]

__all__ = [
    "FitSimulatedConfig",
    "check_rows",
    "fit_on_path",
    "fit_table",
    "heldout_table",
    "markdown",
    "load_turns",
    "run_fit",
    "simulate_chains",
    "success_probability",
]

PREV = (START, "working", "failed", "unknown_tool")
#: failures the events module does not list, read as the class they are
_FAILURE_ALIASES = {"malformed_tag": "invalid_json", "untagged_call": "invalid_json"}


@dataclass
class FitSimulatedConfig:
    """`python -m collect.fit_simulated`: the simulated agent fitted to a real model's data."""

    data: Any = _f(
        "helpdp/data/real-actor",
        "the real model's dataset directory, or a list of them (features; a collection "
        "under way: its finished shards)",
    )
    out: str = _f("", "where to write the fitted table (JSON; required)")
    holdout_seeds: list = _f([2], "episodes of these seeds are left out of the fit")
    buckets: list = _f([0, 1, 2, 3, 5], "lower edges of the turn buckets")
    max_run: int = _f(2, "repeat runs of at least this length share a cell")
    prior: float = _f(2.0, "Dirichlet prior strength toward the parent cell's estimate")
    grid: float = _f(0.02, "grid step of the on-path probabilities")
    chains: int = _f(400, "simulated chains per (task, trigger probability) in the success fit")
    seed: int = _f(0, "seed of the simulated chains")
    worlds: Any = _f(
        None,
        "AWM directory of the tasks' reference solutions (one per data entry where data is a "
        "list); null: shipped worlds",
    )
    model: str = _f(
        "table",
        "table: a cell table (collect/simulated_real.json); features: one logit over the "
        "cells and the task's reference calls and tool count (collect/simfeatures.py), for "
        "tasks it was not fitted on",
    )
    l2: float = _f(1.0, "features: L2 penalty on the logit's weights (intercepts aside)")
    holdout_scenarios: list = _f(
        [], "features: episodes of these worlds are left out of the fit (a split by world)"
    )
    overwrite: bool = _f(False, "replace an existing out")


def load_turns(data: str | Path) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(turns, episodes)`` of a dataset: the steps with ``turn_class``, ``repeat``,
    ``repeats``, ``helped``, ``outcome`` and the previous turn's ``prev``/``run``, and the
    episodes. A missing table or column is a ``ValueError`` naming it."""
    root = Path(data)
    tables = {}
    shards = sorted(p.parent for p in root.glob("shards/*/meta.json"))
    for name in ("steps", "episodes"):
        path = root / f"{name}.parquet"
        if not path.is_file() and shards:  # a collection under way: its finished shards
            tables[name] = pd.concat(
                [pd.read_parquet(d / f"{name}.parquet") for d in shards], ignore_index=True
            )
            continue
        if not path.is_file():
            raise ValueError(f"{path}: missing (a dataset directory of python -m collect)")
        tables[name] = pd.read_parquet(path)
    steps, eps = tables["steps"], tables["episodes"]
    for col in ("episode_id", "t", "help", "kind", "tool_name", "failure"):
        if col not in steps:
            raise ValueError(f"{root / 'steps.parquet'}: no column {col!r}")
    for col in ("episode_id", "task_id", "seed", "trigger_p", "success"):
        if col not in eps:
            raise ValueError(f"{root / 'episodes.parquet'}: no column {col!r}")
    steps = steps.drop(columns=[c for c in ("args_sha",) if c in steps])  # one repeat rule
    steps["failure"] = steps["failure"].replace(_FAILURE_ALIASES)
    steps["failure"] = steps["failure"].where(steps["failure"] != "server_error", "tool_error")
    s = classify_steps(steps).sort_values(["episode_id", "t"]).reset_index(drop=True)
    s["helped"] = s["help"].fillna("").astype(str).ne("")
    s["outcome"] = np.where(s["repeat"], "repeat", s["turn_class"])
    same = s["episode_id"].eq(s["episode_id"].shift()) & s["t"].eq(s["t"].shift() + 1)
    s["prev"] = np.where(same, s["turn_class"].shift(), START)
    s["run"] = np.where(same, s["repeats"].shift().fillna(0), 0).astype(int)
    return s, eps


def _freq(outcomes: pd.Series, mask: np.ndarray) -> np.ndarray:
    n = outcomes.value_counts().reindex(list(OUTCOMES), fill_value=0).to_numpy(float)
    return n * mask


def fit_table(turns: pd.DataFrame, buckets: list[int], max_run: int, prior: float) -> dict:
    """``key -> probabilities over OUTCOMES`` for every cell (see the module doc)."""
    edges = np.asarray(sorted(int(b) for b in buckets))
    t = turns.copy()
    t["bucket"] = np.searchsorted(edges, t["t"].to_numpy(), side="right") - 1
    t["runc"] = t["run"].clip(upper=max_run)
    no_repeat = np.array([o != "repeat" for o in OUTCOMES], dtype=float)
    every = np.ones(len(OUTCOMES))
    pooled = _freq(t["outcome"], every) + 1.0
    pooled /= pooled.sum()

    def shrink(sub: pd.DataFrame, parent: np.ndarray, mask: np.ndarray) -> np.ndarray:
        base = parent * mask
        base = base / base.sum()
        n = _freq(sub["outcome"], mask)
        if n.sum() + prior <= 0:
            return base
        return (n + prior * base) / (n.sum() + prior)

    probs = {}
    for h in (0, 1):
        th = t[t["helped"] == bool(h)]
        p_h = shrink(th, pooled, every)
        for b in range(len(edges)):
            tb = th[th["bucket"] == b]
            mask = no_repeat if b == 0 else every
            p_b = shrink(tb, p_h, mask)
            for prev in [START] if b == 0 else PREV[1:]:
                tp = tb[tb["prev"] == prev]
                p_p = shrink(tp, p_b, mask)
                for r in range(max_run + 1) if prev != START else [0]:
                    p_r = shrink(tp[tp["runc"] == r], p_p, mask)
                    probs[f"{h}|{b}|{prev}|{r}"] = p_r
    return probs


def _agent_arrays(probs: dict, buckets: list[int], max_run: int):
    """The table as an array [help, bucket, prev, run, outcome] (prev in PREV order)."""
    arr = np.zeros((2, len(buckets), len(PREV), max_run + 1, len(OUTCOMES)))
    for key, p in probs.items():
        h, b, prev, r = key.split("|")
        arr[int(h), int(b), PREV.index(prev), int(r)] = p
    return arr


def simulate_chains(
    probs: dict,
    buckets: list[int],
    max_run: int,
    trigger_p: np.ndarray,
    rng: np.random.Generator,
    max_turns: int | np.ndarray = 30,
    rows: RowProbs | None = None,
) -> dict[str, np.ndarray]:
    """Class chains of the fitted table, one per entry of ``trigger_p`` (help drawn per
    turn with that probability): per chain ``a``/``b`` (working turns without/with
    help), ``stop`` (it ended on a stop), ``turns``, and per-turn counts ``classes``
    [chain, outcome]. ``max_turns``: one cap, or one per chain. ``rows(helped, t, prev,
    run, idx)``: the probabilities [chain, outcome] of chains ``idx`` at turn ``t``
    instead of the table's (a :class:`collect.simfeatures.FeatureAgent` with each
    chain's task)."""
    n = len(trigger_p)
    cap = np.broadcast_to(np.asarray(max_turns, dtype=int), (n,))
    if rows is None:
        arr = _agent_arrays(probs, buckets, max_run)
        edges = np.asarray(buckets)

        def rows(helped, t, prev, run, idx):
            bucket = np.searchsorted(edges, t, side="right") - 1
            return arr[helped.astype(int), bucket, prev, np.minimum(run, max_run)]

    alive = np.ones(n, bool)
    prev = np.zeros(n, int)  # index in PREV; 0 = start
    run = np.zeros(n, int)
    a, b, turns = np.zeros(n, int), np.zeros(n, int), np.zeros(n, int)
    stop = np.zeros(n, bool)
    classes = np.zeros((n, len(OUTCOMES)), int)
    repeats, t0_help, t0_class = np.zeros(n, int), np.zeros(n, bool), np.zeros(n, int)
    ends_format = np.zeros(n, bool)
    w, s, f, rep = (OUTCOMES.index(x) for x in ("working", "stop", "format_error", "repeat"))
    for t in range(int(cap.max(initial=0))):
        idx = np.flatnonzero(alive & (t < cap))
        if not len(idx):
            break
        helped = rng.random(len(idx)) < trigger_p[idx]
        p = rows(helped, t, prev[idx], run[idx], idx)
        u = rng.random(len(idx))[:, None]
        o = np.minimum((u > np.cumsum(p, axis=1)).sum(axis=1), len(OUTCOMES) - 1)
        cls = np.where(o == rep, np.maximum(prev[idx], 1) + 0, -1)  # a repeat keeps the class
        named = [OUTCOMES.index(PREV[c]) if c > 0 else -1 for c in cls]
        realised = np.where(o == rep, named, o)
        np.add.at(classes, (idx, realised), 1)
        repeats[idx] += o == rep
        if t == 0:
            t0_help[idx], t0_class[idx] = helped, realised
        a[idx] += (o == w) & ~helped
        b[idx] += (o == w) & helped
        turns[idx] += 1
        ends = (o == s) | (o == f)
        stop[idx[o == s]] = True
        ends_format[idx[o == f]] = True
        alive[idx[ends]] = False
        run[idx] = np.where(o == rep, run[idx] + 1, 0)
        keep = o != rep
        new_prev = np.array([PREV.index(OUTCOMES[x]) if OUTCOMES[x] in PREV else 0 for x in o])
        prev[idx] = np.where(keep, new_prev, prev[idx])
    return {
        "a": a,
        "b": b,
        "stop": stop,
        "turns": turns,
        "classes": classes,
        "repeats": repeats,
        "t0_help": t0_help,
        "t0_class": t0_class,
        "ends_format": ends_format,
    }


def success_probability(a: np.ndarray, b: np.ndarray, n: np.ndarray, q0: float, q1: float):
    """``P(Bin(a, q0) + Bin(b, q1) >= n)`` per entry (exact, by convolution)."""
    from scipy.stats import binom

    out = np.zeros(len(a))
    combos = pd.DataFrame({"a": a, "b": b, "n": n}).drop_duplicates()
    for ai, bi, ni in combos.itertuples(index=False):
        pa = binom.pmf(np.arange(ai + 1), ai, q0)
        pb = binom.pmf(np.arange(bi + 1), bi, q1)
        tail = np.convolve(pa, pb)[ni:].sum() if ni <= ai + bi else 0.0
        out[(a == ai) & (b == bi) & (n == ni)] = tail
    return out


def fit_on_path(chains: dict, cells: pd.DataFrame, grid: float) -> tuple[float, float, float]:
    """(q0, q1, log-likelihood): the grid point maximising the binomial likelihood of
    ``cells`` (``cell`` index of each chain in ``chains['cell']``, ``n_calls``,
    ``successes``, ``episodes``); success per chain as in :func:`success_probability`,
    computed for the whole grid at once."""
    from scipy.stats import binom

    qs = np.round(np.arange(0.0, 1.0 + 1e-9, grid), 6)
    keys = pd.DataFrame({"a": chains["a"], "b": chains["b"], "n": chains["n"]})
    keys = keys[chains["stop"]]
    cell = np.asarray(chains["cell"])[chains["stop"]]
    reps = np.bincount(chains["cell"], minlength=len(cells))
    rate = np.zeros((len(cells), len(qs), len(qs)))
    for (ai, bi, ni), idx in keys.groupby(["a", "b", "n"]).indices.items():
        pa = binom.pmf(np.arange(ai + 1)[None, :], ai, qs[:, None])  # [q0, i]
        pb = binom.pmf(np.arange(bi + 1)[None, :], bi, qs[:, None])  # [q1, j]
        enough = (np.arange(ai + 1)[:, None] + np.arange(bi + 1)[None, :]) >= ni
        tail = pa @ enough @ pb.T  # [q0, q1]
        np.add.at(rate, cell[idx], tail[None, :, :])
    rate = np.clip(rate / np.maximum(reps, 1)[:, None, None], 1e-4, 1 - 1e-4)
    k = cells["successes"].to_numpy(float)[:, None, None]
    n = cells["episodes"].to_numpy(float)[:, None, None]
    ll = (k * np.log(rate) + (n - k) * np.log(1 - rate)).sum(axis=0)
    i, j = np.unravel_index(int(np.argmax(ll)), ll.shape)
    return float(qs[i]), float(qs[j]), float(ll[i, j])


def _n_calls(task_ids: pd.Series, worlds: str | Path | None) -> pd.Series:
    from collect.awm.dataset import AWMDataset
    from collect.worlds import WORLDS_DIR

    ds = AWMDataset(Path(worlds) if worlds else WORLDS_DIR)
    out = {}
    for tid in task_ids.unique():
        scenario, _, idx = str(tid).rpartition("/")
        sc = ds.get(scenario) if scenario in ds else None
        sol = sc.solutions.get(int(idx)) if sc is not None and idx.isdigit() else None
        if sol is None:
            raise ValueError(f"task {tid}: no reference solution in the worlds")
        out[tid] = len(sol.calls)
    return task_ids.map(out)


def _write_json(out: Path, result: dict) -> None:
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps(result, indent=1)
    text = re.sub(
        r"\[\s*([-0-9.e,\s]+?)\s*\]", lambda m: "[" + " ".join(m.group(1).split()) + "]", text
    )
    out.write_text(text + "\n")


def run_fit(cfg: FitSimulatedConfig) -> dict:
    """Fit the table (or, ``model=features``, the logit) and the on-path probabilities;
    write ``cfg.out``; return the JSON."""
    if not cfg.out:
        raise ValueError("out is required (where to write the fitted table)")
    out = Path(cfg.out)
    if out.exists() and not cfg.overwrite:
        raise ValueError(f"{out} exists (overwrite=true replaces it)")
    if cfg.model == "features":
        return run_fit_features(cfg)
    if cfg.model != "table":
        raise ValueError(f"model must be table or features, not {cfg.model!r}")
    turns, eps = load_turns(cfg.data)
    hold = {int(s) for s in cfg.holdout_seeds}
    fit_eps = eps[~eps["seed"].isin(hold)]
    if fit_eps.empty:
        raise ValueError(f"holdout_seeds={sorted(hold)} leaves no episode to fit")
    fit_turns = turns[turns["episode_id"].isin(fit_eps["episode_id"])]
    buckets = sorted(int(b) for b in cfg.buckets)
    probs = fit_table(fit_turns, buckets, int(cfg.max_run), float(cfg.prior))
    cells = fit_eps.groupby(["task_id", "trigger_p"]).agg(
        episodes=("success", "size"), successes=("success", "sum")
    )
    cells = cells.reset_index()
    cells["n_calls"] = _n_calls(cells["task_id"], cfg.worlds)
    reps = int(cfg.chains)
    cell = np.repeat(np.arange(len(cells)), reps)
    chains = simulate_chains(
        probs,
        buckets,
        int(cfg.max_run),
        cells["trigger_p"].to_numpy()[cell],
        np.random.default_rng(int(cfg.seed)),
    )
    chains.update(cell=cell, n=cells["n_calls"].to_numpy()[cell])
    q0, q1, ll = fit_on_path(chains, cells, float(cfg.grid))
    result = {
        "outcomes": list(OUTCOMES),
        "buckets": buckets,
        "max_run": int(cfg.max_run),
        "on_path": {"nohelp": q0, "help": q1},
        "probs": {k: [round(float(x), 6) for x in v] for k, v in probs.items()},
        "fit": {
            "data": str(cfg.data),
            "holdout_seeds": sorted(hold),
            "episodes": int(len(fit_eps)),
            "turns": int(len(fit_turns)),
            "prior": float(cfg.prior),
            "grid": float(cfg.grid),
            "chains": reps,
            "seed": int(cfg.seed),
            "log_likelihood": round(ll, 4),
        },
    }
    _write_json(out, result)
    print(
        f"fitted on {len(fit_eps)} episodes ({len(fit_turns)} turns): on_path nohelp "
        f"{q0:.2f}, help {q1:.2f}; wrote {out}"
    )
    return result


# ---------------------------------------------------------------------------
# the agent on task features (model=features)
# ---------------------------------------------------------------------------

#: a FastAPI route of a world's app (``@app.get(...)``, ``@router.post(...)``): one tool
_ROUTE = re.compile(r"^\s*@\w+\.(?:get|post|put|patch|delete)\(", re.M)


def task_features(task_ids: pd.Series, worlds: str | Path | None) -> pd.DataFrame:
    """Per task id: ``n_calls`` (its reference solution's calls) and ``n_tools`` (its
    world's app routes, the tools the runtime lists); a task without a reference
    solution is a ``ValueError`` naming it."""
    from collect.awm.dataset import AWMDataset
    from collect.worlds import WORLDS_DIR

    ds = AWMDataset(Path(worlds) if worlds else WORLDS_DIR)
    rows = {}
    for tid in pd.unique(task_ids):
        scenario, _, idx = str(tid).rpartition("/")
        sc = ds.get(scenario) if scenario in ds else None
        sol = sc.solutions.get(int(idx)) if sc is not None and idx.isdigit() else None
        if sol is None:
            raise ValueError(f"task {tid}: no reference solution in {ds.root}")
        rows[tid] = (len(sol.calls), max(1, len(_ROUTE.findall(sc.env_code or ""))))
    return pd.DataFrame.from_dict(rows, orient="index", columns=["n_calls", "n_tools"])


def _recorded_max_turns(root: Path) -> int:
    """The turn cap a dataset (its manifest) or a collection under way (its plan) ran at."""
    for rel in ("manifest.json", "shards/plan.json"):
        path = root / rel
        if path.is_file():
            cfg = json.loads(path.read_text()).get("config") or {}
            return int((cfg.get("env") or {}).get("max_turns") or 30)
    return 30


def load_sources(
    data: str | Path | Sequence[str | Path], worlds: str | Path | Sequence[str | Path] | None
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`load_turns` of one dataset or a list of them (``worlds``: one directory,
    or one per dataset), with each task's :func:`task_features`, each dataset's turn cap
    (``max_turns``) and its index (``source``; episode ids made unique across them)."""
    datas = list(data) if isinstance(data, (list, tuple)) or _is_list(data) else [data]
    if worlds is None or isinstance(worlds, str):
        worldss = [worlds] * len(datas)
    else:
        worldss = list(worlds)
    if len(worldss) != len(datas):
        raise ValueError(f"worlds: {len(worldss)} entries for {len(datas)} data directories")
    all_turns, all_eps = [], []
    for i, (d, w) in enumerate(zip(datas, worldss)):
        turns, eps = load_turns(d)
        eps = eps.copy()
        eps["trigger_p"] = eps["trigger_p"].map(lambda v: float(np.asarray(v).ravel()[0]))
        feats = task_features(eps["task_id"], w)
        eps = eps.join(feats, on="task_id")
        eps["max_turns"], eps["source"] = _recorded_max_turns(Path(d)), i
        for t in (turns, eps):
            t["episode_id"] = [f"{i}:{e}" for e in t["episode_id"]]
        turns = turns.merge(eps[["episode_id", "task_id", "n_calls", "n_tools"]], on="episode_id")
        all_turns.append(turns)
        all_eps.append(eps)
    return pd.concat(all_turns, ignore_index=True), pd.concat(all_eps, ignore_index=True)


def _is_list(value: object) -> bool:
    return type(value).__name__ == "ListConfig"


def feature_rows(agent: FeatureAgent, n_calls: np.ndarray, n_tools: np.ndarray) -> RowProbs:
    """:func:`simulate_chains`'s ``rows`` for a FeatureAgent, chain ``i`` playing a task
    of ``n_calls[i]`` reference calls in a world of ``n_tools[i]`` tools."""

    def rows(helped, t, prev, run, idx):
        turn = np.full(len(idx), t)
        return agent.probs(helped, turn, prev, run, n_calls[idx], n_tools[idx])

    return rows


def fit_features(turns: pd.DataFrame, buckets: list[int], max_run: int, l2: float):
    """The logit's weights [feature, outcome] on ``turns`` (:func:`load_sources`'s)."""
    from collect.simfeatures import design, fit_logit, outcome_mask

    known = turns["prev"].isin(PREV)
    if not known.all():
        bad = sorted(set(turns.loc[~known, "prev"]))
        raise ValueError(f"turns after a turn of class {bad}: the episode should have ended")
    prev = turns["prev"].map(PREV.index).to_numpy()
    bucket = np.searchsorted(np.asarray(buckets), turns["t"].to_numpy(), side="right") - 1
    x = design(
        turns["helped"].to_numpy(),
        bucket,
        prev,
        turns["run"].to_numpy(),
        turns["n_calls"].to_numpy(),
        turns["n_tools"].to_numpy(),
        len(buckets),
        max_run,
    )
    y = turns["outcome"].map(list(OUTCOMES).index).to_numpy()
    return fit_logit(x, y, outcome_mask(prev), l2, base=OUTCOMES.index("working"))


def run_fit_features(cfg: FitSimulatedConfig) -> dict:
    """``model=features``: fit the logit and the on-path probabilities on every episode
    but the held-out seeds' and worlds'; the JSON (written to ``cfg.out`` unless empty)."""
    from collect.simfeatures import FeatureAgent, feature_names

    turns, eps = load_sources(cfg.data, cfg.worlds)
    hold_s, hold_w = {int(x) for x in cfg.holdout_seeds}, {str(x) for x in cfg.holdout_scenarios}
    keep = ~eps["seed"].isin(hold_s) & ~eps["task_id"].map(lambda t: t.rpartition("/")[0]).isin(
        hold_w
    )
    fit_eps = eps[keep]
    if fit_eps.empty:
        raise ValueError("the held-out seeds and worlds leave no episode to fit")
    fit_turns = turns[turns["episode_id"].isin(fit_eps["episode_id"])]
    buckets, max_run = sorted(int(b) for b in cfg.buckets), int(cfg.max_run)
    weights = fit_features(fit_turns, buckets, max_run, float(cfg.l2))
    agent = FeatureAgent(tuple(buckets), max_run, weights, (0.0, 0.0))
    keys = ["task_id", "trigger_p", "max_turns", "n_calls", "n_tools"]
    cells = fit_eps.groupby(keys).agg(episodes=("success", "size"), successes=("success", "sum"))
    cells = cells.reset_index()
    cell = np.repeat(np.arange(len(cells)), int(cfg.chains))
    nc, nt = cells["n_calls"].to_numpy()[cell], cells["n_tools"].to_numpy()[cell]
    chains = simulate_chains(
        {},
        buckets,
        max_run,
        cells["trigger_p"].to_numpy()[cell],
        np.random.default_rng(int(cfg.seed)),
        cells["max_turns"].to_numpy()[cell],
        rows=feature_rows(agent, nc, nt),
    )
    chains.update(cell=cell, n=nc)
    q0, q1, ll = fit_on_path(chains, cells, float(cfg.grid))
    result = {
        "model": "features",
        "outcomes": list(OUTCOMES),
        "buckets": buckets,
        "max_run": max_run,
        "features": feature_names(len(buckets), max_run),
        "weights": [[round(float(v), 6) for v in r] for r in weights],
        "on_path": {"nohelp": q0, "help": q1},
        "fit": {
            "data": [str(d) for d in (cfg.data if not isinstance(cfg.data, str) else [cfg.data])],
            "holdout_seeds": sorted(hold_s),
            "holdout_scenarios": sorted(hold_w),
            "episodes": int(len(fit_eps)),
            "tasks": int(fit_eps["task_id"].nunique()),
            "turns": int(len(fit_turns)),
            "l2": float(cfg.l2),
            "grid": float(cfg.grid),
            "chains": int(cfg.chains),
            "seed": int(cfg.seed),
            "log_likelihood": round(ll, 4),
        },
    }
    if cfg.out:
        _write_json(Path(cfg.out), result)
        print(
            f"fitted on {len(fit_eps)} episodes of {fit_eps['task_id'].nunique()} tasks "
            f"({len(fit_turns)} turns): on_path nohelp {q0:.2f}, help {q1:.2f}; wrote {cfg.out}"
        )
    return result


# ---------------------------------------------------------------------------
# the held-out check
# ---------------------------------------------------------------------------


_CLASSES = ("working", "failed", "unknown_tool", "format_error", "stop")


def _episode_counts(turns: pd.DataFrame) -> pd.DataFrame:
    """Per episode: turns of each class, repeats, turns, turn 0's help and working, and
    whether it ended on a format error (the sums behind :func:`_stats`)."""
    g = turns.groupby("episode_id")
    out = pd.DataFrame(
        {f"n {c}": g["turn_class"].agg(lambda x, c=c: int((x == c).sum())) for c in _CLASSES}
    )
    out["n repeat"] = g["repeat"].sum()
    out["turns"] = g.size()
    t0 = turns[turns["t"] == 0].set_index("episode_id")
    out["t0 help"] = t0["helped"].reindex(out.index).fillna(False).astype(bool)
    out["t0 working"] = (t0["turn_class"] == "working").reindex(out.index).fillna(False)
    out["ends format"] = g["turn_class"].last() == "format_error"
    return out.astype(float)


def _stats(c: pd.DataFrame | np.ndarray, cols: list[str]) -> dict[str, float]:
    """Per-turn class frequencies (and repeats), turn-0 working rates with and without
    help, the share of episodes ending on a format error, and turns per episode."""
    x = dict(zip(cols, np.asarray(c, dtype=float).T))
    turns = x["turns"].sum()
    out = {f"class {k}": x[f"n {k}"].sum() / turns for k in _CLASSES}
    out["repeat"] = x["n repeat"].sum() / turns
    h = x["t0 help"]
    with np.errstate(invalid="ignore", divide="ignore"):
        out["turn 0 working (no help)"] = ((1 - h) * x["t0 working"]).sum() / (1 - h).sum()
        out["turn 0 working (help)"] = (h * x["t0 working"]).sum() / h.sum()
    out["ends on format error"] = x["ends format"].mean()
    out["turns per episode"] = turns / len(h)
    return {k: float(v) for k, v in out.items()}


def _wilson(k: float, n: float, z: float) -> tuple[float, float]:
    return (0.0, 1.0) if n == 0 else wilson(k, n, z)


def heldout_table(
    real: str | Path,
    sim: str | Path,
    holdout_seeds: list[int],
    *,
    level: float = 0.95,
    boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Real held-out episodes (``holdout_seeds`` of ``real``) against the collection
    ``sim`` restricted to the same tasks: one row per quantity with the real value,
    its interval (per-turn quantities: percentile bootstrap over episodes; success by
    trigger probability: Wilson), the simulated value and whether it lies inside.
    ``level`` is simultaneous over the rows (Bonferroni: each row at
    ``1 - (1 - level) / rows``)."""
    r_turns, r_eps = load_turns(real)
    s_turns, s_eps = load_turns(sim)
    r_eps = r_eps[r_eps["seed"].isin([int(x) for x in holdout_seeds])]
    if r_eps.empty:
        raise ValueError(f"{real}: no episode of seeds {list(holdout_seeds)}")
    s_eps = s_eps[s_eps["task_id"].isin(set(r_eps["task_id"]))]
    if s_eps.empty:
        raise ValueError(f"{sim}: no episode of the held-out tasks")
    r_turns = r_turns[r_turns["episode_id"].isin(r_eps["episode_id"])]
    s_turns = s_turns[s_turns["episode_id"].isin(s_eps["episode_id"])]
    r_counts, s_counts = _episode_counts(r_turns), _episode_counts(s_turns)
    cols = list(r_counts.columns)
    real_stats, sim_stats = _stats(r_counts, cols), _stats(s_counts, cols)
    ps = sorted(set(r_eps["trigger_p"]))
    rows = len(real_stats) + len(ps)
    alpha = (1 - level) / rows
    z = float(__import__("scipy.stats", fromlist=["norm"]).norm.ppf(1 - alpha / 2))
    rng = np.random.default_rng(seed)
    m = r_counts.to_numpy()
    draws = pd.DataFrame(
        [_stats(m[rng.integers(0, len(m), len(m))], cols) for _ in range(int(boot))]
    )
    table = []
    for name, value in real_stats.items():
        lo, hi = np.nanquantile(draws[name], [alpha / 2, 1 - alpha / 2])
        table.append((name, value, float(lo), float(hi), sim_stats[name], 0))
    for p in ps:
        r = r_eps[r_eps["trigger_p"] == p]["success"]
        s = s_eps[s_eps["trigger_p"] == p]["success"]
        lo, hi = _wilson(float(r.sum()), float(len(r)), z)
        table.append((f"success, p = {p:g}", float(r.mean()), lo, hi, float(s.mean()), len(r)))
    df = pd.DataFrame(table, columns=["quantity", "real", "lo", "hi", "simulated", "n"])
    df["inside"] = (df["simulated"] >= df["lo"] - 1e-12) & (df["simulated"] <= df["hi"] + 1e-12)
    df.attrs.update(real_episodes=len(r_eps), sim_episodes=len(s_eps), level=level)
    return df


def check_rows(table: pd.DataFrame) -> list[str]:
    """The rows whose simulated value lies outside the real interval (empty: the fit holds)."""
    bad = table[~table["inside"]]
    return [
        f"{r.quantity}: simulated {r.simulated:.3f} outside [{r.lo:.3f}, {r.hi:.3f}] "
        f"(real {r.real:.3f})"
        for r in bad.itertuples()
    ]


def markdown(table: pd.DataFrame) -> str:
    """The table as Markdown (real, interval, simulated)."""
    lines = [
        "| quantity | real (held out) | interval | simulated | inside |",
        "|---|---:|---|---:|---|",
    ]
    for r in table.itertuples():
        lines.append(
            f"| {r.quantity} | {r.real:.3f} | [{r.lo:.3f}, {r.hi:.3f}] | {r.simulated:.3f} | "
            f"{'yes' if r.inside else '**no**'} |"
        )
    return "\n".join(lines)


def chain_check(
    agent: FittedAgent | FeatureAgent,
    turns: pd.DataFrame,
    eps: pd.DataFrame,
    *,
    chains: int = 200,
    level: float = 0.95,
    boot: int = 2000,
    seed: int = 0,
) -> pd.DataFrame:
    """Real episodes (``eps``, ``turns``: :func:`load_sources`'s, held out) against
    ``agent``'s class chains on the same tasks (their reference calls and tool counts),
    trigger probabilities and turn caps, ``chains`` per episode: the rows of
    :func:`heldout_table` (per-turn class shares, turn-0 working with and without help,
    format-error endings, turns per episode, success by trigger probability), with
    intervals from a bootstrap over **tasks** (a statement about tasks like these; a
    success row at least as wide as the episodes' Wilson interval, which a rate of 0 or 1
    needs), simultaneous over the rows (Bonferroni). ``agent``: a :class:`FittedAgent` (its
    table, the same for every task) or a ``FeatureAgent``."""
    from collect.simfeatures import FeatureAgent

    turns = turns[turns["episode_id"].isin(eps["episode_id"])]
    real = _episode_counts(turns).join(eps.set_index("episode_id")[["task_id", "success"]])
    real = real.join(eps.set_index("episode_id")["trigger_p"])
    cols = [c for c in _episode_counts(turns.head(1)).columns]
    rep = np.repeat(np.arange(len(eps)), int(chains))
    nc, nt = eps["n_calls"].to_numpy()[rep], eps["n_tools"].to_numpy()[rep]
    ps = eps["trigger_p"].to_numpy()[rep]
    rng = np.random.default_rng(seed)
    if isinstance(agent, FeatureAgent):
        args = ({}, list(agent.buckets), agent.max_run)
        rows = feature_rows(agent, nc, nt)
    else:
        args, rows = (agent.probs, list(agent.buckets), agent.max_run), None
    ch = simulate_chains(*args, ps, rng, eps["max_turns"].to_numpy()[rep], rows=rows)
    sim = pd.DataFrame({f"n {c}": ch["classes"][:, OUTCOMES.index(c)] for c in _CLASSES})
    sim["n repeat"], sim["turns"] = ch["repeats"], ch["turns"]
    sim["t0 help"] = ch["t0_help"]
    sim["t0 working"] = ch["t0_class"] == OUTCOMES.index("working")
    sim["ends format"] = ch["ends_format"]
    q0, q1 = agent.on_path
    sim["success"] = ch["stop"] * success_probability(ch["a"], ch["b"], nc, q0, q1)
    sim["trigger_p"] = ps
    real_stats, sim_stats = _stats(real[cols], cols), _stats(sim[cols].astype(float), cols)
    levels = sorted(set(real["trigger_p"]))
    for p in levels:
        real_stats[f"success, p = {p:g}"] = float(
            real.loc[real["trigger_p"] == p, "success"].mean()
        )
        sim_stats[f"success, p = {p:g}"] = float(sim.loc[sim["trigger_p"] == p, "success"].mean())
    alpha = (1 - level) / len(real_stats)
    by_task = [g for _, g in real.groupby("task_id")]
    draws = []
    for _ in range(int(boot)):
        pick = pd.concat([by_task[i] for i in rng.integers(0, len(by_task), len(by_task))])
        d = _stats(pick[cols].to_numpy(float), cols)
        for p in levels:
            d[f"success, p = {p:g}"] = float(pick.loc[pick["trigger_p"] == p, "success"].mean())
        draws.append(d)
    draws = pd.DataFrame(draws)
    table = []
    z = float(__import__("scipy.stats", fromlist=["norm"]).norm.ppf(1 - alpha / 2))
    for name, value in real_stats.items():
        finite = draws[name].dropna()
        lo, hi = np.quantile(finite, [alpha / 2, 1 - alpha / 2]) if len(finite) else (np.nan,) * 2
        if name.startswith("success, p = "):  # no success (or no failure) in any task: the
            # bootstrap's interval has no width, so it is widened to the episodes' Wilson one
            r = real.loc[real["trigger_p"] == float(name.rpartition("= ")[2]), "success"]
            wlo, whi = _wilson(float(r.sum()), float(len(r)), z)
            lo, hi = min(lo, wlo), max(hi, whi)
        table.append((name, value, float(lo), float(hi), sim_stats[name]))
    df = pd.DataFrame(table, columns=["quantity", "real", "lo", "hi", "simulated"])
    df = df[df["real"].notna()].reset_index(drop=True)  # e.g. no helped turn 0 held out
    df["inside"] = (df["simulated"] >= df["lo"] - 1e-12) & (df["simulated"] <= df["hi"] + 1e-12)
    df.attrs.update(
        real_episodes=len(eps), tasks=int(eps["task_id"].nunique()), chains=len(rep), level=level
    )
    return df


def main() -> None:
    from helpdp.cliconf import run_app

    run_app(
        "collect.fit_simulated",
        FitSimulatedConfig,
        run_fit,
        config_name="fit_simulated",
        errors=(ValueError,),
    )


if __name__ == "__main__":
    main()
