"""``python -m causaltrace.cli``: the ``causaltrace`` command."""

import sys

from causaltrace.cli import main

sys.exit(main())
