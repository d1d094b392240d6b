"""`python -m shardc.launch ...` = `shardc launch ...` (see shardc/tools/launch.py)."""
import sys

from .tools.launch import main

if __name__ == "__main__":
    sys.exit(main())
