"""``spawnml ocr`` and the OCR registrations, with a stand-in pipeline instead of the models."""

from __future__ import annotations

import argparse

import numpy as np
from spawnml_models import plugin
from spawnml_models.ocr import OCRPipeline, TextLine, command
from spawnml_models.ocr.command import OCR, format_lines, run_ocr

LINE = TextLine(np.array([[1, 2], [30, 2], [30, 12], [1, 12]], dtype=np.float32), "Hello", 0.98765)


class FakePipeline:
    def __init__(self, providers=None):
        self.providers = providers

    def __call__(self, image):
        return [LINE]


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    OCR.configure(parser)
    return parser.parse_args(argv)


def test_plugin_registers_the_ocr_pipeline_and_command():
    models, commands = [], []
    plugin.register_models(register=models.append)
    plugin.register_commands(register=commands.append)
    (spec,) = [spec for spec in models if spec.task == "ocr"]
    assert spec.create is OCRPipeline and "rapidocr-onnxruntime==1.4.4" in spec.source
    assert OCR in commands and OCR.name == "ocr"


def test_ocr_arguments():
    args = parse("page.png", "--providers", "webgpu, cpu")
    assert args.image == "page.png" and args.providers == ["webgpu", "cpu"]


def test_format_lines():
    assert format_lines([LINE]) == "1,2 30,2 30,12 1,12  0.988  Hello"


def test_run_ocr_prints_lines(monkeypatch, capsys):
    monkeypatch.setattr(command, "OCRPipeline", FakePipeline)
    assert run_ocr(parse("page.png")) == 0
    out, err = capsys.readouterr()
    assert out == "1,2 30,2 30,12 1,12  0.988  Hello\n" and "read 1 lines" in err
