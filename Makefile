# The two commands of the README. Both install what they need first.
.PHONY: demo test lint manifests

demo:  ## run the quick example against a throwaway local Ceph cluster
	./scripts/setup.sh
	.venv/bin/crimsonbench run operator/crimsonbench/examples/quick.yaml --fresh

test:  ## the whole test suite: static checks, then every test tier that fits in CI's time
	export CB_TEST_T0=$$(date +%s) && ./scripts/setup.sh && ./scripts/test.sh

manifests:  ## regenerate files derived from others (CRD, chart RBAC, plain manifests)
	.venv/bin/python -m crimsonbench.spec.crd > crds/benchmarkrun.yaml
	e2e/render-manifests.sh
