"""The local cluster's address plan: one private block, nothing of it leaves the machine.

Every pod and Service address of the local cluster comes from ``BLOCK``. The real node
routes the block to ``unreachable`` beside its bridge's own /24 and the Service range, so
a packet to an address nobody holds fails on this machine instead of going out of it
(test traffic may only reach loopback and the project's own network namespaces).

| range | what |
|---|---|
| ``10.244.1.0/24`` | pods on the real node ``sits-node-0`` (bridge ``sits0`` holds ``.1``) |
| ``10.244.128.0/18`` | fake pod IPs kwok hands to pods on the fake GPU nodes (never routed) |
| ``10.244.240.0/20`` | Service ClusterIPs (``.1`` is ``kubernetes``, ``.10`` is cluster DNS) |
"""

from __future__ import annotations

import ipaddress

BLOCK = "10.244.0.0/16"
NODE_POD_CIDR = "10.244.1.0/24"
#: The bridge's address: the pods' gateway, the node's InternalIP, and the address the
#: apiserver advertises for the ``kubernetes`` Service (pods reach it there).
NODE_IP = "10.244.1.1"
KWOK_POD_CIDR = "10.244.128.0/18"
SERVICE_CIDR = "10.244.240.0/20"
KUBERNETES_SERVICE_IP = "10.244.240.1"
DNS_SERVICE_IP = "10.244.240.10"
CLUSTER_DOMAIN = "cluster.local"
BRIDGE = "sits0"


def _check_plan() -> None:
    """The ranges must nest in the block and not overlap: a typo here would route wrongly."""
    block = ipaddress.IPv4Network(BLOCK)
    ranges = [ipaddress.IPv4Network(r) for r in (NODE_POD_CIDR, KWOK_POD_CIDR, SERVICE_CIDR)]
    for i, net in enumerate(ranges):
        assert net.subnet_of(block), f"{net} is outside {block}"
        for other in ranges[i + 1 :]:
            assert not net.overlaps(other), f"{net} overlaps {other}"
    node = ipaddress.IPv4Network(NODE_POD_CIDR)
    service = ipaddress.IPv4Network(SERVICE_CIDR)
    assert ipaddress.ip_address(NODE_IP) in node
    assert ipaddress.ip_address(KUBERNETES_SERVICE_IP) == service.network_address + 1
    assert ipaddress.ip_address(DNS_SERVICE_IP) in service


_check_plan()
