"""ddddocr: captcha recognition (CRNN) and the YOLOX object detector.

The default recogniser (common_old.onnx, also ``old=True``) uses com.microsoft::DynamicQuantizeLSTM,
which SpawnML refuses at load, so the "beta" recogniser (common.onnx) is the one compared.
"""

import ddddocr
from _media import png_bytes, result, scene_image, text_image

captcha = png_bytes(text_image(["x7Kp2"], size=48, width=200))
ocr = ddddocr.DdddOcr(show_ad=False, beta=True)
text = ocr.classification(captcha)
boxes = ddddocr.DdddOcr(det=True, ocr=False, show_ad=False).detection(
    png_bytes(text_image(["A B C", "1 2 3"]))
)
scene = ddddocr.DdddOcr(det=True, ocr=False, show_ad=False).detection(png_bytes(scene_image()))
result(
    {"text": text, "boxes": [list(map(int, b)) for b in boxes], "scene": [list(map(int, b)) for b in scene]}
)
