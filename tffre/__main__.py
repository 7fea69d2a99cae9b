"""``python -m tffre`` runs the command line (:mod:`tffre.cli`)."""

import sys

from tffre.cli import main

sys.exit(main())
