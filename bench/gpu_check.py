"""The project's GPU paths, run and timed at small size on one device (docs/grpo.md,
"The GPU check").

    python bench/gpu_check.py --out outputs/gpu_check            # CUDA when present
    python bench/gpu_check.py --out outputs/gpu_check --device cpu --tiny

Four steps, each calling the project's own code (nothing reimplemented here):

1. ``helper_sft``: the demo data labelled at budgets 1 and 3 (``python -m helpdp.label``),
   then the helper (``helpdp.helper.train.train_helper``, ``backbone=hf``) fitted on a
   Qwen3 built from a config and saved as a local checkpoint (random weights, a BPE
   tokenizer trained on the labels' texts), last-token pooling, LoRA through peft, bf16
   weights and autocast where the device supports bf16, gradient checkpointing;
2. ``prm_lm``: the LM PRM (``prm.train.fit_prm``, a Qwen3 built from config, LoRA, bf16
   autocast on CUDA) on the demo data;
3. ``grpo_step``: one GRPO step through TRL (``helpdp.train.trainer.train``, preset
   ``cpu_smoke`` resized), transformers generation on the device, the helper of step 1
   gating the expert (``gate.policy=helper``), the adaptive expert/solo split and the
   graduated reward;
4. ``dp_solve``: the DP's exact solve on the history-tree dataset of ``bench/dp.py``
   (2.2 * 10^6 transitions; ``--tiny``: 2 * 10^4) on the CPU, the accelerator idle: the
   numba threads used are reported.

Each step's row: seconds, peak accelerator memory (``torch.cuda.max_memory_allocated``;
none on CPU), tokens per second (trained tokens; the DP: transitions per second) and
what was checked. The table is printed and written to ``<out>/gpu_check.{json,csv,md}``;
``<out>`` must be new or empty (nothing of another run is replaced). Exit 1 when a check
fails, 2 on bad arguments. On CPU (``--device cpu``, or no CUDA) the sizes are the tiny
ones and the dtype float32: the same code path, which ``tests/test_gpu_check.py`` runs.
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

STEPS = ("helper_sft", "prm_lm", "grpo_step", "dp_solve")
COLUMNS = ("step", "seconds", "peak_gpu_mib", "tokens_per_s", "checked", "ok")

#: the sizes: (CUDA, tiny). Qwen3 built from config: hidden, layers, heads, kv heads.
SIZES = {
    "full": {
        "hidden": 256,
        "layers": 4,
        "heads": 4,
        "kv_heads": 2,
        "max_length": 512,
        "examples": 2048,
        "epochs": 1,
        "batch": 32,
        "grpo_hidden": 256,
        "grpo_layers": 4,
        "grpo_prompts": 2,
        "grpo_generations": 8,
        "dp_transitions": 2.2e6,
        "dp_repeats": 5,
    },
    "tiny": {
        "hidden": 32,
        "layers": 2,
        "heads": 2,
        "kv_heads": 1,
        "max_length": 64,
        "examples": 48,
        "epochs": 1,
        "batch": 16,
        "grpo_hidden": 32,
        "grpo_layers": 1,
        "grpo_prompts": 1,
        "grpo_generations": 4,
        "dp_transitions": 2e4,
        "dp_repeats": 2,
    },
}


class Device:
    """The device, its dtype (bf16 where CUDA supports it, else float32) and its memory
    counters (CUDA only)."""

    def __init__(self, name: str):
        import torch

        self.torch = torch
        if name == "auto":
            name = "cuda" if torch.cuda.is_available() else "cpu"
        if name.startswith("cuda") and not torch.cuda.is_available():
            raise SystemExit(f"gpu_check: --device {name}: torch sees no CUDA device")
        self.name = name
        self.cuda = name.startswith("cuda")
        self.kind = name.split(":")[0]
        self.bf16 = bool(self.cuda and torch.cuda.is_bf16_supported())
        self.dtype = torch.bfloat16 if self.bf16 else torch.float32

    def describe(self) -> str:
        if not self.cuda:
            return f"cpu ({os.cpu_count()} cores), float32"
        p = self.torch.cuda.get_device_properties(0)
        return f"{p.name} ({p.total_memory / 2**30:.0f} GiB), {'bf16' if self.bf16 else 'fp32'}"

    def reset(self) -> None:
        if self.cuda:
            self.torch.cuda.empty_cache()
            self.torch.cuda.reset_peak_memory_stats()

    def peak_mib(self) -> float | None:
        if not self.cuda:
            return None
        return round(self.torch.cuda.max_memory_allocated() / 2**20, 1)

    def allocated(self) -> int:
        return int(self.torch.cuda.memory_allocated()) if self.cuda else 0


def _qwen_checkpoint(path: Path, texts: list[str], size: dict, dev: Device):
    """A Qwen3 (``Qwen3Model``) built from a config with random weights and a BPE
    tokenizer trained on ``texts``, saved in ``dev.dtype`` as a local checkpoint at
    ``path``: what ``backbone=hf base_model=path`` loads."""
    import transformers

    from helpdp.models.tokenizer import train_tokenizer

    tok = train_tokenizer(texts, vocab_size=512)
    config = transformers.Qwen3Config(
        vocab_size=len(tok),
        hidden_size=size["hidden"],
        intermediate_size=2 * size["hidden"],
        num_hidden_layers=size["layers"],
        num_attention_heads=size["heads"],
        num_key_value_heads=size["kv_heads"],
        head_dim=size["hidden"] // size["heads"],
        max_position_embeddings=max(size["max_length"], 64),
        pad_token_id=tok.pad_token_id,
        bos_token_id=None,
        eos_token_id=None,
    )
    dev.torch.manual_seed(0)
    model = transformers.Qwen3Model(config).to(dev.dtype)
    model.save_pretrained(path)
    tok.save_pretrained(path)


def _labels(root: Path) -> Path:
    """The demo data labelled at budgets 1 and 3 (``python -m helpdp.label``, as the
    rehearsal labels it), its output in ``<root>/label.log``."""
    labels = root / "labels"
    with open(root / "label.log", "w") as log:
        subprocess.run(
            [sys.executable, "-m", "helpdp.label", "budget=[1.0,3.0]", f"out={labels}"],
            check=True,
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    return labels


def step_helper(root: Path, size: dict, dev: Device) -> dict:
    """The helper's SFT on a from-config Qwen3 with LoRA (``train_helper``)."""
    from helpdp.helper.policy import HelperPolicy
    from helpdp.helper.train import train_helper
    from helpdp.label import read_labels

    labels, meta = read_labels(_labels(root))
    base = root / "qwen3-helper-base"
    _qwen_checkpoint(base, labels["text"].astype(str).unique().tolist(), size, dev)
    helper_cfg = {
        "backbone": "hf",
        "base_model": str(base),
        "max_length": size["max_length"],
        "head_tokens": size["max_length"] // 8,
        "pooling": "last",
        "lora": {"r": 8, "alpha": 16.0, "dropout": 0.0},
        "lr": 2e-4,
        "epochs": size["epochs"],
        "batch_size": size["batch"],
        "eval_batch_size": 64,
        "bf16": dev.bf16,
        "gradient_checkpointing": True,
    }
    cfg = {
        "labels": str(root / "labels"),
        "out": str(root / "helper"),
        "helper": helper_cfg,
        "max_train_examples": size["examples"],
        "device": dev.name,
        "progress": False,
    }
    t0 = time.perf_counter()
    res = train_helper(labels, meta, cfg, root / "helper")
    seconds = time.perf_counter() - t0
    m = res["metrics"]
    pol = HelperPolicy(root / "helper", device=dev.name)
    # trained tokens: the examples at the mean encoded length (the helper's own cut) x epochs
    texts = labels.drop_duplicates("state_id")["text"].astype(str).tolist()
    mean_len = sum(map(len, pol.encoder(texts))) / max(len(texts), 1)
    n_tokens = m["train_examples"] * mean_len * float(size["epochs"])
    p = pol.proba(texts[:8])
    net_devices = {q.device.type for q in pol.net.parameters()}
    checks = {
        "LoRA r=8 (peft), merged into the saved helper": res["config"]["lora"]["r"] == 8,
        "losses finite": math.isfinite(m["train_loss_before"])
        and math.isfinite(m["train_loss_after"]),
        "a threshold per budget (1, 3)": sorted(res["thresholds"]) == ["1", "3"],
        "saved helper loads on the device and scores": net_devices == {dev.kind}
        and p.shape == (8, len(res["classes"]))
        and bool(abs(p.sum(1) - 1).max() < 1e-4),
    }
    extra = {
        "train_examples": m["train_examples"],
        "train_loss": [m["train_loss_before"], m["train_loss_after"]],
        "base_dtype": str(dev.dtype).removeprefix("torch."),
    }
    return _row("helper_sft", seconds, n_tokens / seconds, checks, extra)


def step_prm(root: Path, size: dict, dev: Device) -> dict:
    """The LM PRM (``fit_prm``) on the demo data: a from-config Qwen3 with LoRA."""
    from helpdp import load_dataset
    from helpdp.demo import demo_dataset_path
    from prm.train import fit_prm

    ds = load_dataset(demo_dataset_path())
    cfg = {
        "data": str(demo_dataset_path()),
        "out": str(root / "prm"),
        "prm": {
            "kind": "lm",
            "base_model": None,
            "hidden_size": size["hidden"],
            "intermediate_size": 2 * size["hidden"],
            "num_layers": size["layers"],
            "num_heads": size["heads"],
            "num_kv_heads": size["kv_heads"],
            "max_length": size["max_length"],
            "epochs": size["epochs"],
            "batch_size": size["batch"],
            "max_train_examples": size["examples"],
            "lr": 2e-4,
        },
        "device": dev.name,
        "progress": False,
    }
    t0 = time.perf_counter()
    prm, summary = fit_prm(ds, cfg)
    seconds = time.perf_counter() - t0
    params = list(prm.model.parameters())
    internal = ds.states.loc[~ds.states["terminal"].astype(bool), "state_id"].to_numpy()[:8]
    scores = prm.predict(ds, internal, 1)
    checks = {
        "LoRA adapters (peft)": any("lora_" in n for n, _ in prm.model.named_parameters()),
        "model on the device": {p.device.type for p in params} == {dev.kind},
        f"bf16 autocast {'on' if dev.bf16 else 'off'}": prm.use_bf16 == dev.bf16,
        "losses finite": math.isfinite(summary["train_loss_before"])
        and math.isfinite(summary["train_loss_after"]),
    }
    checks["scores in [0, 1]"] = len(scores) == 8 and bool(((scores >= 0) & (scores <= 1)).all())
    extra = {"train_loss": [summary["train_loss_before"], summary["train_loss_after"]]}
    return _row("prm_lm", seconds, float(summary["train_tokens_per_s"]), checks, extra)


def step_grpo(root: Path, size: dict, dev: Device) -> dict:
    """One GRPO step through TRL (``helpdp.train.trainer.train``), the helper gating."""
    from helpdp.train.config import train_config
    from helpdp.train.trainer import train

    overrides = [
        "train=cpu_smoke",
        f"out={root / 'grpo'}",
        "grpo.max_steps=1",
        f"grpo.prompts_per_step={size['grpo_prompts']}",
        f"grpo.num_generations={size['grpo_generations']}",
        f"grpo.device={dev.name}",
        f"grpo.bf16={str(dev.bf16).lower()}",
        "grpo.report_to=[]",
        "grpo.cpu_threads=null",
        f"model.hidden_size={size['grpo_hidden']}",
        f"model.num_layers={size['grpo_layers']}",
        "gate.policy=helper",
        f"gate.path={root / 'helper'}",
        "gate.budget=3.0",
        "gate.max_per_batch=null",
        "split.kind=adaptive",
        "rewards.kind=graduated",
        "progress=false",
    ]
    cfg = train_config(overrides)
    t0 = time.perf_counter()
    res = train(cfg)
    seconds = time.perf_counter() - t0
    trainer, rollout = res["trainer"], res["rollout_func"]
    logs = [r for r in trainer.state.log_history if "loss" in r]
    n_tokens = float(logs[-1].get("num_tokens", 0.0)) if logs else 0.0
    devices = {p.device.type for p in trainer.model.parameters()}
    granted = sum(1 for d in rollout.decisions if d["action"])
    n_ep = size["grpo_prompts"] * size["grpo_generations"]
    checks = {
        "1 step, loss finite": res["steps"] == 1 and all(map(math.isfinite, res["losses"])),
        "model on the device": devices == {dev.kind},
        f"{n_ep} episodes": res["episodes"] == n_ep,
        "helper gate decided (gate.policy=helper)": len(rollout.decisions) > 0,
        "grants = expert calls": granted == res["expert_calls"],
        "adaptive split (phase set)": bool(res["phase"]),
        "graduated reward logged": any(k.startswith("rewards/graduated") for k in logs[-1])
        if logs
        else False,
    }
    extra = {
        "episodes": res["episodes"],
        "gate_decisions": len(rollout.decisions),
        "expert_calls": res["expert_calls"],
        "phase": res["phase"],
        "loss": res["losses"],
    }
    return _row("grpo_step", seconds, n_tokens / seconds, checks, extra)


def step_dp(size: dict, dev: Device) -> dict:
    """The DP's exact solve on ``bench/dp.py``'s history trees, on the CPU."""
    import numba
    import numpy as np
    from dp import DEPTH, R, history_trees, write  # the sibling benchmark

    from helpdp import load_dataset, solve
    from helpdp.budget import warm_up

    before = dev.allocated()
    with tempfile.TemporaryDirectory(prefix="helpdp-gpu-check-dp-") as tmp:
        write(Path(tmp), *history_trees(int(size["dp_transitions"])))
        ds = load_dataset(tmp)
    mdp = ds.mdp
    warm_up(mdp, gamma=1.0)
    times = []
    for _ in range(size["dp_repeats"]):
        t = time.perf_counter()
        sol = solve(mdp, R, gamma=1.0)
        times.append(time.perf_counter() - t)
    seconds = float(np.median(times))
    threads = int(numba.get_num_threads())
    v = sol.values
    checks = {
        f"{mdp.n_transitions} transitions": mdp.n_transitions > 0.9 * size["dp_transitions"],
        "V finite, S in [0, 1]": bool(np.isfinite(v[:, 0]).all())
        and bool(((v[:, 1] >= -1e-9) & (v[:, 1] <= 1 + 1e-9)).all()),
        "accelerator idle (no memory taken)": dev.allocated() == before,
        f"CPU: {threads} numba threads of {os.cpu_count()} cores": threads >= 1,
    }
    extra = {
        "n_transitions": int(mdp.n_transitions),
        "n_states": int(mdp.n_states),
        "depth": DEPTH,
        "numba_threads": threads,
        "cpu_cores": os.cpu_count(),
        "solve_seconds": times,
        "expected_success": float(sol.expected_success),
    }
    row = _row("dp_solve", seconds, mdp.n_transitions / seconds, checks, extra)
    row["rate_unit"] = "transitions/s"
    return row


def _row(step: str, seconds: float, rate: float, checks: dict, extra: dict) -> dict:
    return {
        "step": step,
        "seconds": round(float(seconds), 3),
        "tokens_per_s": round(float(rate), 1),
        "checks": {k: bool(v) for k, v in checks.items()},
        "ok": all(checks.values()),
        "rate_unit": "tokens/s",
        **extra,
    }


def run(out: Path, device: str = "auto", tiny: bool = False, steps=STEPS) -> dict:
    """Run ``steps`` into ``out`` (created; it must be new or empty); returns the report
    (also written as gpu_check.json, .csv and .md)."""
    dev = Device(device)
    tiny = tiny or not dev.cuda
    size = SIZES["tiny" if tiny else "full"]
    out = Path(out)
    if out.exists() and any(out.iterdir()):
        raise SystemExit(f"gpu_check: --out {out} is not empty: give a new directory")
    out.mkdir(parents=True, exist_ok=True)
    dev.torch.manual_seed(0)
    rows, t_all = [], time.perf_counter()
    for name in steps:
        dev.reset()
        if name == "dp_solve":
            row = step_dp(size, dev)
        else:
            row = {"helper_sft": step_helper, "prm_lm": step_prm, "grpo_step": step_grpo}[name](
                out, size, dev
            )
        row["peak_gpu_mib"] = dev.peak_mib()
        rows.append(row)
        print(f"gpu_check: {name} {row['seconds']:.1f}s ok={row['ok']}", flush=True)
    report = {
        "device": dev.describe(),
        "size": "tiny" if tiny else "full",
        "dtype": str(dev.dtype).removeprefix("torch."),
        "seconds": round(time.perf_counter() - t_all, 1),
        "versions": _versions(),
        "rows": rows,
    }
    _write(out, report)
    return report


def _versions() -> dict:
    from importlib import metadata

    out = {"python": sys.version.split()[0]}
    for pkg in ("torch", "transformers", "peft", "accelerate", "trl", "numba"):
        try:
            out[pkg] = metadata.version(pkg)
        except metadata.PackageNotFoundError:
            out[pkg] = None
    return out


def table(report: dict) -> str:
    """The markdown table of ``report``."""
    lines = [
        f"device: {report['device']}; size {report['size']}; dtype {report['dtype']}; "
        f"{report['seconds']} s in all",
        "",
        "| step | seconds | peak GPU MiB | tokens/s | checked |",
        "|---|---|---|---|---|",
    ]
    for r in report["rows"]:
        peak = "-" if r["peak_gpu_mib"] is None else f"{r['peak_gpu_mib']:g}"
        rate = f"{r['tokens_per_s']:g}" + (" transitions/s" if r["step"] == "dp_solve" else "")
        checked = "; ".join(f"{k}: {'ok' if v else 'FAIL'}" for k, v in r["checks"].items())
        lines.append(f"| {r['step']} | {r['seconds']:g} | {peak} | {rate} | {checked} |")
    return "\n".join(lines) + "\n"


def _write(out: Path, report: dict) -> None:
    (out / "gpu_check.json").write_text(json.dumps(report, indent=1, default=float) + "\n")
    with open(out / "gpu_check.csv", "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(COLUMNS)
        for r in report["rows"]:
            checked = "; ".join(k for k, v in r["checks"].items() if v)
            w.writerow([r["step"], r["seconds"], r["peak_gpu_mib"], r["tokens_per_s"], checked])
    text = table(report)
    (out / "gpu_check.md").write_text(text)
    print(text)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="a new (or empty) directory")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N")
    ap.add_argument("--tiny", action="store_true", help="the tiny sizes (always on CPU)")
    ap.add_argument(
        "--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}"
    )
    a = ap.parse_args(argv)
    steps = [s for s in a.steps.split(",") if s]
    bad = [s for s in steps if s not in STEPS]
    if bad:
        ap.error(f"--steps: unknown step {bad[0]!r} (known: {', '.join(STEPS)})")
    if "grpo_step" in steps and "helper_sft" not in steps:
        ap.error("--steps: grpo_step gates with the helper of helper_sft: include it")
    report = run(Path(a.out), a.device, a.tiny, steps)
    return 0 if all(r["ok"] for r in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
