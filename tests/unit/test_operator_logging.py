"""The operator's log lines (sits_operator.__main__.configure_logging): one JSON object a
line that a log pipeline can parse, whatever the message holds, with the handlers' extras."""

from __future__ import annotations

import json
import logging
from collections.abc import Iterator
from typing import Any

import pytest

from sits_operator.__main__ import configure_logging


@pytest.fixture
def restored_logging() -> Iterator[None]:
    """configure_logging changes process-wide loggers; put them back for the next test."""
    names = ("", "kopf.objects", "asyncio")
    saved = {
        n: (
            logging.getLogger(n).level,
            logging.getLogger(n).propagate,
            logging.getLogger(n).handlers[:],
        )
        for n in names
    }
    yield
    for n, (level, propagate, handlers) in saved.items():
        logger = logging.getLogger(n)
        logger.setLevel(level)
        logger.propagate = propagate
        logger.handlers[:] = handlers


def lines(err: str) -> list[dict[str, Any]]:
    return [json.loads(line) for line in err.splitlines() if line.strip()]


@pytest.mark.usefixtures("restored_logging")
def test_a_line_is_json_with_logger_severity_and_extras(capsys: pytest.CaptureFixture[str]) -> None:
    configure_logging(verbose=False)
    log = logging.getLogger("sits_operator.reconcile")
    log.info('applied "quoted"\n%s', "two lines", extra={"kind": "Deployment", "child": "c-1"})
    log.debug("hidden unless verbose")
    (line,) = lines(capsys.readouterr().err)
    assert line["message"] == 'applied "quoted"\ntwo lines'
    assert (line["logger"], line["severity"]) == ("sits_operator.reconcile", "info")
    assert (line["kind"], line["child"]) == ("Deployment", "c-1")
    assert line["timestamp"].endswith("+00:00")


@pytest.mark.usefixtures("restored_logging")
def test_kopf_per_object_lines_carry_the_object_and_are_terse_unless_verbose(
    capsys: pytest.CaptureFixture[str],
) -> None:
    ref = {"kind": "SitsDeployment", "namespace": "team-a", "name": "chat"}
    kopf_objects = logging.getLogger("kopf.objects")
    configure_logging(verbose=False)
    kopf_objects.info("Handler succeeded.", extra={"k8s_ref": ref, "k8s_skip": True})
    kopf_objects.warning("Patching failed.", extra={"k8s_ref": ref, "k8s_skip": True})
    (line,) = lines(capsys.readouterr().err)
    assert (line["message"], line["object"], line["severity"]) == ("Patching failed.", ref, "warn")
    assert "k8s_skip" not in line
    configure_logging(verbose=True)
    kopf_objects.info("Handler succeeded.", extra={"k8s_ref": ref})
    assert [x["message"] for x in lines(capsys.readouterr().err)] == ["Handler succeeded."]
