"""ACL and SCRAM credential routes of the controller's HTTP API: types and JSON codec.

The requests are the pure controller's inputs (Kafka's CreateAcls, DescribeAcls, DeleteAcls,
AlterUserScramCredentials and DescribeUserScramCredentials, KIP-140 and KIP-554), so that a
broker forwarding those Kafka APIs and an operator's tool send the same thing. Enum values are
Kafka's names (``TOPIC``, ``PREFIXED``, ``READ``, ``ALLOW``, ``SCRAM-SHA-512``), read in any case;
bytes are standard base64. Errors: ``errors.py``.

POST   /v1/acls {"creations": [ACL]}  -> {"results": [{error, message}]}
GET    /v1/acls?resource_type=&resource_name=&pattern_type=&principal=&host=&operation=
              &permission_type=         (a filter; each parameter optional)
                                       -> {"acls": [ACL]}
DELETE /v1/acls {"filters": [FILTER]} -> {"results": [{error, message, "matching_acls": [ACL]}]}
POST   /v1/scram-credentials {"deletions": [{name, mechanism}],
              "upsertions": [{name, mechanism, iterations, salt, salted_password}]}
                                       -> {"results": [{user, error, message}]}
GET    /v1/scram-credentials?user=a&user=b   (no user: every user)
                                       -> {"results": [{user, error, message,
                                           "credential_infos": [{mechanism, iterations}]}]}

ACL = {resource_type, resource_name, pattern_type, principal, host, operation,
permission_type}; a FILTER is the same with every field optional (null or absent = ANY).
The salted password is what Kafka's clients send (``metadata.auth.scram``); it is never
written to the log and never appears in a repr, and a description carries only mechanism and
iteration count.
"""

from __future__ import annotations

import base64
import binascii
import enum
from collections.abc import Mapping, Sequence
from typing import TypeVar

import attrs

from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import ScramMechanism

# Bounds (STYLE.md §7): Kafka has none per request but its controller writes at most
# MAX_RECORDS_PER_USER_OP (10,000) records in one batch.
MAX_ACL_CREATIONS = 1000
MAX_ACL_FILTERS = 100
MAX_SCRAM_ALTERATIONS = 1000
MAX_SCRAM_USERS = 1000

E = TypeVar("E", bound=enum.Enum)


# ---------------------------------------------------------------------------- ACLs


@attrs.frozen
class CreateAclsRequest:
    creations: tuple[AclBinding, ...]


@attrs.frozen
class CreateAclsResponse:
    # One per creation, in order.
    results: tuple[ApiError, ...]


@attrs.frozen
class DescribeAclsRequest:
    filter: AclBindingFilter


@attrs.frozen
class DescribeAclsResponse:
    error: ApiError = SUCCESS
    acls: tuple[AclBinding, ...] = ()


@attrs.frozen
class DeleteAclsRequest:
    filters: tuple[AclBindingFilter, ...]


@attrs.frozen
class DeleteAclsFilterResult:
    error: ApiError
    matching_acls: tuple[AclBinding, ...] = ()


@attrs.frozen
class DeleteAclsResponse:
    # One per filter, in order.
    results: tuple[DeleteAclsFilterResult, ...]


def _enum_from_json(cls: type[E], text: str, what: str) -> E:
    member = cls.__members__.get(text.upper().replace("-", "_"))
    if member is None:
        names = ", ".join(cls.__members__)
        raise JsonBodyError(f"The field {what!r} must be one of {names}; got {text!r}.")
    return member


def acl_to_json(acl: AclBinding) -> JsonObject:
    return {
        "resource_type": acl.resource_type.name,
        "resource_name": acl.resource_name,
        "pattern_type": acl.pattern_type.name,
        "principal": acl.principal,
        "host": acl.host,
        "operation": acl.operation.name,
        "permission_type": acl.permission_type.name,
    }


def acl_from_json(fields: Fields) -> AclBinding:
    """Every field required except ``host`` ("*") and ``pattern_type`` (LITERAL), as in
    ``kafka-acls``; whether the values make a valid ACL is the controller's check."""
    return AclBinding(
        resource_type=_enum_from_json(
            ResourceType, fields.string("resource_type"), "resource_type"
        ),
        resource_name=fields.string("resource_name"),
        pattern_type=_enum_from_json(
            PatternType, fields.string("pattern_type", "LITERAL"), "pattern_type"
        ),
        principal=fields.string("principal"),
        host=fields.string("host", "*"),
        operation=_enum_from_json(AclOperation, fields.string("operation"), "operation"),
        permission_type=_enum_from_json(
            AclPermissionType, fields.string("permission_type"), "permission_type"
        ),
    )


def acl_filter_to_json(acl_filter: AclBindingFilter) -> JsonObject:
    return {
        "resource_type": acl_filter.resource_type.name,
        "resource_name": acl_filter.resource_name,
        "pattern_type": acl_filter.pattern_type.name,
        "principal": acl_filter.principal,
        "host": acl_filter.host,
        "operation": acl_filter.operation.name,
        "permission_type": acl_filter.permission_type.name,
    }


def acl_filter_from_values(values: Mapping[str, str | None]) -> AclBindingFilter:
    """A filter from a JSON object's or a query string's values (absent or null = ANY)."""

    def pick(cls: type[E], name: str, default: E) -> E:
        text = values.get(name)
        return default if text is None else _enum_from_json(cls, text, name)

    return AclBindingFilter(
        resource_type=pick(ResourceType, "resource_type", ResourceType.ANY),
        resource_name=values.get("resource_name"),
        pattern_type=pick(PatternType, "pattern_type", PatternType.ANY),
        principal=values.get("principal"),
        host=values.get("host"),
        operation=pick(AclOperation, "operation", AclOperation.ANY),
        permission_type=pick(AclPermissionType, "permission_type", AclPermissionType.ANY),
    )


_FILTER_FIELDS = (
    "resource_type",
    "resource_name",
    "pattern_type",
    "principal",
    "host",
    "operation",
    "permission_type",
)


def acl_filter_from_json(fields: Fields) -> AclBindingFilter:
    return acl_filter_from_values({name: fields.optional_string(name) for name in _FILTER_FIELDS})


def acl_filter_to_query(acl_filter: AclBindingFilter) -> dict[str, str]:
    """The query parameters of ``GET /v1/acls`` (ANY and None are left out)."""
    values = acl_filter_to_json(acl_filter)
    return {k: v for k, v in values.items() if v is not None and v != "ANY"}


def _bounded(items: Sequence[Fields], maximum: int, what: str) -> Sequence[Fields]:
    if len(items) > maximum:
        raise JsonBodyError(f"At most {maximum} {what} per request; got {len(items)}.")
    return items


def create_acls_request_to_json(request: CreateAclsRequest) -> JsonObject:
    return {"creations": [acl_to_json(acl) for acl in request.creations]}


def create_acls_request_from_json(fields: Fields) -> CreateAclsRequest:
    creations = _bounded(fields.objects("creations"), MAX_ACL_CREATIONS, "creations")
    return CreateAclsRequest(tuple(acl_from_json(item) for item in creations))


def create_acls_response_to_json(response: CreateAclsResponse) -> JsonObject:
    return {"results": [error_field_to_json(error) for error in response.results]}


def create_acls_response_from_json(fields: Fields) -> CreateAclsResponse:
    return CreateAclsResponse(tuple(error_field_from_json(r) for r in fields.objects("results")))


def describe_acls_response_to_json(response: DescribeAclsResponse) -> JsonObject:
    assert response.error.is_success(), "a refused describe is answered with the error body"
    return {"acls": [acl_to_json(acl) for acl in response.acls]}


def describe_acls_response_from_json(fields: Fields) -> DescribeAclsResponse:
    return DescribeAclsResponse(acls=tuple(acl_from_json(a) for a in fields.objects("acls")))


def delete_acls_request_to_json(request: DeleteAclsRequest) -> JsonObject:
    return {"filters": [acl_filter_to_json(f) for f in request.filters]}


def delete_acls_request_from_json(fields: Fields) -> DeleteAclsRequest:
    filters = _bounded(fields.objects("filters"), MAX_ACL_FILTERS, "filters")
    return DeleteAclsRequest(tuple(acl_filter_from_json(item) for item in filters))


def delete_acls_response_to_json(response: DeleteAclsResponse) -> JsonObject:
    return {
        "results": [
            {
                **error_field_to_json(result.error),
                "matching_acls": [acl_to_json(acl) for acl in result.matching_acls],
            }
            for result in response.results
        ]
    }


def delete_acls_response_from_json(fields: Fields) -> DeleteAclsResponse:
    return DeleteAclsResponse(
        tuple(
            DeleteAclsFilterResult(
                error=error_field_from_json(r),
                matching_acls=tuple(acl_from_json(a) for a in r.objects("matching_acls")),
            )
            for r in fields.objects("results")
        )
    )


# ---------------------------------------------------------------------------- SCRAM


@attrs.frozen
class ScramCredentialDeletion:
    name: str
    mechanism: ScramMechanism


@attrs.frozen
class ScramCredentialUpsertion:
    name: str
    mechanism: ScramMechanism
    iterations: int
    salt: bytes = attrs.field(repr=False)
    # Password-equivalent: never logged, never written to the log.
    salted_password: bytes = attrs.field(repr=False)


@attrs.frozen
class AlterUserScramCredentialsRequest:
    deletions: tuple[ScramCredentialDeletion, ...] = ()
    upsertions: tuple[ScramCredentialUpsertion, ...] = ()


@attrs.frozen
class AlterUserScramCredentialsResult:
    user: str
    error: ApiError


@attrs.frozen
class AlterUserScramCredentialsResponse:
    # One per user named in the request, in order of first mention.
    results: tuple[AlterUserScramCredentialsResult, ...]


@attrs.frozen
class DescribeUserScramCredentialsRequest:
    # None: every user with a credential.
    users: tuple[str, ...] | None = None


@attrs.frozen
class CredentialInfo:
    mechanism: ScramMechanism
    iterations: int


@attrs.frozen
class DescribeUserScramCredentialsResult:
    user: str
    error: ApiError
    credential_infos: tuple[CredentialInfo, ...] = ()


@attrs.frozen
class DescribeUserScramCredentialsResponse:
    error: ApiError = SUCCESS
    results: tuple[DescribeUserScramCredentialsResult, ...] = ()


def _mechanism_from_json(text: str) -> ScramMechanism:
    """``SCRAM-SHA-256`` (or Kafka's enum name); any other name reads as UNKNOWN so that the
    controller answers UNSUPPORTED_SASL_MECHANISM, as Kafka does, rather than a 400."""
    mechanism = ScramMechanism.from_mechanism_name(text.upper().replace("_", "-"))
    return mechanism


def _bytes_from_json(fields: Fields, name: str) -> bytes:
    try:
        return base64.b64decode(fields.string(name), validate=True)
    except (binascii.Error, ValueError):
        raise JsonBodyError(f"The field {name!r} must be standard base64.") from None


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def alter_scram_request_to_json(request: AlterUserScramCredentialsRequest) -> JsonObject:
    return {
        "deletions": [
            {"name": d.name, "mechanism": d.mechanism.mechanism_name} for d in request.deletions
        ],
        "upsertions": [
            {
                "name": u.name,
                "mechanism": u.mechanism.mechanism_name,
                "iterations": u.iterations,
                "salt": _b64(u.salt),
                "salted_password": _b64(u.salted_password),
            }
            for u in request.upsertions
        ],
    }


def alter_scram_request_from_json(fields: Fields) -> AlterUserScramCredentialsRequest:
    deletions = fields.objects("deletions", [])
    upsertions = fields.objects("upsertions", [])
    _bounded([*deletions, *upsertions], MAX_SCRAM_ALTERATIONS, "alterations")
    return AlterUserScramCredentialsRequest(
        deletions=tuple(
            ScramCredentialDeletion(d.string("name"), _mechanism_from_json(d.string("mechanism")))
            for d in deletions
        ),
        upsertions=tuple(
            ScramCredentialUpsertion(
                name=u.string("name"),
                mechanism=_mechanism_from_json(u.string("mechanism")),
                iterations=u.integer("iterations"),
                salt=_bytes_from_json(u, "salt"),
                salted_password=_bytes_from_json(u, "salted_password"),
            )
            for u in upsertions
        ),
    )


def alter_scram_response_to_json(response: AlterUserScramCredentialsResponse) -> JsonObject:
    return {"results": [{"user": r.user, **error_field_to_json(r.error)} for r in response.results]}


def alter_scram_response_from_json(fields: Fields) -> AlterUserScramCredentialsResponse:
    return AlterUserScramCredentialsResponse(
        tuple(
            AlterUserScramCredentialsResult(r.string("user"), error_field_from_json(r))
            for r in fields.objects("results")
        )
    )


def describe_scram_users_from_query(users: Sequence[str]) -> DescribeUserScramCredentialsRequest:
    if len(users) > MAX_SCRAM_USERS:
        raise JsonBodyError(f"At most {MAX_SCRAM_USERS} users per request; got {len(users)}.")
    return DescribeUserScramCredentialsRequest(tuple(users) if users else None)


def describe_scram_response_to_json(response: DescribeUserScramCredentialsResponse) -> JsonObject:
    assert response.error.is_success(), "a refused describe is answered with the error body"
    return {
        "results": [
            {
                "user": r.user,
                **error_field_to_json(r.error),
                "credential_infos": [
                    {"mechanism": c.mechanism.mechanism_name, "iterations": c.iterations}
                    for c in r.credential_infos
                ],
            }
            for r in response.results
        ]
    }


def describe_scram_response_from_json(fields: Fields) -> DescribeUserScramCredentialsResponse:
    return DescribeUserScramCredentialsResponse(
        results=tuple(
            DescribeUserScramCredentialsResult(
                user=r.string("user"),
                error=error_field_from_json(r),
                credential_infos=tuple(
                    CredentialInfo(
                        _mechanism_from_json(c.string("mechanism")), c.integer("iterations")
                    )
                    for c in r.objects("credential_infos")
                ),
            )
            for r in fields.objects("results")
        )
    )
