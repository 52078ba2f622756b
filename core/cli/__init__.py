"""The command line (`python -m core ...`): argparse parsers and handlers, one module per group."""

__all__ = [  # the modules other packages may import (tests/test_package_surface.py)
    "main"
]
