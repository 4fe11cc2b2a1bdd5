"""OpenAI-style error bodies, so the official clients raise their usual typed errors.

``{"error": {"message", "type", "param", "code"}}`` is what the OpenAI API and vLLM send;
the ``openai`` package maps the HTTP status to its exception class (400
BadRequestError, 404 NotFoundError, 503 InternalServerError...) and shows the message.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

# Exception type names in the OpenAI API's vocabulary.
INVALID_REQUEST = "invalid_request_error"
NOT_FOUND = "not_found_error"
UPSTREAM = "upstream_error"
UNAVAILABLE = "service_unavailable_error"
TIMEOUT = "timeout_error"


@dataclass
class GatewayError(Exception):
    """A request the gateway answers itself, with an HTTP status and an OpenAI error."""

    status: int
    message: str
    type: str = INVALID_REQUEST
    param: str | None = None
    code: str | None = None

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.param, self.code)


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> bytes:
    error = {"message": message, "type": type_, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


def sse_error_event(message: str, type_: str, code: int) -> bytes:
    """The event vLLM itself sends when a stream fails; the openai client raises on it."""
    error = {"message": message, "type": type_, "param": None, "code": code}
    return b"data: " + json.dumps({"error": error}).encode() + b"\n\n"


def bad_json(detail: str) -> GatewayError:
    return GatewayError(
        400,
        f"We could not parse the JSON body of your request ({detail}).",
        code="invalid_json",
    )


def too_large(limit: int) -> GatewayError:
    return GatewayError(
        413, f"Request body exceeds the gateway's limit of {limit} bytes.", code="body_too_large"
    )


def unknown_model(model: str) -> GatewayError:
    return GatewayError(
        404,
        f"The model `{model}` does not exist.",
        type=NOT_FOUND,
        param="model",
        code="model_not_found",
    )


def no_endpoint(deployment: str) -> GatewayError:
    return GatewayError(
        503,
        f"No variant of {deployment or 'the service'} has a ready endpoint with traffic weight.",
        type=UNAVAILABLE,
        code="no_ready_endpoint",
    )


def upstream_refused(variant: str, detail: str) -> GatewayError:
    return GatewayError(
        502, f"Variant {variant} could not be reached: {detail}", type=UPSTREAM, code="bad_gateway"
    )


def upstream_timeout(variant: str, seconds: float) -> GatewayError:
    return GatewayError(
        504,
        f"Variant {variant} did not answer within {seconds:g} s.",
        type=TIMEOUT,
        code="gateway_timeout",
    )
