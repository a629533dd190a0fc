"""Progress and cost: a labelled bar with a total from a command's first second, and the
expected cost of the heavy commands, said before they start.

:class:`Stages` is a bar over a command's named stages (``prm.train prm=minilm:
fitting  4/7``); a stage that takes minutes shows its own bar, with its total, under it.
:data:`RATES` holds every measured rate in one place: what was counted, how many per
second, on which machine and in which run. :func:`announce_cost` scales a rate by the
command's size and prints one line on stderr before the work starts::

    prm.train: expected cost: about 23 min on 2 CPU cores (AMD EPYC) (measured there:
    2.63 examples/s fitting, 12.8 scoring; here: 955 examples x 3 epochs, 307 validation)

The rates come from CPU time (on a machine shared with other jobs), spread over the
cores: a busy machine takes longer, one with more cores or a GPU less, and the line
names this machine's cores when they differ. Nothing heavy is imported here.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "RATES",
    "Rate",
    "Stages",
    "announce_cost",
    "announce_episodes",
    "cost_line",
    "duration",
    "expected_seconds",
    "preload_tqdm_auto",
    "tqdm_bar",
]


def tqdm_bar():
    """The tqdm class to draw with: ``tqdm.auto``'s (a widget in a notebook) where
    ipywidgets is installed, else the plain one. ``tqdm.auto`` in a Jupyter kernel
    without ipywidgets warns "IProgress not found" and falls back to the plain bar anyway."""
    import importlib.util

    if importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.auto import tqdm
    else:
        from tqdm import tqdm
    return tqdm


def preload_tqdm_auto() -> None:
    """Import ``tqdm.auto`` once with its "IProgress not found" warning off, where
    ipywidgets is missing: transformers imports it when it loads, and in a Jupyter
    kernel without ipywidgets that import warns, then draws the plain bar anyway."""
    import importlib.util

    if "tqdm.autonotebook" in sys.modules or importlib.util.find_spec("ipywidgets"):
        return
    import warnings

    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found")
        import tqdm.auto  # noqa: F401


@dataclass(frozen=True)
class Rate:
    """A measured throughput: ``per_s`` ``unit``\\ s per second on ``machine`` (``cores``
    CPU cores), from the run ``measured``."""

    per_s: float
    unit: str
    machine: str
    cores: int
    measured: str


MACHINE = "2 CPU cores (AMD EPYC)"
#: how the model rates were measured: CPU seconds per example (``time``, ``getrusage``)
#: on a machine shared with other jobs (load average 15-28), spread over 2 threads
MEASURED = "issue 34's pipeline at 3 seeds (630 episodes), MiniLM at 256 tokens: "

#: every heavy step's measured rate
RATES: dict[str, Rate] = {
    # docs/results/real-actor.md, "Side by side on an idle machine":
    # 4 episodes in 89.9 s after a 38.5 s load
    "collect.real_cpu": Rate(
        4 / 89.9,
        "episode",
        "2 idle CPU cores",
        2,
        "collect/actor=qwen_coder_0_5b, transformers with its KV cache, 17 turns",
    ),
    # prm.train prm=minilm prm.epochs=1 prm.max_train_examples=160: 331 CPU s in all;
    # scoring 0.156 CPU s/example (getrusage around LMPRM.logits_of, 96 examples); the
    # rest, less 15 s of loading, is 160 fitted examples: 0.76 CPU s each
    "prm.train.minilm.fit": Rate(2 / 0.76, "example", MACHINE, 2, MEASURED + "0.76 CPU s"),
    "prm.train.minilm.score": Rate(2 / 0.156, "example", MACHINE, 2, MEASURED + "0.156 CPU s"),
    # helpdp.helper.train helper=minilm helper.epochs=1 (252 examples, 232 validation):
    # 264 CPU s in all; its scoring passes at the PRM's 0.156 CPU s/example, the rest
    # (calibration included), less 20 s of loading, 0.51 CPU s per fitted example
    "helper.train.minilm.fit": Rate(2 / 0.51, "example", MACHINE, 2, MEASURED + "0.51 CPU s"),
    "helper.train.minilm.score": Rate(2 / 0.156, "example", MACHINE, 2, MEASURED + "0.156 CPU s"),
    # helpdp.evaluate seeds=100:101 (15 policies, the MiniLM helper at 3 budgets, 6 test
    # tasks: 90 episodes, the simulated actor): 274 CPU s in all, less 20 s of loading:
    # 2.8 CPU s per episode, its share of the report (off-policy estimates) included
    "evaluate": Rate(2 / 2.8, "episode", MACHINE, 2, MEASURED + "2.8 CPU s per episode"),
}


def expected_seconds(work: dict[str, float]) -> float:
    """Seconds for ``work`` (units per key of :data:`RATES`) at the measured rates."""
    return sum(n / RATES[key].per_s for key, n in work.items())


def duration(seconds: float) -> str:
    """``about 40 s``, ``about 28 min``, ``about 10.2 h`` (two significant figures)."""
    if seconds < 90:
        return f"about {max(1, round(seconds))} s"
    if seconds < 90 * 60:
        return f"about {round(seconds / 60)} min"
    return f"about {seconds / 3600:.1f} h"


def _rate(per_s: float) -> str:
    return f"{per_s:.3g}" if per_s < 100 else f"{per_s:.0f}"


def cost_line(command: str, work: dict[str, float], size: str) -> str:
    """The line :func:`announce_cost` prints: the expected time of ``work`` (see
    :func:`expected_seconds`), the rates it comes from, and ``size`` (what is counted)."""
    rates = [RATES[k] for k in work]
    first = rates[0]
    parts = [f"{_rate(first.per_s)} {first.unit}s/s {_role(next(iter(work)))}".rstrip()]
    parts += [f"{_rate(r.per_s)} {_role(k)}".rstrip() for k, r in list(zip(work, rates))[1:]]
    cores = os.cpu_count() or 0
    here = f"; this machine has {cores} cores" if cores != first.cores else ""
    return (
        f"{command}: expected cost: {duration(expected_seconds(work))} on {first.machine} "
        f"(measured there: {', '.join(parts)}; here: {size}{here})"
    )


def _role(key: str) -> str:
    """What a rate's key counts: ``fitting``/``scoring`` for the model steps, else nothing."""
    tail = key.rsplit(".", 1)[-1]
    return {"fit": "fitting", "score": "scoring"}.get(tail, "")


def announce_cost(command: str, work: dict[str, float], size: str, file=None) -> float:
    """Print :func:`cost_line` on stderr (or ``file``), above any bar that is showing;
    returns the expected seconds."""
    tqdm = tqdm_bar()

    if not any(work.values()):
        return 0.0
    tqdm.write(cost_line(command, work, size), file=file or sys.stderr)
    return expected_seconds(work)


def _on_cpu(device: str) -> bool:
    """Whether an actor's ``device`` runs on the CPU: ``cpu``, or ``auto`` where torch
    (if loaded) sees no CUDA device."""
    if device != "auto":
        return device == "cpu"
    torch = sys.modules.get("torch")
    return torch is None or not torch.cuda.is_available()


def announce_episodes(command: str, episodes: int, actor=None, file=None) -> float:
    """The cost line of ``collect`` or ``helpdp.evaluate`` before ``episodes`` episodes
    with ``actor`` (its config): the real CPU actor's rate where it is one (``kind=hf``
    on the CPU), else, for ``helpdp.evaluate``, the rate of its default policies with a
    MiniLM helper and the simulated actor; a ``collect`` with the simulated actor takes
    minutes and says nothing. Returns the expected seconds (0 when nothing is said)."""
    real = getattr(actor, "kind", None) == "hf" and _on_cpu(str(getattr(actor, "device", "cpu")))
    if real:
        key = "collect.real_cpu"
    elif command == "helpdp.evaluate":
        key = "evaluate"
    else:
        return 0.0
    what = "one at a time" if real else "the simulated actor"
    return announce_cost(command, {key: episodes}, f"{episodes} episodes, {what}", file=file)


class Stages:
    """A bar over the named ``stages`` of a command, labelled ``label: <stage>``, shown
    (with its total) from the moment it is made; ``stages(name)`` enters a stage."""

    def __init__(self, label: str, stages: Sequence[str], enabled: bool = True, file=None):
        tqdm = tqdm_bar()

        self.label, self.names = label, list(stages)
        self.bar = tqdm(
            total=len(self.names),
            desc=f"{label}: {self.names[0]}",
            unit="stage",
            disable=not enabled,
            file=file,
            leave=True,
        )

    def __call__(self, name: str) -> None:
        """Enter stage ``name`` (the stages before it count as done)."""
        i = self.names.index(name)
        self.bar.set_description(f"{self.label}: {name}", refresh=False)
        self.bar.update(i - self.bar.n)

    def close(self) -> None:
        """All stages done; the bar ends at its total."""
        self.bar.update(self.bar.total - self.bar.n)
        self.bar.close()

    def __enter__(self) -> Stages:
        return self

    def __exit__(self, kind, *exc) -> None:
        if kind is None:
            self.close()
        else:  # failed or interrupted: the bar stops where it was
            self.bar.close()
