"""The command line (`python -m core ...`): argparse parsers and handlers, one module per group."""
