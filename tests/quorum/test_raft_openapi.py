"""/v1/openapi.json documents exactly the routes the controller serves (DESIGN.md §3.6)."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ROUTE = re.compile(r'app\.router\.add_(get|post|put|delete)\("([^"]+)"')


def test_openapi_lists_every_route() -> None:
    from quorum.openapi import openapi_document

    source = "".join((ROOT / p).read_text() for p in
                     ("quorum/service.py", "quorum/service_admin.py", "quorum/service_brokers.py"))
    routes = {(method, path) for method, path in ROUTE.findall(source)}
    documented = {(method, path) for path, operations in openapi_document()["paths"].items()
                  for method in operations}
    assert len(routes) >= 20
    assert routes == documented
