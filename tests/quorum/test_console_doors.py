"""The web console is behind the API's doors: on a secure (TLS) controller an anonymous browser
gets 401 with the Basic challenge on every console page, and no page handler runs. Checked on
the routes ``add_console_routes`` registers, with aiohttp's mocked requests (no sockets)."""

from __future__ import annotations

import asyncio
import json

import attrs
import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from pykraft.metadata.api.routes import CONSOLE_ROUTES
from pykraft.quorum.auth import BrokerBinding
from pykraft.quorum.auth_http import DOORS_KEY, Doors
from pykraft.quorum.service_console import add_console_routes
from pykraft.quorum.service_http import error_middleware
from pykraft.storage.system_clock import SystemClock

TLS_DOORS = Doors(tls=True, mapping_rules=(), authorizer=None, binding=BrokerBinding())
PATHS = [route.path(name="orders", group="readers") for route in CONSOLE_ROUTES]


def test_every_console_route_is_registered() -> None:
    app = web.Application()
    add_console_routes(app, SystemClock().monotonic_ms)
    registered = {(r.method, r.resource.canonical) for r in app.router.routes() if r.resource}
    assert registered == {(route.method, route.template) for route in CONSOLE_ROUTES}


@pytest.mark.parametrize("path", PATHS)
def test_an_anonymous_browser_is_asked_to_log_in(path: str) -> None:
    app = web.Application()
    app[DOORS_KEY] = TLS_DOORS  # no NODE_KEY: a handler that ran would fail with KeyError
    add_console_routes(app, SystemClock().monotonic_ms)

    async def answer() -> web.StreamResponse:
        probe = make_mocked_request("GET", path, app=app)
        match = await app.router.resolve(probe)
        request = make_mocked_request("GET", path, app=app, match_info=match)
        return await error_middleware(request, match.handler)

    response = asyncio.run(answer())
    assert isinstance(response, web.Response)
    assert response.status == 401
    assert response.headers["WWW-Authenticate"] == 'Basic realm="pykraft"'
    assert isinstance(response.body, bytes)
    assert json.loads(response.body)["error"] == "SASL_AUTHENTICATION_FAILED"


@attrs.frozen
class ClusterDescribeOnly:
    """ACLs granting DESCRIBE on the cluster only: no group, no topic, no DESCRIBE_CONFIGS."""

    def authorize(
        self, principal: object, host: str, operation: str, resource_type: str, name: str
    ) -> bool:
        return resource_type == "CLUSTER" and operation == "DESCRIBE"


@pytest.mark.parametrize(
    ("path", "error"),
    [
        ("/console/groups/readers", "GROUP_AUTHORIZATION_FAILED"),
        ("/console/groups?group=..", "GROUP_AUTHORIZATION_FAILED"),  # the dot-only ids' form
        ("/console/journal", "CLUSTER_AUTHORIZATION_FAILED"),  # needs DESCRIBE_CONFIGS
    ],
)
def test_describe_on_the_cluster_opens_no_group_and_no_journal(path: str, error: str) -> None:
    app = web.Application()
    app[DOORS_KEY] = Doors(
        tls=False, mapping_rules=(), authorizer=ClusterDescribeOnly(), binding=BrokerBinding()
    )
    # No NODE_KEY: a handler that got past its check would fail.
    add_console_routes(app, SystemClock().monotonic_ms)

    async def answer() -> web.StreamResponse:
        probe = make_mocked_request("GET", path, app=app)
        match = await app.router.resolve(probe)
        request = make_mocked_request("GET", path, app=app, match_info=match)
        return await error_middleware(request, match.handler)

    response = asyncio.run(answer())
    assert isinstance(response, web.Response) and isinstance(response.body, bytes)
    assert (response.status, json.loads(response.body)["error"]) == (403, error)
