"""Seconds per turn and per episode of the real CPU actor (collect/actor=qwen_coder_0_5b).

    make real-actor                                  # once: fetch, join, verify the weights
    python bench/real_actor.py                       # 2 tasks x p in {0, 1}, strict turns
    python bench/real_actor.py --call-format lenient --tasks 0 1 2 --out /tmp/bench-real
    python bench/real_actor.py --call-format lenient --openai http://127.0.0.1:8011/v1  # a server
    python bench/real_actor.py --analyze helpdp/data/real-actor helpdp/data/demo   # rates
    python bench/real_actor.py --publish-partial DEST OVERRIDES...   # a stopped run's shards
    python bench/real_actor.py --eval-report EVAL_OUT... [--skip=POLICY] [--pool]  # evaluate runs, joined
    python bench/real_actor.py --call-value helpdp/data/real-actor helpdp/data/demo  # per turn

Runs a real collection (the demo worlds, the oracle) in this process with the actor
wrapped in a timer, and prints: the model's load time; per turn the prompt tokens, the
tokens actually computed (the rest come from the episode's KV cache), the generated
tokens and the seconds (median, p90, by turn index); per episode the seconds and turns.
Timings depend on the machine and its load: the numbers in docs/results/real-actor.md
say which machine and load they were measured under.

``--openai BASE_URL`` times an OpenAI-compatible server instead of the in-process
model (``collect/actor=openai`` with the ``qwen_coder_0_5b`` preset's sampling), e.g.
llama-cpp-python's ``python -m llama_cpp.server --model GGUF --model_alias qwen``
(``--model`` names it); the load is then the server's, outside this timing, and
``computed_tokens`` is the whole prompt (the server's own log says what its prefix cache
reused).

``--analyze DIR...`` reads collected datasets instead and prints, per turn index and by
whether an expert's message is in the actor's context (given at this turn, at an
earlier turn, or never), the share of turns in each class: a working call, a final
answer (``final_ok`` when the episode succeeded, else ``early_stop``), each format
error class, ``unknown_tool`` (wrong tool), ``invalid_arguments`` (wrong arguments),
``tool_error``, and ``loop`` (a failed turn repeating the previous turn's tool and
failure class: an approximation, the steps table keeps no turn text).

``--publish-partial DEST OVERRIDES...`` writes the finished shards of a stopped
``python -m collect OVERRIDES...`` run (``keep_shards`` is implied by stopping it) as a
dataset in DEST, through the same aggregation, manifest and loader check as the
collector, with ``source.partial`` saying how many planned episodes it holds and the
command that resumes the run (rerunning it finishes the remaining shards).

``--eval-report EVAL_OUT...`` joins the ``results.parquet`` of ``python -m
helpdp.evaluate`` runs that split the seeds between processes (each with its own
``out``; the same policies and tasks) and prints, per split and policy, the SR with a
95% Wilson interval, the calls per episode, and each policy's paired difference
(over the same (task, seed) pairs) to every other, as a markdown table. Runs of
different policies on the same pairs may come from different directories (a helper run
with ``baselines=false`` beside the baselines' runs); only the pairs every policy ran
are counted, and ``--skip=POLICY`` (repeatable) leaves a policy out, e.g. one that an
older run evaluated on fewer pairs. Then the successes per task, and each policy against
"help at turn 0" and against the rules' hull at its own spend, with the difference these
pairs detect at 80% power and the pairs a difference of 0.05 needs. ``--pool`` reports
the splits as one (test and validation: every held-out task).
"""

from __future__ import annotations

import argparse
import json
import shlex
import statistics
import sys
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd

from collect.actors import HFActor, OpenAIActor, actor_config
from collect.awm.protocol import lenient_turn
from collect.collector import collect, collect_config
from helpdp.intervals import wilson


class TimedActor:
    """Times every request of an :class:`HFActor` with ``prefix_cache`` (one at a time)."""

    def __init__(self, actor: HFActor, lenient: bool = False):
        self.actor = actor
        self.lenient = lenient  # actor.call_format=lenient (build_actor's LenientActor)
        self.name = actor.name
        self.needs_solutions = False
        self.turns: list[dict] = []

    def generate(self, requests):
        out = []
        for r in requests:
            t0 = time.perf_counter()
            reply = self.actor.generate([r])[0]
            dt = time.perf_counter() - t0
            if self.lenient and reply.error is None:
                reply.text = lenient_turn(reply.text)
            self.turns.append(
                {
                    "episode": str(r.view.spec.episode_id),
                    "turn": r.view.turn,
                    "seconds": dt,
                    "prompt_tokens": reply.prompt_tokens,
                    "computed_tokens": reply.prompt_tokens - getattr(self.actor, "last_reused", 0),
                    "completion_tokens": reply.completion_tokens,
                }
            )
            out.append(reply)
        return out

    def close(self):
        self.actor.close()


def _q(values, q):
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def turn_classes(path: str):
    """One row per step: turn index, context (``this``/``earlier``/``none``), class."""
    import helpdp

    ds = helpdp.load_dataset(path)
    st = ds.steps.sort_values(["episode_id", "t"]).merge(
        ds.episodes[["episode_id", "success", "trigger_p"]], on="episode_id"
    )
    rows = []
    for _eid, g in st.groupby("episode_id", sort=False):
        helped = False
        prev = None
        for r in g.itertuples():
            ctx = "this" if r.action else ("earlier" if helped else "none")
            helped = helped or bool(r.action)
            failure = r.failure if isinstance(r.failure, str) else None
            if r.kind == "final":
                cls = "final_ok" if r.success else "early_stop"
            elif r.kind == "error":
                cls = "server_error"
            elif failure is None:
                cls = "ok_call"
            elif (
                prev is not None
                and prev[1] == failure
                and prev[0] == (r.tool_name if isinstance(r.tool_name, str) else None)
            ):
                cls = "loop"
            else:
                cls = failure
            rows.append(
                {
                    "episode": int(_eid),
                    "t": int(r.t),
                    "context": ctx,
                    "cls": cls,
                    "help": bool(r.action),
                    "success": bool(r.success),
                    "p": float(r.trigger_p),
                    "prev": "start" if prev is None else prev[2],
                }
            )
            prev = (r.tool_name if isinstance(r.tool_name, str) else None, failure, cls)
    import pandas as pd

    return pd.DataFrame(rows), ds.manifest["source"].get("actor")


def _call_effect(g, weight=None) -> tuple[float, int, int]:
    """The pooled helped-minus-unhelped success difference of the steps ``g`` (within
    each trigger probability, pooled by step counts), each step counted ``weight`` times
    (its episode's draws in a bootstrap replicate); ``(value, steps, helped)``."""
    w = np.ones(len(g)) if weight is None else weight
    h, s, p = g["help"].to_numpy(), g["success"].to_numpy(float), g["p"].to_numpy()
    est, total, n_h = 0.0, 0.0, 0.0
    parts = []
    for pv in np.unique(p):
        m = p == pv
        wh, wn = (w * (m & h)).sum(), (w * (m & ~h)).sum()
        if wh > 0 and wn > 0:
            a = (w * (m & h) * s).sum() / wh
            b = (w * (m & ~h) * s).sum() / wn
            parts.append((wh + wn, a - b))
            n_h += wh
    total = sum(n for n, _ in parts)
    est = sum(n * d for n, d in parts) / total if total else float("nan")
    return est, int(total), int(n_h)


def call_value(paths, max_turn: int = 3, min_n: int = 5, n_boot: int = 1000, seed: int = 0) -> dict:
    """What one expert call is worth, by turn and by the class of the turn before it:
    the difference in episode success between steps helped and not helped, within
    each trigger probability strictly between 0 and 1 (there the call is a coin flip,
    independent of the history: a randomised comparison, with the later turns
    following the same p), pooled over the strata by their step counts. The 95%
    interval resamples **episodes** within their trigger probability (``n_boot``
    percentile replicates): an episode's steps share its outcome, so they are not
    independent draws. Rows with fewer than ``min_n`` steps on either side are left out."""
    out = {}
    for path in paths:
        df, actor = turn_classes(path)
        df = df[(df["p"] > 0) & (df["p"] < 1)].reset_index(drop=True)
        df["turn"] = (
            df["t"].clip(upper=max_turn).map(lambda t: f">={max_turn}" if t >= max_turn else str(t))
        )
        eps = df.groupby("episode")["p"].first()
        ep_code = pd.Index(eps.index).get_indexer(df["episode"])
        rng = np.random.default_rng(seed)
        draws = np.zeros((n_boot, len(eps)))
        for pv in np.unique(eps.to_numpy()):
            idx = np.flatnonzero(eps.to_numpy() == pv)
            pick = idx[rng.integers(0, len(idx), size=(n_boot, len(idx)))]
            np.add.at(draws, (np.arange(n_boot)[:, None], pick), 1.0)
        rows = {}
        groups = [(f"turn {k}", g) for k, g in df.groupby("turn")]
        groups += [(f"after {k}", g) for k, g in df[df["t"] > 0].groupby("prev")]
        for name, g in groups:
            est, n, n_h = _call_effect(g)
            if n_h < min_n or n - n_h < min_n:
                continue
            codes = ep_code[g.index.to_numpy()]
            boot = np.array([_call_effect(g, draws[b, codes])[0] for b in range(n_boot)])
            lo, hi = np.nanquantile(boot, [0.025, 0.975])
            rows[name] = {
                "value": round(est, 3),
                "lo": round(float(lo), 3),
                "hi": round(float(hi), 3),
                "steps": n,
                "helped": n_h,
                "episodes": int(len(np.unique(codes))),
            }
        out[str(path)] = {"actor": actor, "value_of_a_call": rows}
    return out


def analyze(paths, max_turn: int = 4) -> dict:
    """Shares of each turn class by turn (0..max_turn, then ``>=``) and context."""
    out = {}
    for path in paths:
        df, actor = turn_classes(path)
        df["turn"] = (
            df["t"].clip(upper=max_turn).map(lambda t: f">={max_turn}" if t >= max_turn else str(t))
        )
        table = {}
        for (turn, ctx), g in df.groupby(["turn", "context"]):
            shares = g["cls"].value_counts(normalize=True).round(3).to_dict()
            table[f"t={turn} help={ctx}"] = {"n": len(g), **shares}
        overall = df["cls"].value_counts(normalize=True).round(3).to_dict()
        out[str(path)] = {"actor": actor, "turns": len(df), "overall": overall, "table": table}
    return out


def publish_partial(dest: str, overrides: list[str]) -> dict:
    """The finished shards of the run that ``overrides`` describe, as a dataset in ``dest``."""
    import dataclasses

    from collect.awm.clock import WorldClock
    from collect.config import config_differences, worlds_dir
    from collect.plan import fingerprint_config, plan_episodes, runnable_tasks
    from collect.publish import manifest, summarize
    from collect.schedule import shard_episodes
    from collect.shards import TABLES, ShardStore, aggregate
    from helpdp.data import write_dataset

    cfg = collect_config(overrides)
    clock = WorldClock.resolve(cfg.clock, worlds_dir(cfg))
    cfg = dataclasses.replace(cfg, clock=clock.iso())
    _, skipped = runnable_tasks(cfg)
    specs = plan_episodes(cfg)  # a stage-2 collection's plan too
    shards = shard_episodes(specs, cfg.executor.shard_size)
    store = ShardStore(cfg.out)
    plan = json.loads((store.dir / "plan.json").read_text())
    now = json.loads(json.dumps(fingerprint_config(cfg), default=str))

    # a declared field only one side records was added or removed by the code since
    bad = config_differences(plan["config"], now, absent=[])
    if bad:
        raise SystemExit(f"{store.dir}: shards of another collection (differs in {bad})")
    done = [i for i in range(len(shards)) if store.done(i)]
    if not done:
        raise SystemExit(f"{store.dir}: no finished shard")
    files = {t: [str(store.path(i) / f"{t}.parquet") for i in done] for t in TABLES}
    tables = aggregate(
        files["steps"],
        files["states"],
        files["episodes"],
        count_invalid=cfg.invalid_episodes == "count",
    )
    summary = summarize(tables)
    man = manifest(cfg, summary, skipped, clock)
    man["source"]["partial"] = {
        "episodes": sum(len(shards[i]) for i in done),
        "planned_episodes": len(specs),
        "resume": shlex.join(
            ["python", "-m", "collect"]
            + ["out=DIR" if o.startswith("out=") else o for o in overrides]
        ),
    }
    write_dataset(
        Path(dest),
        man,
        {n: tables[n] for n in ("states", "transitions", "episodes", "steps")},
        overwrite=True,
        check=True,
    )
    return man["source"]["partial"]


def _load_eval(dirs: list[str], table: str | None) -> pd.DataFrame:
    """The episodes behind ``--eval-report``: the runs' ``results.parquet`` joined, or a
    shipped episode table (``--from-table``: :func:`helpdp.evaluate.stats.read_episode_table`)."""
    from helpdp.evaluate.stats import read_episode_table

    if table is not None:
        return read_episode_table(table)
    missing = [d for d in dirs if not (Path(d) / "results.parquet").is_file()]
    if missing:
        raise SystemExit(f"{missing[0]}: not an evaluate out directory (no results.parquet)")
    return pd.concat([pd.read_parquet(Path(d) / "results.parquet") for d in dirs])


def eval_report(
    dirs: list[str],
    skip: tuple[str, ...] = (),
    pool: bool = False,
    ship: str | None = None,
    table: str | None = None,
    worlds: bool = False,
) -> dict:
    """Joined evaluate runs: SR (Wilson), calls, and paired differences; markdown.
    ``pool``: the splits as one (e.g. test and validation: every held-out task).
    ``worlds``: also each comparison with worlds (a task id's part before ``/``) as the
    unit, for tasks drawn by world (tasks of one world share its app and rows).
    ``ship``: also write the joined episodes as a slim episode table there (a new file);
    ``table``: read such a table instead of ``dirs`` (the same numbers), or a per-task
    counts table (:func:`counts_report`)."""
    from helpdp.evaluate.stats import episode_table, paired_ci

    if table is not None and "successes" in pd.read_parquet(table).columns:
        return counts_report(table, pool, worlds)
    res = _load_eval(dirs, table)
    unknown = sorted(set(skip) - set(res["policy"]))
    if unknown:
        raise SystemExit(f"--skip={unknown[0]!r}: no such policy in {table or dirs}")
    res = res[~res["policy"].isin(skip)]
    if ship is not None:
        if Path(ship).exists():
            raise SystemExit(f"--ship {ship}: the file exists (an episode table is never replaced)")
        episode_table(res).to_parquet(ship, index=False)
    if pool:
        res = res.assign(split="+".join(dict.fromkeys(res["split"])))
    dup = res.duplicated(["split", "policy", "pair"])
    if dup.any():
        raise SystemExit(f"a (split, policy, pair) is in two runs: {res[dup].iloc[0].to_dict()}")
    lines, out = [], {}
    for split, r in res.groupby("split", sort=False):
        pols = list(dict.fromkeys(r["policy"]))
        pairs = set.intersection(*(set(r.loc[r.policy == p, "pair"]) for p in pols))
        r = r[r["pair"].isin(pairs)]
        lines += [
            f"### {split}: {len(pairs)} paired (task, seed) episodes per policy",
            "",
            "| policy | SR [95% Wilson] | calls / episode | turns |",
            "|---|---|---|---|",
        ]
        by = {p: r[r.policy == p].set_index("pair").sort_index() for p in pols}
        for p in pols:
            e = by[p]
            k, n = int(e["success"].sum()), len(e)
            lo, hi = wilson(k, n)
            out[(split, p)] = {"SR": k / n, "lo": lo, "hi": hi, "U": e["expert_calls"].mean()}
            turns = f"{e['steps'].mean():.2f}" if "steps" in e else "n/a"
            lines.append(
                f"| {p.replace('|', chr(92) + '|')} | {k}/{n} = {k / n:.3f} [{lo:.3f}, {hi:.3f}] | "
                f"{e['expert_calls'].mean():.2f} | {turns} |"
            )
        cell = {p: p.replace("|", "\\|") for p in pols}  # a mixture's name holds "|"
        lines += [
            "",
            "| paired SR difference (row - column) | " + " | ".join(cell[p] for p in pols) + " |",
            "|---" * (len(pols) + 1) + "|",
        ]
        for a in pols:
            cells = []
            for b in pols:
                if a == b:
                    cells.append("")
                    continue
                d = by[a]["success"].astype(float) - by[b]["success"].astype(float)
                m, lo, hi = paired_ci(d.to_numpy())
                cells.append(f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}]")
            lines.append(f"| {cell[a]} | " + " | ".join(cells) + " |")
        lines += ["", *_per_task(by, pols, cell), ""]
        lines += [*_power(by, pols, cell, out, split, worlds=worlds), ""]
    print("\n".join(lines))
    return {f"{s}/{p}": v for (s, p), v in out.items()}


#: a per-task counts table (what survives of a verdict whose episodes are lost): one row
#: per (policy, task); ``calls`` per task may be null, ``policy_calls`` is the policy's
#: total over all its pairs
COUNTS_TABLE = ("policy", "split", "task_id", "pairs", "successes", "calls", "policy_calls")


def read_counts(path: str) -> pd.DataFrame:
    """A per-task counts table; one clear error naming the file and the column or row."""
    t = pd.read_parquet(path)
    missing = [c for c in COUNTS_TABLE if c not in t.columns]
    if missing:
        raise ValueError(f"{path}: no column {missing[0]!r} (a counts table has {COUNTS_TABLE})")
    bad = (t["successes"] < 0) | (t["successes"] > t["pairs"]) | (t["pairs"] <= 0)
    if bad.any():
        raise ValueError(f"{path}: row {int(np.flatnonzero(bad)[0])}: successes not in 0..pairs")
    n = t.groupby("task_id")["pairs"].nunique()
    if (n > 1).any():
        raise ValueError(f"{path}: task {n[n > 1].index[0]}: policies on different pairs")
    return t


def counts_report(path: str, pool: bool = False, worlds: bool = False) -> dict:
    """The task-level numbers of a per-task counts table (:func:`read_counts`): each
    policy against "help at turn 0" and the rules' hull at its spend (the policies' mean
    calls from ``policy_calls``), tasks as the unit. The cluster interval needs only each
    task's sum of differences and its pairs, so it is exact; the per-pair interval needs
    the pairs themselves and is not computed. Each task's episodes are laid out
    successes first for every policy (any layout with the same counts gives the same
    task sums); ``differ`` then counts the tasks whose counts differ (a lower bound)."""
    t = read_counts(path)
    if pool:
        t = t.assign(split="+".join(dict.fromkeys(t["split"])))
    lines, out = [], {}
    for split, r in t.groupby("split", sort=False):
        pols = list(dict.fromkeys(r["policy"]))
        by = {}
        for p in pols:
            e = r[r["policy"] == p].sort_values("task_id")
            pairs = int(e["pairs"].sum())
            rows = [
                (f"{task}#{i}", int(i < k))
                for task, n, k in zip(e["task_id"], e["pairs"], e["successes"])
                for i in range(int(n))
            ]
            f = pd.DataFrame(rows, columns=["pair", "success"]).set_index("pair")
            by[p] = f.assign(expert_calls=float(e["policy_calls"].iloc[0]) / pairs)
        cell = {p: p.replace("|", "\\|") for p in pols}
        n = len(next(iter(by.values())))
        lines += [
            f"### {split}: {n} pairs per policy, from per-task counts (the pairs are lost: "
            "no per-pair interval)",
            "",
            *_per_task(by, pols, cell),
            "",
            *_power(by, pols, cell, out, split, pairs_known=False, worlds=worlds),
            "",
        ]
    print("\n".join(lines))
    return {f"{s}/{p}": v for (s, p), v in out.items()}


def _per_task(by: dict, pols: list[str], cell: dict) -> list[str]:
    """Successes per task (the pair's ``task#seed``) and policy: where a difference sits."""
    task = {p: e.index.str.rsplit("#", n=1).str[0] for p, e in by.items()}
    lines = ["| task | pairs | " + " | ".join(cell[p] for p in pols) + " |"]
    lines.append("|---" * (len(pols) + 2) + "|")
    for t in sorted(set(task[pols[0]])):
        row = [by[p]["success"][task[p] == t] for p in pols]
        lines.append(
            f"| {t} | {len(row[0])} | " + " | ".join(f"{int(x.sum())}" for x in row) + " |"
        )
    return lines


def _against(by: dict, pols: list[str], p: str) -> list[tuple[str, pd.Series]]:
    """What ``p`` is set against: "help at turn 0" and the rules' hull at its own spend."""
    from helpdp.evaluate.stats import is_rule, rule_hull_baseline

    rules = {q: by[q] for q in pols if q != p and is_rule(q)}
    against = []
    if "rule: turn 0" in by and p != "rule: turn 0":
        against.append(("rule: turn 0", by["rule: turn 0"]["success"].astype(float)))
    hull = rule_hull_baseline(float(by[p]["expert_calls"].mean()), rules) if rules else None
    if hull is not None and hull[1] != "rule: turn 0":
        against.append((f"the rules' hull at equal spend ({hull[1]})", hull[0]))
    return against


def _power(
    by: dict,
    pols: list[str],
    cell: dict,
    out: dict,
    split: str,
    pairs_known: bool = True,
    worlds: bool = False,
) -> list[str]:
    """Each policy against "help at turn 0" and against the rules' hull at its own spend
    (helpdp.evaluate.rule_hull_baseline: an episode-wise mix of never, always and the
    ``rule: ...`` policies): per pair ("for these tasks": the difference 80% power detects
    from these pairs and the pairs a difference of 0.05 needs, pairs independent) and with
    tasks as the unit ("for tasks like these": helpdp.evaluate.stats.task_ci, the tasks
    that differ, the largest share one task carries, the task-level detectable difference
    and the tasks 0.05 needs). ``pairs_known=False``: the task-level columns only.
    ``worlds``: a second table, the same with worlds as the unit (``row["worlds"]``)."""
    from helpdp.evaluate.stats import paired_ci, task_ci
    from helpdp.intervals import detectable_difference, pairs_needed

    head = "| policy (calls) | against | "
    if pairs_known:
        head += "for these tasks: paired SR difference [95%] | detectable | pairs for 0.05 | "
    lines = [
        head + "for tasks like these [95%] | tasks that differ (largest share) | detectable "
        "(tasks) | tasks for 0.05 |",
        "|---" * (8 if pairs_known else 5) + "|---|",
    ]
    notes = []
    wlines = [
        "| policy (calls) | against | for worlds like these [95%] | worlds that differ "
        "(largest share) | detectable (worlds) | worlds for 0.05 |",
        "|---" * 6 + "|",
    ]
    for p in pols:
        mine = by[p]["success"].astype(float)
        tasks = by[p].index.str.rsplit("#", n=1).str[0].to_numpy()
        for name, base in _against(by, pols, p):
            d = (mine - base).to_numpy()
            tk = task_ci(d, tasks)
            row = {"tasks": tk}
            if worlds:
                wk = task_ci(d, np.array([t.split("/")[0] for t in tasks]))
                row["worlds"] = wk
                wlines.append(f"| {cell[p]} | {name.replace('|', '/')} | {_cluster_cells(wk)} |")
            cells = (
                f"| {cell[p]} ({by[p]['expert_calls'].mean():.2f}) | {name.replace('|', '/')} | "
            )
            if pairs_known:
                m, lo, hi = paired_ci(d)
                sd = float(d.std(ddof=1)) if len(d) > 1 else 0.0
                # no spread yet (every pair the same): the power is not estimable
                mde = detectable_difference(sd, len(d)) if sd > 0 else float("nan")
                need = pairs_needed(sd, 0.05) if sd > 0 else None
                row.update({"d": m, "lo": lo, "hi": hi, "mde": mde, "need": need})
                cells += f"{m:+.3f} [{lo:+.3f}, {hi:+.3f}] | " + (
                    "n/a (no spread) | n/a | " if need is None else f"{mde:.3f} | {need} | "
                )
            out[(split, f"{p} vs {name}")] = row
            lines.append(cells + _cluster_cells(tk) + " |")
            if tk["note"] and tk["note"] not in notes:
                notes.append(tk["note"])
    lines += [f"\n**{n}**: the task-level intervals describe these tasks only." for n in notes]
    if worlds:
        lines += ["", "With worlds as the unit (tasks drawn by world):", "", *wlines]
    return lines


def _cluster_cells(k: dict) -> str:
    """A :func:`helpdp.evaluate.stats.task_ci` record as the table's four cells."""
    share = "n/a" if np.isnan(k["top_share"]) else f"{k['top_share']:.0%}"
    mde = "n/a" if np.isnan(k["detectable"]) else f"{k['detectable']:.3f}"
    need = k["tasks_for_delta"] if k["tasks_for_delta"] is not None else "n/a"
    return (
        f"{k['mean']:+.3f} [{k['lo']:+.3f}, {k['hi']:+.3f}] (df {k['df']:.1f}) | "
        f"{k['differ']} of {k['G']} ({share}) | {mde} | {need}"
    )


def _eval_main(args: list[str]) -> dict:
    """``--eval-report DIRS [--skip=POLICY] [--pool] [--ship FILE] [--from-table FILE]
    [--worlds]``;
    bad input exits 2 with one line naming the file."""
    ap = argparse.ArgumentParser(prog="real_actor.py --eval-report")
    ap.add_argument("dirs", nargs="*")
    ap.add_argument("--skip", action="append", default=[])
    ap.add_argument("--pool", action="store_true")
    ap.add_argument("--ship", default=None, metavar="FILE")
    ap.add_argument("--from-table", default=None, metavar="FILE")
    ap.add_argument("--worlds", action="store_true", help="also worlds as the unit")
    a = ap.parse_args(args)
    if bool(a.dirs) == bool(a.from_table):
        ap.error("give the evaluate out directories or --from-table FILE, not both")
    try:
        return eval_report(
            a.dirs, tuple(a.skip), a.pool, ship=a.ship, table=a.from_table, worlds=a.worlds
        )
    except (ValueError, OSError) as e:
        print(f"error: {e}", file=sys.stderr)
        raise SystemExit(2) from None


def main(argv=None) -> dict:
    if argv is None:
        argv = sys.argv[1:]
    if argv and argv[0] == "--eval-report":
        return _eval_main(argv[1:])
    if argv and argv[0] == "--call-value":
        report = call_value(argv[1:])
        print(json.dumps(report, indent=1))
        return report
    if argv and argv[0] == "--publish-partial":
        report = publish_partial(argv[1], argv[2:])
        print(json.dumps(report, indent=1))
        return report
    if argv and argv[0] == "--analyze":
        report = analyze(argv[1:])
        print(json.dumps(report, indent=1))
        return report
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--scenario", default="workflow_automation_1")
    ap.add_argument("--tasks", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--probabilities", type=float, nargs="+", default=[0.0, 1.0])
    ap.add_argument("--call-format", default="strict", choices=["strict", "lenient"])
    ap.add_argument("--out", default=None, help="dataset directory (default: a temporary one)")
    ap.add_argument("--json", default=None, help="write the per-turn timings here")
    ap.add_argument("--openai", default=None, metavar="BASE_URL", help="time this server")
    ap.add_argument("--model", default="qwen", help="the model name the server knows")
    args = ap.parse_args(argv)

    with tempfile.TemporaryDirectory(prefix="bench-real-") as tmp:
        out = args.out or str(Path(tmp) / "ds")
        common = [
            f"out={out}",
            f"actor.call_format={args.call_format}",
            f"schedule.scenarios=[{args.scenario}]",
            f"schedule.tasks=[{','.join(map(str, args.tasks))}]",
            f"schedule.probabilities=[{','.join(map(str, args.probabilities))}]",
            "schedule.seeds=[0]",
            "progress=false",
            "overwrite=true",
        ]
        cfg = collect_config(["collect/actor=qwen_coder_0_5b", *common])
        if args.openai:  # the same schedule and sampling, through the server
            a = cfg.actor
            cfg = collect_config(
                [
                    "collect/actor=openai",
                    f"actor.base_url={args.openai}",
                    f"actor.model={args.model}",
                    f"actor.temperature={a.temperature}",
                    f"actor.top_p={a.top_p}",
                    f"actor.max_tokens={a.max_tokens}",
                    "actor.concurrency=1",
                    "executor.batch_size=1",
                    *common,
                ]
            )
        t0 = time.perf_counter()
        actor = (
            OpenAIActor(actor_config(cfg.actor))
            if args.openai
            else HFActor(actor_config(cfg.actor))
        )
        load = time.perf_counter() - t0
        timed = TimedActor(actor, lenient=cfg.actor.call_format == "lenient")
        t1 = time.perf_counter()
        result = collect(cfg, actor=timed)
        total = time.perf_counter() - t1

    turns = timed.turns
    by_ep = defaultdict(list)
    for t in turns:
        by_ep[t["episode"]].append(t)
    secs = [t["seconds"] for t in turns]
    report = {
        "load_s": round(load, 1),
        "episodes": result.episodes,
        "turns": len(turns),
        "collect_s": round(total, 1),
        "turn_s_median": round(statistics.median(secs), 2),
        "turn_s_p90": round(_q(secs, 0.9), 2),
        "episode_s_mean": round(sum(secs) / max(1, len(by_ep)), 1),
        "turns_per_episode": round(len(turns) / max(1, len(by_ep)), 2),
        "prompt_tokens_median": statistics.median(t["prompt_tokens"] for t in turns),
        "computed_tokens_median": statistics.median(t["computed_tokens"] for t in turns),
        "completion_tokens_median": statistics.median(t["completion_tokens"] for t in turns),
        "by_turn": {
            k: {
                "n": len(v),
                "seconds_median": round(statistics.median(x["seconds"] for x in v), 2),
                "prompt_tokens_median": statistics.median(x["prompt_tokens"] for x in v),
                "computed_tokens_median": statistics.median(x["computed_tokens"] for x in v),
            }
            for k, v in sorted(
                {
                    t: [x for x in turns if x["turn"] == t] for t in {x["turn"] for x in turns}
                }.items()
            )
        },
    }
    print(json.dumps(report, indent=1))
    if args.json:
        Path(args.json).write_text(json.dumps({"report": report, "turns": turns}, indent=1))
    return report


if __name__ == "__main__":
    main()
