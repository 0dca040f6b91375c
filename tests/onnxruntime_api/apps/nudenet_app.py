"""NudeNet: YOLOv8 detector on a drawn scene (detections and the raw output's strongest scores)."""

import tempfile

import numpy as np
from _media import result, scene_image
from nudenet import NudeDetector

with tempfile.NamedTemporaryFile(suffix=".png") as file:
    scene_image().save(file.name)
    detector = NudeDetector()
    found = detector.detect(file.name)
    from nudenet.nudenet import _read_image

    blob, *_ = _read_image(file.name, 320)
    raw = detector.onnx_session.run(None, {detector.input_name: blob})[0]
top = np.sort(raw[0, 4:].max(axis=0))[-20:]
result({"detections": [[d["class"], float(d["score"]), d["box"]] for d in found], "top_scores": top.tolist()})
