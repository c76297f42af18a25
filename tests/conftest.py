"""Shared fixtures: tiny in-process causal LMs (Llama and Qwen2) with a small chat tokenizer.

Also registers the memory guard (`rss_guard.RssGuard`: a test whose process passes 4 GiB RSS fails)
and a Hypothesis profile without wall-clock limits.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from rss_guard import RssGuard

# No machine running the tests reaches a model hub: fail fast instead of waiting on the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_NO_ADVISORY_WARNINGS", "1")

from faithgrpo.testing import save_tiny_causal_lm, tiny_causal_lm, tiny_tokenizer

# Wall-clock limits fail on a loaded machine, not on slow code: no per-example deadline, and no
# "data generation too slow" health check (explicit @settings still override the rest).
settings.register_profile("faithgrpo", deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("faithgrpo")


def pytest_configure(config):
    config.pluginmanager.register(RssGuard(), "faithgrpo-rss-guard")


@pytest.fixture(scope="session")
def tiny_tok():
    """A byte-level BPE tokenizer with a ChatML chat template."""
    return tiny_tokenizer()


# Models are rebuilt for every test (about 40 ms): tests put them in train mode or bind adapters,
# and none of that may leak into the next test.


@pytest.fixture
def tiny_llama():
    """``(model, tokenizer)``: a randomly initialised two-layer Llama, float32, CPU, eval mode."""
    return tiny_causal_lm("llama", seed=0)


@pytest.fixture
def tiny_qwen2():
    """``(model, tokenizer)``: a randomly initialised two-layer Qwen2, float32, CPU, eval mode."""
    return tiny_causal_lm("qwen2", seed=0)


@pytest.fixture(scope="session")
def tiny_llama_path(tmp_path_factory):
    """A local checkpoint directory holding a tiny Llama and its tokenizer."""
    return save_tiny_causal_lm(tmp_path_factory.mktemp("tiny_llama"), "llama", seed=0)
