"""OpenAI-style error bodies, so the official clients raise their usual typed errors.

``{"error": {"message", "type", "param", "code"}}`` is what the OpenAI API and vLLM send;
the ``openai`` package maps the HTTP status to its exception class (400
BadRequestError, 404 NotFoundError, 503 InternalServerError...) and shows the message.
Both proxies answer with these, before a request reaches a variant or a tier.
"""

from __future__ import annotations

import enum
import json
from dataclasses import dataclass

import orjson

# What orjson (or its callers) raise on a body that is not JSON, or is nested too deeply.
JSON_ERRORS = (UnicodeDecodeError, orjson.JSONDecodeError, RecursionError)


class ErrorType(enum.StrEnum):
    """The ``type`` of an OpenAI error, in the OpenAI API's vocabulary."""

    INVALID_REQUEST = "invalid_request_error"
    AUTHENTICATION = "authentication_error"
    NOT_FOUND = "not_found_error"
    UPSTREAM = "upstream_error"
    UNAVAILABLE = "service_unavailable_error"
    TIMEOUT = "timeout_error"
    INTERNAL = "internal_error"


@dataclass
class ApiError(Exception):
    """A request a proxy answers itself, with an HTTP status and an OpenAI error."""

    status: int
    message: str
    type: ErrorType = ErrorType.INVALID_REQUEST
    param: str | None = None
    code: str | None = None

    def body(self) -> bytes:
        return error_body(self.message, self.type, self.param, self.code)


def _error(message: str, type_: str, param: str | None, code: str | int | None) -> bytes:
    error = {"message": message, "type": type_, "param": param, "code": code}
    return json.dumps({"error": error}).encode()


def error_body(
    message: str, type_: str, param: str | None = None, code: str | None = None
) -> bytes:
    return _error(message, type_, param, code)


def sse_error_event(message: str, type_: str, code: int) -> bytes:
    """The event vLLM itself sends when a stream fails; the openai client raises on it."""
    return b"data: " + _error(message, type_, None, code) + b"\n\n"


def bad_json(detail: str) -> ApiError:
    return ApiError(
        400,
        f"We could not parse the JSON body of your request ({detail}).",
        code="invalid_json",
    )


def too_large(limit: int, server: str) -> ApiError:
    """413 for a body over ``limit``; ``server`` names whose limit it is."""
    return ApiError(
        413, f"Request body exceeds the {server}'s limit of {limit} bytes.", code="body_too_large"
    )
