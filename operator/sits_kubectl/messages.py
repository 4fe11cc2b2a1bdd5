"""What to tell a user whose request the apiserver refused, and why.

The plugin acts with the user's own credentials, so a 403 is their RBAC speaking: the
message names the verb and resource that were refused (the apiserver's own words follow)
and the `kubectl auth can-i` line that checks it, instead of a stack trace.
"""

from __future__ import annotations

import json
from dataclasses import dataclass


@dataclass(frozen=True)
class Call:
    """One API request, in RBAC's terms."""

    verb: str
    resource: str  # "sitsdeployments.sits.dev", "pods"
    namespace: str | None = None
    name: str | None = None

    @property
    def target(self) -> str:
        what = f'{self.resource} "{self.name}"' if self.name else self.resource
        where = f' in namespace "{self.namespace}"' if self.namespace else " (cluster-wide)"
        return f"{what}{where}"

    @property
    def can_i(self) -> str:
        thing = f"{self.resource}/{self.name}" if self.name else self.resource
        where = f" -n {self.namespace}" if self.namespace else ""
        return f"kubectl auth can-i {self.verb} {thing}{where}"


def apiserver_message(body: str | bytes | None, fallback: str) -> str:
    """The `message` of a Kubernetes Status body; the HTTP reason when there is none."""
    if body:
        try:
            parsed = json.loads(body)
        except ValueError:
            return fallback
        if isinstance(parsed, dict) and parsed.get("message"):
            return str(parsed["message"])
    return fallback


def refusal(call: Call, status: int, said: str, impersonating: str | None = None) -> str:
    """One clear paragraph for an API error of `call`."""
    if status == 403 and impersonating and "cannot impersonate" in said:
        return (
            f"Forbidden: you may not act as {impersonating} (--as): your RBAC lacks the verb "
            f"'impersonate'.\nThe apiserver says: {said}"
        )
    if status == 403:
        who = f" (as {impersonating})" if impersonating else ""
        return (
            f"Forbidden: you{who} may not {call.verb} {call.target}.\n"
            f"The apiserver says: {said}\n"
            f"kubectl sits acts with your own credentials, so your RBAC decides: ask for a Role "
            f"granting {call.verb!r} on {call.resource}, and check with: {call.can_i}"
            f"{' --as ' + impersonating if impersonating else ''}"
        )
    if status == 401:
        return (
            "Unauthorized: the apiserver did not accept your credentials (expired token? "
            f"wrong context?). The apiserver says: {said}"
        )
    if status == 404:
        return f"Not found: {call.target}. The apiserver says: {said}"
    return f"{call.verb} {call.target} failed ({status}): {said}"
