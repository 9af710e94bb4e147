"""ACL and SCRAM routes end to end: the broker's ControllerClient against one real controller
process (POST/GET/DELETE /v1/acls, POST/GET /v1/scram-credentials)."""

from __future__ import annotations

import asyncio
from typing import Any

import attrs
import pytest

from pykraft.broker.controller_client import ControllerClient, ControllerRequestError
from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import ScramMechanism, salted_password
from tests.integration.conftest import Cluster, HttpError

pytestmark = pytest.mark.integration

READ_FOO = AclBinding(
    resource_type=ResourceType.TOPIC,
    resource_name="foo",
    pattern_type=PatternType.PREFIXED,
    principal="User:alice",
    host="*",
    operation=AclOperation.READ,
    permission_type=AclPermissionType.ALLOW,
)
SHA512 = ScramMechanism.SCRAM_SHA_512


def run(coroutine: Any) -> Any:
    return asyncio.run(asyncio.wait_for(coroutine, timeout=60))


def test_acls_and_scram_credentials_over_http(cluster_factory: Any) -> None:
    cluster: Cluster = cluster_factory(size=1)
    controller = cluster.wait_for_leader()
    salt = b"0123456789abcdef"

    async def scenario() -> None:
        async with ControllerClient([controller.url]) as client:
            invalid = attrs.evolve(READ_FOO, principal="alice")
            created = await client.create_acls([READ_FOO, invalid])
            assert [e.error.name for e in created.results] == ["NONE", "INVALID_REQUEST"]
            assert (created.results[1].message or "").startswith(
                "Could not parse principal from `alice`"
            )
            match = AclBindingFilter(resource_name="foobar", pattern_type=PatternType.MATCH)
            assert await client.describe_acls(match) == (READ_FOO,)
            assert await client.describe_acls(AclBindingFilter(principal="User:bob")) == ()
            with pytest.raises(ControllerRequestError) as refused:
                await client.describe_acls(AclBindingFilter(operation=AclOperation.UNKNOWN))
            assert (refused.value.status, refused.value.error) == (400, "INVALID_REQUEST")
            deleted = await client.delete_acls([AclBindingFilter(principal="User:alice")])
            assert deleted.results[0].matching_acls == (READ_FOO,)
            assert await client.describe_acls(AclBindingFilter()) == ()

            upsertion = ScramCredentialUpsertion(
                name="alice",
                mechanism=SHA512,
                iterations=8192,
                salt=salt,
                salted_password=salted_password(SHA512, "secret", salt, 8192),
            )
            altered = await client.alter_user_scram_credentials(
                AlterUserScramCredentialsRequest(
                    deletions=(ScramCredentialDeletion("bob", SHA512),), upsertions=(upsertion,)
                )
            )
            assert {r.user: r.error.error.name for r in altered.results} == {
                "bob": "RESOURCE_NOT_FOUND",
                "alice": "NONE",
            }
            described = await client.describe_user_scram_credentials()
            (alice,) = described.results
            assert (alice.user, alice.credential_infos[0].mechanism) == ("alice", SHA512)
            assert alice.credential_infos[0].iterations == 8192
            some = await client.describe_user_scram_credentials(["alice", "zed"])
            assert [r.error.error.name for r in some.results] == ["NONE", "RESOURCE_NOT_FOUND"]

    run(scenario())
    # Neither the password nor the salted password reaches the controller's log output.
    assert "secret" not in controller.log_tail(1000)
    # Raw HTTP: a name Kafka does not define is a 400 with a sentence.
    bad = {
        "resource_type": "TOPICS",
        "resource_name": "x",
        "principal": "User:a",
        "operation": "READ",
        "permission_type": "ALLOW",
    }
    with pytest.raises(HttpError) as refused:
        cluster.request("POST", "/v1/acls", {"creations": [bad]})
    assert refused.value.status == 400 and refused.value.body["error"] == "INVALID_REQUEST"
    assert "'resource_type' must be one of" in refused.value.body["message"]
