"""``python -m tffre`` runs the command line (:mod:`tffre.cli`)."""

import sys

from tffre.deploy.launch import die_with_parent

die_with_parent()     # a deployment's daemon: stop with the process that started it

from tffre.cli import main  # noqa: E402  (after: a daemon whose parent died stops at once)

sys.exit(main())
