# The two commands of the README. Both install what they need first.
.PHONY: demo test lint manifests golden

demo:  ## run the quick example against a throwaway local Ceph cluster
	./scripts/setup.sh
	.venv/bin/crimsonbench run operator/crimsonbench/examples/quick.yaml --fresh

test:  ## the whole test suite: static checks, then every test tier that fits in CI's time
	export CB_TEST_T0=$$(date +%s) && ./scripts/setup.sh && ./scripts/test.sh

# The only way to rewrite golden files: UPDATE_GOLDEN anywhere else fails the golden tests
# (tests/manifests/conftest.py), and make test refuses it.
golden:  ## rewrite tests/manifests/golden/ from the code, then review `git diff`
	UPDATE_GOLDEN=1 CRIMSONBENCH_GOLDEN_TARGET="make golden" \
	  .venv/bin/python -m pytest -q -p no:cacheprovider tests/manifests
	git status --short tests/manifests/golden

manifests:  ## regenerate files derived from others (CRD, chart RBAC, plain manifests)
	.venv/bin/python -m crimsonbench.spec.crd > crds/benchmarkrun.yaml
	.venv/bin/python -m crimsonbench.spec.study_crd > crds/benchmarkstudy.yaml
	e2e/render-manifests.sh
