"""Inputs the application scripts share, made here so nothing is downloaded: rendered text,
a drawn scene and a speech-like signal, all deterministic."""

from __future__ import annotations

import io

import numpy as np
from PIL import Image, ImageDraw, ImageFont


def text_image(lines: list[str], size: int = 40, width: int = 640) -> Image.Image:
    """Black text on white, one line under another (RGB)."""
    font = ImageFont.load_default(size=size)
    image = Image.new("RGB", (width, 30 + len(lines) * (size + 30)), "white")
    draw = ImageDraw.Draw(image)
    for row, line in enumerate(lines):
        draw.text((20, 20 + row * (size + 30)), line, fill="black", font=font)
    return image


def scene_image(width: int = 480, height: int = 360) -> Image.Image:
    """A drawn scene: gradient sky, a skin-toned figure, shapes and a caption (RGB)."""
    y, x = np.mgrid[0:height, 0:width]
    sky = np.stack([80 + 100 * y / height, 140 + 60 * x / width, 220 - 80 * y / height], axis=-1)
    image = Image.fromarray(sky.astype(np.uint8))
    draw = ImageDraw.Draw(image)
    draw.ellipse((180, 60, 280, 180), fill=(224, 172, 140))  # head
    draw.ellipse((205, 100, 220, 112), fill=(40, 30, 30))
    draw.ellipse((240, 100, 255, 112), fill=(40, 30, 30))
    draw.arc((205, 120, 255, 160), 20, 160, fill=(150, 60, 60), width=4)
    draw.rectangle((170, 180, 290, 340), fill=(210, 160, 130))  # body
    draw.rectangle((20, 250, 140, 340), fill=(60, 120, 40))
    draw.polygon([(340, 340), (400, 200), (460, 340)], fill=(120, 90, 60))
    draw.text((20, 20), "SpawnML", fill="white", font=ImageFont.load_default(size=28))
    return image


def png_bytes(image: Image.Image) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format="PNG")
    return buffer.getvalue()


def bgr(image: Image.Image) -> np.ndarray:
    return np.ascontiguousarray(np.asarray(image.convert("RGB"))[:, :, ::-1])


def speechlike_audio(seconds: float = 4.0, rate: int = 16000) -> np.ndarray:
    """Silence, then voiced bursts (a pitched harmonic stack under a syllable envelope), then noise."""
    rng = np.random.default_rng(7)
    t = np.arange(int(seconds * rate)) / rate
    pitch = 140 + 30 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / rate
    voiced = sum(np.sin(k * phase) / k for k in range(1, 12))
    envelope = np.clip(np.sin(2 * np.pi * 3.0 * t), 0, None) ** 0.5
    envelope *= (t > 1.0) & (t < 3.0)
    audio = 0.3 * voiced * envelope + 0.01 * rng.standard_normal(t.size)
    return audio.astype(np.float32)


def result(payload: object) -> None:
    """Print the script's result as the one line the comparison reads, and which runtime ran it."""
    import json
    import sys

    runtime = sys.modules.get("onnxruntime")
    print("RUNTIME " + (runtime.__name__ if runtime is not None else "none"))
    print("RESULT " + json.dumps(payload, sort_keys=True))
