"""``python -m tffre.deploy ...``: the same commands as ``python -m tffre deploy ...``."""

import sys

from tffre.deploy.commands import main

sys.exit(main(prog="python -m tffre.deploy"))
