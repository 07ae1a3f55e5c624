"""CLI command modules; each attaches its commands to ``kgcheck.cli.app.app`` on import."""
