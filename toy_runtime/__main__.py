"""`python -m toy_runtime` = the `toy-runtime` command."""

import sys

from .cli.main import main

sys.exit(main())
