"""ACLs in the metadata log (Kafka's ``AclControlManager``, KIP-801).

CreateAcls validates each ACL (``metadata.auth.acl.validate_new_acl``: INVALID_REQUEST with
Kafka's message) and writes one ``AccessControlEntryRecord`` with a fresh id per new ACL; an
ACL identical to one in the image, or to an earlier creation of the same request, succeeds
without a record, so the image never holds duplicates. DeleteAcls validates each filter
(INVALID_REQUEST for an UNKNOWN part) and writes one ``RemoveAccessControlEntryRecord`` per
matching ACL; an ACL several filters match is reported under each of them and removed once
(Kafka's ``deleteAclsForFilter`` collects the records in a set). More matches than one batch
holds refuse the whole request, writing nothing (Kafka: "Cannot remove more than 10000 acls in
a single delete operation"). DescribeAcls answers from the committed image. Results come back
in request order.
"""

from __future__ import annotations

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.security import (
    CreateAclsRequest,
    CreateAclsResponse,
    DeleteAclsFilterResult,
    DeleteAclsRequest,
    DeleteAclsResponse,
    DescribeAclsRequest,
    DescribeAclsResponse,
)
from pykraft.metadata.auth.acl import AclBinding, AclError, validate_filter, validate_new_acl
from pykraft.metadata.codec import MAX_BATCH_RECORDS
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    MetadataRecord,
    RemoveAccessControlEntryRecord,
    uuid_to_kafka_string,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.placement import RandomSource


def _sort_key(acl: AclBinding) -> tuple[int, str, int, str, str, int, int]:
    return (
        acl.resource_type.value,
        acl.resource_name,
        acl.pattern_type.value,
        acl.principal,
        acl.host,
        acl.operation.value,
        acl.permission_type.value,
    )


def new_acl_id(image: MetadataImage, rng: RandomSource, taken: set[str]) -> str:
    """A fresh id like Kafka's ``Uuid.randomUuid``: never zero, never one in use."""
    while True:
        value = rng.randrange(1 << 128)
        acl_id = uuid_to_kafka_string(value.to_bytes(16, "big"))
        if value > 1 and acl_id not in taken and acl_id not in image.acls.acls:
            taken.add(acl_id)
            return acl_id


def create_acls(
    image: MetadataImage, request: CreateAclsRequest, rng: RandomSource
) -> ControllerResult[CreateAclsResponse]:
    existing = set(image.acls.acls.values())
    taken: set[str] = set()
    records: list[MetadataRecord] = []
    results: list[ApiError] = []
    for acl in request.creations:
        try:
            validate_new_acl(acl)
        except AclError as exc:
            results.append(ApiError.of(Errors.INVALID_REQUEST, str(exc)))
            continue
        if acl not in existing:
            existing.add(acl)
            records.append(acl.to_record(new_acl_id(image, rng, taken)))
        results.append(SUCCESS)
    return ControllerResult(tuple(records), CreateAclsResponse(tuple(results)))


def describe_acls(image: MetadataImage, request: DescribeAclsRequest) -> DescribeAclsResponse:
    try:
        validate_filter(request.filter)
    except AclError as exc:
        return DescribeAclsResponse(ApiError.of(Errors.INVALID_REQUEST, str(exc)))
    matching = [acl for acl in image.acls.acls.values() if request.filter.matches(acl)]
    return DescribeAclsResponse(SUCCESS, tuple(sorted(matching, key=_sort_key)))


def delete_acls(
    image: MetadataImage, request: DeleteAclsRequest
) -> ControllerResult[DeleteAclsResponse]:
    deleted: dict[str, None] = {}  # ACL ids, in order
    results: list[DeleteAclsFilterResult] = []
    for acl_filter in request.filters:
        try:
            validate_filter(acl_filter)
        except AclError as exc:
            results.append(DeleteAclsFilterResult(ApiError.of(Errors.INVALID_REQUEST, str(exc))))
            continue
        matching = []
        for acl_id in sorted(image.acls.acls):
            acl = image.acls.acls[acl_id]
            if acl_filter.matches(acl):
                deleted.setdefault(acl_id)
                matching.append(acl)
        results.append(DeleteAclsFilterResult(SUCCESS, tuple(sorted(matching, key=_sort_key))))
    records = tuple(RemoveAccessControlEntryRecord(id=acl_id) for acl_id in deleted)
    if len(records) > MAX_BATCH_RECORDS:
        # One atomic batch holds at most this many records (Kafka's MAX_RECORDS_PER_USER_OP).
        too_many = ApiError.of(
            Errors.INVALID_REQUEST,
            f"Cannot remove more than {MAX_BATCH_RECORDS} acls in a single delete operation.",
        )
        return ControllerResult(
            (), DeleteAclsResponse(tuple(DeleteAclsFilterResult(too_many) for _ in results))
        )
    return ControllerResult(records, DeleteAclsResponse(tuple(results)))
