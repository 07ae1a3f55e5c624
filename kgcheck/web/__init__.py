"""What the local web pages (``kgcheck review``, ``kgcheck view``) share: their guard and server."""
