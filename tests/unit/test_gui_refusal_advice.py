"""The refusal screen's first sentence says what stopped the window (``gui_cmd._refusal_advice``):
a window refused for want of a display (the host serving the folder has none) was headed "Maka
could not open its data folder.", which sent the user after the wrong thing."""

from __future__ import annotations

from app.commands.gui_cmd import _refusal_advice


def test_a_missing_display_is_not_called_a_data_folder_problem() -> None:
    said = _refusal_advice("display_unavailable")
    assert "display" in said and "data folder" not in said, said
    assert "maka tui" in said


def test_an_unknown_refusal_names_nothing_it_does_not_know() -> None:
    said = _refusal_advice("something_new")
    assert "data folder" not in said and said.startswith("Maka could not start"), said
