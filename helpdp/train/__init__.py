"""GRPO with a help gate: TRL's GRPOTrainer learns AWM tasks while the expert is
called only where a :class:`~helpdp.policies.HelpPolicy` says, within caps.

* :mod:`helpdp.train.rollout`: ``AWMRollout``, the ``rollout_func`` (episodes run by
  ``collect.rollout``'s turn loop), and ``TokenActor``;
* :mod:`helpdp.train.gate`: the gate (caps, expert/solo roles) and the split schedules;
* :mod:`helpdp.train.ranks`: that split over every rank's episodes, and the rollout's
  state in each checkpoint (what a resumed run continues from);
* the reward callables (verifier, graduated, format): :mod:`collect.awm.rewards`, the one
  home of rewards (the environment's per outcome too);
* :mod:`helpdp.train.trainer`: ``python -m helpdp.train`` (``conf/train.yaml``, ``conf/train/``);
* :mod:`helpdp.train.env_factory`: the same worlds, expert gate and graduated reward as
  TRL's ``environment_factory`` (tools as methods; docs/openenv.md says when to pick it).

Importing this package imports neither torch nor trl.
"""
