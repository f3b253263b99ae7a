"""`python -m pipelines.cli` runs the `fleet` command."""

import sys

from pipelines.cli import main

sys.exit(main())
