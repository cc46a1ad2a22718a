"""Reports from a results directory alone: markdown tables, CSV/JSON, PNG plots (pure)."""
