"""captcha-whisperer: CRNN + CTC captcha recognition of rendered text."""

from _media import png_bytes, result, text_image
from captcha_whisperer import CaptchaRecognizer

recognizer = CaptchaRecognizer()
outputs = [
    recognizer.recognize_bytes(png_bytes(text_image([word], size=36, width=180)))
    for word in ("a3b9x", "QZ7Lm")
]
result(outputs)
