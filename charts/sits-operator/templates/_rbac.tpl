{{/*
The operator's RBAC rules, one source for both install modes:
- cluster-wide (operator.watchNamespaces empty): one ClusterRole with namespacedRules and
  clusterScopedRules (templates/rbac.yaml);
- namespaced (operator.watchNamespaces set): a Role with namespacedRules in each watched
  namespace (templates/rbac-namespaced.yaml), and a ClusterRole with clusterScopedRules
  only (templates/rbac.yaml).
tests/integration/test_chart.py fails on any verb or resource added here without a reason
in the tables it keeps, and runs the operator suites under exactly these rules.
*/}}

{{/* True (non-empty) when the operator watches a list of namespaces: Roles, not a ClusterRole. */}}
{{- define "sits-operator.namespaced" -}}
{{- if .Values.operator.watchNamespaces }}true{{ end -}}
{{- end -}}

{{/* The watched namespaces as a JSON list (fromJsonArray), checked: a list, no empty
name, each name once. */}}
{{- define "sits-operator.watchNamespaces" -}}
{{- if not (kindIs "slice" (default (list) .Values.operator.watchNamespaces)) }}
{{- fail "operator.watchNamespaces must be a list of namespaces, e.g. {team-a,team-b}" }}
{{- end }}
{{- range .Values.operator.watchNamespaces }}
{{- if not . }}
{{- fail "operator.watchNamespaces has an empty entry" }}
{{- end }}
{{- end }}
{{- toJson (uniq (default (list) .Values.operator.watchNamespaces)) -}}
{{- end -}}

{{/* What the operator does with objects in the namespaces it serves, verb by verb. */}}
{{- define "sits-operator.namespacedRules" -}}
# Its own resources: watched; Kopf keeps its finalizer and handler progress in metadata
# (patch); the operator's decisions go to status only, never to spec.
- apiGroups: [sits.dev]
  resources: [sitsdeployments]
  verbs: [get, list, watch, patch]
# (The builtin router reads weights back from the gateway pods, not from status.)
- apiGroups: [sits.dev]
  resources: [sitsdeployments/status]
  verbs: [patch]
# Children carry blockOwnerDeletion owner references; clusters that enable the
# OwnerReferencesPermissionEnforcement admission plugin require this for that.
- apiGroups: [sits.dev]
  resources: [sitsdeployments/finalizers]
  verbs: [update]
# Children: server-side apply (patch; create when the object is new), watched through an
# index, deleted when a variant leaves the spec.
- apiGroups: [apps]
  resources: [deployments]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [""]
  resources: [services]
  verbs: [list, watch, create, patch, delete]
# traffic.router builtin: the gateway's Deployment (above), its identity and its
# PodDisruptionBudget (core/gateway.py), applied, watched and pruned like the others.
- apiGroups: [""]
  resources: [serviceaccounts]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [rbac.authorization.k8s.io]
  resources: [roles, rolebindings]
  verbs: [list, watch, create, patch, delete]
- apiGroups: [policy]
  resources: [poddisruptionbudgets]
  verbs: [list, watch, create, patch, delete]
# Never used by the operator itself: Kubernetes lets it create the gateway's Role
# (get/list/watch on its SitsDeployment and on EndpointSlices) and bind it only if it
# holds those permissions (RBAC's escalation check). Holding them is narrower than
# the alternative, the escalate and bind verbs, which would let it grant anything.
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [get, list, watch]
# Pod readiness and scheduling problems feed the status (read only); the builtin router
# lists the gateway's ready pods to ask them for the weights they apply.
- apiGroups: [""]
  resources: [pods]
  verbs: [list, watch]
# An event for every decision (the operator's and Kopf's own).
- apiGroups: [""]
  resources: [events]
  verbs: [create]
# traffic.router gatewayAPI: the operator reads the HTTPRoute and JSON-patches only its
# variant backends' weights (no update: the rest of the route is never rewritten).
- apiGroups: [gateway.networking.k8s.io]
  resources: [httproutes]
  verbs: [get, patch]
# A route in another namespace is used only where a ReferenceGrant there allows it
# (core/reference_grant.py): list, read when needed; no get (a grant's name is anyone's
# choice) and no watch (read at each analysis, not cached).
- apiGroups: [gateway.networking.k8s.io]
  resources: [referencegrants]
  verbs: [list]
{{- end -}}

{{/* What stays cluster-scoped in either mode. */}}
{{- define "sits-operator.clusterScopedRules" -}}
# SitsPolicies are cluster-scoped: read through a watch-fed index, never written.
- apiGroups: [sits.dev]
  resources: [sitspolicies]
  verbs: [list, watch]
{{- if not (include "sits-operator.namespaced" .) }}
# Kopf notices CRDs installed or removed while it runs (otherwise only at restart). With
# --namespace it does not look (settings.scanning.disabled): it serves the CRDs it found
# at start, so a namespaced install needs no such rule.
- apiGroups: [apiextensions.k8s.io]
  resources: [customresourcedefinitions]
  verbs: [list, watch]
{{- end }}
{{- end -}}
