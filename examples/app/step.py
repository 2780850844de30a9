"""One step of the example pipeline: says which step it is and when it
runs, so that `rbs job logs` shows the pipeline's order."""

import sys
import time

print("%s: running at %.3f" % (" ".join(sys.argv[1:]) or "step", time.time()))
