"""A session's workspace snapshots carried by ``maka export`` / ``maka import``
(docs/design/workspace.md section 4, "Export and import carry the snapshots").

Export: the session's checkpoint refs (every ``workspaceCheckpoint`` / ``workspaceBaseline`` fact
of the exported lines whose snapshot is whole in the private store) go into one Git bundle
written beside the export file. A scratch bare repository borrows the objects of every private
repository involved (``objects/info/alternates``) and holds exactly those refs, so the bundle
carries them and what they reach, nothing else of the stores. The export's last line, a
``maka.checkpoints.v1`` record, names the bundle, its sha256 and each ref with its commit and
workspace identity.

Import: before the data directory is touched, the bundle must match that record byte for byte
(sha256), unpack into a scratch repository, hold exactly the recorded refs, and every ref must
be one of the session's checkpoint facts with its commit and tree and every object under it
(``snapshots_whole``). Only then, after the ledger's import, are the refs fetched into each
workspace's private repository. A session imported without its snapshots (an older export,
``--no-checkpoints``, an export to standard output) is noted in ``checkpoints/imports.jsonl``,
so ``maka doctor`` says the snapshots were not carried instead of calling them missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import tempfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runtime.ledger.checkpoint_ports import CheckpointError
from runtime.ledger.coded_error import CodedError
from runtime.ledger.codes import TransferCode
from runtime.ledger.event_model import RuntimeEvent
from runtime.ledger.workspace_facts import snapshot_fact
from storage.checkpoints.checkpoint_git import GitCommand, GitRunner
from storage.checkpoints.checkpoint_presence import snapshots_whole
from storage.checkpoints.checkpoint_store import GitCheckpointStore
from storage.private_files import ensure_private_dir, private_opener

CHECKPOINTS_KIND = "maka.checkpoints.v1"
BUNDLE_SUFFIX = ".bundle"
IMPORTS_LOG = "imports.jsonl"
_REF = re.compile(r"^refs/maka/[A-Za-z0-9._:-]+(/[A-Za-z0-9._:-]+)*$")
_OBJECT_ID = re.compile(r"^[0-9a-f]{40}([0-9a-f]{24})?$")
_FETCH_BATCH = 200


class CheckpointTransferError(CodedError):
    """A bundle refused or a transfer that failed; ``code`` is a ``TransferCode``."""

    code: TransferCode

    def __init__(self, code: TransferCode, message: str) -> None:
        super().__init__(code, message)
        self.message = message


@dataclass(frozen=True, slots=True)
class CarriedRef:
    ref: str
    commit_id: str
    tree_id: str
    workspace_identity: str


def snapshot_refs(events: Iterable[RuntimeEvent]) -> list[CarriedRef]:
    """The snapshots the events record, in ledger order, each ref once."""
    found: dict[str, CarriedRef] = {}
    for event in events:
        body = snapshot_fact(event.get("actions"))
        if body is None:
            continue
        ref, commit, tree = body.get("checkpointRef"), body.get("commitId"), body.get("treeId")
        workspace = body.get("workspaceIdentity")
        if all(isinstance(value, str) for value in (ref, commit, tree, workspace)):
            found.setdefault(str(ref), CarriedRef(str(ref), str(commit), str(tree), str(workspace)))
    return list(found.values())


def bundle_name(export_name: str) -> str:
    return export_name + BUNDLE_SUFFIX


# ---- export -----------------------------------------------------------------------------------


def write_bundle(
    carrier: GitCheckpointStore, refs: list[CarriedRef], target: Path
) -> list[CarriedRef]:
    """Write the bundle of the refs whose snapshots are whole and undamaged to ``target``;
    returns them (none written when none is). Every object is re-hashed first, as a restore
    does: a damaged one would make a bundle no import can unpack. Raises ``CheckpointError``."""
    by_workspace: dict[str, list[CarriedRef]] = {}
    for item in refs:
        by_workspace.setdefault(item.workspace_identity, []).append(item)
    carried: list[CarriedRef] = []
    for workspace, items in by_workspace.items():
        whole = carrier.present_snapshots(workspace, [(i.commit_id, i.tree_id) for i in items])
        present = [i for i in items if (i.commit_id, i.tree_id) in whole]
        damage = carrier.verify_snapshots(workspace, sorted({i.tree_id for i in present}))
        carried.extend(i for i in present if not damage.get(i.tree_id))
    if not carried:
        return []
    runner = carrier.git_runner()
    with tempfile.TemporaryDirectory(prefix="maka-export-") as scratch:
        git_dir = Path(scratch) / "carry.git"
        runner.init_bare(git_dir)
        sources = sorted({str(carrier.git_dir(i.workspace_identity) / "objects") for i in carried})
        (git_dir / "objects" / "info").mkdir(parents=True, exist_ok=True)
        (git_dir / "objects" / "info" / "alternates").write_text(
            "".join(f"{source}\n" for source in sources), "utf-8"
        )
        lines = "".join(f"create {i.ref} {i.commit_id}\n" for i in carried)
        runner.run(["update-ref", "--stdin"], git_dir=git_dir, stdin=lines.encode())
        # Git runs in the scratch repository: a relative target would land there.
        runner.run(
            ["bundle", "create", "--quiet", str(target.absolute()), "--all"], git_dir=git_dir
        )
    return carried


def manifest_line(name: str, bundle: Path, carried: list[CarriedRef]) -> bytes:
    from runtime.ledger.canonical_codec import canonical_json_bytes

    return canonical_json_bytes(
        {
            "kind": CHECKPOINTS_KIND,
            "bundle": name,
            "sha256": _sha256(bundle),
            "bytes": bundle.stat().st_size,
            "refs": [
                {
                    "ref": i.ref,
                    "commitId": i.commit_id,
                    "treeId": i.tree_id,
                    "workspaceIdentity": i.workspace_identity,
                }
                for i in carried
            ],
        }
    )


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


# ---- import -----------------------------------------------------------------------------------


def _invalid(message: str) -> CheckpointTransferError:
    return CheckpointTransferError(TransferCode.IMPORT_CHECKPOINTS_INVALID, message)


def _plain_file_name(name: str) -> bool:
    """Whether ``name`` names a file in the export's own folder and nothing else: no folder
    part, never ``.`` or ``..``. A name starting with a dot (an export written to ``.hidden``)
    is one, and so is a backslash where it is no separator (an export to ``a\\b.jsonl`` on
    Linux): export writes exactly those names."""
    separators = ("/", "\\") if os.sep == "\\" or os.altsep else ("/",)
    return (
        bool(name)
        and name not in (".", "..")
        and "\x00" not in name
        and not any(separator in name for separator in separators)
    )


def manifest_refs(manifest: Mapping[str, Any]) -> tuple[str, str, int, list[CarriedRef]]:
    """The record's bundle name, sha256, size and refs; raises ``CheckpointTransferError``
    when the record is malformed."""
    name, digest, size, raw = (
        manifest.get("bundle"),
        manifest.get("sha256"),
        manifest.get("bytes"),
        manifest.get("refs"),
    )
    if not isinstance(name, str) or not _plain_file_name(name):
        raise _invalid("the snapshots record names no plain file")
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise _invalid("the snapshots record has no sha256")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise _invalid("the snapshots record has no size")
    if not isinstance(raw, list) or not raw:
        raise _invalid("the snapshots record names no refs")
    refs: list[CarriedRef] = []
    for entry in raw:
        values = (
            [entry.get(key) for key in ("ref", "commitId", "treeId", "workspaceIdentity")]
            if isinstance(entry, dict)
            else []
        )
        if len(values) != 4 or not all(isinstance(value, str) for value in values):
            raise _invalid("a ref of the snapshots record is malformed")
        ref, commit, tree, workspace = (str(value) for value in values)
        if not _REF.match(ref) or not _OBJECT_ID.match(commit) or not _OBJECT_ID.match(tree):
            raise _invalid(f"the ref {ref[:120]!r} of the snapshots record is malformed")
        refs.append(CarriedRef(ref, commit, tree, workspace))
    return name, digest, size, refs


def checked_bundle(
    git: GitCommand,
    export_file: Path,
    manifest: Mapping[str, Any],
    *,
    session_id: str,
    recorded: list[CarriedRef],
    scratch: Path,
) -> list[CarriedRef]:
    """Validate the bundle beside ``export_file`` into a scratch repository under ``scratch``
    (nothing of the data directory is touched, not even created); returns its refs, then held
    by ``scratch_repository(scratch)``."""
    name, digest, size, refs = manifest_refs(manifest)
    bundle = export_file.with_name(name)
    renamed = export_file.with_name(bundle_name(export_file.name))
    if not bundle.exists() and renamed.is_file():
        # The pair was renamed together (x.jsonl and x.jsonl.bundle to y.*): the file beside
        # it under the export's own name, taken only if its bytes are the recorded ones.
        bundle, name = renamed, renamed.name
    try:
        actual_size = bundle.stat().st_size
    except OSError:
        raise CheckpointTransferError(
            TransferCode.IMPORT_CHECKPOINTS_MISSING,
            f"the export names its snapshots file {name}, which is not beside it in "
            f"{export_file.parent}"
            + (f" (nor is {renamed.name})" if renamed.name != name else "")
            + "; bring it beside the export, or import with --no-checkpoints to leave the "
            "snapshots out",
        ) from None
    if actual_size != size or _sha256(bundle) != digest:
        raise _invalid(f"{name} is not the snapshots file this export was written with")
    facts = {item.ref: item for item in recorded}
    prefix = f"refs/maka/{session_id}/"
    for item in refs:
        if not item.ref.startswith(prefix) or facts.get(item.ref) != item:
            raise _invalid(f"{item.ref} is not a snapshot this session's ledger records")
    git_dir = scratch_repository(scratch)
    runner = GitRunner(git, ensure_private_dir(scratch / "home"))
    try:
        runner.init_bare(git_dir)
        runner.run(
            # Git runs in the scratch repository: a relative path would be read from there.
            ["fetch", "--quiet", "--no-tags", str(bundle.absolute()), "+refs/maka/*:refs/maka/*"],
            git_dir=git_dir,
        )
        out = runner.run(
            ["for-each-ref", "--format=%(refname) %(objectname)", "refs/"], git_dir=git_dir
        )
        whole = snapshots_whole(runner, git_dir, [(i.commit_id, i.tree_id) for i in refs])
    except CheckpointError as error:
        raise _invalid(f"{name} cannot be read as the session's snapshots: {error}") from None
    held = dict(line.split(" ", 1) for line in out.decode().splitlines() if line)
    if held != {item.ref: item.commit_id for item in refs}:
        raise _invalid(f"{name} holds other refs than the export records")
    broken = [item.ref for item in refs if (item.commit_id, item.tree_id) not in whole]
    if broken:
        raise _invalid(f"{name} lacks the files of {broken[0]}")
    return refs


def scratch_repository(scratch: Path) -> Path:
    return scratch / "carry.git"


def unpack(carrier: GitCheckpointStore, scratch: Path, refs: list[CarriedRef]) -> None:
    """Fetch the validated refs from the scratch repository (``checked_bundle``) into each
    workspace's private repository. Raises ``CheckpointTransferError``."""
    by_workspace: dict[str, list[CarriedRef]] = {}
    for item in refs:
        by_workspace.setdefault(item.workspace_identity, []).append(item)
    try:
        runner = carrier.git_runner()
        for workspace, items in by_workspace.items():
            with carrier.locked(workspace):
                git_dir = carrier.ensure_repo(workspace)
                for start in range(0, len(items), _FETCH_BATCH):
                    batch = items[start : start + _FETCH_BATCH]
                    runner.run(
                        [
                            "fetch",
                            "--quiet",
                            "--no-tags",
                            str(scratch_repository(scratch)),
                            *(f"{i.ref}:{i.ref}" for i in batch),
                        ],
                        git_dir=git_dir,
                    )
    except (CheckpointError, OSError) as error:
        raise CheckpointTransferError(
            TransferCode.IMPORT_CHECKPOINTS_FAILED,
            f"the snapshots could not be added to the checkpoint store: {error}",
        ) from None


def note_import(
    carrier: GitCheckpointStore,
    session_id: str,
    carried: bool,
    left_out: Iterable[str] = (),
) -> None:
    """Record whether the session's latest import brought its snapshots, and which recorded
    ones its file left out when it brought the others (``left_out``: their refs; an export
    from a host whose ledger is shared carries only the snapshots in its own data folder)."""
    ensure_private_dir(carrier.root)
    entry: dict[str, object] = {"sessionId": session_id, "carried": carried}
    refs = sorted(set(left_out))
    if carried and refs:
        entry["leftOut"] = refs
    line = json.dumps(entry) + "\n"
    with open(carrier.root / IMPORTS_LOG, "a", encoding="utf-8", opener=private_opener) as log:
        log.write(line)
        log.flush()
        os.fsync(log.fileno())


def _latest_imports(data_dir: Path) -> dict[str, dict[str, Any]]:
    """Each session's latest line of the imports log."""
    from storage.checkpoints.checkpoint_store import CHECKPOINTS_DIR

    try:
        text = (Path(data_dir) / CHECKPOINTS_DIR / IMPORTS_LOG).read_text("utf-8")
    except OSError:
        return {}
    latest: dict[str, dict[str, Any]] = {}
    for line in text.splitlines():
        try:
            entry = json.loads(line)
        except ValueError:
            continue  # a line cut short by a crash
        if isinstance(entry, dict) and isinstance(entry.get("sessionId"), str):
            latest[entry["sessionId"]] = entry
    return latest


def imported_left_out(data_dir: Path) -> dict[str, frozenset[str]]:
    """The refs of recorded snapshots the latest import of each session left out while it
    brought the others (none listed for a session imported without any)."""
    found: dict[str, frozenset[str]] = {}
    for session, entry in _latest_imports(data_dir).items():
        refs = entry.get("leftOut")
        if isinstance(refs, list) and refs:
            found[session] = frozenset(str(ref) for ref in refs)
    return found


def imported_without_snapshots(data_dir: Path) -> set[str]:
    """The sessions whose latest import did not bring their snapshots."""
    return {
        session
        for session, entry in _latest_imports(data_dir).items()
        if not bool(entry.get("carried"))
    }
