"""helpdp's data collection for Agent World Model (AWM) environments, in two layers.

* :mod:`collect.awm`: the environment runtime. It loads an AWM-format directory,
  builds databases, runs apps and verifiers in the OS sandbox, parses and formats
  agent turns, serves environments (``python -m collect.awm.serve``) and checks a
  dataset (``python -m collect.awm.check``). It never imports the collection side.
* the collection machinery (this package's other modules): actors, interventions,
  the turn loop (:mod:`collect.rollout`), schedules, state keys, shards and the
  collector itself (``python -m collect``), which writes a helpdp dataset:
  :mod:`collect.collector` runs its steps, one module each (``config``, ``plan``,
  ``worker`` with its ``scratch`` space, ``publish``, and ``cli``).

This ``__init__`` imports nothing, so ``import collect.awm`` stays light.
"""
