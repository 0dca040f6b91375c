"""khmersm: Khmer word segmentation (BiLSTM-CRF emissions from ONNX)."""

from _media import result
from khmersm import segment

result([segment(text) for text in ("សួស្តីពិភពលោក", "ខ្ញុំចង់រៀនភាសាខ្មែរ", "ប្រទេសកម្ពុជា")])
