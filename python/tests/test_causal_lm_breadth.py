"""Breadth: decoder-only *ForCausalLM architectures of the installed transformers, each a
tiny random-weight model from its own Config() with small sizes, through
torch.compile(backend="luminal") at three prompt lengths with and without a cache, against
eager (f32, 1e-5). CI runs a fixed sample; LUMINAL_ALL_CAUSAL_LMS=1 runs every
architecture, where an unsupported one must fail with a clear luminal.Error (it is then
an xfail naming the reason), never with another exception or a wrong answer.
python/tools/causal_lm_table.py prints the README's table from the same check."""
from __future__ import annotations

import os

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
import causal_lm_zoo as zoo  # noqa: E402

# Cheap architectures that cover the common decoder shapes (rotary + GQA + RMSNorm, learned
# positions + LayerNorm, partial rotary, parallel attention/MLP, sliding windows).
CI_SAMPLE = ("mistral", "opt", "phi", "gpt_neox", "gemma2")
ALL = os.environ.get("LUMINAL_ALL_CAUSAL_LMS") == "1"


def _selected() -> list[zoo.Architecture]:
    archs = zoo.decoder_only_architectures()
    return archs if ALL else [a for a in archs if a.model_type in CI_SAMPLE]


def test_ci_sample_is_installed():
    assert {a.model_type for a in _selected()} >= (set() if ALL else set(CI_SAMPLE))


@pytest.mark.parametrize("arch", _selected(), ids=lambda a: a.model_type)
def test_causal_lm_matches_eager(arch):
    try:
        model, vocab = zoo.tiny_model(arch)
        zoo.check_against_eager(model, vocab)
    except zoo.NotGeneric as reason:
        pytest.skip(f"no generic tiny config: {reason}")
    except AssertionError:
        raise
    except Exception as error:
        cause = zoo.luminal_error_in(error)
        if cause is None or not ALL:
            raise
        pytest.xfail(zoo.first_line(cause))
