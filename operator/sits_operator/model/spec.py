"""Typed view of a SitsDeployment spec.

The CRD (crds/sitsdeployment.yaml) is the validating contract and applies defaults on the
server; these models mirror it so the core can work with attributes instead of dicts.
Defaults are repeated here so that objects created before a default was added, or read
from a cluster whose CRD is older, still parse the same way.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class _Frozen(BaseModel):
    """Immutable, camelCase-aliased base so specs can be hashed and shared safely."""

    model_config = ConfigDict(frozen=True, populate_by_name=True, extra="ignore")


class Role(StrEnum):
    STABLE = "stable"
    CANDIDATE = "candidate"


class RouterKind(StrEnum):
    BUILTIN = "builtin"
    GATEWAY_API = "gatewayAPI"
    NONE = "none"


class MetricSource(StrEnum):
    """Which proxy's request metrics the analysis reads (the contract's ``source`` label):
    the gateway and the sidecars see the same requests, so the two are never summed."""

    GATEWAY = "gateway"
    SIDECAR = "sidecar"


class Strategy(StrEnum):
    CANARY = "canary"
    AB_TEST = "abTest"


class LoraAdapter(_Frozen):
    name: str
    source: str
    digest: str | None = None
    pinned: bool = False


class LoraSettings(_Frozen):
    enabled: bool = True
    max_loras: int = Field(default=4, alias="maxLoras")
    max_lora_rank: int = Field(default=16, alias="maxLoraRank")
    adapters: tuple[LoraAdapter, ...] = ()


class SemanticCache(_Frozen):
    enabled: bool = True
    # L1's default (SemanticConfig.threshold), chosen from the benchmark's curve;
    # tests/unit/test_cache_sidecar_settings.py keeps the two equal.
    similarity_threshold: float = Field(default=0.8, alias="similarityThreshold")
    ttl: str = "1h"
    max_entries: int = Field(default=100_000, alias="maxEntries")
    cache_non_deterministic: bool = Field(default=False, alias="cacheNonDeterministic")


class VectorIndexCache(_Frozen):
    enabled: bool = False
    index_ref: str | None = Field(default=None, alias="indexRef")
    hot_list_min_hits: int = Field(default=50, alias="hotListMinHits")
    hot_list_window: str = Field(default="1h", alias="hotListWindow")


class LoraCache(_Frozen):
    max_resident: int = Field(default=4, alias="maxResident")


class CacheSettings(_Frozen):
    semantic: SemanticCache = SemanticCache()
    vector_index: VectorIndexCache = Field(default=VectorIndexCache(), alias="vectorIndex")
    lora: LoraCache = LoraCache()


class ContainerResources(_Frozen):
    cpu: str | None = None
    memory: str | None = None


# A Kubernetes object passed through to the pod as the user wrote it (an EnvVar, a
# Toleration, an Affinity, a pod template patch): the CRD's schema checks its shape, the
# API server the rest when the operator applies the Deployment.
KubeObject = dict[str, Any]


class PodSettings(_Frozen):
    """What users set on a variant's pods beyond the operator's own fields.

    Set once for every variant in `spec.podDefaults` and per variant in `variants[].pod`;
    core/pod_settings.py merges the two. None means unset, so that a variant's empty list
    (e.g. `tolerations: []`) still replaces the defaults' list.
    """

    env: tuple[KubeObject, ...] | None = None
    env_from: tuple[KubeObject, ...] | None = Field(default=None, alias="envFrom")
    image_pull_secrets: tuple[KubeObject, ...] | None = Field(
        default=None, alias="imagePullSecrets"
    )
    service_account_name: str | None = Field(default=None, alias="serviceAccountName")
    node_selector: dict[str, str] | None = Field(default=None, alias="nodeSelector")
    affinity: KubeObject | None = None
    tolerations: tuple[KubeObject, ...] | None = None
    annotations: dict[str, str] | None = None
    labels: dict[str, str] | None = None
    priority_class_name: str | None = Field(default=None, alias="priorityClassName")
    # A strategic merge patch of the rendered pod template ({metadata, spec}).
    pod_template: KubeObject | None = Field(default=None, alias="podTemplate")


# Startup budget of vLLM when a variant names none: downloading ~16 GB of weights (an 8B
# model in BF16) at ~50 MB/s takes about 5 minutes, loading them onto the slice, compiling
# and capturing CUDA graphs a few more; 15 minutes covers that with room to spare.
DEFAULT_STARTUP_TIMEOUT = "15m"


class Variant(_Frozen):
    name: str
    role: Role
    image: str
    # A Hugging Face repository id, pvc://<claim>/<path>, or an absolute path in the pod.
    model: str
    # Git ref (branch, tag, commit) of a Hugging Face model: vLLM --revision.
    model_revision: str | None = Field(default=None, alias="modelRevision")
    # The rollout's key and label value; never given to vLLM.
    revision: str
    startup_timeout: str = Field(default=DEFAULT_STARTUP_TIMEOUT, alias="startupTimeout")
    replicas: int = 1
    mig_profile: str = Field(alias="migProfile")
    gpu_product: str | None = Field(default=None, alias="gpuProduct")
    model_memory: str | None = Field(default=None, alias="modelMemory")
    vllm_args: tuple[str, ...] = Field(default=(), alias="vllmArgs")
    resources: ContainerResources | None = None
    lora: LoraSettings = LoraSettings()
    cache: CacheSettings = CacheSettings()
    pod: PodSettings = PodSettings()

    @property
    def serves_adapters(self) -> bool:
        """vLLM needs --enable-lora only when there is something to load."""
        return self.lora.enabled and bool(self.lora.adapters)


class HTTPRouteRef(_Frozen):
    name: str
    namespace: str | None = None


class StickySession(_Frozen):
    header: str = "x-session-id"
    use_openai_user: bool = Field(default=True, alias="useOpenAIUser")


class WeightEntry(_Frozen):
    variant: str
    weight: int


class GatewaySpec(_Frozen):
    """The SITS gateway the operator deploys for router builtin (core/gateway.py)."""

    replicas: int = 2
    resources: ContainerResources | None = None
    # Scheduling, pull secrets, labels and annotations of the gateway pods (no env: the
    # gateway's settings are the operator's; no serviceAccountName: it owns the account).
    pod: PodSettings = PodSettings()


class Traffic(_Frozen):
    router: RouterKind = RouterKind.BUILTIN
    gateway: GatewaySpec = GatewaySpec()
    http_route: HTTPRouteRef | None = Field(default=None, alias="httpRoute")
    sticky_session: StickySession = Field(default=StickySession(), alias="stickySession")
    initial_weights: tuple[WeightEntry, ...] = Field(default=(), alias="initialWeights")


class PauseStep(_Frozen):
    duration: str | None = None


class RolloutStep(_Frozen):
    set_weight: int | None = Field(default=None, alias="setWeight")
    pause: PauseStep | None = None


# How long a variant that a decision left without traffic keeps its pods (the candidate
# after RolledBack, the old stable after Succeeded), like Argo Rollouts'
# scaleDownDelaySeconds. Argo's 30 s is sized for kube-proxy and ingresses to stop sending
# short web requests; here the streams already running on the variant must also end, and
# a long completion streams for one to two minutes at tens of tokens per second. Two
# minutes covers that and the router applying the weights (seconds), and is short beside
# a rollout, so a MIG slice idles at most that long.
DEFAULT_SCALE_DOWN_DELAY = "2m"


class Rollout(_Frozen):
    strategy: Strategy = Strategy.CANARY
    steps: tuple[RolloutStep, ...] = ()
    step_weight: int = Field(default=10, alias="stepWeight")
    max_weight: int = Field(default=50, alias="maxWeight")
    # The least time a weight step lasts; None: each step lasts what the policy needs
    # (promotion.consecutivePasses periods). core/analysis/period.py reads it.
    interval: str | None = None
    scale_down_delay: str = Field(default=DEFAULT_SCALE_DOWN_DELAY, alias="scaleDownDelay")


class PolicyRef(_Frozen):
    name: str = "sits2026"


class Analysis(_Frozen):
    policy_ref: PolicyRef = Field(default=PolicyRef(), alias="policyRef")
    # None: chosen by the router (core.metric_source), since the default depends on it.
    source: MetricSource | None = None


class SitsDeploymentSpec(_Frozen):
    served_model_name: str | None = Field(default=None, alias="servedModelName")
    variants: tuple[Variant, ...]
    traffic: Traffic = Traffic()
    rollout: Rollout = Rollout()
    analysis: Analysis = Analysis()
    pod_defaults: PodSettings = Field(default=PodSettings(), alias="podDefaults")

    @property
    def stable(self) -> Variant:
        """The CRD guarantees exactly one stable variant; fall back to the first."""
        return next((v for v in self.variants if v.role is Role.STABLE), self.variants[0])

    @property
    def candidates(self) -> tuple[Variant, ...]:
        return tuple(v for v in self.variants if v.role is Role.CANDIDATE)


class ObjectRef(_Frozen):
    """What the core needs of the owning object's metadata (names, owner reference)."""

    name: str
    namespace: str
    uid: str
    generation: int = 0


API_GROUP = "sits.dev"
API_VERSION = "v1alpha1"
KIND = "SitsDeployment"
PLURAL = "sitsdeployments"


def parse_spec(raw: dict[str, Any]) -> SitsDeploymentSpec:
    """Parse the spec dict from the apiserver; raises pydantic.ValidationError if wrong."""
    return SitsDeploymentSpec.model_validate(raw)
