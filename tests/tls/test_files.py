"""Key pairs on disk (webhook/tls/files.py): written atomically and privately, read back."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from webhook.tls import files
from webhook.tls.files import load_ca, load_issued, not_after, write_key_pair
from webhook.tls.pki import CertificateAuthority, IssuedCertificate, issue_serving_certificate

# --- write_key_pair -----------------------------------------------------------------------------


def test_write_key_pair_writes_crt_and_key_files(
    tmp_path: Path, serving: IssuedCertificate
) -> None:
    cert_path, key_path = write_key_pair(tmp_path, "tls", serving)
    assert (cert_path, key_path) == (tmp_path / "tls.crt", tmp_path / "tls.key")
    assert cert_path.read_bytes() == serving.cert_pem()
    assert key_path.read_bytes() == serving.key_pem()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["tls.crt", "tls.key"]  # no temp files


def test_key_file_has_mode_0600(tmp_path: Path, serving: IssuedCertificate) -> None:
    _, key_path = write_key_pair(tmp_path, "tls", serving)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600


def test_key_file_is_created_with_mode_0600_rather_than_chmodded_later(
    tmp_path: Path, serving: IssuedCertificate, monkeypatch: pytest.MonkeyPatch
) -> None:
    opened: list[tuple[str, int]] = []
    real_open = os.open

    def recording_open(path: Any, flags: int, mode: int = 0o777, **kwargs: Any) -> int:
        opened.append((os.fspath(path), mode))
        return real_open(path, flags, mode, **kwargs)

    def forbidden_chmod(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("chmod must not be used")

    monkeypatch.setattr(os, "open", recording_open)
    monkeypatch.setattr(os, "chmod", forbidden_chmod)
    write_key_pair(tmp_path, "tls", serving)
    key_modes = [mode for path, mode in opened if ".tls.key." in path]
    assert key_modes == [0o600]


def test_key_file_replaces_an_existing_world_readable_file(
    tmp_path: Path, serving: IssuedCertificate
) -> None:
    key_path = tmp_path / "tls.key"
    key_path.write_text("old")
    key_path.chmod(0o644)
    write_key_pair(tmp_path, "tls", serving)
    assert stat.S_IMODE(key_path.stat().st_mode) == 0o600
    assert key_path.read_bytes() == serving.key_pem()


def test_missing_directory_is_created_with_mode_0700(
    tmp_path: Path, serving: IssuedCertificate
) -> None:
    directory = tmp_path / "certs"
    write_key_pair(directory, "tls", serving)
    assert stat.S_IMODE(directory.stat().st_mode) == 0o700


@pytest.mark.parametrize("name", ["", ".", "..", "a/b"])
def test_write_key_pair_rejects_names_that_are_not_plain_file_names(
    tmp_path: Path, serving: IssuedCertificate, name: str
) -> None:
    with pytest.raises(ValueError, match="plain file name"):
        write_key_pair(tmp_path, name, serving)


# --- load_ca / load_issued / not_after ----------------------------------------------------------


def test_load_ca_reads_back_what_write_key_pair_wrote(
    tmp_path: Path, ca: CertificateAuthority
) -> None:
    cert_path, key_path = write_key_pair(tmp_path, "ca", ca)
    loaded = load_ca(cert_path, key_path)
    assert loaded.certificate == ca.certificate
    assert loaded.key_pem() == ca.key_pem()
    issued = issue_serving_certificate(loaded, "x", dns_names=["x"])
    issued.certificate.verify_directly_issued_by(ca.certificate)


def test_load_ca_rejects_a_key_from_another_ca(
    tmp_path: Path, ca: CertificateAuthority, other_ca: CertificateAuthority
) -> None:
    cert_path, _ = write_key_pair(tmp_path, "ca", ca)
    _, other_key = write_key_pair(tmp_path, "other", other_ca)
    with pytest.raises(ValueError, match="does not match"):
        load_ca(cert_path, other_key)


def test_load_ca_rejects_a_leaf_certificate(tmp_path: Path, serving: IssuedCertificate) -> None:
    cert_path, key_path = write_key_pair(tmp_path, "tls", serving)
    with pytest.raises(ValueError, match="not a CA"):
        load_ca(cert_path, key_path)


def test_not_after_reads_the_expiry_of_the_first_certificate(
    tmp_path: Path, ca: CertificateAuthority, serving: IssuedCertificate
) -> None:
    path = tmp_path / "chain.pem"
    path.write_bytes(serving.cert_pem() + ca.cert_pem())
    expiry = not_after(path)
    assert expiry == serving.certificate.not_valid_after_utc
    assert expiry.tzinfo is not None


def test_load_issued_reads_back_a_serving_pair(tmp_path: Path, serving: IssuedCertificate) -> None:
    cert_path, key_path = write_key_pair(tmp_path, "tls", serving)
    assert load_issued(cert_path, key_path).certificate == serving.certificate


def test_load_issued_names_a_key_file_that_holds_no_elliptic_curve_key(
    tmp_path: Path, serving: IssuedCertificate
) -> None:
    cert_path, _ = write_key_pair(tmp_path, "tls", serving)
    key_path = tmp_path / "garbage.key"
    key_path.write_text("garbage")
    with pytest.raises(ValueError):
        load_issued(cert_path, key_path)


# --- existing_ca ----------------------------------------------------------------------------


def test_existing_ca_is_none_in_an_empty_directory(tmp_path: Path) -> None:
    assert files.existing_ca(tmp_path) is None


def test_existing_ca_reads_the_ca_written_there(tmp_path: Path, ca: CertificateAuthority) -> None:
    write_key_pair(tmp_path, "ca", ca)
    found = files.existing_ca(tmp_path)
    assert found is not None
    assert found.certificate == ca.certificate


@pytest.mark.parametrize("left_over", ["ca.crt", "ca.key"])
def test_existing_ca_refuses_one_file_without_the_other(
    tmp_path: Path, ca: CertificateAuthority, left_over: str
) -> None:
    write_key_pair(tmp_path, "ca", ca)
    other = {"ca.crt": "ca.key", "ca.key": "ca.crt"}[left_over]
    (tmp_path / other).unlink()
    with pytest.raises(ValueError, match=f"{left_over} exists but .*{other} does not"):
        files.existing_ca(tmp_path)


def test_existing_ca_names_the_directory_of_an_unusable_ca(
    tmp_path: Path, serving: IssuedCertificate
) -> None:
    (tmp_path / "ca.crt").write_bytes(serving.cert_pem())
    (tmp_path / "ca.key").write_bytes(serving.key_pem())
    with pytest.raises(ValueError, match=f"the CA in {tmp_path} cannot be used: .*not a CA"):
        files.existing_ca(tmp_path)
