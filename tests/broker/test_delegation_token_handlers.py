"""CreateDelegationToken, RenewDelegationToken, ExpireDelegationToken and DescribeDelegationToken
through ``KafkaApis.dispatch``: Create/Renew/Expire reach the in-process ``QuorumController``,
Describe reads the broker's image. Mirrors Kafka's ``DelegationTokenRequestsTest`` (create,
describe, renew, expire round trip), ``DelegationTokenRequestsOnPlainTextTest`` (every API
answers DELEGATION_TOKEN_REQUEST_NOT_ALLOWED without authentication),
``DelegationTokenRequestsWithDisableTokenFeatureTest`` (AUTH_DISABLED) and
``DelegationTokenEndToEndAuthorizationWithOwnerTest`` (KIP-373: CREATE_TOKENS on the owner,
DESCRIBE_TOKENS)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.auth.acl import AclBinding, AclOperation, ResourceType
from pykraft.metadata.auth.principal import ANONYMOUS, KafkaPrincipal, user
from pykraft.metadata.delegation_tokens import token_hmac
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.token_messages import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DescribeDelegationTokenRequest,
    DescribeDelegationTokenResponse,
    ExpireDelegationTokenRequest,
    ExpireDelegationTokenResponse,
    RenewDelegationTokenRequest,
    RenewDelegationTokenResponse,
)
from pykraft.quorum.controller import QuorumController
from pykraft.quorum.managers.settings import ControllerSettings
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import NOW_MS, Cluster, InProcessController, services
from tests.broker.test_authorization import CAROL, acl, authorizer, dispatch

SECRET = "token-secret"
BOB = user("bob")


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_and_birds(0))


def apis_with(
    cluster: Cluster, *bindings: AclBinding, secret: str | None = SECRET
) -> tuple[KafkaApis, InProcessController]:
    controller = InProcessController(cluster)
    controller.controller = QuorumController(
        rng=random.Random(7),
        now_ms=NOW_MS,
        settings=ControllerSettings(delegation_token_secret_key=secret),
    )
    overrides: dict[str, Any] = {"controller": controller, "delegation_token_secret_key": secret}
    if bindings:
        overrides["authorizer"] = authorizer(*bindings)
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster, **overrides)))
    return apis, controller


def create(
    apis: KafkaApis,
    version: int = 3,
    principal: KafkaPrincipal = CAROL,
    owner: str | None = None,
    renewers: tuple[str, ...] = (),
) -> Any:
    renewer = CreateDelegationTokenRequest.CreatableRenewers
    request = CreateDelegationTokenRequest(
        version=version,
        owner_principal_type="User" if owner else None,
        owner_principal_name=owner,
        renewers=[renewer(principal_type="User", principal_name=n) for n in renewers],
        max_lifetime_ms=-1,
    )
    body = dispatch(apis, ApiKey.CREATE_DELEGATION_TOKEN, version, request, principal)
    return CreateDelegationTokenResponse.decode(body, version=version)


def timestamps(response: Any) -> tuple[int, int, int]:
    return response.issue_timestamp_ms, response.expiry_timestamp_ms, response.max_timestamp_ms


def renew(apis: KafkaApis, hmac: bytes, principal: KafkaPrincipal = CAROL) -> Any:
    request = RenewDelegationTokenRequest(version=2, hmac=hmac, renew_period_ms=-1)
    body = dispatch(apis, ApiKey.RENEW_DELEGATION_TOKEN, 2, request, principal)
    return RenewDelegationTokenResponse.decode(body, version=2)


def expire(apis: KafkaApis, hmac: bytes, period_ms: int, principal: KafkaPrincipal = CAROL) -> Any:
    request = ExpireDelegationTokenRequest(version=2, hmac=hmac, expiry_time_period_ms=period_ms)
    body = dispatch(apis, ApiKey.EXPIRE_DELEGATION_TOKEN, 2, request, principal)
    return ExpireDelegationTokenResponse.decode(body, version=2)


def describe(
    apis: KafkaApis,
    owners: list[str] | None = None,
    principal: KafkaPrincipal = CAROL,
    version: int = 3,
) -> Any:
    owner = DescribeDelegationTokenRequest.DescribeDelegationTokenOwner
    request = DescribeDelegationTokenRequest(
        version=version,
        owners=None
        if owners is None
        else [owner(principal_type="User", principal_name=n) for n in owners],
    )
    body = dispatch(apis, ApiKey.DESCRIBE_DELEGATION_TOKEN, version, request, principal)
    return DescribeDelegationTokenResponse.decode(body, version=version)


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_create_describe_renew_expire(cluster: Cluster, version: int) -> None:
    apis, controller = apis_with(cluster)
    created = create(apis, version=version, renewers=("dan",))
    assert created.error_code == Errors.NONE
    assert (created.principal_type, created.principal_name) == ("User", "carol")
    assert bytes(created.hmac) == token_hmac(created.token_id, SECRET)
    assert created.expiry_timestamp_ms == NOW_MS + 24 * 3600_000
    if version >= 3:
        assert created.token_requester_principal_name == "carol"
    [token] = describe(apis).tokens
    assert token.token_id == created.token_id and bytes(token.hmac) == bytes(created.hmac)
    assert [(r.principal_type, r.principal_name) for r in token.renewers] == [("User", "dan")]
    renewed = renew(apis, bytes(created.hmac), principal=user("dan"))
    assert renewed.error_code == Errors.NONE
    assert renew(apis, bytes(created.hmac), principal=BOB).error_code == (
        Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    )
    assert expire(apis, bytes(created.hmac), -1).error_code == Errors.NONE
    assert describe(apis).tokens == []
    assert renew(apis, bytes(created.hmac)).error_code == Errors.DELEGATION_TOKEN_NOT_FOUND
    assert [name for name, _ in controller.calls] == [
        "create_delegation_token",
        "renew_delegation_token",
        "renew_delegation_token",
        "expire_delegation_token",
        "renew_delegation_token",
    ]


def test_unauthenticated_connections_may_not_use_tokens(cluster: Cluster) -> None:
    apis, controller = apis_with(cluster)
    not_allowed = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    refused = create(apis, principal=ANONYMOUS)
    assert refused.error_code == not_allowed
    # The broker's own refusal: ErrorTimestamp, -1 (KafkaApis / ControllerApis prepareResponse).
    assert timestamps(refused) == (-1, -1, -1)
    assert renew(apis, b"x", principal=ANONYMOUS).error_code == not_allowed
    assert expire(apis, b"x", -1, principal=ANONYMOUS).error_code == not_allowed
    assert describe(apis, principal=ANONYMOUS).error_code == not_allowed
    assert controller.calls == []


def test_without_a_secret_key_tokens_are_disabled(cluster: Cluster) -> None:
    apis, _ = apis_with(cluster, secret=None)
    disabled = create(apis)
    assert disabled.error_code == Errors.DELEGATION_TOKEN_AUTH_DISABLED
    # The controller's refusal (DelegationTokenControlManager): only the error code is set.
    assert timestamps(disabled) == (0, 0, 0)
    assert describe(apis).error_code == Errors.DELEGATION_TOKEN_AUTH_DISABLED
    assert renew(apis, b"x").error_code == Errors.DELEGATION_TOKEN_AUTH_DISABLED


def test_creating_for_another_owner_needs_create_tokens_on_that_user(cluster: Cluster) -> None:
    # KIP-373
    denied_apis, controller = apis_with(cluster, acl(AclOperation.DESCRIBE, "x"))
    denied = create(denied_apis, owner="bob")
    assert denied.error_code == Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED
    assert timestamps(denied) == (-1, -1, -1)
    assert controller.calls == []
    apis, _ = apis_with(cluster, acl(AclOperation.CREATE_TOKENS, "User:bob", ResourceType.USER))
    created = create(apis, owner="bob")
    assert created.error_code == Errors.NONE
    assert (created.principal_name, created.token_requester_principal_name) == ("bob", "carol")


def test_describe_lists_only_what_the_principal_may_see(cluster: Cluster) -> None:
    apis, _ = apis_with(
        cluster, acl(AclOperation.DESCRIBE_TOKENS, "User:bob", ResourceType.USER, "User:eve")
    )
    mine = create(apis)  # carol's
    bobs = create(apis, principal=BOB)
    assert [t.token_id for t in describe(apis).tokens] == [mine.token_id]
    assert [t.token_id for t in describe(apis, principal=BOB).tokens] == [bobs.token_id]
    # eve may DESCRIBE_TOKENS of bob: she sees his token, not carol's
    assert [t.token_id for t in describe(apis, principal=user("eve")).tokens] == [bobs.token_id]
    # the owner filter: nobody's tokens for an empty list, only bob's when asked
    assert describe(apis, owners=[], principal=user("eve")).tokens == []
    assert describe(apis, owners=["carol"], principal=user("eve")).tokens == []


def test_a_connection_authenticated_with_a_token_may_not_use_tokens(cluster: Cluster) -> None:
    apis, controller = apis_with(cluster)
    by_token = KafkaPrincipal("User", "carol", token_authenticated=True)
    not_allowed = Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED
    assert create(apis, principal=by_token).error_code == not_allowed
    assert describe(apis, principal=by_token).error_code == not_allowed
    assert controller.calls == []
