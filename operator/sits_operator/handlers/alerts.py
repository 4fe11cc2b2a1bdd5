"""Alert-driven rollback: the Alertmanager webhook receiver the operator starts.

The receiver is an adapter (adapters/alert_webhook.py: HTTP in, Kubernetes API out); what
an alert asks for and whether it may be acted on is pure (core/alerts.py).
"""

from __future__ import annotations

from sits_operator.adapters.alert_webhook import start_alert_server

__all__ = ["start_alert_server"]
