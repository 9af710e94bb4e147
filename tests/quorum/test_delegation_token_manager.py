"""The controller's delegation tokens (quorum/managers/delegation_tokens.py).

Mirrors Kafka's ``DelegationTokenControlManagerTest`` (create, renew and expire with and without
a secret key, by owner, renewer and stranger, expired tokens) and the expiry and removal cases
of ``DelegationTokenManagerTest`` (``testExpireToken``, ``testRemoveExpiredTokens``).
"""

from __future__ import annotations

import asyncio
import random
from typing import Any

import attrs
import pytest

from pykraft.metadata.api import delegation_tokens as api
from pykraft.metadata.api.delegation_tokens import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DelegationTokenExpiryResponse,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.metadata.delegation_tokens import token_hmac
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import QuorumController
from pykraft.quorum.managers.delegation_tokens import (
    MAX_TOKENS_PER_SWEEP,
    create_delegation_token,
    expire_delegation_token,
    renew_delegation_token,
    sweep_expired_tokens,
)
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.managers.settings import ControllerSettings
from pykraft.quorum.runner import sweep_expired_delegation_tokens
from tests.fake_clock import FakeClock
from tests.quorum.helpers import apply
from tests.quorum.test_controller_timer import TimedNode

DAY_MS = 24 * 3600_000
SETTINGS = ControllerSettings(delegation_token_secret_key="secret")
DISABLED = ControllerSettings()
NOW = 1_000_000


def applied(image: MetadataImage, result: ControllerResult[Any]) -> MetadataImage:
    delta = MetadataDelta(image)
    for record in result.records:
        delta.replay(record)
    return delta.apply(offset=image.offset + len(result.records), epoch=1)


def created(
    image: MetadataImage = MetadataImage.EMPTY,
    request: CreateDelegationTokenRequest | None = None,
    settings: ControllerSettings = SETTINGS,
    now_ms: int = NOW,
) -> tuple[MetadataImage, CreateDelegationTokenResponse]:
    if request is None:
        request = CreateDelegationTokenRequest(requester="User:alice", renewers=("User:renewer",))
    result = create_delegation_token(image, request, settings, random.Random(7), now_ms)
    return applied(image, result), result.response


def test_create_writes_the_token_and_answers_its_hmac() -> None:
    image, response = created()
    assert response.error.error is Errors.NONE
    assert response.owner == "User:alice" and response.requester == "User:alice"
    assert response.issue_timestamp_ms == NOW
    assert response.max_timestamp_ms == NOW + 7 * DAY_MS
    assert response.expiry_timestamp_ms == NOW + DAY_MS
    assert response.hmac == token_hmac(response.token_id, "secret")
    assert len(response.token_id) == 22  # a Kafka uuid string
    token = image.delegation_tokens.tokens[response.token_id]
    assert token.owner == "User:alice" and token.renewers == ("User:renewer",)
    assert token.expiry_timestamp_ms == response.expiry_timestamp_ms


def test_create_for_another_owner_keeps_the_requester() -> None:
    # KIP-373: a token created on behalf of an owner.
    request = CreateDelegationTokenRequest(requester="User:admin", owner="User:bob")
    image, response = created(request=request)
    token = image.delegation_tokens.tokens[response.token_id]
    assert (token.owner, token.requester) == ("User:bob", "User:admin")
    assert (response.owner, response.requester) == ("User:bob", "User:admin")


def test_an_empty_owner_means_the_requester() -> None:
    _, response = created(request=CreateDelegationTokenRequest(requester="User:a", owner=""))
    assert response.owner == "User:a"


def test_a_requested_max_lifetime_only_shortens() -> None:
    short = CreateDelegationTokenRequest(requester="User:a", max_lifetime_ms=3600_000)
    _, response = created(request=short)
    assert response.max_timestamp_ms == NOW + 3600_000
    # expiry never passes the max timestamp
    assert response.expiry_timestamp_ms == NOW + 3600_000
    long = CreateDelegationTokenRequest(requester="User:a", max_lifetime_ms=30 * DAY_MS)
    assert created(request=long)[1].max_timestamp_ms == NOW + 7 * DAY_MS


def refused_timestamps(response: CreateDelegationTokenResponse) -> tuple[int, int, int]:
    return response.issue_timestamp_ms, response.expiry_timestamp_ms, response.max_timestamp_ms


def test_create_without_a_secret_key_is_disabled() -> None:
    for settings in (DISABLED, ControllerSettings(delegation_token_secret_key="")):
        image, response = created(settings=settings)
        assert response.error.error is Errors.DELEGATION_TOKEN_AUTH_DISABLED
        assert response.owner == "User:alice"
        # DelegationTokenControlManager.createDelegationToken sets only the error code: the
        # timestamps keep the schema's default, 0 (the broker's own refusals answer -1).
        assert refused_timestamps(response) == (0, 0, 0)
        assert (response.token_id, response.hmac) == ("", b"")
        assert not image.delegation_tokens.tokens


def test_a_renewer_not_of_type_user_is_refused() -> None:
    for renewers in (("Group:ops",), ("User:ok", "nocolon")):
        request = CreateDelegationTokenRequest(requester="User:a", renewers=renewers)
        image, response = created(request=request)
        assert response.error.error is Errors.INVALID_PRINCIPAL_TYPE, renewers
        assert refused_timestamps(response) == (0, 0, 0)
        assert not image.delegation_tokens.tokens


def test_two_tokens_get_two_ids() -> None:
    image, first = created()
    request = CreateDelegationTokenRequest(requester="User:alice")
    result = create_delegation_token(image, request, SETTINGS, random.Random(7), NOW)
    assert result.response.token_id != first.token_id


def renew(
    image: MetadataImage, principal: str, hmac: bytes, period_ms: int = -1, now_ms: int = NOW
) -> ControllerResult[DelegationTokenExpiryResponse]:
    request = RenewDelegationTokenRequest(principal=principal, hmac=hmac, renew_period_ms=period_ms)
    return renew_delegation_token(image, request, SETTINGS, now_ms)


def test_owner_and_renewer_may_renew_but_not_others() -> None:
    image, token = created()
    later = NOW + 1000
    for principal in ("User:alice", "User:renewer"):
        result = renew_delegation_token(
            image,
            RenewDelegationTokenRequest(principal=principal, hmac=token.hmac, renew_period_ms=-1),
            SETTINGS,
            later,
        )
        assert result.response.error.error is Errors.NONE
        assert result.response.expiry_timestamp_ms == later + DAY_MS
        record = result.records[0]
        assert isinstance(record, DelegationTokenRecord)
        assert record.expiration_timestamp == later + DAY_MS
    stranger = renew_delegation_token(
        image,
        RenewDelegationTokenRequest(principal="User:eve", hmac=token.hmac, renew_period_ms=-1),
        SETTINGS,
        later,
    )
    assert stranger.response.error.error is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    assert stranger.records == ()


def test_the_requester_alone_may_not_renew() -> None:
    # Kafka's allowedToRenew: owner or renewers, not the requester.
    request = CreateDelegationTokenRequest(requester="User:admin", owner="User:bob")
    image, token = created(request=request)
    result = renew(image, "User:admin", token.hmac)
    assert result.response.error.error is Errors.DELEGATION_TOKEN_OWNER_MISMATCH


def test_renewal_period_is_capped_by_expiry_time_and_max_timestamp() -> None:
    image, token = created()
    short = renew(image, "User:alice", token.hmac, period_ms=5000)
    assert short.response.expiry_timestamp_ms == NOW + 5000
    long = renew(image, "User:alice", token.hmac, period_ms=3 * DAY_MS)
    assert long.response.expiry_timestamp_ms == NOW + DAY_MS
    near_max = NOW + 7 * DAY_MS - 10
    # not yet expired if renewed every day until then: renew the image's token to near_max
    image = attrs.evolve(
        image,
        delegation_tokens=attrs.evolve(
            image.delegation_tokens,
            tokens=image.delegation_tokens.tokens.set(
                token.token_id,
                attrs.evolve(
                    image.delegation_tokens.tokens[token.token_id],
                    expiry_timestamp_ms=near_max,
                ),
            ),
        ),
    )
    capped = renew(image, "User:alice", token.hmac, now_ms=near_max - 1)
    assert capped.response.expiry_timestamp_ms == NOW + 7 * DAY_MS


def test_unknown_hmac_is_not_found() -> None:
    image, token = created()
    result = renew(image, "User:alice", token_hmac(token.token_id, "other-secret"))
    assert result.response.error.error is Errors.DELEGATION_TOKEN_NOT_FOUND


def test_an_expired_token_cannot_be_renewed() -> None:
    image, token = created()
    result = renew(image, "User:alice", token.hmac, now_ms=token.expiry_timestamp_ms + 1)
    assert result.response.error.error is Errors.DELEGATION_TOKEN_EXPIRED
    # at the expiry timestamp itself it still may be (Kafka: expiry < now is expired)
    ok = renew(image, "User:alice", token.hmac, now_ms=token.expiry_timestamp_ms)
    assert ok.response.error.error is Errors.NONE


def test_renew_refuses_an_expired_token_before_checking_the_owner() -> None:
    # Kafka 3.9's renewDelegationToken: not found, expired, then owner mismatch.
    image, token = created()
    stranger = renew(image, "User:eve", token.hmac, now_ms=token.expiry_timestamp_ms + 1)
    assert stranger.response == DelegationTokenExpiryResponse(
        error=ApiError.of(Errors.DELEGATION_TOKEN_EXPIRED), expiry_timestamp_ms=0
    )


def test_renew_and_expire_without_a_secret_key_are_disabled() -> None:
    image, token = created()
    renewal = renew_delegation_token(
        image,
        RenewDelegationTokenRequest(principal="User:alice", hmac=token.hmac, renew_period_ms=1),
        DISABLED,
        NOW,
    )
    assert renewal.response.error.error is Errors.DELEGATION_TOKEN_AUTH_DISABLED
    expiry = expire_delegation_token(
        image,
        ExpireDelegationTokenRequest(
            principal="User:alice", hmac=token.hmac, expiry_time_period_ms=1
        ),
        DISABLED,
        NOW,
    )
    assert expiry.response.error.error is Errors.DELEGATION_TOKEN_AUTH_DISABLED


def expire(
    image: MetadataImage, principal: str, hmac: bytes, period_ms: int, now_ms: int = NOW + 10
) -> ControllerResult[DelegationTokenExpiryResponse]:
    request = ExpireDelegationTokenRequest(
        principal=principal, hmac=hmac, expiry_time_period_ms=period_ms
    )
    return expire_delegation_token(image, request, SETTINGS, now_ms)


@pytest.mark.parametrize("period_ms", [-1, -5000])
def test_a_negative_period_removes_the_token_and_answers_now(period_ms: int) -> None:
    # Kafka 3.9's expireDelegationToken (KAFKA-17315; SaslSslAdminIntegrationTest.
    # testExpireDelegationToken: "expireTokenOrFailWithAssert(token1, -1) < currentTimeMillis").
    image, token = created()
    result = expire(image, "User:renewer", token.hmac, period_ms)
    assert result.records == (RemoveDelegationTokenRecord(token_id=token.token_id),)
    assert result.response == DelegationTokenExpiryResponse(expiry_timestamp_ms=NOW + 10)
    assert token.token_id not in applied(image, result).delegation_tokens.tokens


def test_an_expired_token_is_refused_unless_the_period_is_negative() -> None:
    # testExpireDelegationToken: expiring an expired token with period 1 is
    # DelegationTokenExpiredException; with -1 it succeeds and removes the token.
    image, token = created()
    later = token.expiry_timestamp_ms + 1
    refused = expire(image, "User:alice", token.hmac, 1, now_ms=later)
    assert refused.response == DelegationTokenExpiryResponse(
        error=ApiError.of(Errors.DELEGATION_TOKEN_EXPIRED), expiry_timestamp_ms=0
    )
    assert refused.records == ()
    removed = expire(image, "User:alice", token.hmac, -1, now_ms=later)
    assert removed.response == DelegationTokenExpiryResponse(expiry_timestamp_ms=later)
    assert removed.records == (RemoveDelegationTokenRecord(token_id=token.token_id),)


def test_expire_checks_the_owner_before_the_expiry() -> None:
    # Kafka 3.9's order: not found, owner mismatch, then (period >= 0) expired.
    image, token = created()
    later = token.expiry_timestamp_ms + 1
    stranger = expire(image, "User:eve", token.hmac, 1, now_ms=later)
    assert stranger.response.error.error is Errors.DELEGATION_TOKEN_OWNER_MISMATCH
    unknown = expire(image, "User:alice", token_hmac(token.token_id, "x"), -1, now_ms=later)
    assert unknown.response.error.error is Errors.DELEGATION_TOKEN_NOT_FOUND


def test_a_zero_period_expires_the_token_now_and_keeps_it_until_the_sweep() -> None:
    image, token = created()
    result = expire(image, "User:alice", token.hmac, 0)
    assert result.response.expiry_timestamp_ms == NOW + 10
    after = applied(image, result)
    assert after.delegation_tokens.tokens[token.token_id].expiry_timestamp_ms == NOW + 10
    assert sweep_expired_tokens(after, NOW + 10).records == ()
    assert sweep_expired_tokens(after, NOW + 11).records == (
        RemoveDelegationTokenRecord(token_id=token.token_id),
    )


def test_a_positive_period_moves_the_expiry() -> None:
    image, token = created()
    result = expire(image, "User:alice", token.hmac, 500)
    assert result.response.expiry_timestamp_ms == NOW + 10 + 500
    after = applied(image, result).delegation_tokens.tokens[token.token_id]
    assert after.expiry_timestamp_ms == NOW + 10 + 500


def test_a_stranger_cannot_expire() -> None:
    image, token = created()
    result = expire(image, "User:eve", token.hmac, -1)
    assert result.response == DelegationTokenExpiryResponse(
        error=ApiError.of(Errors.DELEGATION_TOKEN_OWNER_MISMATCH), expiry_timestamp_ms=0
    )
    assert result.records == ()


def test_sweep_removes_only_expired_tokens() -> None:
    image, first = created()
    image, second = created(image, now_ms=NOW + DAY_MS)
    assert sweep_expired_tokens(image, NOW + DAY_MS).records == ()
    result = sweep_expired_tokens(image, NOW + DAY_MS + 1)
    assert result.records == (RemoveDelegationTokenRecord(token_id=first.token_id),)
    assert result.response == 1
    assert set(applied(image, result).delegation_tokens.tokens) == {second.token_id}


def test_sweep_is_bounded() -> None:
    image = MetadataImage.EMPTY
    rng = random.Random(1)
    delta = MetadataDelta(image)
    for _ in range(MAX_TOKENS_PER_SWEEP + 5):
        request = CreateDelegationTokenRequest(requester="User:a")
        result = create_delegation_token(delta.apply(), request, SETTINGS, rng, NOW)
        for record in result.records:
            delta.replay(record)
    image = delta.apply(offset=0, epoch=1)
    swept = sweep_expired_tokens(image, NOW + 8 * DAY_MS)
    assert len(swept.records) == MAX_TOKENS_PER_SWEEP
    assert len(sweep_expired_tokens(applied(image, swept), NOW + 8 * DAY_MS).records) == 5


def test_the_controller_dispatches_token_requests_and_sweeps_on_its_timer() -> None:
    controller = QuorumController(rng=random.Random(3), now_ms=NOW, settings=SETTINGS)
    request = CreateDelegationTokenRequest(requester="User:alice")
    result = controller.handle(MetadataImage.EMPTY, request, NOW, wall_clock_ms=NOW)
    assert result.response.error.error is Errors.NONE
    image = applied(MetadataImage.EMPTY, result)
    interval_ms = SETTINGS.delegation_token_expiry_check_interval_ms
    # With a token held, the sweep is one of the timer's deadlines.
    assert controller.next_deadline_ms(image) <= NOW + interval_ms
    sweep = controller.maybe_sweep_expired_delegation_tokens
    assert sweep(image, NOW + interval_ms - 1, NOW + interval_ms - 1) is None
    due = sweep(image, NOW + interval_ms, NOW + interval_ms)
    assert due is not None and due.records == ()
    # After a day the token has expired: the sweep removes it, then waits an interval.
    later = NOW + DAY_MS + 1
    swept = sweep(image, later, later)
    assert swept is not None and swept.response == 1
    assert sweep(image, later + 1, later + 1) is None


WALL_MS = 1_795_000_000_000  # a Unix time in 2026; the monotonic clock starts near 0


def test_token_times_are_unix_times_and_the_sweep_runs_on_the_monotonic_clock() -> None:
    # Kafka dates tokens with time.milliseconds(): clients read these timestamps and every
    # controller compares them, so a monotonic time (meaningless across processes) is a bug.
    controller = QuorumController(rng=random.Random(3), now_ms=0, settings=SETTINGS)
    request = CreateDelegationTokenRequest(requester="User:alice")
    result = controller.delegation_token(MetadataImage.EMPTY, request, 5, WALL_MS)
    response = result.response
    assert (response.issue_timestamp_ms, response.expiry_timestamp_ms) == (
        WALL_MS,
        WALL_MS + DAY_MS,
    )
    image = applied(MetadataImage.EMPTY, result)
    interval_ms = SETTINGS.delegation_token_expiry_check_interval_ms
    sweep = controller.maybe_sweep_expired_delegation_tokens
    # due by the monotonic clock, but by the wall clock the token lives: nothing removed
    kept = sweep(image, interval_ms, WALL_MS + DAY_MS)
    assert kept is not None and kept.records == ()
    # not due by the monotonic clock, however late the wall clock
    assert sweep(image, interval_ms + 1, WALL_MS + 2 * DAY_MS) is None
    removed = sweep(image, 2 * interval_ms, WALL_MS + DAY_MS + 1)
    assert removed is not None and removed.response == 1
    expire = ExpireDelegationTokenRequest(
        principal="User:alice", hmac=response.hmac, expiry_time_period_ms=-1
    )
    expired = controller.delegation_token(image, expire, 7, WALL_MS + 9)
    assert expired.response.expiry_timestamp_ms == WALL_MS + 9


def test_handle_dates_tokens_by_the_wall_clock_it_is_given() -> None:
    # handle() takes both clocks; a token request without the wall clock is refused rather
    # than dated by the monotonic now_ms.
    controller = QuorumController(rng=random.Random(3), now_ms=0, settings=SETTINGS)
    create = CreateDelegationTokenRequest(requester="User:alice")
    result = controller.handle(MetadataImage.EMPTY, create, 5, wall_clock_ms=WALL_MS)
    assert (result.response.issue_timestamp_ms, result.response.max_timestamp_ms) == (
        WALL_MS,
        WALL_MS + 7 * DAY_MS,
    )
    image = applied(MetadataImage.EMPTY, result)
    hmac = result.response.hmac
    renew = RenewDelegationTokenRequest(principal="User:alice", hmac=hmac, renew_period_ms=-1)
    expire = ExpireDelegationTokenRequest(
        principal="User:alice", hmac=hmac, expiry_time_period_ms=0
    )
    for request in (create, renew, expire):
        with pytest.raises(TypeError, match="wall_clock_ms"):
            controller.handle(image, request, 6)
    renewed = controller.handle(image, renew, 6, wall_clock_ms=WALL_MS + 1)
    assert renewed.response.expiry_timestamp_ms == WALL_MS + 1 + DAY_MS
    expired = controller.handle(image, expire, 7, wall_clock_ms=WALL_MS + 2)
    assert expired.response.expiry_timestamp_ms == WALL_MS + 2


def test_the_timer_sweeps_by_the_wall_clock() -> None:
    # quorum.runner's sweep hands the controller its node's wall clock.
    clock = FakeClock(0, wall_clock_start_ms=WALL_MS)
    node = TimedNode(clock, SETTINGS)
    request = CreateDelegationTokenRequest(requester="User:alice", max_lifetime_ms=1000)
    created = node.controller.delegation_token(node.image, request, 0, clock.wall_clock_ms())
    node.image = apply(node.image, created.records)
    assert created.response.max_timestamp_ms == WALL_MS + 1000
    clock.now_ms = SETTINGS.delegation_token_expiry_check_interval_ms  # due; wall: +1 hour
    asyncio.run(sweep_expired_delegation_tokens(node))
    assert created.response.token_id not in node.image.delegation_tokens.tokens
    assert [type(record) for _, record in node.written] == [RemoveDelegationTokenRecord]


def test_the_route_json_round_trips() -> None:
    create = CreateDelegationTokenRequest(
        requester="User:a", owner="User:b", renewers=("User:c",), max_lifetime_ms=5
    )
    assert api.create_request_from_json(Fields(api.create_request_to_json(create))) == create
    _, response = created()
    assert api.create_response_from_json(Fields(api.create_response_to_json(response))) == (
        response
    )
    renewal = RenewDelegationTokenRequest(principal="User:a", hmac=b"\x00\xff", renew_period_ms=-1)
    assert api.renew_request_from_json(Fields(api.renew_request_to_json(renewal))) == renewal
    expiry = ExpireDelegationTokenRequest(
        principal="User:a", hmac=b"\x01", expiry_time_period_ms=-1
    )
    assert api.expire_request_from_json(Fields(api.expire_request_to_json(expiry))) == expiry
    answer = DelegationTokenExpiryResponse(
        error=ApiError.of(Errors.DELEGATION_TOKEN_EXPIRED), expiry_timestamp_ms=-1
    )
    assert api.expiry_response_from_json(Fields(api.expiry_response_to_json(answer))) == answer


@pytest.mark.parametrize(
    "body",
    [
        {"principal": "User:a", "hmac": "not base64!", "renew_period_ms": 1},
        {"principal": "User:a", "renew_period_ms": 1},
        {"principal": "User:a", "hmac": "AA==", "renew_period_ms": "soon"},
    ],
)
def test_the_route_refuses_bad_bodies(body: dict[str, object]) -> None:
    with pytest.raises(JsonBodyError):
        api.renew_request_from_json(Fields(body))


def test_the_route_bounds_renewers() -> None:
    body = {"requester": "User:a", "renewers": ["User:x"] * (api.MAX_RENEWERS + 1)}
    with pytest.raises(JsonBodyError, match="renewers"):
        api.create_request_from_json(Fields(body))
