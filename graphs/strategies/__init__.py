"""The built-in strategies, one module each; the registry imports every module here.

A module registers its strategies with ``kgcheck.graphs.registry.register`` when imported,
so adding a built-in strategy is adding a module to this package: nothing else lists them.
"""
