"""The examples' tests use the tiny helpers of the package tests (tests/tffre), which pytest
has not put on the path yet when it collects tests/examples first."""

import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                                "tffre"))
