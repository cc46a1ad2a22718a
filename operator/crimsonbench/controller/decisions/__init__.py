"""The operator's decisions: pure functions from what was observed (and the run's record) to
what to do next. Nothing here talks to the API, reads the clock or the environment, or
starts a process; the I/O modules beside this package observe, ask, and carry the answer
out. A package-wide import contract (pyproject.toml) holds every module placed here."""
