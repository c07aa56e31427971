"""Sessions as a whole: administration (remove, relocate), listing, export and import, and the
workspace identity marker in a session's folder."""
