"""The single-core parse floor: json.loads of a whole trace with the garbage collector off."""

import gc
import json
import sys

gc.disable()
with open(sys.argv[1], "rb") as f:
    json.loads(f.read())
