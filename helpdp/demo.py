"""The embedded demo dataset: ``helpdp/data/demo``.

It was collected from the three demo worlds shipped in ``collect/worlds`` (workflow
automation, e-commerce admin, smart home; 10 tasks each) with the ``simulated``
actor and the ``oracle`` intervention under the schedule of Min et al. (2025): expert calls
triggered at random with probability 0, .1, .3, .5, .7, .9, 1 per turn, 3 seeds per
task and probability, 630 episodes. States are keyed by ``state_key=db`` (task,
database digest, last observation, turn), so paths that reach the same world state
merge. The simulated actor is a seeded simulation of a weak agent, not a language
model (see ``collect.actors``); the environments, tool calls and verifiers are real.

Regenerate it, byte for byte (Parquet files), with ``make demo-data``, which runs::

    python -m collect out=helpdp/data/demo state_key=db keep_shards=false overwrite=true progress=false
"""

from pathlib import Path

DEMO_DIR = Path(__file__).parent / "data" / "demo"
DEMO_COMMAND = "python -m collect out=helpdp/data/demo state_key=db keep_shards=false overwrite=true progress=false"


def demo_dataset_path() -> Path:
    """The embedded demo dataset shipped with the package."""
    if not (DEMO_DIR / "manifest.json").exists():
        raise FileNotFoundError(
            f"the demo dataset is missing from {DEMO_DIR}; regenerate it: {DEMO_COMMAND}"
        )
    return DEMO_DIR
