"""The bodies of the ``chaoskraft`` commands, one module per group; ``harness.cli`` parses
the command line and calls them."""
