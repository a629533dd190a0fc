"""Sources of the e_commerce_admin_1 world: app.py (full_code), schema.py, data.py, tasks.py."""
