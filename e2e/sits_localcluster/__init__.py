"""A local Kubernetes control plane on 127.0.0.1.

etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, with fake MIG GPU
nodes; see :class:`sits_localcluster.cluster.LocalCluster` and ``sits-cluster --help``.
"""
