"""The FactCheck study's tables and figures, from its recorded answers or from run folders."""
