"""SCRAM credentials in the metadata log (Kafka's ``ScramControlManager``, KIP-554).

AlterUserScramCredentials: each user named in the request gets one result, and at most one
alteration per user per request. A user whose alteration fails gets that error and nothing
written for it (the other users' alterations still apply, in one batch); the checks and messages
are Kafka's:

- a user altered twice in one request, even for two mechanisms: DUPLICATE_RESOURCE "A user
  credential cannot be altered twice in the same request" (Kafka's controller keys the request
  by user name);
- an empty user name: UNACCEPTABLE_CREDENTIAL "Username must not be empty";
- a mechanism other than SCRAM-SHA-256/512: UNSUPPORTED_SASL_MECHANISM "Unknown SCRAM mechanism";
- iterations outside 4096..16384: UNACCEPTABLE_CREDENTIAL "Too few iterations" / "Too many
  iterations";
- deleting a credential the image does not hold: RESOURCE_NOT_FOUND "Attempt to delete a user
  credential that does not exist";
- pykraft's own: an empty salt or salted password is UNACCEPTABLE_CREDENTIAL (Kafka's HMAC
  would throw on the empty key and answer UNKNOWN_SERVER_ERROR).

An upsertion carries the salt and the *salted* password; only the derived StoredKey and
ServerKey are written (``metadata.auth.scram.credential_from_salted_password``).
DescribeUserScramCredentials answers mechanism and iteration count only — never a key.
"""

from __future__ import annotations

from collections import Counter

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.security import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
    AlterUserScramCredentialsResult,
    CredentialInfo,
    DescribeUserScramCredentialsRequest,
    DescribeUserScramCredentialsResponse,
    DescribeUserScramCredentialsResult,
    ScramCredentialDeletion,
    ScramCredentialUpsertion,
)
from pykraft.metadata.auth.scram import (
    MAX_ITERATIONS,
    MIN_ITERATIONS,
    ScramMechanism,
    credential_from_salted_password,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord, RemoveUserScramCredentialRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult

Alteration = ScramCredentialDeletion | ScramCredentialUpsertion


def _check(image: MetadataImage, alteration: Alteration) -> ApiError:
    if not alteration.name:
        return ApiError.of(Errors.UNACCEPTABLE_CREDENTIAL, "Username must not be empty")
    if alteration.mechanism is ScramMechanism.UNKNOWN:
        return ApiError.of(Errors.UNSUPPORTED_SASL_MECHANISM, "Unknown SCRAM mechanism")
    if isinstance(alteration, ScramCredentialDeletion):
        if image.scram.credential(alteration.name, alteration.mechanism) is None:
            return ApiError.of(
                Errors.RESOURCE_NOT_FOUND,
                "Attempt to delete a user credential that does not exist",
            )
        return SUCCESS
    if alteration.iterations < MIN_ITERATIONS:
        return ApiError.of(Errors.UNACCEPTABLE_CREDENTIAL, "Too few iterations")
    if alteration.iterations > MAX_ITERATIONS:
        return ApiError.of(Errors.UNACCEPTABLE_CREDENTIAL, "Too many iterations")
    if not alteration.salt or not alteration.salted_password:
        return ApiError.of(
            Errors.UNACCEPTABLE_CREDENTIAL, "The salt and the salted password must not be empty"
        )
    return SUCCESS


def _record(alteration: Alteration) -> MetadataRecord:
    if isinstance(alteration, ScramCredentialDeletion):
        return RemoveUserScramCredentialRecord(
            name=alteration.name, mechanism=alteration.mechanism.value
        )
    credential = credential_from_salted_password(
        alteration.mechanism, alteration.salt, alteration.salted_password, alteration.iterations
    )
    return credential.to_record(alteration.name, alteration.mechanism)


def alter_user_scram_credentials(
    image: MetadataImage, request: AlterUserScramCredentialsRequest
) -> ControllerResult[AlterUserScramCredentialsResponse]:
    """Kafka's ``ScramControlManager.alterCredentials``: deletions first, then upsertions, in
    request order; a user's first failure is its answer and its later alterations are ignored;
    a second alteration of a user (whatever the mechanism) fails the user with
    DUPLICATE_RESOURCE and drops the first."""
    pending: dict[str, Alteration] = {}
    failed: dict[str, ApiError] = {}
    mentioned: dict[str, None] = {}  # every user, in order of first mention
    alterations: list[Alteration] = [*request.deletions, *request.upsertions]
    for alteration in alterations:
        user = alteration.name
        mentioned.setdefault(user)
        if user in failed:
            continue
        if pending.pop(user, None) is not None:
            failed[user] = ApiError.of(
                Errors.DUPLICATE_RESOURCE,
                "A user credential cannot be altered twice in the same request",
            )
            continue
        error = _check(image, alteration)
        if error.is_failure():
            failed[user] = error
        else:
            pending[user] = alteration
    records = tuple(_record(pending[user]) for user in mentioned if user in pending)
    results = tuple(
        AlterUserScramCredentialsResult(user, failed.get(user, SUCCESS)) for user in mentioned
    )
    return ControllerResult(records, AlterUserScramCredentialsResponse(results))


def describe_user_scram_credentials(
    image: MetadataImage, request: DescribeUserScramCredentialsRequest
) -> DescribeUserScramCredentialsResponse:
    users = sorted(image.scram.users) if request.users is None else list(request.users)
    results = []
    mentions = Counter(users)
    for user in mentions:  # first mention order
        credentials = image.scram.users.get(user)
        if mentions[user] > 1:
            error = ApiError.of(
                Errors.DUPLICATE_RESOURCE,
                "Cannot describe SCRAM credentials for the same user twice in a single request",
            )
            results.append(DescribeUserScramCredentialsResult(user, error))
        elif credentials is None:
            error = ApiError.of(
                Errors.RESOURCE_NOT_FOUND,
                "Attempt to describe a user credential that does not exist",
            )
            results.append(DescribeUserScramCredentialsResult(user, error))
        else:
            infos = tuple(
                CredentialInfo(mechanism, credentials[mechanism].iterations)
                for mechanism in sorted(credentials)
            )
            results.append(DescribeUserScramCredentialsResult(user, SUCCESS, infos))
    return DescribeUserScramCredentialsResponse(SUCCESS, tuple(results))
