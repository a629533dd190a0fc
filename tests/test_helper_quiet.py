"""Quiet by default (issue 34, item 8): third-party noise off, our own notes once."""

import subprocess
import sys

import pytest

from helpdp.cliconf.quiet import pop_verbose

CHECK = """
import warnings, logging
from helpdp.cliconf.quiet import quiet_third_party
{setup}
import transformers
from transformers.utils import logging as hf_logging
warnings.warn_explicit("gradient_checkpointing is deprecated", FutureWarning, "x.py", 1,
                       module="transformers.training_args")
hf_logging.get_logger("transformers.tokenization_utils_base").warning("Token indices sequence")
logging.basicConfig(level=logging.INFO)
logging.getLogger("matplotlib.font_manager").info("generated new fontManager")
print("bars", hf_logging.is_progress_bar_enabled())
"""


@pytest.mark.parametrize("quiet", [True, False])
def test_third_party_warnings_logs_and_bars_are_off_unless_verbose(quiet):
    code = CHECK.format(setup="quiet_third_party()" if quiet else "")
    env = {"PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert r.returncode == 0, r.stderr
    noisy = ("gradient_checkpointing", "Token indices", "generated new fontManager")
    if quiet:
        assert not any(n in r.stderr for n in noisy), r.stderr
        assert r.stdout.strip() == "bars False"
    else:
        assert all(n in r.stderr for n in noisy), r.stderr
        assert r.stdout.strip() == "bars True"


def test_verbose_is_a_key_of_every_command():
    assert pop_verbose("c", ["a=1", "verbose=true"]) == (["a=1"], True)
    assert pop_verbose("c", ["a=1"]) == (["a=1"], False)
    with pytest.raises(SystemExit) as e:
        pop_verbose("c", ["verbose=loud"])
    assert e.value.code == 2


def test_a_cut_text_is_said_once(capsys):
    from helper_helpers import toy_labels

    from helpdp.models.encoder import Encoder
    from helpdp.models.tokenizer import train_tokenizer

    texts = toy_labels(3)["text"].tolist()
    enc = Encoder(train_tokenizer(texts, vocab_size=64), max_length=6, head_tokens=2)
    seqs = enc(texts)
    assert max(map(len, seqs)) == 6
    enc(texts)
    err = capsys.readouterr().err
    assert err.count("helper: ") == 1 and f"of {len(texts)} texts are longer than 6 tokens" in err
    assert "first 2 and last 4 tokens" in err


def test_the_hf_actor_passes_its_cache_under_the_current_name():
    from transformers import GPT2Config, GPT2LMHeadModel

    from collect.actors import _cache_kwarg

    m = GPT2LMHeadModel(GPT2Config(n_layer=1, n_embd=8, n_head=2, vocab_size=10))
    assert _cache_kwarg(m.generate) == "cache"  # transformers 5.x renames past_key_values
    assert _cache_kwarg(lambda **kw: None) == "past_key_values"
