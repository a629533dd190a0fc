"""A seeded generator of AWM-format worlds (``python -m collect.worlds.generate``).

Eight domain families (:mod:`collect.worlds.gen.families`) each describe a few entity
*roles* - the people who work in the app (``person``), the outside parties it serves
(``party``), a grouping (``group``), the main stateful record (``item``, with a state
machine), its log entries (``child``) and optional ``extra`` entities - with naming
variants, typed fields and seed-value pools. A world draws one variant of every role,
its field names, which optional fields and extra entities it has, and its seed rows
from its family and its seed (:mod:`collect.worlds.gen.draw`); then its FastAPI app and
DDL are rendered (:mod:`collect.worlds.gen.appcode`) and its ten graded tasks with
reference solutions and code verifiers are built over the seed rows
(:mod:`collect.worlds.gen.tasks`, :mod:`collect.worlds.gen.verifier`).

Everything is a pure function of (family, seed, world index): ``random.Random`` seeded
with strings, no clock, no set iteration, JSON with sorted keys.
"""
