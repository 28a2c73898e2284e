"""`python -m toy_runtime` = the `toy-runtime` command."""

import sys

from .cli import main

sys.exit(main())
