"""The CPU rehearsal of the B200 recipe cannot drift from it: `train=b200_rehearsal`
composes to `train=b200` except in a declared list of keys, each justified by a
`# CPU:` comment in conf/train/b200_rehearsal.yaml."""

from __future__ import annotations

import re

from omegaconf import OmegaConf

from helpdp.cliconf import as_config, compose_config
from helpdp.cliconf.app import CONF_DIR
from helpdp.train.config import TrainConfig

# what CPU forces (docs/grpo.md, "The B200 rehearsal on CPU"); nothing else may differ
DECLARED = {
    "out",
    "model.kind",
    "model.dtype",
    "model.warm_start_steps",
    "grpo.max_steps",
    "grpo.prompts_per_step",
    "grpo.num_generations",
    "grpo.max_completion_length",
    "grpo.bf16",
    "grpo.use_vllm",
    "grpo.save_steps",
    "grpo.cpu_threads",
    "rollout.max_turns",
    "rollout.max_turn_tokens",
    "rollout.threads",
    "gate.design",
}


def _flat(node, prefix=""):
    if isinstance(node, dict):
        out = {}
        for k, v in node.items():
            out.update(_flat(v, f"{prefix}{k}."))
        return out
    return {prefix[:-1]: node}


def _preset(name: str) -> dict:
    cfg = compose_config("train", [f"train={name}"], node=TrainConfig)
    # unresolved: the endpoint's ${oc.env:...} must be the same text in both
    return _flat(OmegaConf.to_container(cfg, resolve=False))


def _commented_keys(path) -> dict[str, str]:
    """dotted key -> its `# CPU:` comment (continuation comment lines appended)."""
    keys: dict[str, str] = {}
    stack: list[tuple[int, str]] = []
    last = None
    for line in path.read_text().splitlines():
        m = re.match(r"^( *)([A-Za-z_][\w]*):(.*)$", line)
        if not m:
            c = re.match(r"^ +# (.*)$", line)
            if c and last is not None:
                keys[last] += " " + c.group(1)
            continue
        indent, key, rest = len(m.group(1)), m.group(2), m.group(3)
        while stack and stack[-1][0] >= indent:
            stack.pop()
        dotted = ".".join([k for _, k in stack] + [key])
        stack.append((indent, key))
        value, _, comment = rest.partition("#")
        last = None
        if value.strip() and key != "defaults":
            keys[dotted] = comment.strip()
            last = dotted
    return keys


def test_rehearsal_differs_from_b200_only_in_the_declared_keys():
    real, rehearsal = _preset("b200"), _preset("b200_rehearsal")
    assert set(real) == set(rehearsal)
    differ = {k for k in real if real[k] != rehearsal[k]}
    assert differ == DECLARED, (
        f"undeclared: {sorted(differ - DECLARED)}; declared, equal: {sorted(DECLARED - differ)}"
    )
    # what the rehearsal must keep (the point of rehearsing), spelled out
    for key in (
        "model.lora.r",
        "gate.policy",
        "gate.max_per_episode",
        "split.kind",
        "split.window",
        "rollout.max_idle_envs",
        "interventions.expert.kind",
        "interventions.expert.base_url",
        "grpo.gradient_checkpointing",
    ):
        assert rehearsal[key] == real[key], key
    assert rehearsal["interventions.expert.base_url"] == '${oc.env:HELPDP_EXPERT_URL,""}'


def test_every_declared_key_is_justified_by_a_comment_in_the_preset():
    keys = _commented_keys(CONF_DIR / "train" / "b200_rehearsal.yaml")
    assert set(keys) == DECLARED  # the file sets exactly the declared keys
    for key, comment in keys.items():
        assert comment.startswith("CPU: ") and len(comment) > 12, (key, comment)


def test_the_comment_parser_reads_nesting_and_continuations(tmp_path):
    f = tmp_path / "p.yaml"
    f.write_text(
        "defaults:\n  - b200\na: 1  # CPU: one\nb:\n  c: x  # CPU: two\n"
        "                # and more\n  d:\n    e: 3\n"
    )
    assert _commented_keys(f) == {"a": "CPU: one", "b.c": "CPU: two and more", "b.d.e": ""}


def test_both_presets_are_valid_train_configs():
    for name in ("b200", "b200_rehearsal"):
        cfg = compose_config("train", [f"train={name}"], node=TrainConfig)
        as_config(TrainConfig, cfg, instance=True)
    cfg = compose_config("train", ["train=b200"], node=TrainConfig)
    # one global batch of b200 (8 ranks) fits the adaptive window (gathered in rank order)
    assert cfg.split.window >= 8 * cfg.grpo.prompts_per_step * cfg.grpo.num_generations
