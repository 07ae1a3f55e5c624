"""Why models fail: explain, embed, cluster, name and count wrong verdicts (kgcheck errors)."""
