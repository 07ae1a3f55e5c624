"""CLI command modules; each attaches its commands to ``kgcheck.app.app`` on import."""
