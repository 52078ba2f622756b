"""``python -m core``."""
import sys

from core.cli.main import main

sys.exit(main())
