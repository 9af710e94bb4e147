"""The ACL and SCRAM parts of the metadata image, and their deltas.

Kafka's ``AclsImage``/``AclsDelta`` and ``ScramImage``/``ScramDelta``: every ACL by its id, and
every SCRAM credential by user and mechanism, in ``immutables.Map``s so that an image made by
``MetadataDelta.apply`` shares them with its parent untouched (one ACL added to 10,000 costs
O(log n)). Replay rules:

- ``AccessControlEntryRecord`` puts the ACL under its id; ``RemoveAccessControlEntryRecord`` of an
  id the image does not hold is a ``MetadataReplayError`` (Kafka's ``AclsDelta``: "Failed to find
  existing acl with ID").
- ``UserScramCredentialRecord`` sets one (user, mechanism) credential;
  ``RemoveUserScramCredentialRecord`` of an absent one is a ``MetadataReplayError`` too (the
  controller refuses such deletions with RESOURCE_NOT_FOUND before writing anything).

A refused record leaves the delta as it was. Pure: no I/O, no clock.
"""

from __future__ import annotations

from typing import ClassVar

import attrs
from immutables import Map

from pykraft.metadata.auth.acl import AclBinding, AclError
from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.records import (
    AccessControlEntryRecord,
    RemoveAccessControlEntryRecord,
    RemoveUserScramCredentialRecord,
    UserScramCredentialRecord,
)


@attrs.frozen(kw_only=True)
class AclsImage:
    # ACL id (a Kafka uuid string) -> the ACL.
    acls: Map[str, AclBinding] = attrs.field(factory=Map)

    EMPTY: ClassVar[AclsImage]


@attrs.frozen(kw_only=True)
class ScramImage:
    # user name -> mechanism -> credential; users with no credential left are dropped.
    users: Map[str, Map[ScramMechanism, ScramCredential]] = attrs.field(factory=Map)

    EMPTY: ClassVar[ScramImage]

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        """What a SCRAM server needs to check ``user``'s proof; None for an unknown user."""
        credentials = self.users.get(user)
        return None if credentials is None else credentials.get(mechanism)


AclsImage.EMPTY = AclsImage()
ScramImage.EMPTY = ScramImage()


class AclsDelta:
    def __init__(self, image: AclsImage) -> None:
        self.image = image
        # ACL id -> the new ACL, or None when it was removed.
        self.changes: dict[str, AclBinding | None] = {}

    def _has(self, acl_id: str) -> bool:
        if acl_id in self.changes:
            return self.changes[acl_id] is not None
        return acl_id in self.image.acls

    def replay(self, record: AccessControlEntryRecord | RemoveAccessControlEntryRecord) -> None:
        if isinstance(record, RemoveAccessControlEntryRecord):
            if not self._has(record.id):
                raise MetadataReplayError(
                    record, f"Failed to find existing acl with ID {record.id}"
                )
            self.changes[record.id] = None
            return
        try:
            self.changes[record.id] = AclBinding.from_record(record)
        except AclError as exc:
            raise MetadataReplayError(record, str(exc)) from None

    def apply(self) -> AclsImage:
        if not self.changes:
            return self.image
        acls = self.image.acls.mutate()
        for acl_id, acl in self.changes.items():
            if acl is not None:
                acls[acl_id] = acl
            elif acl_id in acls:
                del acls[acl_id]
        return AclsImage(acls=acls.finish())


class ScramDelta:
    def __init__(self, image: ScramImage) -> None:
        self.image = image
        # (user, mechanism) -> the new credential, or None when it was removed.
        self.changes: dict[tuple[str, ScramMechanism], ScramCredential | None] = {}

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None:
        if (user, mechanism) in self.changes:
            return self.changes[(user, mechanism)]
        return self.image.credential(user, mechanism)

    def replay(self, record: UserScramCredentialRecord | RemoveUserScramCredentialRecord) -> None:
        # The record schema admits only Kafka's two mechanism codes.
        mechanism = ScramMechanism(record.mechanism)
        if isinstance(record, RemoveUserScramCredentialRecord):
            if self.credential(record.name, mechanism) is None:
                raise MetadataReplayError(
                    record, f"no {mechanism.mechanism_name} credential for user {record.name!r}"
                )
            self.changes[(record.name, mechanism)] = None
            return
        self.changes[(record.name, mechanism)] = ScramCredential.from_record(record)

    def apply(self) -> ScramImage:
        if not self.changes:
            return self.image
        users = self.image.users.mutate()
        for (user, mechanism), credential in self.changes.items():
            credentials = users.get(user, Map())
            if credential is not None:
                credentials = credentials.set(mechanism, credential)
            elif mechanism in credentials:
                credentials = credentials.delete(mechanism)
            if credentials:
                users[user] = credentials
            elif user in users:
                del users[user]
        return ScramImage(users=users.finish())
