"""ACL, SCRAM credential and client quota routes of the controller's HTTP service.

Reads (GET) are answered by any controller from its committed image; writes go to the active
controller. Bodies and answers are the contract's (``metadata/api/security.py``, where the
payloads are documented). A refused request as a whole (a DescribeAcls filter with an UNKNOWN
part) is answered with the error body; per-item failures (one ACL of a CreateAcls, one user of
an AlterUserScramCredentials) are answered 200 with each item's error, as Kafka's APIs do.
Who may call these routes is the controllers' HTTP authorization's business (issue 11's doors).
"""

from __future__ import annotations

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.client_quotas import (
    DescribeClientQuotasResponse,
    alter_client_quotas_request_from_json,
    alter_client_quotas_response_to_json,
    describe_client_quotas_request_from_json,
    describe_client_quotas_response_to_json,
)
from pykraft.metadata.api.delegation_tokens import (
    create_request_from_json,
    create_response_to_json,
    expire_request_from_json,
    expiry_response_to_json,
    renew_request_from_json,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.security import (
    ACL_FIELDS,
    DescribeAclsRequest,
    acl_filter_from_values,
    alter_scram_request_from_json,
    alter_scram_response_to_json,
    create_acls_request_from_json,
    create_acls_response_to_json,
    delete_acls_request_from_json,
    delete_acls_response_to_json,
    describe_acls_response_to_json,
    describe_scram_response_to_json,
    describe_scram_users_from_query,
)
from pykraft.metadata.client_quotas import DescribeError, describe_client_quotas
from pykraft.quorum.managers.acls import describe_acls
from pykraft.quorum.managers.scram import describe_user_scram_credentials
from pykraft.quorum.service_http import add_routes, json_response, node_of, raise_for, read_body


async def create_acls(request: web.Request) -> web.Response:
    create = await read_body(request, create_acls_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.create_acls(image, create, now_ms)
    )
    return json_response(create_acls_response_to_json(response))


async def get_acls(request: web.Request) -> web.Response:
    acl_filter = acl_filter_from_values({k: request.query.get(k) for k in ACL_FIELDS})
    response = describe_acls(node_of(request).view.image, DescribeAclsRequest(acl_filter))
    raise_for(response.error)
    return json_response(describe_acls_response_to_json(response))


async def delete_acls(request: web.Request) -> web.Response:
    delete = await read_body(request, delete_acls_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.delete_acls(image, delete, now_ms)
    )
    return json_response(delete_acls_response_to_json(response))


async def alter_scram_credentials(request: web.Request) -> web.Response:
    alter = await read_body(request, alter_scram_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.alter_user_scram_credentials(
            image, alter, now_ms
        )
    )
    return json_response(alter_scram_response_to_json(response))


async def get_scram_credentials(request: web.Request) -> web.Response:
    describe = describe_scram_users_from_query(request.query.getall("user", []))
    response = describe_user_scram_credentials(node_of(request).view.image, describe)
    raise_for(response.error)
    return json_response(describe_scram_response_to_json(response))


async def alter_client_quotas(request: web.Request) -> web.Response:
    alter = await read_body(request, alter_client_quotas_request_from_json)
    response = await node_of(request).write(
        lambda controller, image, now_ms: controller.alter_client_quotas(image, alter, now_ms)
    )
    return json_response(alter_client_quotas_response_to_json(response))


async def describe_client_quotas_route(request: web.Request) -> web.Response:
    describe = await read_body(request, describe_client_quotas_request_from_json)
    image = node_of(request).view.image
    result = describe_client_quotas(image.client_quotas, describe.components, describe.strict)
    if isinstance(result, DescribeError):
        raise_for(ApiError.of(result.error, result.message))
        raise AssertionError("raise_for refuses a failure")
    response = DescribeClientQuotasResponse(
        tuple((entity, tuple(sorted(quotas.items()))) for entity, quotas in result)
    )
    return json_response(describe_client_quotas_response_to_json(response))


async def create_delegation_token(request: web.Request) -> web.Response:
    create = await read_body(request, create_request_from_json)
    node = node_of(request)
    response = await node.write(
        lambda controller, image, now_ms: controller.delegation_token(
            image, create, now_ms, node.clock.wall_clock_ms()
        )
    )
    return json_response(create_response_to_json(response))


async def renew_delegation_token(request: web.Request) -> web.Response:
    renew = await read_body(request, renew_request_from_json)
    node = node_of(request)
    response = await node.write(
        lambda controller, image, now_ms: controller.delegation_token(
            image, renew, now_ms, node.clock.wall_clock_ms()
        )
    )
    return json_response(expiry_response_to_json(response))


async def expire_delegation_token(request: web.Request) -> web.Response:
    expire = await read_body(request, expire_request_from_json)
    node = node_of(request)
    response = await node.write(
        lambda controller, image, now_ms: controller.delegation_token(
            image, expire, now_ms, node.clock.wall_clock_ms()
        )
    )
    return json_response(expiry_response_to_json(response))


def add_security_routes(app: web.Application) -> None:
    add_routes(
        app,
        [
            (routes.CREATE_ACLS, create_acls),
            (routes.DESCRIBE_ACLS, get_acls),
            (routes.DELETE_ACLS, delete_acls),
            (routes.ALTER_SCRAM_CREDENTIALS, alter_scram_credentials),
            (routes.DESCRIBE_SCRAM_CREDENTIALS, get_scram_credentials),
            (routes.ALTER_CLIENT_QUOTAS, alter_client_quotas),
            (routes.DESCRIBE_CLIENT_QUOTAS, describe_client_quotas_route),
            (routes.CREATE_DELEGATION_TOKEN, create_delegation_token),
            (routes.RENEW_DELEGATION_TOKEN, renew_delegation_token),
            (routes.EXPIRE_DELEGATION_TOKEN, expire_delegation_token),
        ],
    )
