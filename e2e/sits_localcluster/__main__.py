"""``python -m sits_localcluster``: the same as the ``sits-cluster`` console script."""

import sys

from .cli import main

sys.exit(main())
