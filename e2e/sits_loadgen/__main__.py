"""``python -m sits_loadgen``: the same as the ``sits-loadgen`` console script."""

import sys

from .cli import main

sys.exit(main())
