# The two commands of the README. Both install what they need first.
.PHONY: demo test lint

demo:  ## run the quick example against a throwaway local Ceph cluster
	./scripts/setup.sh
	.venv/bin/crimsonbench run operator/crimsonbench/examples/quick.yaml --fresh

test:  ## the whole test suite: static checks, unit, property and real-Ceph tests
	./scripts/setup.sh
	./scripts/test.sh
