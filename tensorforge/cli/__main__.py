"""`python -m tensorforge.cli ...`: the same as the `tensorforge` command."""
import sys

from . import main

sys.exit(main())
