"""Human-editable sources of the demo worlds (one sub-package per scenario)."""
