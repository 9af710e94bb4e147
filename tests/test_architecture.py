"""Architecture invariants from DESIGN.md §2 and STYLE.md §1, checked on the source tree."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = [
    "storage",
    "protocol",
    "fetcher",
    "replica",
    "coordinator",
    "broker",
    "metadata",
    "quorum",
    "export",
    "pykraft",
]

# Which of our packages each package may import (DESIGN.md §2).
ALLOWED: dict[str, set[str]] = {
    "storage": set(),
    "protocol": {"storage"},
    "fetcher": {"storage", "protocol"},
    "replica": {"storage", "protocol", "fetcher", "metadata"},
    # The coordinators are handed the broker's replica layer; they never import broker.
    "coordinator": {"storage", "protocol", "metadata"},
    "broker": {"storage", "protocol", "fetcher", "replica", "coordinator", "metadata"},
    "metadata": set(),
    "quorum": {"metadata"},
    "export": {"storage", "metadata"},
    "pykraft": set(PACKAGES) - {"pykraft"},
}
# Kafka's vocabulary, defined once where the data path keeps it, is the one thing the control
# plane takes from it: modules that import nothing of ours (checked below), so the edge brings
# nothing else along. The clock contract (Kafka's ``Time``) is shared the same way.
VOCABULARY = {"protocol.errors", "storage.topic_partition", "storage.clock"}
ALLOWED_MODULES: dict[str, set[str]] = {
    "metadata": VOCABULARY,
    # The trace clock (storage/hop_trace.py, stdlib only): PYKRAFT_COMMIT_TRACE's marks line up
    # with PYKRAFT_HOP_TRACE's.
    "quorum": VOCABULARY | {"storage.hop_trace"},
    # export-topic --command-config: the one reading of a Kafka client properties file into
    # librdkafka's settings that every client tool uses (PEM trust stores, JAAS, SCRAM).
    "export": {"pykraft.client_properties"},
}

# Pure cores: no I/O, clock or randomness (STYLE.md §1-2).
IO_MODULES = {"asyncio", "socket", "threading", "time", "random", "os", "aiohttp", "pysyncobj"}
PURE_CORES = [
    "protocol/errors.py",
    "storage/topic_partition.py",
    "storage/clock.py",
    "replica/alter_log_dir.py",
    "metadata/records.py",
    "metadata/image.py",
    # metadata/auth/tls_context.py is the shell that loads key files into an SSLContext.
    "metadata/auth/principal.py",
    "metadata/auth/jaas.py",
    "metadata/auth/tls_settings.py",
    "metadata/auth/acl.py",
    "metadata/auth/authorizer.py",
    "metadata/auth/images.py",
    "metadata/auth/scram.py",
    "metadata/delta.py",
    "metadata/client_quotas.py",
    "metadata/delegation_tokens.py",
    "metadata/local_changes.py",
    # Kafka's config definitions: the controller validates with them, brokers describe them.
    "metadata/config_defs.py",
    "metadata/broker_config_defs.py",
    # The controller's HTTP contract: served by quorum, called by broker, so it lives in metadata.
    "metadata/api",
    "quorum/controller.py",
    "quorum/managers",
    # Kafka's DescribeQuorum from pysyncobj's status; quorum/service_quorum.py is its shell.
    "quorum/describe_quorum.py",
    # KIP-853's AddRaftVoter / RemoveRaftVoter decisions; quorum/service_voters.py is the shell.
    "quorum/voter_changes.py",
    # The doors' decisions (issue 11); quorum/auth_http.py is their aiohttp shell.
    "quorum/auth.py",
    "quorum/auth_basic.py",
    # The web console's rows and HTML (issue 16); quorum/service_console.py is their shell.
    "quorum/console_views.py",
    "quorum/console_html.py",
    "fetcher/truncation.py",
    "fetcher/state.py",
    # kafka-reassign-partitions' decisions (KIP-455): files, placement, throttles, messages.
    "pykraft/reassign_plan.py",
    "pykraft/consumer_groups_plan.py",
    "pykraft/consumer_groups_views.py",
    "pykraft/get_offsets_filter.py",
    "pykraft/configs_plan.py",
    "fetcher/responses.py",
    # Rates over sampled windows (Kafka's SampledStat: Rate, SimpleRate) and the KIP-73 throttles.
    "fetcher/sampled_rate.py",
    "fetcher/replication_quota.py",
    "replica",
    "broker/connection_quotas.py",
    # DescribeConfigs' entries and the dynamic broker config layers (issue 13).
    "broker/config_describe.py",
    # KIP-13/124/546: client quota rates, precedence and throttle times.
    "broker/quotas.py",
    "broker/lifecycle.py",
    "broker/lifecycle_core.py",
    "broker/sasl_config.py",
    "broker/sasl_mechanisms.py",
    "broker/sasl_server.py",
    # KIP-890 part 1: which writes are verified, how, and what the producer is told.
    "broker/transaction_verification.py",
    "broker/add_partitions_to_txn_batches.py",
    "coordinator/group/state.py",
    "coordinator/group/rebalance.py",
    "coordinator/group/manager.py",
    "coordinator/group/coordinator.py",
    "coordinator/group/offsets.py",
    "coordinator/group/records.py",
    "coordinator/record_reader.py",
    "coordinator/group/effects.py",
    "coordinator/group/replicas.py",
    "coordinator/group/transactions.py",
    "coordinator/group/views.py",
    "coordinator/group/deletion.py",
    "coordinator/group/consumer_protocol.py",
    "coordinator/group/static_members.py",
    "coordinator/group/commits.py",
    "coordinator/group/expiration.py",
    # KIP-848 consumer groups
    "coordinator/group/assignors.py",
    "coordinator/group/consumer_member.py",
    "coordinator/group/consumer_group.py",
    "coordinator/group/consumer_heartbeat.py",
    "coordinator/group/consumer_groups.py",
    "coordinator/group/consumer_writes.py",
    "coordinator/group/consumer_timers.py",
    "coordinator/group/consumer_records.py",
    "coordinator/group/consumer_replay.py",
    "coordinator/group/unified.py",
    "coordinator/group/consumer_migration.py",
    "coordinator/group/consumer_classic_members.py",
    "coordinator/group/classic_apis.py",
    "coordinator/transaction/state.py",
    "coordinator/transaction/metadata.py",
    "coordinator/transaction/records.py",
    "coordinator/transaction/config.py",
    "coordinator/transaction/effects.py",
    "coordinator/transaction/writes.py",
    "coordinator/transaction/manager.py",
    "coordinator/transaction/markers.py",
    "coordinator/transaction/init_producer_id.py",
    "coordinator/transaction/end_txn.py",
    "coordinator/transaction/coordinator.py",
    "coordinator/transaction/replay.py",
    "export/replica_choice.py",
    "export/isolation.py",
    # The pykraft-kafka source's options and offset-range planning (Spark's Kafka connector).
    "export/kafka_options.py",
    "export/kafka_plan.py",
    # Issue 15: whether a run's committed output holds what it read (before the manifest).
    "export/output_check.py",
    # pykraft transactions: its requests as values, and find-hanging's decisions.
    "pykraft/admin_codec.py",
    "pykraft/admin_errors.py",
    "pykraft/hanging_transactions.py",
    # pykraft dev: when its cluster is ready (issue 16).
    "pykraft/dev_ready.py",
    # Issue 16: Prometheus exposition, Kafka's broker topic meters, the controller's metrics.
    "metadata/prometheus.py",
    "broker/broker_topic_stats.py",
    "broker/log_cleaner_metrics.py",
    "quorum/metrics.py",
    # Issue 13: Kafka 3.9's version table, Fetch v0-3's answer, ListOffsets v0's offsets.
    "protocol/kafka_3_9_versions.py",
    "protocol/legacy_fetch.py",
    "storage/legacy_offsets.py",
    # Kafka's ConfigDef and the topic keys (split from config_defs.py).
    "metadata/config_def.py",
    "metadata/config_defs.py",
    # KIP-714's CLIENT_METRICS subscription keys and ClientMetricsConfigs.validate.
    "metadata/client_metrics_configs.py",
]
# The storage rules the pure cores build on: each split from the file it used to share a module
# with (leader_epoch_cache from leader_epoch_file, producer_append and producer_state from
# producer_state_file, fetch_data from file_slice, unified_log — PartitionLog's decisions — from
# partition_log, which opens it on files), so that importing a rule never reaches the disk.
STORAGE_RULES = [
    "storage/leader_epoch_cache.py",
    "storage/producer_append.py",
    "storage/producer_entry.py",
    "storage/log_validator.py",
    "storage/retention.py",
    "storage/fetch_data.py",
    "storage/record_batch.py",
    "storage/record_walk.py",
    "storage/segment_store.py",
    "storage/memory_disk.py",
    "storage/memory_store.py",
    "storage/log_dir_store.py",
    "storage/memory_log_dir.py",
    "storage/log_reader.py",
    "storage/corruption.py",
    "storage/unified_log.py",
    "storage/producer_state.py",
    # Transactions (issue 12): the index entries and their rules, the markers, the replay.
    "storage/aborted_txn.py",
    "storage/txn_markers.py",
    "storage/producer_replay.py",
    # KIP-890 part 1: a producer's verification in progress and its guard.
    "storage/verification_guard.py",
    # The log cleaner's decisions; its shells: storage/cleaner.py, cleaner_segment.py,
    # cleaner_swap.py, log_cleaner.py and broker/log_cleaner.py.
    "storage/cleaner_offset_map.py",
    "storage/cleaner_txn.py",
    "storage/cleaner_batches.py",
    "storage/cleaner_filter.py",
    "storage/cleaner_policy.py",
    "storage/cleaner_throttle.py",
    "storage/cleaner_hooks.py",
]


# One clock per process (storage/clock.py): the real one is built only where a process is
# composed, and nothing else reads ``time`` for a timestamp or a deadline.
REAL_CLOCK = "storage.system_clock"
COMPOSITION_ROOTS = {
    "pykraft/broker_cmd.py",
    "pykraft/controller_cmd.py",
    "pykraft/demo.py",
    # A tool's process: its admin client's deadlines and back-off, the wall clock it prints.
    "pykraft/transactions_cmd.py",
    "pykraft/reassign_cmd.py",
    "pykraft/metadata_quorum_cmd.py",
    "pykraft/consumer_groups_cmd.py",  # --by-duration counts back from the wall clock
    "pykraft/configs_cmd.py",  # client quotas through KafkaAdminClient's deadlines
    "pykraft/console_consumer_cmd.py",  # --timeout-ms
    "pykraft/producer_perf_cmd.py",  # the perf tests' windows, rates and dates
    "pykraft/consumer_perf_cmd.py",
    # A Spark job's entry point: ``spark-submit`` runs it as a process of its own.
    "export/export_topic_job.py",
    # Spark builds the streaming reader in its own process: its trigger clock is made there.
    "export/kafka_source.py",
}
TIME_READS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns"}
READS_TIME = {
    "storage/system_clock.py": "the real clock",
    "broker/network.py": "request latency for the metrics histogram, in nanoseconds",
    "broker/request_time.py": "a request handler's running time, for request_percentage quotas",
    "pykraft/dev.py": "pykraft dev waiting for its child processes",
    "pykraft/dev_wait.py": "pykraft dev-wait's deadline while it polls cluster.json",
    "storage/hop_trace.py": "the trace clock of PYKRAFT_HOP_TRACE and PYKRAFT_COMMIT_TRACE",
}


def in_package_terms(name: str) -> str:
    """``pykraft.storage.x`` -> ``storage.x``: our code is installed (and imported) under the
    ``pykraft`` namespace, over the repository's top-level packages whose rules this file states."""
    head, _, rest = name.partition(".")
    if head == "pykraft" and rest.split(".")[0] in PACKAGES:
        return rest
    return name


def imported_modules(path: Path) -> set[str]:
    """Dotted names of the modules ``path`` imports (for ``from a.b import c``: ``a.b``), in
    package terms (``in_package_terms``)."""
    return {in_package_terms(name) for name in imported_names(path)}


def imported_names(path: Path) -> set[str]:
    """Dotted names of the modules ``path`` imports, as written."""
    tree = ast.parse(path.read_text(), filename=str(path))
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
    return names


def imported_roots(path: Path) -> set[str]:
    return {name.split(".")[0] for name in imported_modules(path)}


def _is_type_checking_block(node: ast.AST) -> bool:
    test = node.test if isinstance(node, ast.If) else None
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def runtime_imports(path: Path) -> set[str]:
    """Dotted names ``path`` imports when it runs (for ``from a.b import c``: ``a.b`` and
    ``a.b.c``, which may be a module). Imports under ``if TYPE_CHECKING:`` never run, so
    they do not count: a pure core may name a shell's type in an annotation."""
    names: set[str] = set()
    pending: list[ast.AST] = [ast.parse(path.read_text(), filename=str(path))]
    while pending:  # bounded by the size of the syntax tree
        node = pending.pop()
        if _is_type_checking_block(node):
            assert isinstance(node, ast.If)
            pending.extend(node.orelse)
            continue
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        pending.extend(ast.iter_child_nodes(node))
    return {in_package_terms(name) for name in names}


def module_path(name: str) -> Path | None:
    """The source file of one of our modules (a package's ``__init__.py``), else None."""
    if name.split(".")[0] not in PACKAGES:
        return None
    base = ROOT.joinpath(*name.split("."))
    for candidate in (base.with_suffix(".py"), base / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def io_reached(start: Path) -> dict[str, list[str]]:
    """Every I/O module ``start`` reaches through our own modules, with one import chain to
    it: ``{"os": ["fetcher/truncation.py", "storage/atomic_file.py"]}``."""
    chains: dict[Path, list[Path]] = {start: [start]}
    reached: dict[str, list[str]] = {}
    pending = [start]
    while pending:  # each of our modules is visited once
        path = pending.pop()
        names = runtime_imports(path)
        for root in sorted({name.split(".")[0] for name in names} & IO_MODULES):
            chain = [
                str(step.relative_to(ROOT)) if step.is_relative_to(ROOT) else step.name
                for step in chains[path]
            ]
            reached.setdefault(root, chain)
        for name in sorted(names):
            found = module_path(name)
            if found is not None and found not in chains:
                chains[found] = [*chains[path], found]
                pending.append(found)
    return reached


def python_files(relative: str) -> list[Path]:
    target = ROOT / relative
    if target.is_file():
        return [target]
    return sorted(target.rglob("*.py")) if target.is_dir() else []


def forbidden_imports(package: str, path: Path) -> list[str]:
    """The modules ``path`` imports that ``package`` may not."""
    return sorted(
        name
        for name in imported_modules(path)
        if (root := name.split(".")[0]) in PACKAGES
        and root != package
        and root not in ALLOWED[package]
        and name not in ALLOWED_MODULES.get(package, set())
    )


@pytest.mark.parametrize("package", PACKAGES)
def test_import_direction(package: str) -> None:
    offenders = {
        str(path.relative_to(ROOT)): found
        for path in python_files(package)
        if (found := forbidden_imports(package, path))
    }
    assert offenders == {}, (
        f"{package} may only import {sorted(ALLOWED[package])} and "
        f"{sorted(ALLOWED_MODULES.get(package, set()))}"
    )


@pytest.mark.parametrize("module", sorted(VOCABULARY))
def test_the_shared_vocabulary_imports_nothing_of_ours(module: str) -> None:
    path = module_path(module)
    assert path is not None
    assert imported_roots(path) & set(PACKAGES) == set()


@pytest.mark.parametrize("core", PURE_CORES + STORAGE_RULES)
def test_pure_cores_do_no_io(core: str) -> None:
    """Transitively: a pure core must not reach I/O through another of our modules either
    (a rule module that imports a file module is split, not exempted)."""
    offenders = {
        str(path.relative_to(ROOT)): reached
        for path in python_files(core)
        if (reached := io_reached(path))
    }
    assert offenders == {}


def time_reads(path: Path) -> list[str]:
    """``time.monotonic()``-style calls and ``from time import ...`` in ``path``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if (
            isinstance(node, ast.Attribute)
            and node.attr in TIME_READS
            and isinstance(node.value, ast.Name)
            and node.value.id == "time"
        ):
            found.append(f"time.{node.attr}")
        elif isinstance(node, ast.ImportFrom) and node.module == "time":
            found.extend(f"from time import {alias.name}" for alias in node.names)
    return found


def test_the_real_clock_is_built_only_at_composition_roots() -> None:
    importers = {
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in python_files(package)
        if REAL_CLOCK in imported_modules(path)
    }
    assert importers <= COMPOSITION_ROOTS
    assert "pykraft/broker_cmd.py" in importers and "pykraft/controller_cmd.py" in importers


def test_only_the_real_clock_reads_the_time() -> None:
    offenders = {
        relative: found
        for package in PACKAGES
        for path in python_files(package)
        if (relative := str(path.relative_to(ROOT))) not in READS_TIME
        and (found := time_reads(path))
    }
    assert offenders == {}
    assert time_reads(ROOT / "storage" / "system_clock.py")  # the checker sees a read


def test_metadata_never_imports_asyncio() -> None:
    offenders = [str(p) for p in python_files("metadata") if "asyncio" in imported_roots(p)]
    assert offenders == []


def test_checker_sees_a_forbidden_import(tmp_path: Path) -> None:
    """The checker itself must be able to fail."""
    sample = tmp_path / "sample.py"
    sample.write_text("import asyncio\nfrom broker.x import y\nfrom . import z\n")
    assert imported_roots(sample) == {"asyncio", "broker"}
    control = tmp_path / "control.py"
    control.write_text("from protocol.errors import Errors\nfrom protocol.produce import x\n")
    # The vocabulary passes; any other module of the data path does not.
    assert forbidden_imports("quorum", control) == ["protocol.produce"]


def test_checker_follows_imports_through_our_modules(tmp_path: Path) -> None:
    """The transitive check must see I/O two imports away, and skip type-only imports."""
    core = ROOT / "storage" / "leader_epoch_cache.py"
    assert io_reached(core) == {}
    assert io_reached(ROOT / "storage" / "partition_log.py")["os"] == [
        "storage/partition_log.py",
        "storage/recovery.py",
        "storage/segment.py",
    ]
    sample = tmp_path / "sample.py"
    sample.write_text(
        "from typing import TYPE_CHECKING\n"
        "from storage import leader_epoch_file\n"
        "if TYPE_CHECKING:\n    import socket\nelse:\n    import random\n"
    )
    reached = io_reached(sample)
    assert sorted(reached) == ["os", "random"]
    assert reached["os"][-1] == "storage/atomic_file.py"


def test_our_modules_are_imported_by_their_installed_names() -> None:
    """``from pykraft.storage.x import y``, never ``from storage.x import y``: a bare name would
    load a second copy of the module (two ``Errors`` enums, two classes that never compare
    equal) and finds nothing once installed, where only ``pykraft`` is on the path."""
    ours = set(PACKAGES) - {"pykraft"}
    roots = [*PACKAGES, "tests", "bench", "examples"]
    offenders = {
        str(path.relative_to(ROOT)): bare
        for root in roots
        for path in python_files(root)
        if (bare := sorted(name for name in imported_names(path) if name.split(".")[0] in ours))
    }
    assert offenders == {}


def test_the_namespace_links_every_package() -> None:
    """``pykraft/<package>`` is a link to the top-level folder, so a checkout imports (and mypy
    checks) the installed names without an install step."""
    for package in set(PACKAGES) - {"pykraft"}:
        link = ROOT / "pykraft" / package
        assert link.is_symlink() and link.resolve() == ROOT / package, package


def module_level_rebindings(path: Path) -> list[str]:
    """Names a module assigns twice at its top level: ``NAME = ...`` then ``NAME = ...``."""
    seen: set[str] = set()
    twice: list[str] = []
    for node in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(node, ast.Assign):
            names = [target.id for target in node.targets if isinstance(target, ast.Name)]
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            names = [node.target.id] if isinstance(node.target, ast.Name) else []
        else:
            names = []
        twice.extend(name for name in names if name in seen)
        seen.update(names)
    return twice


def test_no_module_assigns_a_top_level_name_twice() -> None:
    """A second ``CREATE_ACLS = Route(...)`` silently replaces the first — a merge once left the
    ACL routes defined twice, the later copy without its authorization column. Constants and
    tables are bound once."""
    offenders = {
        str(path.relative_to(ROOT)): twice
        for package in PACKAGES
        for path in python_files(package)
        if (twice := module_level_rebindings(path))
    }
    assert offenders == {}
