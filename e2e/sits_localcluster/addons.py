"""Cluster add-ons the real node runs as pods: CoreDNS, and local PersistentVolumes.

CoreDNS is deployed the way kubeadm deploys it (ServiceAccount, ClusterRole, ConfigMap
with the Corefile, Deployment, the ``kube-dns`` Service at the cluster DNS address), with
one local choice: it answers for ``cluster.local`` only (no ``forward``: nothing of ours
is outside, and nothing should try to leave). As in kubeadm's manifest it keeps only
``NET_BIND_SERVICE`` (the binary carries that file capability, to bind port 53 as a
non-root user; with the capability dropped too, the kernel refuses to exec it).

Local volumes are ``local`` PersistentVolumes on the real node, pre-bound to one claim,
for data the pods read (the tiny model, LoRA adapters), as a user's weights would reach
their pods through a volume.
"""

from __future__ import annotations

from typing import Any

from . import network
from .node import NODE_NAME, REAL_NODE_LABEL, REAL_NODE_TOLERATION

COREDNS_IMAGE_REPO = "sits.local/coredns"
DNS_PORT = 53
STORAGE_CLASS = "sits-local"

COREFILE = f""".:{DNS_PORT} {{
    errors
    health :8080
    ready :8181
    kubernetes {network.CLUSTER_DOMAIN} in-addr.arpa ip6.arpa {{
        pods insecure
        fallthrough in-addr.arpa ip6.arpa
        ttl 30
    }}
    cache 30
    loop
    reload
    loadbalance
}}
"""


def _meta(name: str, namespace: str | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "labels": {"k8s-app": "kube-dns"}}
    if namespace:
        meta["namespace"] = namespace
    return meta


def coredns_objects(version: str) -> list[dict[str, Any]]:
    """Everything CoreDNS needs, in apply order."""
    ns = "kube-system"
    rules = [
        {
            "apiGroups": [""],
            "resources": ["endpoints", "services", "pods", "namespaces"],
            "verbs": ["list", "watch"],
        },
        {
            "apiGroups": ["discovery.k8s.io"],
            "resources": ["endpointslices"],
            "verbs": ["list", "watch"],
        },
    ]
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": _meta("coredns", ns)},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta("system:coredns"),
            "rules": rules,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta("system:coredns"),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "system:coredns",
            },
            "subjects": [{"kind": "ServiceAccount", "name": "coredns", "namespace": ns}],
        },
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": _meta("coredns", ns),
            "data": {"Corefile": COREFILE},
        },
        _coredns_deployment(version, ns),
        _dns_service(ns),
    ]


def _coredns_deployment(version: str, ns: str) -> dict[str, Any]:
    container = {
        "name": "coredns",
        "image": f"{COREDNS_IMAGE_REPO}:{version}",
        "imagePullPolicy": "Never",
        "args": ["-conf", "/etc/coredns/Corefile"],
        "ports": [
            {"name": "dns", "containerPort": DNS_PORT, "protocol": "UDP"},
            {"name": "dns-tcp", "containerPort": DNS_PORT, "protocol": "TCP"},
        ],
        "volumeMounts": [{"name": "config", "mountPath": "/etc/coredns", "readOnly": True}],
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "readinessProbe": {"httpGet": {"path": "/ready", "port": 8181}, "periodSeconds": 2},
        "livenessProbe": {"httpGet": {"path": "/health", "port": 8080}, "periodSeconds": 10},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": 65532,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]},
        },
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta("coredns", ns),
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"k8s-app": "kube-dns"}},
            "template": {
                "metadata": {"labels": {"k8s-app": "kube-dns"}},
                "spec": {
                    "serviceAccountName": "coredns",
                    "priorityClassName": "system-cluster-critical",
                    "dnsPolicy": "Default",
                    "nodeSelector": dict(REAL_NODE_LABEL),
                    "tolerations": [dict(REAL_NODE_TOLERATION)],
                    "containers": [container],
                    "volumes": [{"name": "config", "configMap": {"name": "coredns"}}],
                },
            },
        },
    }


def _dns_service(ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {**_meta("kube-dns", ns), "labels": {"k8s-app": "kube-dns"}},
        "spec": {
            "selector": {"k8s-app": "kube-dns"},
            "clusterIP": network.DNS_SERVICE_IP,
            "ports": [
                {"name": "dns", "port": 53, "protocol": "UDP", "targetPort": DNS_PORT},
                {"name": "dns-tcp", "port": 53, "protocol": "TCP", "targetPort": DNS_PORT},
            ],
        },
    }


def storage_class() -> dict[str, Any]:
    """Local volumes on the real node: no provisioner, bound when a pod is scheduled."""
    return {
        "apiVersion": "storage.k8s.io/v1",
        "kind": "StorageClass",
        "metadata": {"name": STORAGE_CLASS},
        "provisioner": "kubernetes.io/no-provisioner",
        "volumeBindingMode": "WaitForFirstConsumer",
        "reclaimPolicy": "Retain",
    }


def local_volume(name: str, path: str, size: str, namespace: str, claim: str) -> dict[str, Any]:
    """A read-only-many ``local`` PV on the real node, reserved for ``namespace/claim``."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolume",
        "metadata": {"name": name, "labels": {"sits.dev/local-volume": name}},
        "spec": {
            "capacity": {"storage": size},
            "accessModes": ["ReadOnlyMany", "ReadWriteOnce"],
            "persistentVolumeReclaimPolicy": "Retain",
            "storageClassName": STORAGE_CLASS,
            "local": {"path": path},
            "claimRef": {"namespace": namespace, "name": claim},
            "nodeAffinity": {
                "required": {
                    "nodeSelectorTerms": [
                        {
                            "matchExpressions": [
                                {
                                    "key": "kubernetes.io/hostname",
                                    "operator": "In",
                                    "values": [NODE_NAME],
                                }
                            ]
                        }
                    ]
                }
            },
        },
    }


def volume_claim(name: str, namespace: str, size: str, volume: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "accessModes": ["ReadOnlyMany"],
            "storageClassName": STORAGE_CLASS,
            "volumeName": volume,
            "resources": {"requests": {"storage": size}},
        },
    }
