"""The whole system live on the local cluster's real node, and the record of what it did.

``timeline`` records a rollout (status, SLIs, request rates, events) as JSON, ``plot``
draws it, ``view`` prints it as it happens; ``stack`` brings up what the live scenarios
and ``make demo`` run on (the operator from its chart, Prometheus, the model volume).
"""
