"""``TlsSettings`` -> ``ssl.SSLContext``, for a server (a TLS listener) and for a client (a
broker connecting to another broker or to a controller).

The shell around ``metadata.auth.tls_settings``: it reads key files and builds OpenSSL state.

Inline PEM (KIP-651's ``ssl.truststore.certificates``, ``ssl.keystore.certificate.chain`` +
``ssl.keystore.key``) without temporary files where ``ssl`` allows:

* trust anchors go in as ``load_verify_locations(cadata=...)``, straight from memory;
* ``SSLContext.load_cert_chain`` only takes a path, so an inline key and chain are written to an
  anonymous in-memory file (``os.memfd_create``, Linux) and loaded from ``/proc/self/fd/<n>``;
  the file has no name on any file system and is closed at once. Where memfd is missing the
  inline key store is refused with a clear error (use ``ssl.keystore.location``) rather than
  written to disk.

``ssl.client.auth``: ``none`` -> ``CERT_NONE``, ``requested`` -> ``CERT_OPTIONAL`` (a client
without a certificate gets ``User:ANONYMOUS``), ``required`` -> ``CERT_REQUIRED``.
"""

from __future__ import annotations

import contextlib
import os
import ssl
from collections.abc import Iterator

from pykraft.metadata.auth.tls_settings import (
    ClientAuth,
    PemKeyStore,
    PemTrustStore,
    TlsSettings,
    TlsSettingsError,
)

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_VERIFY_MODES = {
    ClientAuth.NONE: ssl.CERT_NONE,
    ClientAuth.REQUESTED: ssl.CERT_OPTIONAL,
    ClientAuth.REQUIRED: ssl.CERT_REQUIRED,
}


def server_context(settings: TlsSettings, prefix: str = "") -> ssl.SSLContext:
    """The context a TLS listener serves with; ``prefix`` only names properties in errors."""
    if settings.keystore is None:
        raise TlsSettingsError(
            f"{prefix}ssl.keystore.location",
            "missing; a TLS listener needs a key store (ssl.keystore.location, or inline "
            "ssl.keystore.certificate.chain and ssl.keystore.key)",
        )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    _set_versions(context, settings)
    _load_keystore(context, settings.keystore, prefix)
    context.verify_mode = _VERIFY_MODES[settings.client_auth]
    if settings.client_auth is not ClientAuth.NONE:
        _load_truststore(context, settings.truststore, prefix, ssl.Purpose.CLIENT_AUTH)
    return context


def client_context(settings: TlsSettings, prefix: str = "") -> ssl.SSLContext:
    """The context a client connects with: the server is always verified against the trust
    store; its host name when ``ssl.endpoint.identification.algorithm=https``; a key store,
    when set, is the client certificate offered for mutual TLS."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    _set_versions(context, settings)
    context.check_hostname = settings.check_hostname
    context.verify_mode = ssl.CERT_REQUIRED
    _load_truststore(context, settings.truststore, prefix, ssl.Purpose.SERVER_AUTH)
    if settings.keystore is not None:
        _load_keystore(context, settings.keystore, prefix)
    return context


def _set_versions(context: ssl.SSLContext, settings: TlsSettings) -> None:
    versions = sorted(_VERSIONS[name] for name in settings.enabled_protocols)
    context.minimum_version = versions[0]
    context.maximum_version = versions[-1]


def _load_truststore(
    context: ssl.SSLContext, store: PemTrustStore, prefix: str, purpose: ssl.Purpose
) -> None:
    try:
        if store.location is not None:
            context.load_verify_locations(cafile=store.location)
        elif store.certificates is not None:
            context.load_verify_locations(cadata=store.certificates)
        else:
            context.load_default_certs(purpose)
    except (OSError, ssl.SSLError) as error:
        name = "location" if store.location is not None else "certificates"
        raise TlsSettingsError(f"{prefix}ssl.truststore.{name}", _reason(error)) from None


def _load_keystore(context: ssl.SSLContext, store: PemKeyStore, prefix: str) -> None:
    name = f"{prefix}ssl.keystore.location"
    try:
        if store.location is not None:
            context.load_cert_chain(store.location, password=store.key_password)
            return
        assert store.key is not None and store.certificate_chain is not None
        name = f"{prefix}ssl.keystore.key"
        with _in_memory_file(f"{store.key}\n{store.certificate_chain}\n", name) as path:
            context.load_cert_chain(path, password=store.key_password)
    except (OSError, ssl.SSLError) as error:
        # OpenSSL's reason (e.g. "bad decrypt" for a wrong ssl.key.password); never the key.
        raise TlsSettingsError(
            name, f"cannot load the key and certificate: {_reason(error)}"
        ) from None


@contextlib.contextmanager
def _in_memory_file(text: str, property_name: str) -> Iterator[str]:
    memfd_create = getattr(os, "memfd_create", None)
    if memfd_create is None:
        raise TlsSettingsError(
            property_name,
            "an inline key store needs os.memfd_create (Linux); use ssl.keystore.location",
        )
    descriptor: int = memfd_create("pykraft-keystore", getattr(os, "MFD_CLOEXEC", 0))
    try:
        os.write(descriptor, text.encode())
        yield f"/proc/self/fd/{descriptor}"
    finally:
        os.close(descriptor)


def _reason(error: Exception) -> str:
    if isinstance(error, ssl.SSLError) and error.reason:
        return str(error.reason)
    return error.strerror if isinstance(error, OSError) and error.strerror else str(error)
