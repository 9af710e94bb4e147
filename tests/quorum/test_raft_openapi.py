"""/v1/openapi.json documents exactly the routes the controller serves (DESIGN.md §3.6), and
the controller serves exactly the routes of the contract (``metadata/api/routes.py``): the API's
and the web console's HTML pages (``CONSOLE_ROUTES``, not part of the JSON API)."""

from typing import Any, cast

from pykraft.metadata.api.routes import CONSOLE_ROUTES, ROUTES
from pykraft.quorum.auth_http import Doors
from pykraft.quorum.openapi import openapi_document
from pykraft.quorum.service import build_app


def test_the_controller_serves_every_route_of_the_contract() -> None:
    app = build_app(cast(Any, object()), Doors.open())  # the node is only read by handlers
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    assert len(ROUTES) >= 20
    assert served == {(route.method, route.template) for route in ROUTES + CONSOLE_ROUTES}


def test_openapi_lists_every_route() -> None:
    documented = {
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        for method in operations
    }
    assert documented == {(route.method, route.template) for route in ROUTES}
