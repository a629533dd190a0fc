"""The Hydra configs compose against their schemas; every field is documented."""

from dataclasses import fields, is_dataclass

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra

from prm.config import (
    CONF_DIR,
    SCHEMAS,
    PRMModelConfig,
    help_text,
    primary_config,
    register_configs,
)


@pytest.fixture(autouse=True)
def _fresh_hydra():
    GlobalHydra.instance().clear()
    yield
    GlobalHydra.instance().clear()


@pytest.mark.parametrize(
    "choice,kind,base",
    [("tiny", "lm", None), ("tabular", "tabular", None), ("qwen3_0_6b", "lm", "Qwen/Qwen3-0.6B"),
     ("qwen3_4b", "lm", "Qwen/Qwen3-4B")],
)  # fmt: skip
def test_model_group_composes(choice, kind, base):
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        cfg = compose("prm_train", overrides=[f"prm={choice}", "data=/d", "out=/o"])
    assert cfg.prm.kind == kind and cfg.prm.base_model == base
    assert cfg.fit_splits == ["train"] and cfg.kind is None


def test_train_rejects_unknown_field():
    register_configs()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base=None):
        with pytest.raises(Exception, match="no_such_field"):
            compose("prm_train", overrides=["prm.no_such_field=1"])


@pytest.mark.parametrize("stage", ["prm_score", "prm_report", "prm_selfreg"])
def test_prm_is_a_directory_in_the_later_stages(stage):
    from hydra import initialize

    name = primary_config(stage)
    with initialize(config_path=None, version_base=None):
        cfg = compose(name, overrides=["data=/d", "prm=/some/prm_dir"])
    assert cfg.prm == "/some/prm_dir" and cfg.data == "/d"


def test_every_field_documented_once():
    def walk(cls):
        for f in fields(cls):
            assert f.metadata.get("help"), f"{cls.__name__}.{f.name} has no help"
            if is_dataclass(f.type):
                walk(f.type)

    for schema in [PRMModelConfig, *SCHEMAS.values()]:
        walk(schema)
    text = help_text(SCHEMAS["prm_train"], "python -m prm.train")
    assert "prm.prior_strength=2.0" in text and "Beta prior strength" in text


def test_import_prm_is_light():
    import subprocess
    import sys

    code = "import sys, prm; prm.TabularPRM; print('torch' in sys.modules, 'transformers' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        cwd=CONF_DIR.parent,
    )
    assert out.stdout.split() == ["False", "False"]
