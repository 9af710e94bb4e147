"""The controller's HTTP doors as the middleware answers them, on aiohttp's mocked requests (no
sockets): a caller the doors cannot authenticate gets 401 with the challenge RFC 7235 §3.1
requires, and the handler never runs."""

from __future__ import annotations

import asyncio
import base64
import json

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from pykraft.metadata.api.errors import ErrorBody, status_of
from pykraft.metadata.api.routes import CLUSTER
from pykraft.protocol.errors import Errors
from pykraft.quorum.auth import BrokerBinding
from pykraft.quorum.auth_http import DOORS_KEY, Doors, Refused, guard
from pykraft.quorum.service_http import error_middleware

# A TLS listener without an authorizer: callers must still say who they are.
TLS_DOORS = Doors(tls=True, mapping_rules=(), authorizer=None, binding=BrokerBinding())


def answer(headers: dict[str, str]) -> tuple[web.Response, list[str]]:
    app = web.Application()
    app[DOORS_KEY] = TLS_DOORS
    served: list[str] = []

    async def handler(request: web.Request) -> web.StreamResponse:
        served.append(request.path)
        return web.Response(text="{}")

    request = make_mocked_request("GET", CLUSTER.template, headers=headers, app=app)
    response = asyncio.run(error_middleware(request, guard(CLUSTER, handler)))
    assert isinstance(response, web.Response)
    return response, served


@pytest.mark.parametrize(
    "headers",
    [
        {},  # neither a certificate nor Authorization
        {"Authorization": "Basic " + base64.b64encode(b"carol:wrong").decode()},
        {"Authorization": "Bearer something"},
    ],
)
def test_a_401_carries_the_basic_challenge(headers: dict[str, str]) -> None:
    """RFC 7235 §3.1: a 401 MUST carry WWW-Authenticate with a challenge (RFC 7617's Basic)."""
    response, served = answer(headers)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == 'Basic realm="pykraft"'
    assert isinstance(response.body, bytes)
    assert json.loads(response.body)["error"] == "SASL_AUTHENTICATION_FAILED"
    assert served == []


def test_only_a_401_carries_the_challenge() -> None:
    """403 (authenticated, not allowed) and the others must not ask for credentials again."""
    for error in (Errors.CLUSTER_AUTHORIZATION_FAILED, Errors.REQUEST_TIMED_OUT):
        refused = Refused(status_of(error), ErrorBody(error=error.name, message="no"))
        assert refused.status != 401 and refused.headers == {}
