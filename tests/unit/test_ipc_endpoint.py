"""Where the main process listens: a private directory, a path that fits a socket address."""

from __future__ import annotations

import os
import shutil
import stat
import sys
from pathlib import Path

import pytest

from app.host.ipc_endpoint import (
    MAX_SOCKET_PATH_BYTES,
    EndpointError,
    find_endpoint,
    fixed_endpoint,
    prepare_endpoint,
    release_endpoint,
    socket_name_for,
)

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="named pipes are not files")

NO_XDG: dict[str, str] = {}


def _mode(path: str | Path) -> int:
    return stat.S_IMODE(os.lstat(path).st_mode)


def test_the_data_directory_holds_a_private_ipc_folder_when_the_path_fits() -> None:
    data = Path("/tmp") / f"mkd-{os.getpid()}"
    data.mkdir(mode=0o700, exist_ok=True)
    try:
        endpoint = prepare_endpoint(data, NO_XDG)
        assert endpoint == str(data.resolve() / "ipc" / socket_name_for(data))
        assert _mode(data / "ipc") == 0o700
        assert find_endpoint(data, NO_XDG) == endpoint
    finally:
        shutil.rmtree(data / "ipc")
        data.rmdir()


def test_a_private_runtime_directory_is_preferred() -> None:
    runtime = Path("/tmp") / f"mkx-{os.getpid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    short = Path("/tmp") / f"mkr-{os.getpid()}"
    short.mkdir(mode=0o700, exist_ok=True)
    try:
        env = {"XDG_RUNTIME_DIR": str(runtime)}
        assert prepare_endpoint(short, env) == str(runtime / socket_name_for(short))
        # A runtime directory others can enter is not used.
        runtime.chmod(0o755)
        assert fixed_endpoint(short, env) == str(short.resolve() / "ipc" / socket_name_for(short))
    finally:
        shutil.rmtree(short / "ipc")
        short.rmdir()
        runtime.rmdir()


def test_a_wider_ipc_folder_is_made_private() -> None:
    data = Path("/tmp") / f"mkw-{os.getpid()}"
    (data / "ipc").mkdir(parents=True, exist_ok=True)
    (data / "ipc").chmod(0o755)
    try:
        prepare_endpoint(data, NO_XDG)
        assert _mode(data / "ipc") == 0o700
    finally:
        shutil.rmtree(data / "ipc")
        data.rmdir()


def test_a_link_in_place_of_the_ipc_folder_is_refused_with_the_reason(tmp_path: Path) -> None:
    data = Path("/tmp") / f"mkl-{os.getpid()}"
    data.mkdir(exist_ok=True)
    (tmp_path / "elsewhere").mkdir()
    (data / "ipc").symlink_to(tmp_path / "elsewhere")
    try:
        with pytest.raises(EndpointError, match="not a folder"):
            prepare_endpoint(data, NO_XDG)
    finally:
        (data / "ipc").unlink()
        data.rmdir()


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_an_ipc_folder_of_another_user_is_refused_with_the_reason(tmp_path: Path) -> None:
    data = Path("/tmp") / f"mko-{os.getpid()}"
    (data / "ipc").mkdir(parents=True, exist_ok=True, mode=0o700)
    os.chown(data / "ipc", 65534, 65534)
    try:
        with pytest.raises(EndpointError, match="another user"):
            prepare_endpoint(data, NO_XDG)
    finally:
        shutil.rmtree(data / "ipc")
        data.rmdir()


def test_a_long_data_directory_falls_back_to_a_random_private_folder(tmp_path: Path) -> None:
    data = tmp_path / ("d" * 120)
    data.mkdir()
    assert fixed_endpoint(data, NO_XDG) is None
    endpoint = prepare_endpoint(data, NO_XDG)
    try:
        assert len(os.fsencode(endpoint)) <= MAX_SOCKET_PATH_BYTES
        assert _mode(os.path.dirname(endpoint)) == 0o700
        assert find_endpoint(data, NO_XDG) == endpoint, "a second launch finds it"
        assert _mode(data / "ipc" / "endpoint") == 0o600
        # A launch after a kill (nothing released) reuses the same folder instead of leaking.
        assert prepare_endpoint(data, NO_XDG) == endpoint
    finally:
        release_endpoint(data, endpoint)
    assert not os.path.exists(os.path.dirname(endpoint))
    assert find_endpoint(data, NO_XDG) is None


def test_endpoints_differ_per_data_directory(tmp_path: Path) -> None:
    assert fixed_endpoint(tmp_path / "a", NO_XDG) != fixed_endpoint(tmp_path / "b", NO_XDG)


def test_a_second_launch_without_the_runtime_directory_still_finds_the_socket() -> None:
    import socket

    runtime = Path("/tmp") / f"mkf-{os.getpid()}"
    runtime.mkdir(mode=0o700, exist_ok=True)
    data = Path("/tmp") / f"mkg-{os.getpid()}"
    data.mkdir(mode=0o700, exist_ok=True)
    env = {"XDG_RUNTIME_DIR": str(runtime)}
    endpoint = prepare_endpoint(data, env)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        listener.bind(endpoint)
        assert find_endpoint(data, NO_XDG) == endpoint  # its own guess would be <data>/ipc
        assert fixed_endpoint(data, NO_XDG) != endpoint
    finally:
        listener.close()
        os.unlink(endpoint)
        shutil.rmtree(data / "ipc")
        data.rmdir()
        runtime.rmdir()


def test_the_socket_name_hashes_as_hashlib_does(tmp_path: Path) -> None:
    """The name comes from the interpreter's built-in SHA-256 (no OpenSSL start): the same digest
    ``hashlib`` gives, so every version finds the same endpoint."""
    import hashlib

    resolved = os.path.realpath(tmp_path)
    expected = hashlib.sha256(f"{os.getuid()}\0{resolved}".encode()).hexdigest()[:12]
    assert socket_name_for(tmp_path) == f"maka-{expected}"
