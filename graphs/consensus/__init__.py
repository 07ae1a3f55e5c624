"""Multi-model consensus: the voting graph and the judges that break ties."""
