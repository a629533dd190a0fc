"""Shared by the PRM tests: a tiny LM PRM config (built from config, CPU, seconds)."""

TINY_PRM = {
    "kind": "lm",
    "hidden_size": 32,
    "intermediate_size": 64,
    "num_layers": 1,
    "num_heads": 2,
    "num_kv_heads": 1,
    "vocab_size": 200,
    "max_length": 32,
    "epochs": 5,
    "batch_size": 16,
    "lr": 3e-3,
    "cpu_threads": 1,
}
