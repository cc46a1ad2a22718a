"""Pure planning: spec + topology -> a frozen RunPlan that any executor can run."""
