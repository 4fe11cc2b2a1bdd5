"""`kubectl sits`: the kubectl plugin for SitsDeployments (the executable `kubectl-sits`).

`get` draws a rollout as a tree (variants, pods and their MIG slices, SLIs against the
policy's thresholds, the last decisions), `explain` says why the last decision was taken,
and `promote | abort | pause | resume | retry` set the operator's command annotations with
the user's own credentials. Only `kube` talks to the apiserver; every other module is pure
and reads the operator's vocabulary from `sits_operator.model` and `sits_operator.core.naming`
(an import-linter contract keeps it so).
"""
