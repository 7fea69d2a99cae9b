"""The deployment tests' stand-ins (``tests/tffre/deploy``: a grid without servers, a tiny
task) serve the federation core's tests too."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "deploy"))
