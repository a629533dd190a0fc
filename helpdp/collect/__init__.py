"""helpdp's data collection for Agent World Model (AWM) environments, in two layers.

* :mod:`helpdp.collect.awm`: the environment runtime. It loads an AWM-format directory,
  builds databases, runs apps and verifiers in the OS sandbox, parses and formats
  agent turns, serves environments (``python -m helpdp.collect.awm.serve``) and checks a
  dataset (``python -m helpdp.collect.awm.check``). It never imports the collection side.
* the collection machinery (this package's other modules): actors, interventions,
  the turn loop (:mod:`helpdp.collect.rollout`), schedules, state keys, shards and the
  collector itself (``python -m helpdp.collect``), which writes a helpdp dataset:
  :mod:`helpdp.collect.collector` runs its steps, one module each (``config``, ``plan``,
  ``worker`` with its ``scratch`` space, ``publish``, and ``cli``).

This ``__init__`` imports nothing, so ``import helpdp.collect.awm`` stays light.
"""
