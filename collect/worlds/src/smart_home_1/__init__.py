"""Sources of the smart_home_1 world: app.py (full_code), schema.py, data.py, tasks.py."""
