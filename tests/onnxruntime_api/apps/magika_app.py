"""magika: content-type detection of byte strings of several kinds."""

from _media import result
from magika import Magika

samples = {
    "python": b"import os\n\ndef main():\n    print(os.getcwd())\n\nif __name__ == '__main__':\n    main()\n"
    * 4,
    "json": b'{"name": "spawnml", "version": [0, 1, 0], "backends": ["cpu", "webgpu"], "ok": true}' * 3,
    "html": b"<!DOCTYPE html><html><head><title>x</title></head><body><p>Hello</p></body></html>" * 3,
    "csv": b"name,size,kind\nresnet,25,vision\nbert,110,text\nwhisper,39,audio\n" * 5,
    "c": b'#include <stdio.h>\nint main(void) {\n  printf("hi\\n");\n  return 0;\n}\n' * 4,
}
magika = Magika()
out = {}
for name, content in samples.items():
    found = magika.identify_bytes(content)
    out[name] = {"label": found.output.ct_label, "score": float(found.output.score)}
result(out)
