"""The Hydra configs compose against their schemas; every field is documented."""

import typing
from dataclasses import fields, is_dataclass

import pytest
from hydra.core.global_hydra import GlobalHydra

from helpdp.cliconf import compose_config, help_text
from helpdp.models.lora import LoRAConfig
from prm.config import SCHEMAS, PRMModelConfig


@pytest.fixture(autouse=True)
def _fresh_hydra():
    GlobalHydra.instance().clear()
    yield
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    "choice,kind,base",
    [
        ("tiny", "lm", None),
        ("tabular", "tabular", None),
        ("qwen3_0_6b", "lm", "Qwen/Qwen3-0.6B"),
        ("qwen3_4b", "lm", "Qwen/Qwen3-4B"),
    ],
)
def test_model_group_composes(choice, kind, base):
    cfg = compose_config(
        "prm_train", [f"prm={choice}", "data=/d", "out=/o"], node=SCHEMAS["prm_train"]
    )
    assert cfg.prm.kind == kind and cfg.prm.base_model == base
    assert cfg.fit_splits == ["train"] and cfg.kind is None


def test_train_rejects_unknown_field():
    with pytest.raises(Exception, match="no_such_field"):
        compose_config("prm_train", ["prm.no_such_field=1"], node=SCHEMAS["prm_train"])


@pytest.mark.parametrize("stage", ["prm_score", "prm_report", "prm_selfreg"])
def test_prm_dir_names_the_directory_in_the_later_stages(stage):
    # conf/ is on the search path of every app: prm=... is the model group, prm_dir=... a PRM
    cfg = compose_config(stage, ["data=/d", "prm_dir=/some/prm_dir"], node=SCHEMAS[stage])
    assert cfg.prm_dir == "/some/prm_dir" and cfg.data == "/d"


def test_every_field_documented_once():
    visited = []

    def walk(cls):
        visited.append(cls)
        hints = typing.get_type_hints(cls)  # f.type is a string (postponed annotations)
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help"
            if is_dataclass(hints[f.name]):
                walk(hints[f.name])

    for schema in SCHEMAS.values():
        walk(schema)
    # the model group is reached through PRMTrainConfig.prm, not only listed; its LoRA
    # settings through PRMModelConfig.lora (helpdp.models.lora, shared with the helper)
    assert visited.count(PRMModelConfig) == 1 and visited.count(LoRAConfig) == 1
    assert len(visited) == len(SCHEMAS) + 2
    assert "prm.lora.r=8\n" in help_text("prm.train", SCHEMAS["prm_train"], None)
    cfg = compose_config("prm_train", node=SCHEMAS["prm_train"])
    text = help_text("prm.train", SCHEMAS["prm_train"], cfg)
    assert "prm.prior_strength=2.0" in text and "Beta prior strength" in text
    # the values shown are the resolved ones: conf/prm/tiny.yaml's, not the schema's
    assert "prm.max_length=128\n" in text and "prm.lr=0.003\n" in text and "prm.epochs=8\n" in text


def test_import_prm_is_light():
    import subprocess
    import sys

    code = "import sys, prm as prm; prm.TabularPRM; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
    )
    assert out.stdout.split() == ["False", "False"]
