"""The installable Linux bundle and its .deb, built for real and run for real.

``packaging/build.py`` runs once per module (PyInstaller one-folder build + ``.deb``) into a
temporary folder. Every behaviour is then checked twice: on ``dist/maka/maka`` and on the binary
unpacked from the ``.deb`` with ``dpkg -x`` (what ``dpkg -i`` would put under ``/opt/maka``).
The .deb is built with zstd here because it compresses ~25x faster than the release's xz; the
layout and control data are identical.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from app import __version__

ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = ROOT / "packaging" / "build.py"
BUDGET = ROOT / "packaging" / "budget.json"

pytestmark = [
    pytest.mark.packaging,
    pytest.mark.timeout(600),
    pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the .deb is Linux-only"),
]


@dataclass(frozen=True, slots=True)
class Built:
    dist: Path
    bundle: Path
    deb: Path
    summary: dict[str, object]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Built:
    for tool, package in (("dpkg-deb", "dpkg"), ("objdump", "binutils")):
        if shutil.which(tool) is None:  # objdump: PyInstaller needs it on Linux
            pytest.fail(f"{tool} is required by the packaging tests: apt-get install {package}")
    base = tmp_path_factory.mktemp("packaging")
    dist, work = base / "dist", base / "work"
    completed = subprocess.run(
        [
            sys.executable,
            str(BUILD_SCRIPT),
            "--dist",
            str(dist),
            "--work",
            str(work),
            "--deb-compression",
            "zstd",
        ],
        capture_output=True,
        text=True,
        check=False,
        timeout=540,
    )
    assert completed.returncode == 0, completed.stdout[-3000:] + completed.stderr[-5000:]
    summary = json.loads((dist / "build-summary.json").read_text("utf-8"))
    deb = Path(str(summary["installer"]))
    assert deb.exists() and deb.suffix == ".deb"
    return Built(dist=dist, bundle=dist / "maka", deb=deb, summary=summary)


@pytest.fixture(scope="module")
def deb_root(built: Built, tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("deb-root")
    subprocess.run(["dpkg-deb", "-x", str(built.deb), str(root)], check=True)
    return root


@pytest.fixture(params=["bundle", "deb"])
def maka_exe(request: pytest.FixtureRequest, built: Built) -> Path:
    """The frozen ``maka`` from dist/ and from the unpacked .deb."""
    if request.param == "bundle":
        return built.bundle / "maka"
    root: Path = request.getfixturevalue("deb_root")
    return root / "opt" / "maka" / "maka"


def frozen_env(data_dir: Path) -> dict[str, str]:
    """A user's environment: no venv, no test-only variables, a private data directory."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("PYTHON", "VIRTUAL_ENV", "MAKA_", "PYTEST", "LD_LIBRARY_PATH"))
    }
    env["MAKA_DATA_DIR"] = str(data_dir)
    env["QT_QPA_PLATFORM"] = "offscreen"
    return env


def run_maka(
    exe: Path, *args: str, data_dir: Path, cwd: Path | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(exe), *args],
        env=frozen_env(data_dir),
        cwd=cwd or data_dir.parent,
        capture_output=True,
        text=True,
        check=False,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


# --- the bundle runs --------------------------------------------------------------------------


def test_version(maka_exe: Path, tmp_path: Path) -> None:
    completed = run_maka(maka_exe, "--version", data_dir=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"maka {__version__}"


def test_self_test_passes_in_the_frozen_app(maka_exe: Path, tmp_path: Path) -> None:
    data_dir = tmp_path / "not-yet-created" / "data"
    completed = run_maka(maka_exe, "--data-dir", str(data_dir), "self-test", "--json",
                         data_dir=tmp_path)  # fmt: skip
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, json.dumps(report, indent=2) + completed.stderr
    assert report["ok"] is True
    assert report["frozen"] is True
    assert Path(report["executable"]).resolve() == maka_exe.resolve()
    assert Path(report["dataDir"]) == data_dir
    assert [check["name"] for check in report["checks"]] == [
        "qt-platform",
        "display",
        "sqlite-wal",
        "store-open",
        "ipc-listen",
        "git-checkpoints",
        "data-dir",
    ]
    # Created as the app creates it, written, then removed with its parents: a check leaves
    # nothing behind.
    [checked] = [check for check in report["checks"] if check["name"] == "data-dir"]
    assert "(created for the check, then removed)" in checked["detail"], checked
    assert not (tmp_path / "not-yet-created").exists()


def test_frozen_app_defaults_to_the_per_user_data_directory(built: Built, tmp_path: Path) -> None:
    """Without --data-dir or MAKA_DATA_DIR the bundle uses the platform's per-user data folder
    (XDG on Linux), like the installed app does."""
    env = frozen_env(tmp_path)
    del env["MAKA_DATA_DIR"]
    env.pop("XDG_DATA_HOME", None)
    env["HOME"] = str(tmp_path / "home")
    completed = subprocess.run(
        [str(built.bundle / "maka"), "self-test", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    report = json.loads(completed.stdout)
    assert completed.returncode == 0, completed.stdout + completed.stderr
    expected = tmp_path / "home" / ".local" / "share" / "maka"
    assert Path(report["dataDir"]) == expected
    [checked] = [check for check in report["checks"] if check["name"] == "data-dir"]
    assert checked["ok"] and f"writable: {expected}" in checked["detail"], checked


def test_self_test_reports_an_unwritable_data_dir(built: Built, tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", "utf-8")
    completed = run_maka(
        built.bundle / "maka", "--data-dir", str(blocker / "data"), "self-test", data_dir=tmp_path
    )
    assert completed.returncode == 1
    assert "FAIL  data-dir" in completed.stdout
    assert "checks failed: data-dir" in completed.stdout
    assert f"{blocker} is a file, not a folder" in completed.stdout
    assert "Traceback" not in completed.stdout + completed.stderr


def test_self_test_names_a_missing_platform_plugin(built: Built, tmp_path: Path) -> None:
    """A bundle without its offscreen plugin: Qt aborts the probe child, the self-test survives,
    names the failed check with Qt's own reason, and still runs the other checks."""
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-al", str(built.bundle), str(broken)], check=True)  # hard links: fast
    plugin = broken / "_internal" / "PySide6" / "Qt" / "plugins" / "platforms" / "libqoffscreen.so"
    plugin.unlink()
    completed = run_maka(broken / "maka", "self-test", "--json", data_dir=tmp_path / "data")
    assert completed.returncode == 1, completed.stdout + completed.stderr
    report = json.loads(completed.stdout)
    # The desktop's own platform is offscreen here too (QT_QPA_PLATFORM), so both probes fail.
    assert report["failures"] == ["qt-platform", "display"]
    detail = report["checks"][0]["detail"]
    assert "offscreen" in detail and "exited with" in detail, detail
    assert all(check["ok"] for check in report["checks"][2:])


def test_bundle_runs_its_own_modules_but_no_python_code(built: Built, tmp_path: Path) -> None:
    """``-m MODULE`` runs a frozen first-party module as ``python -m`` would (a development-style
    self-spawn keeps working); ``-c CODE`` is refused: the bundle is not an interpreter."""
    module = run_maka(
        built.bundle / "maka", "-m", "app.commands.gui_cmd", "--help", data_dir=tmp_path
    )
    assert module.returncode == 0, module.stderr
    assert "usage: maka gui" in module.stdout
    code = run_maka(built.bundle / "maka", "-c", "print('hello')", data_dir=tmp_path)
    assert code.returncode == 2
    assert "hello" not in code.stdout
    assert "does not run Python code" in code.stderr


@pytest.fixture(scope="module")
def bundle_commands(built: Built, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """The subcommands the bundle itself lists in ``maka --help``."""
    listing = run_maka(built.bundle / "maka", "--help", data_dir=tmp_path_factory.mktemp("help"))
    assert listing.returncode == 0, listing.stderr
    epilog = listing.stdout.split("commands:\n", 1)[1].split("\n\n", 1)[0]
    return [line.split()[0] for line in epilog.splitlines() if line.strip()]


def test_every_listed_command_is_in_the_bundle(
    built: Built, bundle_commands: list[str], tmp_path: Path
) -> None:
    """Commands are imported by name at run time, invisible to PyInstaller's analysis: each one
    the bundle lists must be frozen into it and start."""
    assert {"gui", "ledger", "self-test"} <= set(bundle_commands), bundle_commands
    for name in bundle_commands:
        completed = run_maka(built.bundle / "maka", name, "--help", data_dir=tmp_path)
        assert completed.returncode == 0, f"maka {name} --help: {completed.stderr[-2000:]}"
        assert f"maka {name}" in completed.stdout


def demo_run(
    exe: Path, prompt: str, workspace: Path, data_dir: Path
) -> subprocess.CompletedProcess[str]:
    completed = run_maka(
        exe,
        "run",
        "--cwd",
        str(workspace),
        "--provider",
        "demo",
        "--permission-mode",
        "auto",
        prompt,
        data_dir=data_dir,
        cwd=workspace,
    )
    assert completed.returncode == 0, completed.stdout[-2000:] + completed.stderr[-3000:]
    return completed


def test_headless_demo_run(maka_exe: Path, bundle_commands: list[str], tmp_path: Path) -> None:
    """A real agent turn with the offline demo provider: a tool writes a file, the ledger lands
    in the data directory, and a shell command started by a tool sees the user's library path,
    not the bundle's (system programs must load system libraries)."""
    if "run" not in bundle_commands:
        pytest.skip("the 'maka run' command is not in this repository yet")
    workspace = tmp_path / "workspace"
    workspace.mkdir()
    data_dir = tmp_path / "data"
    demo_run(maka_exe, "write hello.txt saying hi", workspace, data_dir)
    assert (workspace / "hello.txt").read_text("utf-8").strip() == "hi"
    assert (data_dir / "runtime.sqlite").exists()
    demo_run(maka_exe, "run env > env.txt", workspace, data_dir)
    environment = (workspace / "env.txt").read_text("utf-8").splitlines()
    assert any(line.startswith("MAKA_DATA_DIR=") for line in environment)
    leaked = [line for line in environment if line.startswith("LD_LIBRARY_PATH")]
    assert leaked == [], leaked


def test_desktop_starts_main_and_renderer_from_the_same_executable(
    maka_exe: Path, tmp_path: Path
) -> None:
    """``maka`` without arguments: the main process starts, and spawns the renderer by running
    this same executable again (frozen apps have no Python to run)."""
    import psutil

    process = subprocess.Popen(
        [str(maka_exe)],
        env=frozen_env(tmp_path / "data"),
        cwd=tmp_path,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        renderer = _wait_for_renderer(psutil.Process(process.pid), timeout=60)
        assert renderer is not None, _early_output(process)
        assert Path(renderer.exe()).resolve() == maka_exe.resolve()
        assert "renderer" in renderer.cmdline()
        foreign = _system_copies_of_bundled_libraries(renderer, maka_exe.parent, timeout=60)
        assert foreign == [], foreign
        process.send_signal(signal.SIGTERM)
        assert process.wait(timeout=30) == 0
        psutil.wait_procs([renderer], timeout=15)
        assert not renderer.is_running()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if process.stdout is not None:
            process.stdout.close()


def _system_copies_of_bundled_libraries(process: Any, bundle: Path, timeout: float) -> list[str]:
    """Libraries the process mapped from outside the bundle although the bundle ships them.
    Waits until the process has loaded Qt's GUI library (the renderer draws the window)."""
    shipped = {path.name for path in bundle.rglob("*.so*")}
    deadline = time.monotonic() + timeout
    mapped: set[str] = set()
    while time.monotonic() < deadline:
        mapped = {region.path for region in process.memory_maps() if ".so" in region.path}
        if any("libQt6Gui" in path for path in mapped):
            break
        time.sleep(0.2)
    assert any("libQt6Gui" in path for path in mapped), sorted(mapped)
    root = str(bundle.resolve())
    return sorted(
        path
        for path in mapped
        if Path(path).name in shipped and not str(Path(path).resolve()).startswith(root)
    )


def _wait_for_renderer(main: Any, timeout: float) -> Any:
    """The first child whose command line carries ``--role`` (psutil is untyped, hence Any)."""
    import psutil

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and main.is_running():
        for child in main.children(recursive=True):
            try:
                if "--role" in child.cmdline():
                    return child
            except psutil.NoSuchProcess:
                continue
        time.sleep(0.1)
    return None


def _early_output(process: subprocess.Popen[bytes]) -> str:
    if process.poll() is None:
        return "main process still running, but no renderer child appeared"
    out = process.stdout.read() if process.stdout else b""
    return f"main process exited with {process.returncode}: {out.decode(errors='replace')[-3000:]}"


# --- what the bundle and the package contain --------------------------------------------------


def test_only_the_needed_qt_plugins_are_bundled(built: Built) -> None:
    plugins = built.bundle / "_internal" / "PySide6" / "Qt" / "plugins"
    found = {p.relative_to(plugins).as_posix() for p in plugins.rglob("*.so")}
    for needed in ("platforms/libqoffscreen.so", "platforms/libqxcb.so",
                   "platforms/libqwayland.so", "imageformats/libqsvg.so"):  # fmt: skip
        assert needed in found
    kinds = {name.split("/")[0] for name in found}
    assert kinds <= {
        "platforms",
        "platforminputcontexts",
        "platformthemes",
        "xcbglintegrations",
        "wayland-shell-integration",
        "wayland-decoration-client",
        "wayland-graphics-integration-client",
        "imageformats",
        "iconengines",
    }, kinds
    for unwanted in ("platforms/libqeglfs.so", "platforms/libqvnc.so",
                     "platformthemes/libqgtk3.so", "imageformats/libqjpeg.so"):  # fmt: skip
        assert unwanted not in found
    assert not (built.bundle / "_internal" / "PySide6" / "Qt" / "translations").exists()
    qt_libs = {p.name for p in (built.bundle / "_internal" / "PySide6" / "Qt" / "lib").iterdir()}
    heavy = ("libQt6Qml", "libQt6Quick", "libQt6Pdf", "libQt6WebEngine", "libQt6Multimedia")
    assert not {name for name in qt_libs if name.startswith(heavy)}, sorted(qt_libs)
    internal = {p.name for p in (built.bundle / "_internal").iterdir()}
    assert not internal & {"mypy", "hypothesis", "_pytest", "pytest", "tkinter"}


def test_deb_layout_and_control(built: Built, deb_root: Path, tmp_path: Path) -> None:
    fields = {
        key: _deb_field(built.deb, key) for key in ("Package", "Version", "Architecture", "Depends")
    }
    assert fields["Package"] == "maka"
    assert fields["Version"] == __version__
    arch = subprocess.run(
        ["dpkg", "--print-architecture"], capture_output=True, text=True, check=True
    ).stdout.strip()
    assert fields["Architecture"] == arch
    depends = fields["Depends"]
    for package in ("libc6", "libegl1", "libgl1", "libfontconfig1", "libxkbcommon-x11-0",
                    "libxcb-cursor0", "libxcb-icccm4", "libxcb-keysyms1"):  # fmt: skip
        assert package in depends
    exe = deb_root / "opt" / "maka" / "maka"
    assert os.access(exe, os.X_OK)
    libraries = [
        path
        for path in (deb_root / "opt").rglob("*.so*")
        if path.is_file() and not path.is_symlink()
    ]
    assert libraries and all(path.stat().st_mode & 0o777 == 0o644 for path in libraries)
    import gzip

    changelog = deb_root / "usr" / "share" / "doc" / "maka" / "changelog.gz"
    assert gzip.decompress(changelog.read_bytes()) == (ROOT / "CHANGELOG.md").read_bytes()
    link = deb_root / "usr" / "bin" / "maka"
    assert link.is_symlink() and os.readlink(link) == "/opt/maka/maka"
    desktop = (deb_root / "usr" / "share" / "applications" / "maka.desktop").read_text("utf-8")
    entry = dict(line.split("=", 1) for line in desktop.splitlines()[1:] if "=" in line)
    assert desktop.startswith("[Desktop Entry]\n")
    assert (entry["Type"], entry["Exec"], entry["Icon"]) == ("Application", "maka", "maka")
    icons = deb_root / "usr" / "share" / "icons" / "hicolor"
    assert (icons / "256x256" / "apps" / "maka.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert b"<svg" in (icons / "scalable" / "apps" / "maka.svg").read_bytes()
    # /usr/bin/maka is a symlink: the bundle must find its files through one.
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "maka").symlink_to(exe)
    completed = run_maka(bin_dir / "maka", "--version", data_dir=tmp_path)
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"maka {__version__}"


def test_deb_declares_the_newest_glibc_its_files_need(built: Built) -> None:
    """Measured independently of the build script: the versioned glibc symbols every ELF file
    of the bundle imports (``objdump -T``); the package must not promise an older glibc."""
    import re

    needed: tuple[int, ...] = (2, 34)
    pattern = re.compile(r"\*UND\*.*\(GLIBC_(\d+)\.(\d+)(?:\.(\d+))?\)")
    for dump in _objdump_every_elf_file(built.bundle, "-T"):
        for match in pattern.finditer(dump):
            needed = max(needed, tuple(int(part) for part in match.groups() if part))
    libc = next(
        part.strip() for part in _deb_field(built.deb, "Depends").split(",") if "libc6" in part
    )
    assert libc == f"libc6 (>= {'.'.join(map(str, needed))})"


def test_no_bundled_file_searches_the_build_hosts_folders(built: Built) -> None:
    """RPATH/RUNPATH entries (read with ``objdump -p``) may only be relative to the file."""
    foreign: list[str] = []
    for path, dump in _objdump_every_elf_file(built.bundle, "-p", named=True):
        for line in dump.splitlines():
            words = line.split()
            if len(words) == 2 and words[0] in ("RPATH", "RUNPATH"):
                foreign.extend(
                    f"{path}: {entry}"
                    for entry in words[1].split(":")
                    if not entry.startswith("$ORIGIN")
                )
    assert foreign == [], foreign[:10]


def _objdump_every_elf_file(bundle: Path, option: str, *, named: bool = False) -> Iterator[Any]:
    """``objdump OPTION`` of every ELF file of the bundle: its text, or (file name, text)."""
    for path in sorted(bundle.rglob("*")):
        if path.is_symlink() or not path.is_file() or path.read_bytes()[:4] != b"\x7fELF":
            continue
        dump = subprocess.run(
            ["objdump", option, str(path)], capture_output=True, text=True, check=False
        ).stdout
        yield (path.name, dump) if named else dump


def _deb_field(deb: Path, name: str) -> str:
    return subprocess.run(
        ["dpkg-deb", "-f", str(deb), name], capture_output=True, text=True, check=True
    ).stdout.strip()


def test_deb_depends_cover_every_system_library(built: Built, deb_root: Path) -> None:
    """Each shared library the installed bundle loads from the system (as its own loader would
    resolve it) belongs to a declared dependency, directly or through that package's own
    dependencies; a library this machine lacks must at least be named by a declared package."""
    internal = deb_root / "opt" / "maka" / "_internal"
    depends = _deb_field(built.deb, "Depends")
    declared = {alt.strip().split(" ")[0] for item in depends.split(",") for alt in item.split("|")}
    closure = _installed_closure(declared)
    system_paths: set[str] = set()
    missing: set[str] = set()
    for soname, resolved in _ldd_all(deb_root / "opt" / "maka", internal):
        if resolved is None:
            missing.add(soname)
        elif not resolved.startswith(str(deb_root)):
            system_paths.add(os.path.realpath(resolved))
    owners = _dpkg_owners(system_paths)
    unowned = {path: owner for path, owner in owners.items() if owner not in closure}
    assert not unowned, f"system libraries from undeclared packages: {unowned}"
    for soname in missing:
        assert _conventional_package(soname) in declared, f"{soname}: not found and not declared"


def _ldd_all(top: Path, internal: Path) -> Iterator[tuple[str, str | None]]:
    env = dict(os.environ, LD_LIBRARY_PATH=str(internal))
    for path in sorted(top.rglob("*")):
        if not path.is_file() or path.is_symlink():
            continue
        with open(path, "rb") as handle:
            if handle.read(4) != b"\x7fELF":
                continue
        out = subprocess.run(
            ["ldd", str(path)], env=env, capture_output=True, text=True, check=False
        ).stdout
        for line in out.splitlines():
            if "=>" not in line:
                continue
            soname, _, rest = line.strip().partition(" => ")
            target = rest.split(" (")[0].strip()
            yield soname, None if target == "not found" else target


def _dpkg_owners(paths: set[str]) -> dict[str, str]:
    owners: dict[str, str] = {}
    for path in sorted(paths):
        candidates = [path, path.replace("/usr/lib/", "/lib/", 1)]
        for candidate in candidates:
            result = subprocess.run(
                ["dpkg", "-S", candidate], capture_output=True, text=True, check=False
            )
            if result.returncode == 0:
                owners[path] = result.stdout.split(":", 1)[0].strip()
                break
        else:
            owners[path] = "<no package>"
    return owners


def _installed_closure(roots: set[str]) -> set[str]:
    """Installed packages reachable from ``roots`` through Depends/Pre-Depends (architecture
    qualifiers and alternatives flattened)."""
    listing = subprocess.run(
        ["dpkg-query", "-W", "-f", "${Package}\t${Pre-Depends}, ${Depends}\n"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    graph: dict[str, set[str]] = {}
    for line in listing.splitlines():
        package, _, deps = line.partition("\t")
        names = {alt.strip().split(" ")[0].split(":")[0] for item in deps.split(",")
                 for alt in item.split("|") if alt.strip()}  # fmt: skip
        graph.setdefault(package, set()).update(names)
    seen: set[str] = set()
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def _conventional_package(soname: str) -> str:
    """Debian's library package naming: libfoo.so.1 -> libfoo1, libfoo2.so.0 -> libfoo2-0."""
    base, _, major = soname.partition(".so.")
    base = base.lower().replace("_", "-")
    return f"{base}-{major}" if base[-1:].isdigit() else f"{base}{major}"


def test_bundle_size_within_budget(built: Built) -> None:
    budget = json.loads(BUDGET.read_text("utf-8"))
    allowed = int(budget["bundleBytes"] * (1 + budget["tolerance"]))
    size = int(str(built.summary["bundleBytes"]))
    assert size <= allowed, (
        f"bundle is {size / 2**20:.1f} MiB, over the budget of {budget['bundleBytes'] / 2**20:.1f}"
        f" MiB + {budget['tolerance']:.0%}: shrink it or update packaging/budget.json (and say "
        "why in docs/performance.md)"
    )


def test_icon_containers_hold_every_size(qapp: Any) -> None:
    """The .ico and .icns files are written by hand (packaging/icon_render.py); Qt's own readers
    must find every image in them, at the sizes the index claims."""
    from PySide6.QtGui import QImageReader

    del qapp
    assets = ROOT / "packaging" / "assets"
    for name, sizes in (("maka.ico", {16, 24, 32, 48, 64, 128, 256}),
                        ("maka.icns", {32, 64, 128, 256, 512, 1024})):  # fmt: skip
        reader = QImageReader(str(assets / name))
        found: set[int] = set()
        for index in range(reader.imageCount()):
            assert reader.jumpToImage(index), (name, index)
            image = reader.read()
            assert not image.isNull(), (name, index, reader.errorString())
            assert image.width() == image.height()
            found.add(image.width())
        assert found == sizes, (name, sorted(found))
