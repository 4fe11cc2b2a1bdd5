"""`sits-operator --namespace`: what Kopf is told for a namespaced install (the chart's
operator.watchNamespaces) and for a cluster-wide one."""

from __future__ import annotations

from sits_operator.__main__ import _parse, kopf_options


def test_without_namespaces_kopf_serves_the_cluster_and_follows_crds() -> None:
    options = kopf_options(_parse([]))
    assert options["clusterwide"] is True
    assert options["namespaces"] == []
    assert options["settings"].scanning.disabled is False  # CRDs added later are noticed
    assert options["memo"]["watch_namespaces"] == ()
    assert options["standalone"] is True


def test_with_namespaces_kopf_serves_only_those_and_lists_nothing_cluster_wide() -> None:
    """A namespaced install's Roles allow no cluster-wide list of namespaces or CRDs:
    Kopf must not try (it would log the API's 403 and fall back)."""
    options = kopf_options(_parse(["-n", "team-a", "--namespace", "team-b", "-n", "team-a"]))
    assert options["clusterwide"] is False
    assert options["namespaces"] == ["team-a", "team-b"]
    assert options["settings"].scanning.disabled is True
    assert options["memo"]["watch_namespaces"] == ("team-a", "team-b")  # the alert webhook's


def test_the_liveness_endpoint_is_passed_on_when_set() -> None:
    assert kopf_options(_parse([]))["liveness_endpoint"] is None
    url = "http://0.0.0.0:8081/healthz"
    assert kopf_options(_parse(["--liveness", url]))["liveness_endpoint"] == url
