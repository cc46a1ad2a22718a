"""The Kubernetes operator: kopf handlers (main.py) over a state machine whose state lives
in the BenchmarkRun's status and in named child objects, never in memory."""
