"""Benchmark of the LM PRM: scoring and training throughput of the tiny model on
CPU, peak memory, and a labelled *estimate* for Qwen3-0.6B on one GPU.

    python bench/prm_speed.py                    # the demo dataset
    python bench/prm_speed.py --data DIR --threads 2

Measured (this machine, in this run):

* scoring: every non-terminal state of the dataset under every action (one
  forward pass per (state, action), batched by length): states/s, (state,
  action) pairs/s and tokens/s (non-padding tokens);
* training: one epoch over the training tasks' examples: examples/s, tokens/s;
* memory: peak resident set size of the process (``resource.getrusage``) and
  the peak of Python-level allocations during scoring (``tracemalloc``; torch's
  own tensor buffers are not traced, the RSS includes them).

Estimated, not measured (no GPU here): Qwen3-0.6B scoring throughput on one
H100 from its parameter count, the dataset's mean tokens per input, and an
assumed model-FLOPs utilisation; the assumptions are printed with the number.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
import tracemalloc

import numpy as np

# Qwen3-0.6B (config.json of Qwen/Qwen3-0.6B): 28 layers, hidden 1024, MLP 3072,
# 16 query heads and 8 key/value heads of dim 128; embeddings tied.
QWEN3_0_6B = {"layers": 28, "hidden": 1024, "mlp": 3072, "q_dim": 16 * 128, "kv_dim": 8 * 128}
H100_BF16_DENSE_FLOPS = 989e12  # NVIDIA H100 SXM datasheet, bf16 dense tensor-core peak
ASSUMED_MFU = 0.30  # batched HF eager inference at ~500-token inputs; a guess, not a measurement


def qwen3_0_6b_estimate(mean_tokens: float) -> dict:
    """Forward FLOPs per token = 2 x non-embedding parameters + attention scores
    (4 x layers x context x q_dim, context ~ mean input length / 2 on average for a
    causal model), at ``ASSUMED_MFU`` of an H100's bf16 peak."""
    c = QWEN3_0_6B
    per_layer = c["hidden"] * (2 * c["q_dim"] + 2 * c["kv_dim"]) + 3 * c["hidden"] * c["mlp"]
    params = c["layers"] * per_layer
    flops_per_token = 2 * params + 4 * c["layers"] * (mean_tokens / 2) * c["q_dim"]
    tokens_per_s = ASSUMED_MFU * H100_BF16_DENSE_FLOPS / flops_per_token
    return {
        "non_embedding_params": params,
        "flops_per_token": flops_per_token,
        "tokens_per_s": tokens_per_s,
        "pairs_per_s": tokens_per_s / mean_tokens,
    }


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default=None, help="dataset directory (default: the demo dataset)")
    ap.add_argument("--threads", type=int, default=1, help="torch CPU threads")
    ap.add_argument("--batch", type=int, default=256, help="scoring batch size")
    ap.add_argument(
        "--repeats", type=int, default=3, help="scoring repetitions (the best is reported)"
    )
    args = ap.parse_args(argv)

    from helpdp import demo_dataset_path, load_dataset
    from helpdp.cliconf import as_config, to_dict
    from helpdp.splits import task_splits
    from prm.config import PRMModelConfig
    from prm.data import build_examples, observed_pairs, state_rows
    from prm.lm import LMPRM

    data = args.data or demo_dataset_path()
    ds = load_dataset(data)
    ex = build_examples(ds, task_splits(ds))
    train = ex.select("train")
    cfg = to_dict(
        as_config(
            PRMModelConfig,
            kind="lm",
            cpu_threads=args.threads,
            eval_batch_size=args.batch,
            epochs=1,
        )
    )
    prm = LMPRM.create(
        cfg, actions=ds.actions, actor=None, texts=train.frame["text"].tolist(), device="cpu"
    )
    n_params = sum(p.numel() for p in prm.model.parameters())

    # training: one epoch
    hist = prm.fit(train, None, progress=False)
    train_eps = len(train) / hist["train_seconds"]

    # scoring: every non-terminal state under every action
    sids = np.unique(observed_pairs(ds)["state_id"].to_numpy(np.int64))
    n_act = len(ds.actions)
    texts = ds.states["text"].astype(str).to_numpy()[state_rows(ds, sids)]
    all_texts = np.repeat(texts, n_act)
    all_actions = np.tile(np.arange(n_act), len(sids))
    t0 = time.perf_counter()
    seqs = prm.encode(all_texts, all_actions)
    t_tok = time.perf_counter() - t0
    n_tokens = sum(len(s) for s in seqs)
    tracemalloc.start()
    best = np.inf
    for _ in range(args.repeats):
        t0 = time.perf_counter()
        prm.logits_of(seqs, batch_size=args.batch)
        best = min(best, time.perf_counter() - t0)
    _, traced_peak = tracemalloc.get_traced_memory()
    tracemalloc.stop()
    rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux
    mean_tokens = n_tokens / len(seqs)
    est = qwen3_0_6b_estimate(mean_tokens=500.0)

    res = {
        "data": str(data),
        "model": f"tiny Qwen3 from config ({n_params / 1e3:.0f}k params, LoRA r={cfg['lora']['r']}), CPU, {args.threads} thread(s)",
        "states": int(len(sids)),
        "pairs": int(len(seqs)),
        "mean_tokens": mean_tokens,
        "score_seconds": best,
        "tokenize_seconds": t_tok,
        "states_per_s": len(sids) / best,
        "pairs_per_s": len(seqs) / best,
        "tokens_per_s": n_tokens / best,
        "train_examples_per_s": train_eps,
        "train_tokens_per_s": hist["train_tokens_per_s"],
        "train_loss_before": hist["train_loss_before"],
        "train_loss_after": hist["train_loss_after"],
        "peak_rss_mib": rss_mib,
        "tracemalloc_peak_mib": traced_peak / 2**20,
        "estimate_qwen3_0_6b_h100": est,
    }
    print(f"model: {res['model']}")
    print(
        f"scoring: {res['states']} states x {n_act} actions = {res['pairs']} inputs "
        f"({mean_tokens:.1f} tokens each) in {best:.3f} s (best of {args.repeats}): "
        f"{res['states_per_s']:.0f} states/s, {res['pairs_per_s']:.0f} pairs/s, {res['tokens_per_s']:.0f} tokens/s "
        f"(+ tokenization {t_tok:.3f} s)"
    )
    print(
        f"training: {len(train)} examples, 1 epoch in {hist['train_seconds']:.2f} s: "
        f"{train_eps:.0f} examples/s, {hist['train_tokens_per_s']:.0f} tokens/s; "
        f"loss {hist['train_loss_before']:.4f} -> {hist['train_loss_after']:.4f}"
    )
    print(
        f"memory: peak RSS {rss_mib:.0f} MiB; tracemalloc peak during scoring {res['tracemalloc_peak_mib']:.1f} MiB"
    )
    print(
        f"ESTIMATE (not measured): Qwen3-0.6B on one H100 (bf16): ~{est['tokens_per_s']:.2g} tokens/s, "
        f"~{est['pairs_per_s']:.0f} (state, action) scores/s at 500-token inputs "
        f"[{est['non_embedding_params'] / 1e6:.0f}M non-embedding params, {est['flops_per_token'] / 1e9:.2f} GFLOP/token, "
        f"{H100_BF16_DENSE_FLOPS / 1e12:.0f} TFLOP/s peak x assumed MFU {ASSUMED_MFU}]"
    )
    print(json.dumps(res))
    return res


if __name__ == "__main__":
    main()
