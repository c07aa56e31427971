"""Every stable code a user can meet -> a severity and a headline, in plain words.

Why one table outside Qt: docs/design/codes.md says the UI maps each stable code to a severity and a
sentence in one place, and tests assert codes, not sentences. The renderer (through
``renderer/park_text.py``, which translates with Qt's ``tr``), the CLI and the TUI all read this
module, so ``maka plan`` prints the same words as the banner without loading Qt. It imports only
the standard library (the renderer may import it, like ``app/bridge_contract.py``). What to do
about a park (its next step, Try again, a damaged record, a write that did not happen) is
``app/park_guidance.py``, which reads this table.

Keyed by the code *strings*: the renderer may not import the runtime's enums. A test walks every
code of docs/design/codes.md and every code enum and fails when one has no sentence here. Sentences
name no exception classes and quote no raw operating-system errors; those stay in "Copy
diagnostics".

Severity: ``info`` = an expected state the user can act on calmly; ``warn`` = the workspace or
session needs attention before resuming; ``error`` = the ledger or the host is not in a
trustworthy state. An unknown code is shown as ``error`` with its code, never hidden.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, NamedTuple


class Severity(StrEnum):
    INFO = "info"
    WARN = "warn"
    ERROR = "error"


_RANK = {Severity.INFO: 0, Severity.WARN: 1, Severity.ERROR: 2}

_I, _W, _E = Severity.INFO, Severity.WARN, Severity.ERROR


class CodeRecord(NamedTuple):
    """Everything the project says about one code, in one place: its ``severity``, the
    ``sentence`` people read, for a park reason the ``next_step`` (what to do; empty: the
    severity's default, ``park_guidance.NEXT_STEP_BY_SEVERITY``), and the detail ``fields`` its
    diagnostics carry (the codes and paths they name as data, never inside the message)."""

    severity: Severity
    sentence: str
    next_step: str = ""
    fields: tuple[str, ...] = ()


def _records(table: dict[str, tuple[Any, ...]]) -> dict[str, CodeRecord]:
    return {code: CodeRecord(*entry) for code, entry in table.items()}


_CHANGED = ("changedPaths", "moreChangedPaths")
_SNAPSHOT = ("checkpointRef", "commitId", "basis", "basisRunId", "rolledForward")
_RESTORE_POINT = (
    "restorePoint",
    "laterCalls",
    "moreLaterCalls",
    "lostCheckpointRef",
    "snapshotAfterCall",
    "snapshotAgeMs",
)

PARK_REASONS: dict[str, CodeRecord] = _records(
    {
        "resume_feature_disabled": (
            _I,
            "Safe resume is turned off on this computer.",
            "Turn on Safe resume in Settings, or check your files and send a new message to carry "
            "on.",
        ),
        "resume_candidate_missing": (
            _I,
            "There is nothing interrupted to resume in this session.",
        ),
        "session_busy": (
            _I,
            "This session is running right now (another client or Safe resume drives it). Wait "
            "for it to finish.",
        ),
        "continuation_already_exists": (
            _I,
            "This interruption has already been resumed.",
            "",
            ("continuationClaimId", "continuationRunId"),
        ),
        "dangling_tool_state": (
            _W,
            "A tool call's outcome is unknown or unsettled; resuming could repeat or hide its "
            "side effect.",
            "Check the files that tool call may have changed, then send a new message to carry "
            "on, or say on its card below whether it ran (It ran / It did not run): Safe resume "
            "then checks again by itself, as Try again does,"
            " and offers Safe resume if nothing else stands in the way.",
        ),
        "pending_permission": (
            _W,
            "A permission request was never answered.",
            "Check what that request was for, then send a new message to carry on.",
        ),
        "background_operation_pending": (
            _W,
            "A background command or child task is still running.",
            "A command from before the restart is still running and may still change files: stop "
            "it (or wait for it to end), then choose Try again, or send a new message to carry "
            "on.",
            ("pending",),
        ),
        "workspace_identity_mismatch": (
            _W,
            "This folder is not the same workspace the session ran in.",
            "Choose Locate folder…: this folder if its marker was deleted (git clean -fdx "
            "deletes .maka), or the session's folder if it is elsewhere; or put its "
            ".maka/workspace.json back. Then choose Try again, or send a new message here.",
        ),
        "provider_history_too_long": (
            _W,
            "The conversation no longer fits the model's context window (or the model server "
            "refused it without saying why), so resuming would fail the same way.",
            "Send a new, shorter message to carry on: the turn that did not fit is left out from "
            "then on. If a short message fails the same way, start a new session or give the "
            "model server a larger context size.",
        ),
        "workspace_identity_missing": (
            _W,
            "The interrupted run did not record which workspace it used.",
            "Check your files, then send a new message to carry on; this run cannot be resumed.",
        ),
        "workspace_folder_missing": (
            _W,
            "The session's folder is no longer there; it was moved, deleted or replaced by a file.",
            "If you moved the folder, choose Locate folder… and pick its new place. If you "
            "deleted it, View › Timeline's Continue from here… makes a new folder from a "
            "snapshot of a point and carries the session on there; or choose Remove session.",
        ),
        "tool_catalog_mismatch": (
            _W,
            "A tool used in this session is no longer available.",
            "Make the missing tool available again and choose Try again, or send a new message to "
            "carry on.",
        ),
        "workspace_drift": (
            _W,
            "The files in the folder differ from how they were when the run stopped.",
            "Look at the changed files listed above: put them back as they were and choose Try "
            "again, or send a new message telling the model what changed.",
            (*_SNAPSHOT, *_CHANGED),
        ),
        "workspace_checkpoint_stale": (
            _W,
            "The snapshot of the folder is out of date.",
            "A command or a write ran after the last snapshot, so files may have changed: check "
            "them, then send a new message to carry on.",
            ("checkpointRef", "subject", *_CHANGED),
        ),
        "workspace_checkpoint_failed": (
            _W,
            "No snapshot of the folder could be taken at the stop.",
            "",
            ("reasonCode", "message"),
        ),
        "workspace_checkpoint_missing": (
            _E,
            "The snapshot of the folder taken at the stop is gone or damaged.",
            "Check your files, then send a new message to carry on; the snapshot cannot be "
            "compared.",
            ("checkpointRef", "commitId"),
        ),
        "runtime_offset_mismatch": (
            _E,
            "The saved history does not end where the checkpoint says it should.",
            "",
            ("expectedRuntimeEventHighWater", "actualRuntimeEventHighWater"),
        ),
        "runtime_ledger_empty": (
            _E,
            "The interrupted run has no saved events to continue from.",
        ),
        "runtime_ledger_unreadable": (
            _E,
            "The run's saved history cannot be read or has been quarantined.",
        ),
        "runtime_identity_mismatch": (
            _E,
            "The run's saved history mixes events of different runs.",
        ),
        "continuation_identity_reused": (
            _E,
            "A new run would reuse the identity of an old one.",
        ),
        "terminal_repair_failed": (
            _E,
            "The run's recorded ending and its header disagree.",
        ),
        "provider_resume_head_unsupported": (
            _E,
            "The history does not start with a user message, so it cannot be continued.",
        ),
        "provider_resume_boundary_unsupported": (
            _E,
            "The history does not end at a user message or a tool result, so it cannot be "
            "continued.",
        ),
        "provider_replay_non_suffix_gap": (
            _E,
            "An unresolved tool call sits in the middle of the history.",
        ),
        "source_run_unreadable": (
            _E,
            "The interrupted run's record cannot be read.",
        ),
        "source_prefix_digest_mismatch": (
            _E,
            "An earlier part of the saved history has changed.",
        ),
        "runtime_lineage_cycle": (
            _E,
            "The chain of earlier resumes loops back on itself.",
        ),
        "runtime_lineage_depth_exceeded": (
            _E,
            "The chain of earlier resumes is longer than 64 links.",
        ),
        "runtime_lineage_missing": (
            _E,
            "A link in the chain of earlier resumes is missing.",
        ),
        "runtime_lineage_start_mismatch": (
            _E,
            "An earlier resume's starting point does not match its record.",
        ),
        "runtime_lineage_replay_mismatch": (
            _E,
            "The history replayed by an earlier resume has changed.",
        ),
        "runtime_lineage_claim_mismatch": (
            _E,
            "An earlier resume has no matching claim on record.",
        ),
        "continuation_authority_unavailable": (
            _E,
            "The record of earlier resumes cannot be read.",
        ),
        "continuation_claim_conflict": (
            _E,
            "Another resume claimed this point first.",
        ),
        "safety_observation_unavailable": (
            _E,
            "The workspace, tools or background work could not be inspected.",
        ),
    }
)

DIAGNOSTICS: dict[str, CodeRecord] = _records(
    {
        "pending_tool_result": (
            _W,
            "A tool call has no recorded result; its outcome is unknown.",
            "",
            ("resolverReason",),
        ),
        "tool_not_dispatched": (
            _W,
            "A tool call was prepared but never started.",
            "",
            ("resolverReason",),
        ),
        "tool_recovery_parked": (
            _W,
            "Recovery could not settle a tool call on its own.",
            "",
            ("resolverReason",),
        ),
        "tool_recovery_corruption": (
            _E,
            "A tool call's recovery record is inconsistent.",
            "",
            ("resolverReason",),
        ),
        "tool_ledger_corruption": (
            _E,
            "The tool history is inconsistent.",
            "",
            ("issueCode",),
        ),
        "duplicate_event_id": (
            _E,
            "The same event is saved twice in the history.",
        ),
        "semantic_lane_conflict": (
            _E,
            "A saved tool event is not in the form its kind is saved in (a tool result not "
            "recorded as coming from the tool, say).",
        ),
        "protocol_marker_invalid": (
            _E,
            "A mark only the run's first event may carry is on another event, or is not one Maka "
            "writes.",
        ),
        "workspace_fact_malformed": (
            _E,
            "A record of a folder snapshot is not one Maka writes: it is visible to the model or "
            "carries content.",
        ),
        "unmatched_tool_result": (
            _E,
            "A tool result has no matching call.",
        ),
        "tool_name_mismatch": (
            _E,
            "A tool result names a different tool than its call.",
        ),
        "workspace_location_changed": (
            _I,
            "The workspace folder has moved; it is still the same workspace.",
        ),
        "workspace_verified": (
            _I,
            "The files in the folder are exactly as in the last snapshot Maka recorded: at the "
            "stop, or when you last decided about them.",
            "",
            (*_SNAPSHOT, "skippedPaths"),
        ),
        "workspace_checkpoint_unavailable": (
            _I,
            "No snapshot of the folder could be compared: the session runs without them, or the "
            "run stopped before its first one was recorded, with nothing written; resume checks "
            "the history only.",
            "",
            ("reasonCode", "noSnapshotYet"),
        ),
        "checkpoint_git_missing": (
            _I,
            "Snapshots of the folder need Git 2.25 or newer, and none was found.",
        ),
        "checkpoint_nested_repository": (
            _I,
            "The folder holds another Git repository or a submodule, which snapshots do not cover, "
            "so none is taken while it is there (a nested repository a .gitignore rule names is "
            "left out, and the rest is snapshotted).",
        ),
        "checkpoint_lfs_unsupported": (
            _I,
            "The folder uses Git LFS, which snapshots do not support.",
        ),
        "checkpoint_too_large": (
            _I,
            "The folder is too large for snapshots.",
        ),
        "checkpoint_turned_off": (
            _I,
            "Snapshots of the folder are turned off on this computer.",
        ),
        "workspace_checkpoints_not_carried": (
            _I,
            "The session was imported without its snapshots of the folder; to resume, continue "
            "with the current files.",
        ),
        "workspace_checkpoint_unnamed": (
            _I,
            "A snapshot's name in the checkpoint store is gone while its files are still there; "
            "Maka names it again before it removes anything.",
        ),
        "workspace_store_borrowing": (
            _I,
            "A snapshot store still reads files from the folder's Git repository; the next "
            "Maka command that opens this data folder copies them in.",
        ),
        "workspace_checkpoint_damaged": (
            _E,
            "A snapshot's stored files are not what it recorded; a restore from it is refused.",
        ),
        "workspace_restore_abandoned": (
            _I,
            "A restored copy was made by a resume that did not start; it is left as it is and "
            "never used.",
            "",
            ("path",),
        ),
        "workspace_restore_point": (
            _I,
            "A restored copy would not be the folder at the stop: the note says which point of "
            "the history it would hold.",
            "",
            ("checkpointRef", *_RESTORE_POINT),
        ),
        "workspace_restore_place": (
            _I,
            "A restored copy is offered: the note names the new folder it would be made in "
            "when you do not choose one.",
            "",
            ("path",),
        ),
        "workspace_settle_takes_folder": (
            _I,
            "Answering whether the interrupted calls ran also takes the folder as it is now as "
            "the new starting point, so no decision about the files follows.",
            "",
            (),
        ),
        "workspace_rebaseline_uncompared": (
            _I,
            "No snapshot is left to compare your current files with: continuing with them tells "
            "the model that files may have changed, not which.",
        ),
        "workspace_rebaseline_uncaptured": (
            _I,
            "Your current files cannot be snapshotted as they are (the note says why, a nested "
            "repository say): continuing with them goes on without a snapshot until that is "
            "removed.",
            "",
            ("reasonCode", "message"),
        ),
        "workspace_restore_unavailable": (
            _E,
            "No snapshot of the folder is left to make a restored copy from; only continuing with "
            "your current files is offered.",
        ),
        "workspace_restore_target_not_empty": (
            _E,
            "A restored copy needs a new or empty folder; the one chosen holds files.",
        ),
        "workspace_restore_target_inside": (
            _E,
            "A restored copy goes outside your folder: the one chosen is inside it.",
        ),
        "workspace_restore_failed": (
            _E,
            "The restored copy of the folder could not be made.",
        ),
        "workspace_restore_snapshot_damaged": (
            _E,
            "The snapshot's stored files are not what it recorded, so no copy was made from it.",
        ),
        "workspace_decision_not_offered": (
            _E,
            "This resume has no changed files to decide about; nothing was done.",
        ),
        "workspace_drift_changed": (
            _W,
            "The files changed again after the list was shown, so nothing was done: check the "
            "new list and choose again.",
        ),
        "settle_folder_changed": (
            _W,
            "The folder changed after this card was shown: read what answering does now, "
            "and answer again.",
        ),
        "checkpoint_git_failed": (
            _W,
            "Git could not take a snapshot of the folder.",
        ),
        "checkpoint_git_timeout": (
            _W,
            "Taking a snapshot of the folder took too long.",
        ),
        "checkpoint_folder_unreadable": (
            _W,
            "A file or folder in the folder could not be read for a snapshot.",
        ),
        "reconcile_matches_prior_state": (
            _W,
            "The write did not happen; redo is left to you.",
        ),
        "reconcile_diverged": (
            _W,
            "The file was changed by someone else since the tool ran; Maka will not overwrite it.",
        ),
        "reconcile_unreadable": (
            _W,
            "The file or the workspace could not be checked, so what happened is unknown.",
        ),
        "recovery_bundle_completed": (
            _I,
            "Completed after recovery: the write had happened.",
        ),
        "dispatch_without_response": (
            _W,
            "The call was dispatched but no result was recorded, so whether it ran is unknown; it "
            "is never retried or assumed.",
        ),
        "legacy_dispatch_unknown": (
            _W,
            "It is not known whether the tool started.",
        ),
        "orphan_dispatch": (
            _E,
            "The start of a tool call is saved, but the call itself is missing.",
        ),
        "recovery_fact_corruption": (
            _E,
            "What recovery saved about a tool call after a restart is malformed or does not fit "
            "the call.",
        ),
        "write_temp_file_left": (
            _W,
            "A temporary file of the interrupted write is still in the folder; Maka left it for "
            "you to check.",
        ),
        "user_attested_ran": (
            _I,
            "You confirmed that this tool call ran.",
        ),
        "user_attested_not_run": (
            _I,
            "You confirmed that this tool call did not run.",
        ),
        "partial_skipped": (
            _E,
            "A model reply in the history was only partly saved, so the history cannot be handed "
            "back to the model.",
        ),
        "tool_id_mismatch": (
            _E,
            "A tool result answers its call under a different tool name.",
        ),
        "unsupported_role": (
            _E,
            "An entry of the history comes from the wrong side for its kind (a tool result not "
            "from a tool, say).",
        ),
        "unsupported_content": (
            _E,
            "An entry of the history is of a kind that cannot be handed back to the model.",
        ),
    }
)

REVALIDATION: dict[str, CodeRecord] = _records(
    {
        "source_identity_changed": (_E, "The interrupted run changed while resume was starting."),
        "source_terminal_changed": (
            _E,
            "The interrupted run's ending changed while resume was starting.",
        ),
        "source_high_water_changed": (
            _E,
            "New events were saved to the interrupted run while resume was starting.",
        ),
        "source_ledger_identity_changed": (
            _E,
            "The interrupted run's history changed while resume was starting.",
        ),
        "source_replay_changed": (_E, "The history to replay changed while resume was starting."),
        "workspace_identity_changed": (
            _W,
            "The workspace changed while resume was starting.",
        ),
        "background_operation_started": (
            _W,
            "A background command started while resume was starting.",
        ),
        "tool_catalog_changed": (_W, "The available tools changed while resume was starting."),
        "target_run_conflict": (_E, "Another run already uses the new run's identity."),
        "workspace_tree_changed": (
            _W,
            "Files in the folder changed while resume was starting.",
        ),
    }
)

# What the resolver concluded about one tool call, and how a settlement came about.
RESOLVER: dict[str, CodeRecord] = _records(
    {
        "completed": (_I, "The tool call finished and its result is recorded."),
        "parked": (_W, "The tool call is on hold until you decide what happened."),
        "definitely_not_dispatched": (_I, "The tool call never started."),
        "indeterminate": (_W, "Whether the tool call ran is unknown."),
        "corruption": (_E, "The tool call's record is inconsistent."),
        "matching_response": (_I, "The tool call has its recorded result."),
        "new_protocol_before_dispatch": (_I, "The tool call stopped before it started."),
        "orphan_response": (_E, "A tool result is saved, but the call it answers is missing."),
        "duplicate_call": (_E, "The same tool call is saved twice."),
        "duplicate_operation": (_E, "Two different tool calls are saved under one operation."),
        "duplicate_dispatch": (_E, "A tool call is saved as started twice."),
        "duplicate_response": (_E, "A tool call has two saved results."),
        "canonical_args_hash_conflict": (
            _E,
            "A tool call's arguments differ from the ones saved when it started.",
        ),
        "invocation_identity_conflict": (
            _E,
            "Events of one turn are saved as belonging to different sessions, runs or turns.",
        ),
        "identity_conflict": (
            _E,
            "Saved events of one tool call disagree about which call they belong to (its tool "
            "name or its identifiers).",
        ),
        "event_order_conflict": (
            _E,
            "A tool call's events are saved in an impossible order (started before it was called, "
            "say).",
        ),
        "normal_t2": (_I, "Settled by the tool's own result."),
        "pre_t1_synthetic": (_I, "Settled before the tool started."),
        "recovery_bundle": (_I, "Settled by recovery after a restart."),
        "user_attestation": (_I, "Settled by what you confirmed."),
    }
)

STORE: dict[str, CodeRecord] = _records(
    {
        "reserved_tool_boundary_fact": (
            _E,
            "Only the tool writer may record a tool's start or end.",
        ),
        "reserved_recovery_fact": (_E, "Only recovery may record a recovery decision."),
        "reserved_continuation_fact": (_E, "Only Safe resume may record a continuation."),
        "reserved_workspace_fact": (_E, "Only the snapshot writer may record a folder snapshot."),
        "reserved_run_ending_fact": (_E, "Only the run-ending writer may end a run."),
        "transition_shape_conflict": (_E, "The events to save do not form a valid step."),
        "run_sealed": (_E, "This run has already ended; nothing more can be added to it."),
        "operation_settled": (_E, "This tool call is already settled."),
        # Recording what the user confirmed about an unknown outcome
        # (docs/design/recovery.md section 8).
        "attestation_not_applicable": (
            _W,
            "Only a tool call whose outcome is unknown can be confirmed; this one is not.",
        ),
        "run_not_orphaned": (
            _W,
            "This tool call belongs to the turn running now; wait for it to end.",
        ),
        "attestation_not_offered_for_reconcile": (
            _W,
            "A file write is settled by checking the file, not by confirming it.",
        ),
        "attestation_note_too_long": (_W, "The note must be at most 500 characters."),
        "attestation_note_empty": (_W, "The note is empty: leave it out instead."),
        "attestation_outcome_conflict": (
            _E,
            "A recorded confirmation does not match the result saved with it.",
        ),
        "schema_newer_than_program": (
            _E,
            "The saved data was written by a newer version of Maka; this version will not touch "
            "it.",
        ),
        "store_locked": (_W, "Another Maka window or command is using this data folder."),
        "store_corrupt": (_E, "The saved data is damaged and cannot be opened."),
        "store_not_found": (_I, "There is no saved data here yet."),
        "schema_upgrade_required": (
            _W,
            "The saved data was written by an older Maka and needs a one-time upgrade; starting "
            "the desktop app, 'maka run' or 'maka resume' does it.",
        ),
        "store_read_only": (_W, "The saved data can only be read right now."),
        "store_io_failed": (_E, "The saved data could not be read or written on disk."),
        "disk_full": (_E, "The disk is full, so Maka cannot save. Free some space and try again."),
        "data_dir_read_only": (
            _E,
            "Maka's data folder cannot be written. Give your user write access to it, or copy "
            "the folder somewhere writable and use the copy as the data folder.",
        ),
        "session_not_found": (_E, "This session no longer exists."),
        "session_has_branches": (
            _E,
            "Other sessions were branched from this one and refer to its history; remove them "
            "first.",
        ),
        "session_title_invalid": (
            _E,
            "A session's title is one line of 1 to 200 characters, with no tab or other "
            "control character.",
        ),
        "run_not_found": (_E, "This run no longer exists."),
        "event_not_found": (_E, "This run has no saved event with that id."),
        "run_status_conflict": (_E, "The run's status changed in the meantime."),
        "operation_not_found": (_E, "The tool call this refers to was never recorded."),
        "session_lease_lost": (
            _E,
            "Another Maka process holds this session now (a host in a terminal, or another "
            "computer on the shared database), so nothing was saved here. Carry on there, or "
            "here once that process has stopped and its lease has run out.",
        ),
        "database_url_invalid": (
            _E,
            "The database URL is not a PostgreSQL URL Maka can use (postgresql://user@host/db).",
        ),
        "postgres_driver_missing": (
            _E,
            "The PostgreSQL driver is not installed: pip install 'maka[postgres]'.",
        ),
        "database_access_denied": (
            _E,
            "The database user may not read or write Maka's tables. Connect as the user that "
            "created the ledger, or grant this one rights on its tables.",
        ),
        "settings_damaged": (
            _E,
            "The data folder's settings.json cannot be read, so Maka cannot tell which database "
            "holds your sessions. Fix the file, or remove it to use this computer's database.",
        ),
        "workspace_not_found": (_W, "The folder does not exist."),
        "workspace_marker_invalid": (
            _W,
            "The folder's workspace marker (.maka/workspace.json, or .maka-workspace.json from "
            "older versions) is damaged; Maka will not replace it.",
        ),
        "workspace_marker_symlink": (
            _W,
            "The folder's workspace marker, or its .maka folder, is a link to somewhere else; Maka "
            "will not follow it.",
        ),
        "workspace_marker_not_file": (
            _W,
            "The folder's workspace marker is not a file, or its .maka is not a folder.",
        ),
        "workspace_marker_unreadable": (_W, "The folder's workspace marker cannot be read."),
        "workspace_marker_write_failed": (
            _W,
            "The workspace marker could not be written in the folder.",
        ),
        "workspace_markers_disagree": (
            _W,
            "The folder holds two workspace markers naming different workspaces "
            "(.maka/workspace.json and the older .maka-workspace.json); Maka will not choose "
            "between them: remove the one that is not this folder's.",
        ),
    }
)

TOOL_REFUSALS: dict[str, CodeRecord] = _records(
    {
        "unknown_tool": (_W, "The model asked for a tool that does not exist."),
        "arguments_invalid": (_W, "The tool was called with invalid arguments."),
        "loop_gate_blocked": (_W, "The same tool call was repeated too often and was stopped."),
        "permission_denied": (_I, "You declined this tool call."),
        "path_invalid": (_W, "The path is not valid."),
        "path_outside_workspace": (_W, "The path is outside the session's folder."),
        "path_protected": (_W, "The path is protected; Maka does not change it."),
        "not_a_regular_file": (_W, "The path is not a regular file."),
        "edit_target_missing": (_W, "The file to edit does not exist."),
        "edit_no_match": (_W, "The text to replace was not found in the file."),
        "edit_ambiguous": (_W, "The text to replace appears more than once in the file."),
        "cancelled": (_I, "The tool call was stopped."),
        "path_unusable": (
            _W,
            "The system refused the path (a file used as a folder, a link loop or a name too "
            "long).",
        ),
        "preflight_failed": (
            _E,
            "The tool call could not be prepared because of an internal error.",
        ),
        "tool_internal_error": (_E, "The tool stopped because of an internal error."),
    }
)

RUN_ENDINGS: dict[str, CodeRecord] = _records(
    {
        "app_restarted": (_W, "Maka stopped before this run finished."),
        "provider_error": (_E, "The model could not be reached or answered with an error."),
        "tool_boundary_failed": (_E, "A tool step could not be saved, so the run stopped."),
        "cancelled_by_user": (
            _I,
            "The run was stopped before it finished: by you, or by Maka as it shut down (its "
            "ending says which).",
        ),
        "step_limit": (
            _I,
            "The turn reached its step limit. Send a message to let it continue, or raise the "
            "limit in Settings.",
        ),
        "continuation_revalidation_failed": (
            _W,
            "Something changed while Safe resume was starting, so it did not continue.",
        ),
    }
)

FAILURES: dict[str, CodeRecord] = _records(
    {
        "bridge_disconnected": (_E, "The window lost its connection to the Maka process."),
        "host_not_ready": (_W, "Maka is still starting up. Try again in a moment."),
        "host_draining": (_W, "Maka is shutting down."),
        "operation_conflict": (_W, "A resume with different inputs is already under way."),
        "internal_failure": (_E, "Safe resume could not start because of an internal error."),
        "invalid_cwd": (
            _W,
            "The session's folder does not exist; if it moved, locate it (Session › Locate "
            "folder…, or maka sessions relocate).",
        ),
        "workspace_identity_differs": (
            _W,
            "That folder cannot be shown to be the session's workspace (it has no workspace "
            "marker, or another workspace's), so the session was not moved there.",
        ),
        "startup_recovery_failed": (
            _E,
            "Maka could not finish checking the runs interrupted before it started, so it did "
            "not open the data folder.",
        ),
        "not_found": (_W, "That session does not exist; it may have been removed."),
        "permission_not_pending": (
            _I,
            "That permission question is no longer open; it was already answered or its turn "
            "ended.",
        ),
        "text_not_utf8": (
            _W,
            "The text holds bytes that are not valid UTF-8, so nothing was saved.",
        ),
        # The command line's own (maka run, maka sessions, maka ledger ...).
        "usage_invalid": (_W, "The command line is not valid; see maka --help."),
        "invalid_argument": (_W, "A value given on the command line is out of range."),
        "prompt_empty": (_W, "The message is empty, so there is nothing to send."),
        "cwd_required": (_W, "A new session needs a folder to work in; name it with --cwd."),
        "session_cwd_mismatch": (
            _W,
            "That session works in another folder; leave out --cwd to continue it there.",
        ),
        "confirmation_required": (
            _W,
            "This deletes a session's history, so it needs your confirmation (--yes).",
        ),
        "command_unavailable": (_W, "This command is not part of this build of Maka."),
        "interrupted": (_I, "The command was interrupted before it finished."),
        "data_dir_invalid": (
            _W,
            "The data folder's path is not valid UTF-8 text; choose another data folder.",
        ),
        "data_dir_unavailable": (
            _E,
            "Maka's data folder could not be reserved for this process, so nothing was opened.",
        ),
        "display_unavailable": (
            _W,
            "There is no display to open Maka's window on here; use maka tui or maka run in a "
            "terminal, or start Maka in a desktop session.",
        ),
        "failpoint_unknown": (
            _W,
            "The test crash point that was asked for does not exist, so it would never fire.",
        ),
        "host_stopped": (
            _E,
            "The Maka window or host serving this data folder stopped before answering; run the "
            "command again.",
        ),
        "host_unreachable": (
            _E,
            "The Maka window serving this data folder did not accept this command; nothing was "
            "changed.",
        ),
    }
)

# The model provider cannot be built from its settings: ``maka run`` / ``resume`` / ``tui``
# refuse to start, and the window does not send the message. (A failure while the model answers
# ends the run as ``provider_error``, with the provider's message.)
PROVIDER: dict[str, CodeRecord] = _records(
    {
        "provider_config_invalid": (
            _W,
            "The model provider is not set up correctly: check its name, address, model and key.",
        ),
        "provider_script_invalid": (_W, "The scripted provider's test script is not valid."),
        "provider_empty_reply": (
            _W,
            "The model ended its turn without a word or a tool call. Ask again, or see "
            "docs/providers.md for server settings that cause empty replies.",
        ),
    }
)

# A line of a ledger file (``maka ledger``, ``maka import``) or an event to save that is not a
# RuntimeEvent as Maka writes it.
DECODING: dict[str, CodeRecord] = _records(
    {
        "json_invalid": (_E, "A line is not valid JSON, so it is not a saved event."),
        "event_schema_invalid": (_E, "An event does not have the shape of the events Maka saves."),
        "not_canonical": (
            _E,
            "An event is not written byte for byte in the one form Maka saves events in.",
        ),
    }
)

TRANSFER: dict[str, CodeRecord] = _records(
    {
        "import_file_unreadable": (_W, "The file to import could not be read."),
        "import_line_invalid": (
            _W,
            "A line of the file to import is not a valid saved event; nothing was imported.",
        ),
        "import_structure_invalid": (
            _W,
            "The file to import is not a complete, consistent session export; nothing was "
            "imported.",
        ),
        "import_torn_tail": (
            _W,
            "The file to import ends with a cut-off line; nothing was imported.",
        ),
        "import_conflict": (
            _W,
            "The file to import disagrees with the history already saved here; nothing was "
            "imported.",
        ),
        "export_target_exists": (
            _W,
            "A file with that name already exists; Maka will not replace it.",
        ),
        "export_target_invalid": (_W, "The session cannot be saved to that place."),
        "export_target_inside_data_dir": (
            _W,
            "An export cannot be saved inside Maka's data folder, where it could replace the "
            "history it is made from; choose a place outside it.",
        ),
        "export_write_failed": (_E, "The export file could not be written."),
        "import_checkpoints_missing": (
            _W,
            "The snapshots file the export names is not beside it; nothing was imported.",
        ),
        "import_checkpoints_invalid": (
            _W,
            "The snapshots file beside the export is not the one it was written with; nothing was "
            "imported.",
        ),
        "import_branch_source_missing": (
            _W,
            "The session was branched from another session that is not here, or whose history "
            "differs; import that one first. Nothing was imported.",
        ),
        "import_checkpoints_failed": (
            _E,
            "The session was imported, but its snapshots could not be added to the store.",
        ),
    }
)

BRANCH: dict[str, CodeRecord] = _records(
    {
        "branch_event_not_found": (_W, "The session has no event with that id; nothing was done."),
        "branch_boundary_invalid": (
            _W,
            "A session can be branched only at a user message, a tool result or the end of a "
            "run; nothing was done.",
        ),
        "branch_boundary_unsettled": (
            _W,
            "A tool call before that point has no settled outcome there, so the history up to it "
            "cannot be continued; pick an earlier point.",
        ),
        "branch_source_running": (
            _W,
            "A turn of that session is still running or was interrupted; branch it once it has "
            "finished or was repaired.",
        ),
        "branch_snapshot_unavailable": (
            _W,
            "No snapshot of the folder is kept for that point; branch with a copy of the current "
            "files instead (--current-files).",
        ),
        "branch_copy_mismatch": (
            _E,
            "The copy of the folder does not match the snapshot; it is left in place and not used.",
        ),
        "branch_source_changed": (
            _E,
            "The history this session was branched from changed after the branch; it is not "
            "shown to the model.",
        ),
    }
)

BRANCH_FOLDER_WORDS: dict[str, str] = {
    "workspace_restore_target_not_empty": (
        "A branch needs a new or empty folder for the new session; the one chosen holds files."
    ),
    "workspace_restore_target_inside": (
        "The branch's folder goes outside the session's folder: the one chosen is inside it."
    ),
    "workspace_restore_failed": "The new session's folder could not be made.",
}
"""The codes a branch shares with a restored copy (both copy the folder into a new one), as a
branch's refusal says them: the user chose the new session's folder, not a restored copy's. The
tables above keep the restored copy's words (Safe resume's banner, ``maka resume``)."""

_TABLES = (
    PARK_REASONS,
    REVALIDATION,
    DIAGNOSTICS,
    RESOLVER,
    STORE,
    TOOL_REFUSALS,
    RUN_ENDINGS,
    FAILURES,
    PROVIDER,
    DECODING,
    TRANSFER,
    BRANCH,
)

UNKNOWN_CODE = "Safe resume stopped for a reason this version does not know ({code})."


@dataclass(frozen=True, slots=True)
class CodeText:
    code: str
    severity: Severity
    sentence: str
    known: bool
    next_step: str = ""
    fields: tuple[str, ...] = ()


def lookup(code: str) -> CodeRecord | None:
    """The untranslated record of ``code`` (the first table naming it), or ``None``."""
    for table in _TABLES:
        entry = table.get(code)
        if entry is not None:
            return entry
    return None


def describe(code: str) -> CodeText:
    """Severity and headline for ``code``; unknown codes fall back to ``error``, naming it."""
    entry = lookup(code)
    if entry is not None:
        return CodeText(code, entry.severity, entry.sentence, True, entry.next_step, entry.fields)
    return CodeText(code, Severity.ERROR, UNKNOWN_CODE.replace("{code}", code), False)


def highest_severity(codes: Iterable[str]) -> Severity:
    """The most serious severity among ``codes`` (``info`` if none)."""
    return max((describe(code).severity for code in codes), key=_RANK.__getitem__, default=_I)
