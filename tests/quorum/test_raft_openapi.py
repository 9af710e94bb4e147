"""/v1/openapi.json documents exactly the routes the controller serves (DESIGN.md §3.6), and
the controller serves exactly the routes of the contract (``metadata/api/routes.py``)."""

from typing import Any, cast

from pykraft.metadata.api.routes import ROUTES
from pykraft.quorum.openapi import openapi_document
from pykraft.quorum.service import build_app


def test_the_controller_serves_every_route_of_the_contract() -> None:
    app = build_app(cast(Any, object()))  # the node is only read by handlers
    served = {
        (route.method, route.resource.canonical)
        for route in app.router.routes()
        if route.resource is not None
    }
    assert len(ROUTES) >= 20
    assert served == {(route.method, route.template) for route in ROUTES}


def test_openapi_lists_every_route() -> None:
    documented = {
        (method.upper(), path)
        for path, operations in openapi_document()["paths"].items()
        for method in operations
    }
    assert documented == {(route.method, route.template) for route in ROUTES}
