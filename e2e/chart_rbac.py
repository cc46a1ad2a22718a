"""Write the chart's RBAC rules (templates/_rbac-rules.tpl) from crimsonbench.manifests.rbac.

    .venv/bin/python e2e/chart_rbac.py > templates/_rbac-rules.tpl

The rules and their scopes have one source, operator/crimsonbench/manifests/rbac.py (also
behind manifests/rbac.yaml and the operator tests); templates/rbac.yaml puts each scope's
rules in the namespaces the chart's `targets` values name. tests/chart fails when the
checked-in file differs from this output and when the rendered Roles grant anything else
than operator_rbac() for the same targets.
"""

from __future__ import annotations

import sys

from crimsonbench.manifests.rbac import render_chart_rules


def render() -> str:
    return render_chart_rules()


if __name__ == "__main__":
    sys.stdout.write(render())
