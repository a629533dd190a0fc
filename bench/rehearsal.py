"""The B200 recipe rehearsed on CPU with two ranks (conf/train/b200_rehearsal.yaml).

    python bench/rehearsal.py [--out outputs/rehearsal] [--steps 4] [--timeout 900]

writes ``<out>/run`` (the launches' ``out=``), ``<out>/launch-{kill,resume}.log`` and
``<out>/rehearsal.json``; with ``--gate helper`` (the default) first ``<out>/labels`` and
``<out>/helper``: the demo data's budget-1 labels and a tiny helper trained on them, which
gates the expert on both ranks (``gate.policy=helper``) as a trained helper gates it on
the B200s.

One command, four parts:

1. a local OpenAI-compatible stand-in for the LLM expert on 127.0.0.1 (a thread of this
   process, :class:`StubExpert`): it answers every ``POST /v1/chat/completions`` with a
   fixed plan, logs each request (the rank, told apart by the API key each rank reads:
   ``interventions.expert.api_key_env=HELPDP_REHEARSAL_KEY_${oc.env:RANK,0}``; the kind:
   the expert's help or its once-per-task success criteria), refuses more than
   ``--max-requests`` and stops with this command;
2. ``accelerate launch --multi_gpu --num_processes 2 -m helpdp.train train=b200_rehearsal``
   (on a host without CUDA the trainer asks for the CPU and accelerate takes gloo;
   ``--cpu --num_processes 2`` would start ONE process: accelerate's simple launcher
   runs several only under mpirun), checkpoints every step, KILLED (SIGKILL to the
   launch's process group) once both ranks have logged rollout batch 2 (so
   ``checkpoints/checkpoint-2`` exists);
3. the same launch with ``resume=<out>/checkpoints/checkpoint-2``, to ``--steps``;
4. the checks (each rank its own environments; the expert calls reaching the
   environments = the gate's grants = the stand-in's requests, per rank; the adaptive
   schedule identical on both ranks; metrics, TensorBoard and checkpoints written once;
   the step count continued; batch 2 re-run after the resume = batch 2 before the kill,
   per rank; no worker left after the kill) and the measurements (peak RSS per rank and
   per environment worker, sampled every 0.25 s; seconds per step; the expert's request
   rate), written to ``<out>/rehearsal.json`` and printed as a table. Exit 1 when a
   check fails.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import signal
import subprocess
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import psutil

KILL_AFTER_BATCH = 2  # the kill comes once both ranks logged this rollout batch
PLAN = "Call list_tools, then call the tool the task names with the task's values."


class StubExpert:
    """The stand-in endpoint: a ThreadingHTTPServer on 127.0.0.1 (a free port)."""

    def __init__(self, max_requests: int = 5000):
        self.log: list[dict] = []
        self.phase = ""
        self.max_requests = int(max_requests)
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *a):  # quiet
                pass

            def do_POST(self):  # noqa: N802 - http.server's name
                n = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(n) or b"{}")
                messages = body.get("messages") or [{}]
                system = str(messages[0].get("content", ""))
                entry = {
                    "t": time.time(),
                    "phase": stub.phase,
                    "rank": (self.headers.get("Authorization") or "").removeprefix("Bearer "),
                    "kind": "help" if system.startswith("You are an expert operator") else "other",
                    "chars": sum(len(str(m.get("content", ""))) for m in messages),
                }
                with stub.lock:
                    full = len(stub.log) >= stub.max_requests
                    if not full:
                        stub.log.append(entry)
                if full:
                    self.send_response(503)
                    self.end_headers()
                    return
                reply = {
                    "id": "stub",
                    "object": "chat.completion",
                    "created": int(entry["t"]),
                    "model": body.get("model", "stub"),
                    "choices": [
                        {
                            "index": 0,
                            "message": {"role": "assistant", "content": PLAN},
                            "finish_reason": "stop",
                        }
                    ],
                    "usage": {
                        "prompt_tokens": entry["chars"] // 4,
                        "completion_tokens": 16,
                        "total_tokens": entry["chars"] // 4 + 16,
                    },
                }
                data = json.dumps(reply).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self):
        self.thread.start()
        return self

    def __exit__(self, *exc):
        self.server.shutdown()
        self.server.server_close()


class Monitor:
    """Peak memory of the launch's processes, by pid: the ranks (the launcher's children,
    ``RANK`` in their environment) and their descendants (the environment pool's
    processes). RSS every ``period`` s; PSS (shared pages split between their users,
    so it adds up) every ``pss_every`` samples; each process's command line, short."""

    def __init__(self, root: int, period: float = 0.25, pss_every: int = 4):
        self.root, self.period, self.pss_every = root, period, pss_every
        self.rss: dict[int, int] = {}
        self.pss: dict[int, int] = {}
        self.cmd: dict[int, str] = {}
        self.rank_of: dict[int, int] = {}  # pid -> rank (ranks and their workers)
        self.is_rank: set[int] = set()
        self.samples = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _classify(self, p: psutil.Process) -> bool:
        if p.pid in self.rank_of:
            return True
        env = p.environ()
        if p.ppid() == self.root and "RANK" in env:  # torch.distributed.run's worker
            self.rank_of[p.pid] = int(env["RANK"])
            self.is_rank.add(p.pid)
        else:
            anc = next((a.pid for a in p.parents() if a.pid in self.is_rank), None)
            if anc is None:
                return False  # not below a rank
            self.rank_of[p.pid] = self.rank_of[anc]
        argv = p.cmdline()[:3]
        self.cmd[p.pid] = " ".join([Path(argv[0]).name, *argv[1:]] if argv else [])[:100]
        return True

    def _sample(self) -> None:
        try:
            kids = psutil.Process(self.root).children(recursive=True)
        except psutil.Error:
            return
        full = self.samples % self.pss_every == 0
        self.samples += 1
        for p in kids:
            try:
                if not self._classify(p):
                    continue
                self.rss[p.pid] = max(self.rss.get(p.pid, 0), p.memory_info().rss)
                if full:
                    self.pss[p.pid] = max(self.pss.get(p.pid, 0), p.memory_full_info().pss)
            except psutil.Error:
                continue

    def _run(self) -> None:
        while not self.stop.is_set():
            self._sample()
            self.stop.wait(self.period)

    def close(self) -> None:
        self.stop.set()
        self.thread.join()

    def summary(self) -> dict:
        """Per rank: its pid, peak RSS/PSS (MiB), and each descendant's."""
        out: dict = {}
        for pid, rank in self.rank_of.items():
            r = out.setdefault(str(rank), {"rank_pid": None, "workers": {}})
            mem = {
                "rss_mib": round(self.rss.get(pid, 0) / 2**20, 1),
                "pss_mib": round(self.pss.get(pid, 0) / 2**20, 1),
            }
            if pid in self.is_rank:
                r.update(rank_pid=pid, rank_rss_mib=mem["rss_mib"], rank_pss_mib=mem["pss_mib"])
            else:
                r["workers"][str(pid)] = {**mem, "cmd": self.cmd.get(pid, "")}
        return out


def _launch_cmd(out: Path, steps: int, extra: list[str], port: int) -> list[str]:
    return [
        sys.executable,
        "-m",
        "accelerate.commands.launch",
        "--multi_gpu",
        "--num_processes",
        "2",
        "--num_machines",
        "1",
        "--mixed_precision",
        "no",
        "--dynamo_backend",
        "no",
        "--main_process_port",
        str(port),
        "-m",
        "helpdp.train",
        "train=b200_rehearsal",
        f"out={out}",
        f"grpo.max_steps={steps}",
        "progress=false",
        "interventions.expert.api_key_env=HELPDP_REHEARSAL_KEY_${oc.env:RANK,0}",
        *extra,
    ]


def _train_helper(root: Path, env: dict) -> list[str]:
    """Label the demo data at budgets 1 and 3 and train a tiny helper on them
    (``helper=tiny``, two epochs: the rehearsal checks the gate's plumbing, not the
    helper's quality; about 40 s of CPU, its output in ``<root>/helper.log``): the
    overrides that make both ranks' gate that helper at budget 3, so that a 2-epoch
    helper still grants calls on both ranks before and after the kill."""
    labels, helper = root / "labels", root / "helper"
    with open(root / "helper.log", "w") as log:
        for cmd in (
            ["-m", "helpdp.label", "budget=[1.0,3.0]", f"out={labels}"],
            [
                "-m",
                "helpdp.helper.train",
                f"labels={labels}",
                "helper=tiny",
                "helper.epochs=2",
                f"out={helper}",
            ],
        ):
            subprocess.run([sys.executable, *cmd], env=env, check=True, stdout=log, stderr=log)
    return ["gate.policy=helper", f"gate.path={helper}", "gate.budget=3.0"]


def _batches_logged(out: Path) -> int:
    """The fewest rollout batches any rank has logged (episodes.jsonl's step + 1)."""
    least = None
    for rank in (0, 1):
        f = out / f"rank{rank}" / "episodes.jsonl"
        steps = [json.loads(x)["step"] for x in f.read_text().splitlines()] if f.exists() else []
        n = max(steps) + 1 if steps else 0
        least = n if least is None else min(least, n)
    return least or 0


def _kill_tree(root: int) -> None:
    """SIGKILL the launcher and every process below it, by pid (a node failure).
    Killing the launcher's process group is not enough: torch.distributed.run starts
    each rank in a session of its own, and the ranks would train on, orphaned."""
    try:
        procs = [psutil.Process(root), *psutil.Process(root).children(recursive=True)]
    except psutil.Error:
        return
    for p in procs:
        try:
            p.send_signal(signal.SIGKILL)
        except psutil.Error:
            continue


def _run_phase(cmd, env, log, timeout, kill_after=None, out=None) -> dict:
    """One launch; with ``kill_after``, SIGKILL its process group once both ranks
    logged that many batches. Returns its wall time, return code, peak RSS."""
    t0 = time.perf_counter()
    with open(log, "w") as f:
        proc = subprocess.Popen(
            cmd, env=env, stdout=f, stderr=subprocess.STDOUT, start_new_session=True
        )
    mon = Monitor(proc.pid)
    killed = False
    try:
        while proc.poll() is None:
            if time.perf_counter() - t0 > timeout:
                _kill_tree(proc.pid)
                raise SystemExit(f"rehearsal: a launch ran past {timeout}s (log: {log})")
            if kill_after is not None and _batches_logged(out) >= kill_after:
                _kill_tree(proc.pid)
                killed = True
                proc.wait()
                break
            time.sleep(0.5)
    finally:
        mon.close()
    pids = list(mon.rank_of)
    time.sleep(3.0)  # the workers' parent watch
    left = [p for p in pids if psutil.pid_exists(p) and psutil.Process(p).status() != "zombie"]
    return {
        "seconds": round(time.perf_counter() - t0, 1),
        "returncode": proc.returncode,
        "killed": killed,
        "processes": mon.summary(),
        "left_after": left,
    }


def _read_jsonl(path: Path) -> list[dict]:
    return [json.loads(x) for x in path.read_text().splitlines()] if path.exists() else []


def _metrics(out: Path) -> list[dict]:
    with open(out / "metrics.csv", newline="") as f:
        return list(csv.DictReader(f))


def _diff(first: list[dict], again: list[dict]) -> list:
    """Where the rerun of a batch differs from its first run: ``[index, field, first,
    again]`` per differing field (``[None, "episodes", n_first, n_again]`` on a count)."""
    if len(first) != len(again):
        return [[None, "episodes", len(first), len(again)]]
    return [
        [i, k, a.get(k), b.get(k)]
        for i, (a, b) in enumerate(zip(first, again))
        for k in sorted(set(a) | set(b))
        if a.get(k) != b.get(k)
    ]


def _per_rank(out: Path, stub: list[dict], snap: dict, kill_step: int) -> dict:
    """Per rank: grants, calls, the stand-in's requests, worker count; the checks."""
    rows = {}
    for rank in (0, 1):
        d = _read_jsonl(out / f"rank{rank}" / "decisions.jsonl")
        e = _read_jsonl(out / f"rank{rank}" / "episodes.jsonl")
        mine = [r for r in stub if r["rank"] == f"rank{rank}" and r["kind"] == "help"]
        before = snap[rank]["decisions"]
        rows[rank] = {
            "episodes": len(e),
            "batches": sorted({x["step"] for x in e}),
            "gate_grants": sum(1 for x in d if x["gate"] > 0),
            "expert_ran": sum(1 for x in d if x["action"] > 0),
            "episode_expert_calls": sum(x["expert_calls"] for x in e),
            "expert_errors": sum(1 for x in d if x["error"]),
            "stub_help_after_resume": sum(1 for r in mine if r["phase"] == "resume"),
            "grants_after_resume": sum(1 for x in d if x["gate"] > 0 and x["step"] >= kill_step),
            "stub_help_before_kill": sum(1 for r in mine if r["phase"] == "kill"),
            "grants_logged_before_kill": sum(1 for x in before if x["gate"] > 0),
            "stub_other": sum(
                1 for r in stub if r["rank"] == f"rank{rank}" and r["kind"] != "help"
            ),
            "tasks": sorted({(x["step"], x["task_id"]) for x in e}),
        }
        again = [x for x in e if x["step"] == kill_step]
        first = [x for x in snap[rank]["episodes"] if x["step"] == kill_step]
        rows[rank]["batch_rerun_identical"] = bool(first) and again == first
        rows[rank]["batch_rerun_diff"] = _diff(first, again)
    return rows


def _checks(out: Path, steps: int, ranks: dict, phases: dict, kill_step: int) -> dict:
    ck = out / "checkpoints"
    found = sorted(int(p.name.split("-")[1]) for p in ck.glob("checkpoint-*"))
    states = {}
    for n in found:
        s = [
            json.loads((ck / f"checkpoint-{n}" / f"rollout_state-rank{r}.json").read_text())
            for r in (0, 1)
        ]
        states[n] = s
    rank0 = json.loads((out / "rank0" / "train.json").read_text())
    metric_steps = [int(r["step"]) for r in _metrics(out)]
    workers = {
        r: set(phases["resume"]["processes"].get(str(r), {}).get("workers", {})) for r in (0, 1)
    }
    return {
        "two_ranks_ran": set(phases["resume"]["processes"]) == {"0", "1"},
        "each_rank_its_own_workers": all(workers.values()) and not (workers[0] & workers[1]),
        "ranks_got_different_tasks": ranks[0]["tasks"] != ranks[1]["tasks"],
        "grants_eq_calls_per_rank": all(
            r["gate_grants"] == r["expert_ran"] == r["episode_expert_calls"]
            and not r["expert_errors"]
            for r in ranks.values()
        ),
        "stub_eq_grants_after_resume_per_rank": all(
            r["stub_help_after_resume"] == r["grants_after_resume"] for r in ranks.values()
        ),
        "stub_ge_grants_before_kill_per_rank": all(
            r["stub_help_before_kill"] >= r["grants_logged_before_kill"] for r in ranks.values()
        ),
        "killed": phases["kill"]["killed"],
        "no_worker_left_after_kill": not phases["kill"]["left_after"],
        "checkpoints_every_step": found[-1] == steps and kill_step in found,
        "schedule_same_on_both_ranks": all(
            s[0]["schedule"] == s[1]["schedule"] for s in states.values()
        ),
        "metrics_once_per_step": metric_steps == list(range(1, steps + 1)),
        "metrics_rank0_only": not any((out / f"rank{r}" / "metrics.csv").exists() for r in (0, 1)),
        "tensorboard_one_file_per_launch": len(list((out / "tb").glob("events.out.tfevents.*")))
        == 2,
        "resume_continued_step_count": rank0["steps"] == steps
        and str(rank0["resumed_from"]).endswith(f"checkpoint-{kill_step}"),
        "batch_rerun_identical_per_rank": all(r["batch_rerun_identical"] for r in ranks.values()),
    }


def _by_command(workers: dict) -> dict:
    """command -> [count, max peak RSS, max peak PSS] (MiB) of a rank's descendants."""
    out: dict = {}
    for w in workers.values():
        n, rss, pss = out.get(w["cmd"], (0, 0.0, 0.0))
        out[w["cmd"]] = (n + 1, max(rss, w["rss_mib"]), max(pss, w["pss_mib"]))
    return {k: list(v) for k, v in sorted(out.items(), key=lambda kv: -kv[1][1])}


def _measure(out: Path, phases: dict, stub: list[dict]) -> dict:
    m = {}
    rows = _metrics(out)
    m["step_time_s"] = [round(float(r["step_time"]), 1) for r in rows if r.get("step_time")]
    m["rollout_wall_s"] = [round(float(r["time/wall_s"]), 1) for r in rows if r.get("time/wall_s")]
    for name, ph in phases.items():
        procs = ph["processes"]
        m[name] = {
            "seconds": ph["seconds"],
            "rank_rss_mib": {r: p.get("rank_rss_mib") for r, p in procs.items()},
            "rank_pss_mib": {r: p.get("rank_pss_mib") for r, p in procs.items()},
            "descendants": {r: len(p["workers"]) for r, p in procs.items()},
            "by_command": {r: _by_command(p["workers"]) for r, p in procs.items()},
            "descendants_pss_mib_sum": {
                r: round(sum(w["pss_mib"] for w in p["workers"].values()), 1)
                for r, p in procs.items()
            },
        }
        help_ = [r for r in stub if r["phase"] == name and r["kind"] == "help"]
        if help_:
            span = max(r["t"] for r in help_) - min(r["t"] for r in help_)
            m[name]["expert_help_requests"] = len(help_)
            m[name]["expert_requests_per_s"] = round(len(help_) / ph["seconds"], 3)
            m[name]["expert_requests_per_s_while_active"] = round(len(help_) / max(span, 1e-9), 3)
    return m


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default="outputs/rehearsal")
    ap.add_argument("--steps", type=int, default=4, help="GRPO steps in all (> 2)")
    ap.add_argument("--timeout", type=float, default=900.0, help="most seconds of one launch")
    ap.add_argument("--max-requests", type=int, default=5000, help="the stand-in's bound")
    ap.add_argument("--port", type=int, default=29531, help="the ranks' rendezvous port")
    ap.add_argument(
        "--gate",
        choices=("helper", "always"),
        default="helper",
        help="helper: a tiny helper trained first on the demo data's budget-1 labels gates the "
        "expert (gate.policy=helper); always: the preset's own gate",
    )
    a = ap.parse_args(argv)
    if a.steps <= KILL_AFTER_BATCH:
        ap.error(f"--steps must be > {KILL_AFTER_BATCH}")
    root = Path(a.out).resolve()
    out = root / "run"  # the launches' out=; the launch logs and rehearsal.json beside it
    if out.exists():
        ap.error(f"{out} holds an earlier rehearsal: give a new --out")
    kill_step = KILL_AFTER_BATCH
    phases: dict = {}
    snap: dict = {}
    with StubExpert(a.max_requests) as stub:
        env = dict(
            os.environ,
            HELPDP_EXPERT_URL=stub.url,
            HELPDP_EXPERT_MODEL="stub-expert",
            HELPDP_REHEARSAL_KEY_0="rank0",
            HELPDP_REHEARSAL_KEY_1="rank1",
            OMP_NUM_THREADS="1",
            TOKENIZERS_PARALLELISM="false",
        )
        root.mkdir(parents=True, exist_ok=True)
        gate = _train_helper(root, env) if a.gate == "helper" else []
        stub.phase = "kill"
        cmd = _launch_cmd(out, a.steps, gate, a.port)
        phases["kill"] = _run_phase(
            cmd, env, root / "launch-kill.log", a.timeout, kill_step + 1, out
        )
        if not phases["kill"]["killed"]:
            print(
                f"rehearsal: the first launch ended before the kill (log: {root / 'launch-kill.log'})"
            )
            return 1
        snap = {
            r: {k: _read_jsonl(out / f"rank{r}" / f"{k}.jsonl") for k in ("decisions", "episodes")}
            for r in (0, 1)
        }
        stub.phase = "resume"
        cmd = _launch_cmd(
            out, a.steps, [*gate, f"resume={out}/checkpoints/checkpoint-{kill_step}"], a.port
        )
        phases["resume"] = _run_phase(cmd, env, root / "launch-resume.log", a.timeout)
        log = list(stub.log)
    if phases["resume"]["returncode"] != 0:
        print(f"rehearsal: the resumed launch failed (log: {root / 'launch-resume.log'})")
        return 1
    ranks = _per_rank(out, log, snap, kill_step)
    checks = _checks(out, a.steps, ranks, phases, kill_step)
    report = {
        "checks": checks,
        "ranks": ranks,
        "measured": _measure(out, phases, log),
        "phases": phases,
        "stub_requests": len(log),
        "stub_log": log,
    }
    (root / "rehearsal.json").write_text(json.dumps(report, indent=1, default=list) + "\n")
    _print_table(report)
    return 0 if all(checks.values()) else 1


def _print_table(report: dict) -> None:
    ms = report["measured"]["resume"]
    print(
        "| rank | episodes | gate grants | expert calls (env) | stand-in requests after "
        "resume / grants | rank peak RSS / PSS MiB | descendants, PSS sum MiB |"
    )
    print("|---|---|---|---|---|---|---|")
    for rank, r in report["ranks"].items():
        k = str(rank)
        print(
            f"| {rank} | {r['episodes']} | {r['gate_grants']} | {r['episode_expert_calls']} | "
            f"{r['stub_help_after_resume']} / {r['grants_after_resume']} | "
            f"{ms['rank_rss_mib'].get(k)} / {ms['rank_pss_mib'].get(k)} | "
            f"{ms['descendants'].get(k)}, {ms['descendants_pss_mib_sum'].get(k)} |"
        )
    for k, kinds in ms["by_command"].items():
        for cmd, (n, rss, pss) in kinds.items():
            print(f"rank {k}: {n} x {cmd!r}: peak RSS {rss} MiB, PSS {pss} MiB")
    print("step_time_s", report["measured"]["step_time_s"])
    for name, ok in report["checks"].items():
        print(f"{'ok  ' if ok else 'FAIL'} {name}")


if __name__ == "__main__":
    sys.exit(main())
