"""Shared by the helper tests: toy labels and a tiny BERT configuration."""

import numpy as np
import pandas as pd

BUDGETS = (0.5, 1.0, 2.0)
WORDS = "alpha beta gamma delta epsilon zeta eta theta".split()


def toy_labels(n_tasks=40, seed=0) -> pd.DataFrame:
    """Each state shows 'alarm level k' (k = 0..3) among filler words; the DP helps
    at budget 0.5 from level 3, at 1 from level 2, at 2 from level 1. Tasks split
    60/20/20."""
    rng = np.random.default_rng(seed)
    rows = []
    for t in range(n_tasks):
        split = "train" if t < 0.6 * n_tasks else ("validation" if t < 0.8 * n_tasks else "test")
        for j in range(4):
            k = int(rng.integers(0, 4))
            text = (
                f"{' '.join(rng.choice(WORDS, 3))} alarm level {k} {' '.join(rng.choice(WORDS, 2))}"
            )
            for b, cut in zip(BUDGETS, (3, 2, 1)):
                a = int(k >= cut)
                rows.append((t * 10 + j, f"task{t}", split, text, a, b, k))
    df = pd.DataFrame(
        rows, columns=["state_id", "task_id", "split", "text", "label", "budget", "k"]
    )
    df["p_nohelp"] = 1.0 - df["label"]
    df["p_expert"] = df["label"].astype(float)
    return df


TINY = {
    "backbone": "tiny",
    "hidden_size": 32,
    "num_layers": 1,
    "num_heads": 2,
    "intermediate_size": 64,
    "vocab_size": 64,
    "max_length": 16,
    "head_tokens": 4,
    "lr": 3e-3,
    "epochs": 12,
    "batch_size": 16,
    "cpu_threads": 1,
}
