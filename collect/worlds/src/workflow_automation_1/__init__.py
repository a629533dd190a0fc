"""Sources of the workflow_automation_1 world: app.py (full_code), schema.py, data.py, tasks.py."""
