"""rapid-layout: PicoDet layout detection of a rendered page."""

from _media import bgr, result, text_image
from rapid_layout import RapidLayout

page = bgr(
    text_image(["A Title", "", "Body text of the first paragraph", "continues here", "", "Another block"])
)
found, _ = RapidLayout()(page)
result([{"label": str(d["label"]), "box": [float(v) for v in d["bbox"]]} for d in found])
