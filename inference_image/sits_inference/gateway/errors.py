"""The errors the gateway answers with itself, before or instead of a variant's answer.

Their shape (``{"error": {"message", "type", "param", "code"}}``) and the checks every
request body passes are the shared OpenAI layer's (``sits_inference.openai``); these are
the situations only the gateway has: a model the routing table does not list, no variant
to send to, a variant that cannot be reached or does not answer in time.
"""

from __future__ import annotations

from ..openai.errors import ApiError, ErrorType

SERVER = "gateway"  # whose limit a 413 names (``openai.requests.read_body``)


def unknown_model(model: str) -> ApiError:
    return ApiError(
        404,
        f"The model `{model}` does not exist.",
        type=ErrorType.NOT_FOUND,
        param="model",
        code="model_not_found",
    )


def unknown_path(path: str) -> ApiError:
    return ApiError(404, f"Unknown path {path}.", type=ErrorType.NOT_FOUND)


def no_endpoint(deployment: str) -> ApiError:
    return ApiError(
        503,
        f"No variant of {deployment or 'the service'} has a ready endpoint with traffic weight.",
        type=ErrorType.UNAVAILABLE,
        code="no_ready_endpoint",
    )


def upstream_refused(variant: str, detail: str) -> ApiError:
    return ApiError(
        502,
        f"Variant {variant} could not be reached: {detail}",
        type=ErrorType.UPSTREAM,
        code="bad_gateway",
    )


def upstream_timeout(variant: str, seconds: float) -> ApiError:
    return ApiError(
        504,
        f"Variant {variant} did not answer within {seconds:g} s.",
        type=ErrorType.TIMEOUT,
        code="gateway_timeout",
    )
