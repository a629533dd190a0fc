"""SQLite schema of the workflow_automation_1 world (FlowPilot)."""

TABLES = [
    {
        "name": "users",
        "ddl": """CREATE TABLE users (
    id INTEGER PRIMARY KEY,
    username TEXT NOT NULL UNIQUE,
    email TEXT NOT NULL UNIQUE,
    full_name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('admin', 'editor', 'viewer')),
    is_active INTEGER NOT NULL DEFAULT 1,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);""",
        "indexes": ["CREATE INDEX idx_users_full_name ON users(full_name);"],
    },
    {
        "name": "apps",
        "ddl": """CREATE TABLE apps (
    id INTEGER PRIMARY KEY,
    slug TEXT NOT NULL UNIQUE,
    name TEXT NOT NULL,
    category TEXT NOT NULL,
    auth_type TEXT NOT NULL CHECK (auth_type IN ('oauth2', 'api_key', 'none'))
);""",
        "indexes": ["CREATE INDEX idx_apps_category ON apps(category);"],
    },
    {
        "name": "connections",
        "ddl": """CREATE TABLE connections (
    id INTEGER PRIMARY KEY,
    app_id INTEGER NOT NULL,
    owner_id INTEGER NOT NULL,
    name TEXT NOT NULL UNIQUE,
    account_label TEXT,
    status TEXT NOT NULL DEFAULT 'active' CHECK (status IN ('active', 'expired', 'revoked')),
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    last_verified_at TEXT,
    FOREIGN KEY (app_id) REFERENCES apps(id),
    FOREIGN KEY (owner_id) REFERENCES users(id)
);""",
        "indexes": [
            "CREATE INDEX idx_connections_app_id ON connections(app_id);",
            "CREATE INDEX idx_connections_owner_id ON connections(owner_id);",
            "CREATE INDEX idx_connections_status ON connections(status);",
        ],
    },
    {
        "name": "folders",
        "ddl": """CREATE TABLE folders (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
);""",
        "indexes": [],
    },
    {
        "name": "workflows",
        "ddl": """CREATE TABLE workflows (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL UNIQUE,
    description TEXT,
    folder_id INTEGER,
    owner_id INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'draft' CHECK (status IN ('draft', 'active', 'paused', 'archived')),
    created_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (folder_id) REFERENCES folders(id),
    FOREIGN KEY (owner_id) REFERENCES users(id)
);""",
        "indexes": [
            "CREATE INDEX idx_workflows_owner_id ON workflows(owner_id);",
            "CREATE INDEX idx_workflows_folder_id ON workflows(folder_id);",
            "CREATE INDEX idx_workflows_status ON workflows(status);",
        ],
    },
    {
        "name": "triggers",
        "ddl": """CREATE TABLE triggers (
    id INTEGER PRIMARY KEY,
    workflow_id INTEGER NOT NULL UNIQUE,
    trigger_type TEXT NOT NULL CHECK (trigger_type IN ('schedule', 'webhook', 'app_event')),
    app_id INTEGER,
    connection_id INTEGER,
    event TEXT,
    cron_expression TEXT,
    timezone TEXT,
    webhook_path TEXT,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (workflow_id) REFERENCES workflows(id) ON DELETE CASCADE,
    FOREIGN KEY (app_id) REFERENCES apps(id),
    FOREIGN KEY (connection_id) REFERENCES connections(id)
);""",
        "indexes": ["CREATE INDEX idx_triggers_connection_id ON triggers(connection_id);"],
    },
    {
        "name": "steps",
        "ddl": """CREATE TABLE steps (
    id INTEGER PRIMARY KEY,
    workflow_id INTEGER NOT NULL,
    position INTEGER NOT NULL CHECK (position >= 1),
    name TEXT NOT NULL,
    app_id INTEGER NOT NULL,
    action TEXT NOT NULL,
    connection_id INTEGER,
    config_json TEXT NOT NULL DEFAULT '{}',
    on_error TEXT NOT NULL DEFAULT 'stop' CHECK (on_error IN ('stop', 'continue', 'retry')),
    max_retries INTEGER NOT NULL DEFAULT 0,
    FOREIGN KEY (workflow_id) REFERENCES workflows(id) ON DELETE CASCADE,
    FOREIGN KEY (app_id) REFERENCES apps(id),
    FOREIGN KEY (connection_id) REFERENCES connections(id)
);""",
        "indexes": [
            "CREATE INDEX idx_steps_workflow_position ON steps(workflow_id, position);",
            "CREATE INDEX idx_steps_connection_id ON steps(connection_id);",
        ],
    },
    {
        "name": "runs",
        "ddl": """CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    workflow_id INTEGER NOT NULL,
    status TEXT NOT NULL CHECK (status IN ('queued', 'running', 'waiting_approval', 'succeeded', 'failed', 'cancelled')),
    triggered_by TEXT NOT NULL CHECK (triggered_by IN ('schedule', 'webhook', 'app_event', 'manual', 'retry')),
    retry_of_run_id INTEGER,
    failed_step_id INTEGER,
    error_message TEXT,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    FOREIGN KEY (workflow_id) REFERENCES workflows(id) ON DELETE CASCADE,
    FOREIGN KEY (retry_of_run_id) REFERENCES runs(id),
    FOREIGN KEY (failed_step_id) REFERENCES steps(id)
);""",
        "indexes": [
            "CREATE INDEX idx_runs_workflow_started ON runs(workflow_id, started_at);",
            "CREATE INDEX idx_runs_status ON runs(status);",
        ],
    },
    {
        "name": "approvals",
        "ddl": """CREATE TABLE approvals (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL,
    step_id INTEGER NOT NULL,
    approver_id INTEGER NOT NULL,
    status TEXT NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'approved', 'rejected')),
    request_message TEXT NOT NULL,
    decision_comment TEXT,
    requested_at TEXT NOT NULL,
    decided_at TEXT,
    FOREIGN KEY (run_id) REFERENCES runs(id) ON DELETE CASCADE,
    FOREIGN KEY (step_id) REFERENCES steps(id),
    FOREIGN KEY (approver_id) REFERENCES users(id)
);""",
        "indexes": [
            "CREATE INDEX idx_approvals_approver_status ON approvals(approver_id, status);",
            "CREATE INDEX idx_approvals_run_id ON approvals(run_id);",
        ],
    },
    {
        "name": "variables",
        "ddl": """CREATE TABLE variables (
    id INTEGER PRIMARY KEY,
    workflow_id INTEGER,
    key TEXT NOT NULL,
    value TEXT NOT NULL,
    is_secret INTEGER NOT NULL DEFAULT 0,
    updated_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP,
    FOREIGN KEY (workflow_id) REFERENCES workflows(id) ON DELETE CASCADE
);""",
        "indexes": ["CREATE INDEX idx_variables_workflow_key ON variables(workflow_id, key);"],
    },
]
