"""Every command's YAML names, in its header, the file and the dataclass that declare its
fields (a newcomer reads there what a field means); the pointer stays true."""

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
YAMLS = sorted((ROOT / "conf").glob("*.yaml"))


@pytest.mark.parametrize("yaml", YAMLS, ids=lambda p: p.name)
def test_the_header_names_the_file_and_class_of_the_fields(yaml):
    head = "\n".join(yaml.read_text().splitlines()[:4])
    path = re.search(r"[a-z_/]+\.py", head)
    cls = re.search(r"\(([A-Z][A-Za-z]*Config)\b", head)
    assert path and cls, f"{yaml.name}: its header names no FILE.py (ClassConfig)"
    source = (ROOT / path.group(0)).read_text()
    assert re.search(rf"^class {cls.group(1)}\b", source, re.M), (
        f"{yaml.name}: {cls.group(1)} is not declared in {path.group(0)}"
    )


def test_every_command_yaml_is_checked():
    assert len(YAMLS) >= 20
