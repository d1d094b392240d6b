"""`python -m shardc ...` runs the command line (see shardc/tools/cli.py)."""
import sys

from .tools.cli import main

sys.exit(main())
