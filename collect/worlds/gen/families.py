"""The eight domain families, in the order worlds cycle through them."""

from collect.worlds.gen import families_a, families_b, families_c, families_d

FAMILIES: list[dict] = [
    *families_a.FAMILIES,
    *families_b.FAMILIES,
    *families_c.FAMILIES,
    *families_d.FAMILIES,
]
FAMILY_KEYS: list[str] = [f["key"] for f in FAMILIES]

if len(set(FAMILY_KEYS)) != len(FAMILY_KEYS):  # pragma: no cover - a definition error
    raise ValueError(f"duplicate family keys: {FAMILY_KEYS}")


def family(key: str) -> dict:
    for f in FAMILIES:
        if f["key"] == key:
            return f
    raise KeyError(f"no family {key!r}; families: {', '.join(FAMILY_KEYS)}")
