"""Tasks, verifiers and reference solutions of the workflow_automation_1 world.

Each verifier is a self-contained function; the builder ships its source (renamed to
``verify_task_completion``) in gen_verifier.pure_code.jsonl. Verifiers only use sqlite3
and open both databases read-only.
"""

from collect.worlds.src.common import call

SCENARIO = "workflow_automation_1"

DESCRIPTION = (
    "FlowPilot is a workflow automation platform similar to Zapier or n8n. A workspace has users "
    "(admins, editors, viewers), a catalog of apps (Slack, Gmail, Google Sheets, Salesforce, HubSpot, "
    "Stripe, QuickBooks, GitHub, Jira, Zendesk and utility apps), and authenticated connections to "
    "those apps that can be active, expired or revoked. Workflows live in folders, have an owner and "
    "a status (draft, active, paused, archived), exactly one trigger (a cron schedule with a "
    "timezone, an inbound webhook, or an app event received through a connection) and an ordered "
    "list of steps, each calling an app action through a connection with a JSON configuration and "
    "an error policy. Every execution is recorded as a run (queued, running, waiting_approval, "
    "succeeded, failed, cancelled) with the failing step and error message; failed runs can be "
    "retried once the cause is fixed. Approval steps raise approval requests that an assigned user "
    "approves or rejects, or that can be reassigned. Account-wide and workflow-scoped variables "
    "(optionally secret) parameterize workflows. Users can duplicate workflows, change triggers, "
    "insert or edit steps, manage connections, transfer ownership and deactivate departing users."
)


# ---------------------------------------------------------------- task 0


def v0(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    sql = "SELECT value FROM variables WHERE workflow_id IS NULL AND key = 'SUPPORT_EMAIL'"
    if q(initial_db_path, sql):
        return {"result": "others"}
    rows = q(final_db_path, sql)
    if len(rows) != 1 or (rows[0][0] or "").strip().lower() != "support@lumenfield.io":
        return {"result": "others"}
    # No workflow-scoped SUPPORT_EMAIL must have been created instead of / besides the global one.
    if q(
        final_db_path,
        "SELECT id FROM variables WHERE workflow_id IS NOT NULL AND key = 'SUPPORT_EMAIL'",
    ):
        return {"result": "others"}
    others = (
        "SELECT workflow_id, key, value FROM variables WHERE key != 'SUPPORT_EMAIL' ORDER BY id"
    )
    if q(initial_db_path, others) != q(final_db_path, others):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 1


def v1(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    sql = "SELECT id, name, status FROM workflows ORDER BY id"
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    target = [wid for wid, r in before.items() if r[1] == "Nightly CRM Sync"]
    if len(target) != 1 or before[target[0]][2] != "active":
        return {"result": "others"}
    wid = target[0]
    if wid not in after or after[wid][2] != "paused":
        return {"result": "others"}
    for other_id, row in before.items():
        if other_id != wid and (other_id not in after or after[other_id][2] != row[2]):
            return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 2


def v2(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    sql = (
        "SELECT a.id, a.status, a.decision_comment, a.approver_id, a.run_id, a.request_message, w.name "
        "FROM approvals a JOIN runs r ON r.id = a.run_id JOIN workflows w ON w.id = r.workflow_id ORDER BY a.id"
    )
    before = {r[0]: r for r in q(initial_db_path, sql)}
    after = {r[0]: r for r in q(final_db_path, sql)}
    target = [
        aid
        for aid, r in before.items()
        if r[6] == "Vendor Invoice Approval" and "INV-2291" in (r[5] or "") and r[1] == "pending"
    ]
    if len(target) != 1 or set(after) != set(before):
        return {"result": "others"}
    aid = target[0]
    row = after[aid]
    if row[1] != "approved" or (row[2] or "").strip().rstrip(".").lower() != "budget confirmed":
        return {"result": "others"}
    for other_id, r in before.items():
        if other_id != aid and after[other_id][1:4] != r[1:4]:
            return {"result": "others"}
    run = q(final_db_path, "SELECT status FROM runs WHERE id = ?", (row[4],))
    if not run or run[0][0] != "running":
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 3


def v3(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import json
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    wf = q(initial_db_path, "SELECT id FROM workflows WHERE name = 'Weekly Metrics Digest'")
    conn_rows = q(initial_db_path, "SELECT id FROM connections WHERE name = 'Ops Slack'")
    slack = q(initial_db_path, "SELECT id FROM apps WHERE slug = 'slack'")
    if len(wf) != 1 or len(conn_rows) != 1 or len(slack) != 1:
        return {"result": "others"}
    sql = (
        "SELECT id, position, name, app_id, action, connection_id, config_json FROM steps "
        "WHERE workflow_id = ? ORDER BY position, id"
    )
    before = q(initial_db_path, sql, (wf[0][0],))
    after = q(final_db_path, sql, (wf[0][0],))
    if len(after) != len(before) + 1 or [r[1] for r in after] != list(range(1, len(after) + 1)):
        return {"result": "others"}
    new = after[1]
    if new[0] in {r[0] for r in before}:
        return {"result": "others"}
    try:
        config = json.loads(new[6] or "{}")
    except Exception:
        return {"result": "others"}
    if new[3] != slack[0][0] or new[4] != "post_message" or new[5] != conn_rows[0][0]:
        return {"result": "others"}
    if str(config.get("channel", "")).strip() != "#metrics":
        return {"result": "others"}
    # The original steps keep their relative order and content around the new one.
    kept = [after[0]] + after[2:]
    if [(r[0], r[2], r[3], r[4], r[5], r[6]) for r in kept] != [
        (r[0], r[2], r[3], r[4], r[5], r[6]) for r in before
    ]:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 4


def v4(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    conns_before = dict(q(initial_db_path, "SELECT name, status FROM connections"))
    conns_after = dict(q(final_db_path, "SELECT name, status FROM connections"))
    if (
        conns_after.get("Marketing Slack") != "active"
        or conns_before.get("Marketing Slack") != "expired"
    ):
        return {"result": "others"}
    for name, status in conns_before.items():
        if name != "Marketing Slack" and conns_after.get(name) != status:
            return {"result": "others"}
    last_failed = q(
        initial_db_path,
        "SELECT r.id FROM runs r JOIN workflows w ON w.id = r.workflow_id "
        "WHERE w.name = 'Lead Alert to Slack' AND r.status = 'failed' ORDER BY r.started_at DESC, r.id DESC LIMIT 1",
    )
    if not last_failed:
        return {"result": "others"}
    old_ids = {r[0] for r in q(initial_db_path, "SELECT id FROM runs")}
    new_runs = [
        r
        for r in q(final_db_path, "SELECT id, retry_of_run_id, status FROM runs")
        if r[0] not in old_ids
    ]
    if len(new_runs) != 1 or new_runs[0][1] != last_failed[0][0]:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 5


def v5(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import json
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    def steps(path, wid):
        rows = q(
            path,
            "SELECT position, app_id, action, connection_id, config_json, on_error, max_retries "
            "FROM steps WHERE workflow_id = ? ORDER BY position",
            (wid,),
        )
        return [(r[0], r[1], r[2], r[3], json.loads(r[4] or "{}"), r[5], r[6]) for r in rows]

    def variables(path, wid):
        return dict(q(path, "SELECT key, value FROM variables WHERE workflow_id = ?", (wid,)))

    trig_sql = "SELECT trigger_type, cron_expression, timezone FROM triggers WHERE workflow_id = ?"
    orig = q(
        initial_db_path,
        "SELECT id, folder_id, status FROM workflows WHERE name = 'Order Fulfillment Sync'",
    )
    if len(orig) != 1 or q(
        initial_db_path, "SELECT id FROM workflows WHERE name = 'Order Fulfillment Sync (EU)'"
    ):
        return {"result": "others"}
    oid, folder_id, status = orig[0]
    copy = q(
        final_db_path,
        "SELECT id, folder_id, status FROM workflows WHERE name = 'Order Fulfillment Sync (EU)'",
    )
    if len(copy) != 1 or copy[0][2] != "draft" or copy[0][1] != folder_id:
        return {"result": "others"}
    cid = copy[0][0]
    try:
        if steps(final_db_path, cid) != steps(initial_db_path, oid) or not steps(
            final_db_path, cid
        ):
            return {"result": "others"}
    except Exception:
        return {"result": "others"}
    trig = q(final_db_path, trig_sql, (cid,))
    if len(trig) != 1 or trig[0][0] != "schedule":
        return {"result": "others"}
    if " ".join((trig[0][1] or "").split()) != "0 6 * * *" or trig[0][2] != "Europe/Berlin":
        return {"result": "others"}
    expected_vars = variables(initial_db_path, oid)
    expected_vars["REGION"] = "eu"
    if variables(final_db_path, cid) != expected_vars:
        return {"result": "others"}
    # The original stays untouched.
    final_orig = q(final_db_path, "SELECT status FROM workflows WHERE id = ?", (oid,))
    if not final_orig or final_orig[0][0] != status:
        return {"result": "others"}
    if q(final_db_path, trig_sql, (oid,)) != q(initial_db_path, trig_sql, (oid,)):
        return {"result": "others"}
    if variables(final_db_path, oid) != variables(initial_db_path, oid):
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 6


def v6(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    last_failed = q(
        initial_db_path,
        "SELECT r.id, r.failed_step_id, r.workflow_id FROM runs r JOIN workflows w ON w.id = r.workflow_id "
        "WHERE w.name = 'Invoice Sync to QuickBooks' AND r.status = 'failed' "
        "ORDER BY r.started_at DESC, r.id DESC LIMIT 1",
    )
    if not last_failed or last_failed[0][1] is None:
        return {"result": "others"}
    run_id, step_id, wid = last_failed[0]
    old_conn = q(initial_db_path, "SELECT connection_id FROM steps WHERE id = ?", (step_id,))
    good = q(
        initial_db_path,
        "SELECT c.id FROM connections c JOIN apps a ON a.id = c.app_id "
        "WHERE a.slug = 'quickbooks' AND c.status = 'active'",
    )
    if not old_conn or len(good) != 1:
        return {"result": "others"}
    step_after = q(final_db_path, "SELECT connection_id FROM steps WHERE id = ?", (step_id,))
    if not step_after or step_after[0][0] != good[0][0]:
        return {"result": "others"}
    if q(final_db_path, "SELECT id FROM connections WHERE id = ?", (old_conn[0][0],)):
        return {"result": "others"}
    other_sql = "SELECT id, connection_id, position FROM steps WHERE workflow_id = ? AND id != ? ORDER BY id"
    if q(final_db_path, other_sql, (wid, step_id)) != q(initial_db_path, other_sql, (wid, step_id)):
        return {"result": "others"}
    old_ids = {r[0] for r in q(initial_db_path, "SELECT id FROM runs")}
    new_runs = [
        r for r in q(final_db_path, "SELECT id, retry_of_run_id FROM runs") if r[0] not in old_ids
    ]
    if len(new_runs) != 1 or new_runs[0][1] != run_id:
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 7


def v7(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    paused = q(
        initial_db_path,
        "SELECT w.id FROM workflows w JOIN users u ON u.id = w.owner_id "
        "WHERE u.full_name = 'Daniel Okafor' AND w.status = 'paused'",
    )
    expected_archived = set()
    for (wid,) in paused:
        ok = q(
            initial_db_path,
            "SELECT COUNT(*) FROM runs WHERE workflow_id = ? AND status = 'succeeded' AND started_at >= '2025-05-01'",
            (wid,),
        )
        if ok and ok[0][0] == 0:
            expected_archived.add(wid)
    if not expected_archived or len(expected_archived) == len(paused):
        return {"result": "others"}
    before = dict(q(initial_db_path, "SELECT id, status FROM workflows"))
    after = dict(q(final_db_path, "SELECT id, status FROM workflows"))
    if set(before) != set(after):
        return {"result": "others"}
    for wid, status in before.items():
        expected = "archived" if wid in expected_archived else status
        if after[wid] != expected:
            return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 8


def v8(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import json
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    name = "Stripe Payments to Finance"
    if q(initial_db_path, "SELECT id FROM workflows WHERE name = ?", (name,)):
        return {"result": "others"}
    wf = q(
        final_db_path,
        "SELECT w.id, w.status, f.name FROM workflows w LEFT JOIN folders f ON f.id = w.folder_id WHERE w.name = ?",
        (name,),
    )
    if len(wf) != 1 or wf[0][1] != "active" or wf[0][2] != "Finance":
        return {"result": "others"}
    wid = wf[0][0]
    conns = dict(q(final_db_path, "SELECT name, id FROM connections"))
    apps = dict(q(final_db_path, "SELECT slug, id FROM apps"))
    trig = q(
        final_db_path,
        "SELECT trigger_type, app_id, connection_id, event FROM triggers WHERE workflow_id = ?",
        (wid,),
    )
    if trig != [
        ("app_event", apps.get("stripe"), conns.get("Stripe Live"), "payment_intent.succeeded")
    ]:
        return {"result": "others"}
    steps = q(
        final_db_path,
        "SELECT position, app_id, action, connection_id, config_json FROM steps WHERE workflow_id = ? ORDER BY position",
        (wid,),
    )
    if len(steps) != 2:
        return {"result": "others"}
    try:
        c1 = json.loads(steps[0][4] or "{}")
        c2 = json.loads(steps[1][4] or "{}")
    except Exception:
        return {"result": "others"}
    if steps[0][:4] != (1, apps.get("google_sheets"), "append_row", conns.get("Finance Sheets")):
        return {"result": "others"}
    if str(c1.get("spreadsheet", "")).strip() != "Payments 2025":
        return {"result": "others"}
    if steps[1][:4] != (2, apps.get("slack"), "post_message", conns.get("Ops Slack")):
        return {"result": "others"}
    if str(c2.get("channel", "")).strip() != "#finance":
        return {"result": "others"}
    return {"result": "complete"}


# ---------------------------------------------------------------- task 9


def v9(initial_db_path: str, final_db_path: str, final_answer: str | None = None) -> dict:
    import sqlite3

    def q(path, sql, params=()):
        try:
            conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            try:
                return conn.execute(sql, params).fetchall()
            finally:
                conn.close()
        except Exception:
            return []

    users = dict(q(initial_db_path, "SELECT full_name, id FROM users"))
    priya, marcus = users.get("Priya Nair"), users.get("Marcus Chen")
    if priya is None or marcus is None:
        return {"result": "others"}
    active = dict(q(final_db_path, "SELECT id, is_active FROM users"))
    if active.get(priya) != 0 or active.get(marcus) != 1:
        return {"result": "others"}
    wf_sql = "SELECT id, owner_id, status FROM workflows ORDER BY id"
    before = {r[0]: r for r in q(initial_db_path, wf_sql)}
    after = {r[0]: r for r in q(final_db_path, wf_sql)}
    if set(before) != set(after):
        return {"result": "others"}
    moved = 0
    for wid, (_, owner, status) in before.items():
        expected_owner = marcus if owner == priya and status != "archived" else owner
        moved += expected_owner != owner
        if after[wid][1] != expected_owner or after[wid][2] != status:
            return {"result": "others"}
    ap_sql = "SELECT id, approver_id, status FROM approvals ORDER BY id"
    ap_before = {r[0]: r for r in q(initial_db_path, ap_sql)}
    ap_after = {r[0]: r for r in q(final_db_path, ap_sql)}
    if set(ap_before) != set(ap_after):
        return {"result": "others"}
    for aid, (_, approver, status) in ap_before.items():
        expected = marcus if approver == priya and status == "pending" else approver
        if ap_after[aid][1] != expected or ap_after[aid][2] != status:
            return {"result": "others"}
    return {"result": "complete"} if moved else {"result": "others"}


# ---------------------------------------------------------------- tasks

TASKS = [
    {
        "task": "Create an account-wide (global) variable named SUPPORT_EMAIL with the value "
        "support@lumenfield.io.",
        "verifier": v0,
        "negatives": [
            [
                call(
                    "set_variable",
                    key="SUPPORT_EMAIL",
                    value="support@lumenfield.io",
                    workflow_id=3,
                )
            ],
            [call("set_variable", key="SUPPORT_EMAIL", value="help@lumenfield.io")],
        ],
        "calls": [call("set_variable", key="SUPPORT_EMAIL", value="support@lumenfield.io")],
    },
    {
        "task": "Pause the 'Nightly CRM Sync' workflow.",
        "verifier": v1,
        "negatives": [[call("pause_workflow", workflow_id=2)]],
        "calls": [
            call("list_workflows", search="Nightly CRM Sync"),
            call("pause_workflow", workflow_id=1),
        ],
    },
    {
        "task": "In the 'Vendor Invoice Approval' workflow, approve the pending approval request for "
        "invoice INV-2291 with the comment 'Budget confirmed'. Leave the other pending invoice "
        "request untouched.",
        "verifier": v2,
        "negatives": [
            [
                call(
                    "decide_approval",
                    approval_id=3,
                    decision="approved",
                    comment="Budget confirmed",
                )
            ],
            [
                call(
                    "decide_approval",
                    approval_id=2,
                    decision="rejected",
                    comment="Budget confirmed",
                )
            ],
        ],
        "calls": [
            call("list_workflows", search="Vendor Invoice Approval"),
            call("list_approvals", workflow_id=4, status="pending"),
            call("decide_approval", approval_id=2, decision="approved", comment="Budget confirmed"),
        ],
    },
    {
        "task": "Insert a new step as the second step of the 'Weekly Metrics Digest' workflow that posts "
        'to the #metrics Slack channel: Slack action \'post_message\', config {"channel": "#metrics"}, '
        "using the 'Ops Slack' connection. The existing steps keep their order around it.",
        "verifier": v3,
        "negatives": [
            [
                call(
                    "add_workflow_step",
                    workflow_id=3,
                    name="Post digest to Slack",
                    app_id=1,
                    action="post_message",
                    connection_id=1,
                    config={"channel": "#metrics"},
                )
            ]
        ],
        "calls": [
            call("list_workflows", search="Weekly Metrics Digest"),
            call("get_workflow", workflow_id=3),
            call("list_connections", app_slug="slack"),
            call(
                "add_workflow_step",
                workflow_id=3,
                name="Post digest to Slack",
                app_id=1,
                action="post_message",
                connection_id=1,
                config={"channel": "#metrics"},
                position=2,
            ),
        ],
    },
    {
        "task": "The 'Marketing Slack' connection has expired. Reauthorize it, then retry the most recent "
        "failed run of the 'Lead Alert to Slack' workflow.",
        "verifier": v4,
        "negatives": [
            [
                call("reauthorize_connection", connection_id=2),
                call("trigger_workflow_run", workflow_id=2),
            ],
            [call("reauthorize_connection", connection_id=2), call("retry_run", run_id=6)],
        ],
        "calls": [
            call("list_connections", search="Marketing Slack"),
            call("reauthorize_connection", connection_id=2),
            call("list_workflows", search="Lead Alert to Slack"),
            call("list_runs", workflow_id=2, status="failed"),
            call("retry_run", run_id=7),
        ],
    },
    {
        "task": "Make an EU copy of the 'Order Fulfillment Sync' workflow named 'Order Fulfillment Sync "
        "(EU)'. The copy must run daily at 06:00 Berlin time (cron '0 6 * * *', timezone "
        "Europe/Berlin) and have the same workflow variables as the original, except REGION, which "
        "must be 'eu'. Leave the copy as a draft and do not change the original.",
        "verifier": v5,
        "negatives": [
            [
                call("duplicate_workflow", workflow_id=6, new_name="Order Fulfillment Sync (EU)"),
                call(
                    "set_workflow_trigger",
                    workflow_id=23,
                    trigger_type="schedule",
                    cron_expression="0 6 * * *",
                    timezone="Europe/Berlin",
                ),
                call("set_variable", key="REGION", value="eu", workflow_id=6),
                call("set_variable", key="BATCH_SIZE", value="50", workflow_id=23),
            ]
        ],
        "calls": [
            call("list_workflows", search="Order Fulfillment Sync"),
            call("duplicate_workflow", workflow_id=6, new_name="Order Fulfillment Sync (EU)"),
            call(
                "set_workflow_trigger",
                workflow_id=23,
                trigger_type="schedule",
                cron_expression="0 6 * * *",
                timezone="Europe/Berlin",
            ),
            call("list_variables", workflow_id=6),
            call("set_variable", key="REGION", value="eu", workflow_id=23),
            call("set_variable", key="BATCH_SIZE", value="50", workflow_id=23),
        ],
    },
    {
        "task": "The 'Invoice Sync to QuickBooks' workflow keeps failing because one of its steps uses a "
        "revoked QuickBooks connection. Switch that step to the active QuickBooks connection, delete "
        "the revoked connection, and retry the workflow's most recent failed run.",
        "verifier": v6,
        "negatives": [
            [
                call("update_workflow_step", step_id=10, connection_id=12),
                call("delete_connection", connection_id=11),
                call("retry_run", run_id=14),
            ]
        ],
        "calls": [
            call("list_workflows", search="Invoice Sync to QuickBooks"),
            call("list_runs", workflow_id=5, status="failed"),
            call("get_run", run_id=15),
            call("list_connections", app_slug="quickbooks", status="active"),
            call("update_workflow_step", step_id=10, connection_id=12),
            call("delete_connection", connection_id=11),
            call("retry_run", run_id=15),
        ],
    },
    {
        "task": "Clean up Daniel Okafor's paused workflows: archive every paused workflow he owns that "
        "has had no successful run since 2025-05-01. His other paused workflows stay paused.",
        "verifier": v7,
        "negatives": [[call("archive_workflow", workflow_id=w) for w in (8, 9, 10, 11)]],
        "calls": [
            call("list_users", search="Daniel"),
            call("list_workflows", owner_id=4, status="paused"),
            call("list_runs", workflow_id=8, status="succeeded", started_after="2025-05-01"),
            call("list_runs", workflow_id=9, status="succeeded", started_after="2025-05-01"),
            call("list_runs", workflow_id=10, status="succeeded", started_after="2025-05-01"),
            call("list_runs", workflow_id=11, status="succeeded", started_after="2025-05-01"),
            call("archive_workflow", workflow_id=9),
            call("archive_workflow", workflow_id=10),
        ],
    },
    {
        "task": "Build and activate a new workflow 'Stripe Payments to Finance' in the Finance folder. "
        "It triggers on the Stripe event 'payment_intent.succeeded' through the 'Stripe Live' "
        "connection. Step 1 appends a row to the 'Payments 2025' spreadsheet (Google Sheets action "
        "'append_row', config key 'spreadsheet') via the 'Finance Sheets' connection; step 2 posts to "
        "the #finance Slack channel (action 'post_message', config key 'channel') via 'Ops Slack'.",
        "verifier": v8,
        "negatives": [
            [
                call("create_workflow", name="Stripe Payments to Finance", folder_id=2),
                call(
                    "set_workflow_trigger",
                    workflow_id=23,
                    trigger_type="app_event",
                    app_id=6,
                    connection_id=10,
                    event="payment_intent.succeeded",
                ),
                call(
                    "add_workflow_step",
                    workflow_id=23,
                    name="Log payment",
                    app_id=3,
                    action="append_row",
                    connection_id=5,
                    config={"spreadsheet": "Payments 2025"},
                ),
                call(
                    "add_workflow_step",
                    workflow_id=23,
                    name="Notify finance",
                    app_id=1,
                    action="post_message",
                    connection_id=1,
                    config={"channel": "#finance"},
                ),
                call("activate_workflow", workflow_id=23),
            ]
        ],
        "calls": [
            call("list_folders"),
            call("list_connections", app_slug="stripe"),
            call("list_connections", app_slug="google_sheets"),
            call("list_connections", app_slug="slack"),
            call(
                "create_workflow",
                name="Stripe Payments to Finance",
                description="Log successful Stripe payments to the finance sheet and notify #finance.",
                folder_id=2,
            ),
            call(
                "set_workflow_trigger",
                workflow_id=23,
                trigger_type="app_event",
                app_id=6,
                connection_id=9,
                event="payment_intent.succeeded",
            ),
            call(
                "add_workflow_step",
                workflow_id=23,
                name="Log payment",
                app_id=3,
                action="append_row",
                connection_id=5,
                config={"spreadsheet": "Payments 2025"},
            ),
            call(
                "add_workflow_step",
                workflow_id=23,
                name="Notify finance",
                app_id=1,
                action="post_message",
                connection_id=1,
                config={"channel": "#finance"},
            ),
            call("activate_workflow", workflow_id=23),
        ],
    },
    {
        "task": "Priya Nair is leaving the company. Transfer ownership of all her non-archived workflows "
        "to Marcus Chen, reassign her pending approval requests to Marcus, and then deactivate her "
        "account. Her archived workflows stay as they are.",
        "verifier": v9,
        "negatives": [
            [call("update_workflow", workflow_id=w, owner_id=4) for w in (1, 2, 12, 13, 14, 21)]
            + [call("reassign_approval", approval_id=a, approver_id=4) for a in (3, 4)]
            + [call("deactivate_user", user_id=2)]
        ],
        "calls": [
            call("list_users"),
            call("list_workflows", owner_id=2),
            call("update_workflow", workflow_id=1, owner_id=3),
            call("update_workflow", workflow_id=2, owner_id=3),
            call("update_workflow", workflow_id=12, owner_id=3),
            call("update_workflow", workflow_id=13, owner_id=3),
            call("update_workflow", workflow_id=14, owner_id=3),
            call("update_workflow", workflow_id=21, owner_id=3),
            call("list_approvals", approver_id=2, status="pending"),
            call("reassign_approval", approval_id=3, approver_id=3),
            call("reassign_approval", approval_id=4, approver_id=3),
            call("deactivate_user", user_id=2),
        ],
    },
]
