import os
import sys

# Tests must not depend on the developer's own tracelab.toml or pyproject settings.
os.environ.setdefault("PYTHONHASHSEED", "0")
