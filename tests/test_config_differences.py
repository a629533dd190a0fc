"""Two recorded collection configs compared (collect.config.config_differences): a field
of a config class that only one records was added or removed by a code version (not
compared: the collector's resume and collect.merge's unchecked); within a free-form value
(a dict in a field declared dict or Any) a key only one records is a difference."""

from __future__ import annotations

import copy
import json

import pytest

from collect.config import collect_config, config_differences, source_config
from collect.publish import check_out
from collect.shards import PlanMismatch


@pytest.fixture(scope="module")
def recorded():
    """An hf actor's collection config, as its manifest records it."""
    cfg = collect_config(["collect/actor=hf", "actor.model=m", "progress=false"])
    return json.loads(json.dumps(source_config(cfg), default=str))


def test_declared_fields_only_one_records_are_absent_free_form_keys_differ(recorded):
    old, new = copy.deepcopy(recorded), copy.deepcopy(recorded)
    del old["env"]["max_idle_envs"]  # declared (EnvConfig): an older collector's manifest
    del old["actor"]["prefix_cache"]  # declared by the hf actor's class
    new["env"]["a_newer_option"] = 1  # a field this code does not know: a newer one's
    new["actor"]["chat_template_kwargs"] = {"enable_thinking": False}  # declared dict
    new["interventions"]["hint"] = new["interventions"]["oracle"]  # the names: the user's
    new["text"]["tokenizer"] = {"name": "t"}  # Any: a dict against null, compared whole
    absent: list[str] = []
    assert config_differences(old, new, absent=absent) == [
        "actor.chat_template_kwargs.enable_thinking",
        "interventions.hint",
        "text.tokenizer",
    ]
    assert absent == ["actor.prefix_cache", "env.a_newer_option", "env.max_idle_envs"]
    # without ``absent`` a field only one records is a difference too
    assert "env.max_idle_envs" in config_differences(old, new)
    # actors of two kinds have no common class: compared whole
    other = {**new, "actor": {"kind": "openai", "model": "m", "base_url": "http://h/v1"}}
    absent = []
    diff = config_differences(other, new, absent=absent)
    assert {"actor.kind", "actor.base_url", "actor.dtype", "actor.prefix_cache"} <= set(diff)
    assert absent == []


def _published(tmp_path, edit):
    """``out=`` holding a dataset whose manifest records this config, edited."""
    args = [f"out={tmp_path / 'data'}", "collect/actor=hf", "actor.model=m", "progress=false"]
    cfg = collect_config(args)
    config = json.loads(json.dumps(source_config(cfg), default=str))
    edit(config)
    out = tmp_path / "data"
    out.mkdir()
    man = {"source": {"generator": "collect", "config": config}}
    (out / "manifest.json").write_text(json.dumps(man))
    return cfg


def test_a_resume_refuses_a_free_form_key_only_one_config_records(tmp_path):
    def kwargs(c):
        c["actor"]["chat_template_kwargs"] = {"enable_thinking": False}

    with pytest.raises(PlanMismatch) as e:
        check_out(_published(tmp_path, kwargs))
    assert str(e.value) == (
        f"{tmp_path / 'data'} holds a dataset of another collection (config differs in: "
        "actor.chat_template_kwargs.enable_thinking); use another out= or overwrite=true"
    )


def test_a_resume_takes_a_declared_field_only_one_config_records(tmp_path):
    def older(c):
        del c["env"]["max_idle_envs"], c["actor"]["prefix_cache"]

    check_out(_published(tmp_path, older))  # nothing raised: the same collection
